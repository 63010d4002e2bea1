"""The Flux-Lang Draft AST as frozen, comparable dataclasses: one class per node kind of the Rust
``flux_lang::ast::Node`` enum, fields in its declared order (the order the AST JSON, and so every hash, is
built from). Sequences are tuples; map-shaped fields are ``(key, node)`` pairs sorted by UTF-8 key bytes
(the Rust ``BTreeMap``); ``Lit`` compares by strict JSON equality (``1``, ``1.0`` and ``True`` differ);
symbol names are stored without ``$``. So ``parse(format(ast)) == ast`` holds with plain ``==``."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Optional, Union, dataclass_transform

from flux.canonical import scrub_text

__all__ = [
    "TypeRef", "Param", "DraftAst", "Node", "ThingRef",
    "Part", "Branch", "MatchCase", "RouteCase", "FallbackBranch", "SagaStep",
    "Call", "Bind", "When", "Repeat", "Each", "Assert", "Pipe", "Seq", "Memo", "Parallel",
    "Await", "Retry", "Try", "Confirm", "Loop", "Race", "Throttle", "Debounce", "Unless",
    "Verify", "Return", "Peek", "Var", "Lit", "Thing", "Expr", "Fmt", "Jq", "Parse", "Ctx",
    "CtxAppend", "Match", "Route", "Fallback", "Timeout", "Budget", "CapScope", "Scope", "Saga",
    "Once", "Checkpoint", "Obj", "ListExpr", "NODE_CLASSES", "FLOW_EFFECTS", "json_key",
    "utf8_key",
]

#: ``FlowEffect`` wire tags (snake_case), in declared order.
FLOW_EFFECTS = (
    "pure", "read", "model", "network", "write_file", "write_db", "send_external", "delete",
    "money", "calendar", "human_visible",
)


def json_key(v: Any) -> Any:
    """A hashable, type-strict image of a JSON value: two values share it iff their JSON is equal.

    Python's ``==`` treats ``1 == 1.0 == True``; JSON (and the hashes built on it) does not.
    """
    if v is None:
        return ("n",)
    if v is True or v is False:
        return ("b", v)
    if isinstance(v, int):
        return ("i", v)
    if isinstance(v, float):
        if math.isnan(v):
            return ("f", "nan")
        return ("f", v, math.copysign(1.0, v))
    if isinstance(v, str):
        return ("s", v)
    if isinstance(v, (list, tuple)):
        return ("a", tuple(json_key(x) for x in v))
    if isinstance(v, dict):
        return ("o", tuple(sorted((str(k), json_key(x)) for k, x in v.items())))
    raise TypeError(f"not a JSON value: {type(v).__name__}")


def utf8_key(k: str) -> bytes:
    """A map key's UTF-8 bytes, the BTreeMap order; unpaired surrogates sort as U+FFFD."""
    try:
        return k.encode("utf-8")
    except UnicodeEncodeError:
        return scrub_text(k).encode("utf-8")


def _sorted_pairs(m: Any) -> tuple:
    """A dict or pair sequence as ``(key, value)`` pairs sorted by UTF-8 key bytes (BTreeMap order)."""
    items = m.items() if isinstance(m, dict) else m
    return tuple(sorted(((k, v) for k, v in items), key=lambda kv: utf8_key(kv[0])))


# ---------------------------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TypeRef:
    """``any|bool|number|string``, ``list`` (with ``inner``) or ``named`` (with ``name``)."""

    tag: str
    inner: Optional["TypeRef"] = None
    name: Optional[str] = None

    BUILTINS: ClassVar[dict[str, str]] = {
        "any": "Any", "bool": "Bool", "number": "Number", "string": "String",
    }

    @staticmethod
    def any() -> "TypeRef":
        return TypeRef("any")

    @staticmethod
    def bool() -> "TypeRef":
        return TypeRef("bool")

    @staticmethod
    def number() -> "TypeRef":
        return TypeRef("number")

    @staticmethod
    def string() -> "TypeRef":
        return TypeRef("string")

    @staticmethod
    def list_of(inner: "TypeRef") -> "TypeRef":
        return TypeRef("list", inner=inner)

    @staticmethod
    def named(name: str) -> "TypeRef":
        return TypeRef("named", name=name)

    def label(self) -> str:
        """The text label the formatter writes (``List<String>``, ``Ticket``)."""
        if self.tag in self.BUILTINS:
            return self.BUILTINS[self.tag]
        if self.tag == "list":
            assert self.inner is not None
            return f"List<{self.inner.label()}>"
        return self.name or ""


@dataclass(frozen=True)
class Param:
    name: str
    ty: TypeRef


# ---------------------------------------------------------------------------------------------
# Nodes
# ---------------------------------------------------------------------------------------------

@dataclass_transform(frozen_default=True)
@dataclass(frozen=True)
class Node:
    """Base of every AST node. ``kind`` is the JSON ``"kind"`` tag, given as the class keyword
    (``class Call(Node, kind="call")``); every subclass is made a frozen dataclass here."""

    kind: ClassVar[str] = ""

    def __init_subclass__(cls, kind: str = "", eq: bool = True, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.kind = kind
        dataclass(frozen=True, eq=eq)(cls)

    def __post_init__(self) -> None:
        names = _FIELD_NAMES.get(type(self))
        if names is None:  # dataclasses.fields() per construction was a third of parsing a host plan
            names = _FIELD_NAMES[type(self)] = tuple(f.name for f in fields(self))
        for name in names:
            v = getattr(self, name)
            if name in ("fields", "vars") and not isinstance(self, Lit):
                object.__setattr__(self, name, _sorted_pairs(v))
            elif isinstance(v, list):
                object.__setattr__(self, name, tuple(v))


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


@dataclass(frozen=True)
class Part:
    """Base of the non-node sub-structures (branches, cases, saga steps)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, list):
                object.__setattr__(self, f.name, tuple(v))


@dataclass(frozen=True)
class Branch(Part):
    """A ``parallel``/``race`` arm: its result is bound to ``name``."""

    name: str
    body: tuple = ()


@dataclass(frozen=True)
class MatchCase(Part):
    value: Node
    body: tuple = ()


@dataclass(frozen=True)
class RouteCase(Part):
    label: str
    body: tuple = ()


@dataclass(frozen=True)
class FallbackBranch(Part):
    body: tuple = ()


@dataclass(frozen=True)
class SagaStep(Part):
    body: tuple = ()
    undo: tuple = ()


@dataclass(frozen=True)
class ThingRef:
    """``{"kind": <kind>|{"custom": <kind>}, "selector": {<selector>: <value>}}``."""

    kind: str
    selector: str
    value: str
    custom: bool = False

    KINDS: ClassVar[tuple[str, ...]] = (
        "context", "file", "person", "ticket", "email", "repo", "dataset", "calendar_event",
        "url", "secret",
    )
    SELECTORS: ClassVar[tuple[str, ...]] = ("id", "name", "path", "query", "key")


class Call(Node, kind="call"):
    op: str
    args: tuple = ()


class Bind(Node, kind="bind"):
    name: str
    value: Node
    ty: Optional[TypeRef] = None
    effect: Optional[str] = None


class When(Node, kind="when"):
    cond: Node
    then: tuple = ()
    otherwise: tuple = ()


class Repeat(Node, kind="repeat"):
    max: int
    until: Optional[Node] = None
    body: tuple = ()
    collect: Optional[str] = None


class Each(Node, kind="each"):
    source: Node
    item: str
    body: tuple = ()
    collect: Optional[str] = None
    flat: bool = False


class Assert(Node, kind="assert"):
    cond: Node
    message: Optional[str] = None


class Pipe(Node, kind="pipe"):
    steps: tuple = ()
    bind: Optional[str] = None


class Seq(Node, kind="seq"):
    body: tuple = ()
    bind: Optional[str] = None


class Memo(Node, kind="memo"):
    name: str
    value: Node
    ty: Optional[TypeRef] = None
    effect: Optional[str] = None


class Parallel(Node, kind="parallel"):
    branches: tuple = ()


class Await(Node, kind="await"):
    binding: Optional[str] = None
    source: str = ""
    as_type: Optional[TypeRef] = None
    condition: Optional[Node] = None


class Retry(Node, kind="retry"):
    max: int
    backoff: Optional[str] = None
    delay_ms: Optional[int] = None
    body: tuple = ()
    bind: Optional[str] = None


class Try(Node, kind="try"):
    body: tuple = ()
    catch: Optional[str] = None
    handler: tuple = ()


class Confirm(Node, kind="confirm"):
    message: str
    risk: Optional[str] = None
    body: tuple = ()


class Loop(Node, kind="loop"):
    for_ms: int
    every_ms: int = 0
    until: Optional[Node] = None
    body: tuple = ()
    bind: Optional[str] = None


class Race(Node, kind="race"):
    timeout_ms: int
    branches: tuple = ()
    bind: Optional[str] = None


class Throttle(Node, kind="throttle"):
    name: str
    max: int
    window_ms: int
    body: tuple = ()


class Debounce(Node, kind="debounce"):
    name: str
    wait_ms: int
    body: tuple = ()


class Unless(Node, kind="unless"):
    cond: Node
    body: tuple = ()


class Verify(Node, kind="verify"):
    cmd: Node
    expect: Node
    message: Optional[str] = None


class Return(Node, kind="return"):
    value: Node


class Peek(Node, kind="peek"):
    name: str


class Var(Node, kind="var"):
    name: str


class Lit(Node, kind="lit", eq=False):
    """A JSON literal. Equality and hashing are strict JSON equality (see :func:`json_key`)."""

    value: Any = None

    def __post_init__(self) -> None:
        # The value stays the plain JSON Python value it was given (lists stay lists).
        pass

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lit) and json_key(self.value) == json_key(other.value)

    def __hash__(self) -> int:
        return hash(json_key(self.value))


class Thing(Node, kind="thing"):
    thing: ThingRef


class Expr(Node, kind="expr"):
    """An operator formula (``a > 3 && b``) over ``vars`` (sorted name → node pairs)."""

    formula: str
    vars: tuple = ()


class Fmt(Node, kind="fmt"):
    template: str


class Jq(Node, kind="jq"):
    """Field access ``input<path>`` (``path`` like ``.a.b[0]["k"]``); ``optional`` is the ``?``."""

    path: str
    input: Node
    optional: bool = False


class Parse(Node, kind="parse"):
    value: Node
    as_type: str


class Ctx(Node, kind="ctx"):
    name: str
    purpose: Optional[str] = None
    include: tuple = ()
    exclude: tuple = ()
    budget: Optional[int] = None


class CtxAppend(Node, kind="ctx_append"):
    ctx: str
    add: tuple = ()


class Match(Node, kind="match"):
    subject: Node
    cases: tuple = ()
    default: tuple = ()


class Route(Node, kind="route"):
    selector: Node
    cases: tuple = ()
    default: tuple = ()


class Fallback(Node, kind="fallback"):
    branches: tuple = ()
    bind: Optional[str] = None


class Timeout(Node, kind="timeout"):
    ms: int
    body: tuple = ()
    bind: Optional[str] = None


class Budget(Node, kind="budget"):
    limit: int
    body: tuple = ()
    bind: Optional[str] = None


class CapScope(Node, kind="cap_scope"):
    tools: tuple = ()
    body: tuple = ()
    bind: Optional[str] = None


class Scope(Node, kind="scope"):
    """RAII block; ``finally_`` is the JSON ``finally`` field."""

    acquire: Optional[Node] = None
    bind: Optional[str] = None
    body: tuple = ()
    finally_: tuple = ()


class Saga(Node, kind="saga"):
    steps: tuple = ()


class Once(Node, kind="once"):
    label: str
    body: tuple = ()
    bind: Optional[str] = None


class Checkpoint(Node, kind="checkpoint"):
    label: str


class Obj(Node, kind="obj"):
    """An object template: sorted ``(key, node)`` pairs."""

    fields: tuple = ()


class ListExpr(Node, kind="list"):
    """A list template (JSON kind ``list``)."""

    items: tuple = ()


NODE_CLASSES: dict[str, type[Node]] = {
    cls.kind: cls
    for cls in (
        Call, Bind, When, Repeat, Each, Assert, Pipe, Seq, Memo, Parallel, Await, Retry, Try,
        Confirm, Loop, Race, Throttle, Debounce, Unless, Verify, Return, Peek, Var, Lit, Thing,
        Expr, Fmt, Jq, Parse, Ctx, CtxAppend, Match, Route, Fallback, Timeout, Budget, CapScope,
        Scope, Saga, Once, Checkpoint, Obj, ListExpr,
    )
}


@dataclass(frozen=True)
class DraftAst:
    """A whole flow: optional header name, params, return type and the statement body."""

    name: Optional[str] = None
    params: tuple = ()
    returns: Optional[TypeRef] = None
    body: tuple = ()

    def __post_init__(self) -> None:
        for attr in ("params", "body"):
            v = getattr(self, attr)
            if isinstance(v, list):
                object.__setattr__(self, attr, tuple(v))


NodeLike = Union[Node, Any]
