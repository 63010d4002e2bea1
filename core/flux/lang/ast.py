"""The Flux-Lang Draft AST as frozen, comparable dataclasses: one class per node kind of the Rust
``flux_lang::ast::Node`` enum, fields in its declared order (the order the AST JSON, and so every hash, is
built from). Sequences are tuples; map-shaped fields are ``(key, node)`` pairs sorted by UTF-8 key bytes
(the Rust ``BTreeMap``); ``Lit`` compares by strict JSON equality (``1``, ``1.0`` and ``True`` differ);
symbol names are stored without ``$``. So ``parse(format(ast)) == ast`` holds with plain ``==``."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Optional, Union

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

@dataclass(frozen=True)
class Node:
    """Base of every AST node. ``kind`` is the JSON ``"kind"`` tag."""

    kind: ClassVar[str] = ""

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


@dataclass(frozen=True)
class Call(Node):
    kind: ClassVar[str] = "call"
    op: str
    args: tuple = ()


@dataclass(frozen=True)
class Bind(Node):
    kind: ClassVar[str] = "bind"
    name: str
    value: Node
    ty: Optional[TypeRef] = None
    effect: Optional[str] = None


@dataclass(frozen=True)
class When(Node):
    kind: ClassVar[str] = "when"
    cond: Node
    then: tuple = ()
    otherwise: tuple = ()


@dataclass(frozen=True)
class Repeat(Node):
    kind: ClassVar[str] = "repeat"
    max: int
    until: Optional[Node] = None
    body: tuple = ()
    collect: Optional[str] = None


@dataclass(frozen=True)
class Each(Node):
    kind: ClassVar[str] = "each"
    source: Node
    item: str
    body: tuple = ()
    collect: Optional[str] = None
    flat: bool = False


@dataclass(frozen=True)
class Assert(Node):
    kind: ClassVar[str] = "assert"
    cond: Node
    message: Optional[str] = None


@dataclass(frozen=True)
class Pipe(Node):
    kind: ClassVar[str] = "pipe"
    steps: tuple = ()
    bind: Optional[str] = None


@dataclass(frozen=True)
class Seq(Node):
    kind: ClassVar[str] = "seq"
    body: tuple = ()
    bind: Optional[str] = None


@dataclass(frozen=True)
class Memo(Node):
    kind: ClassVar[str] = "memo"
    name: str
    value: Node
    ty: Optional[TypeRef] = None
    effect: Optional[str] = None


@dataclass(frozen=True)
class Parallel(Node):
    kind: ClassVar[str] = "parallel"
    branches: tuple = ()


@dataclass(frozen=True)
class Await(Node):
    kind: ClassVar[str] = "await"
    binding: Optional[str] = None
    source: str = ""
    as_type: Optional[TypeRef] = None
    condition: Optional[Node] = None


@dataclass(frozen=True)
class Retry(Node):
    kind: ClassVar[str] = "retry"
    max: int
    backoff: Optional[str] = None
    delay_ms: Optional[int] = None
    body: tuple = ()
    bind: Optional[str] = None


@dataclass(frozen=True)
class Try(Node):
    kind: ClassVar[str] = "try"
    body: tuple = ()
    catch: Optional[str] = None
    handler: tuple = ()


@dataclass(frozen=True)
class Confirm(Node):
    kind: ClassVar[str] = "confirm"
    message: str
    risk: Optional[str] = None
    body: tuple = ()


@dataclass(frozen=True)
class Loop(Node):
    kind: ClassVar[str] = "loop"
    for_ms: int
    every_ms: int = 0
    until: Optional[Node] = None
    body: tuple = ()
    bind: Optional[str] = None


@dataclass(frozen=True)
class Race(Node):
    kind: ClassVar[str] = "race"
    timeout_ms: int
    branches: tuple = ()
    bind: Optional[str] = None


@dataclass(frozen=True)
class Throttle(Node):
    kind: ClassVar[str] = "throttle"
    name: str
    max: int
    window_ms: int
    body: tuple = ()


@dataclass(frozen=True)
class Debounce(Node):
    kind: ClassVar[str] = "debounce"
    name: str
    wait_ms: int
    body: tuple = ()


@dataclass(frozen=True)
class Unless(Node):
    kind: ClassVar[str] = "unless"
    cond: Node
    body: tuple = ()


@dataclass(frozen=True)
class Verify(Node):
    kind: ClassVar[str] = "verify"
    cmd: Node
    expect: Node
    message: Optional[str] = None


@dataclass(frozen=True)
class Return(Node):
    kind: ClassVar[str] = "return"
    value: Node


@dataclass(frozen=True)
class Peek(Node):
    kind: ClassVar[str] = "peek"
    name: str


@dataclass(frozen=True)
class Var(Node):
    kind: ClassVar[str] = "var"
    name: str


@dataclass(frozen=True, eq=False)
class Lit(Node):
    """A JSON literal. Equality and hashing are strict JSON equality (see :func:`json_key`)."""

    kind: ClassVar[str] = "lit"
    value: Any = None

    def __post_init__(self) -> None:
        # The value stays the plain JSON Python value it was given (lists stay lists).
        pass

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Lit) and json_key(self.value) == json_key(other.value)

    def __hash__(self) -> int:
        return hash(json_key(self.value))


@dataclass(frozen=True)
class Thing(Node):
    kind: ClassVar[str] = "thing"
    thing: ThingRef


@dataclass(frozen=True)
class Expr(Node):
    """An operator formula (``a > 3 && b``) over ``vars`` (sorted name → node pairs)."""

    kind: ClassVar[str] = "expr"
    formula: str
    vars: tuple = ()


@dataclass(frozen=True)
class Fmt(Node):
    kind: ClassVar[str] = "fmt"
    template: str


@dataclass(frozen=True)
class Jq(Node):
    """Field access ``input<path>`` (``path`` like ``.a.b[0]["k"]``); ``optional`` is the ``?``."""

    kind: ClassVar[str] = "jq"
    path: str
    input: Node
    optional: bool = False


@dataclass(frozen=True)
class Parse(Node):
    kind: ClassVar[str] = "parse"
    value: Node
    as_type: str


@dataclass(frozen=True)
class Ctx(Node):
    kind: ClassVar[str] = "ctx"
    name: str
    purpose: Optional[str] = None
    include: tuple = ()
    exclude: tuple = ()
    budget: Optional[int] = None


@dataclass(frozen=True)
class CtxAppend(Node):
    kind: ClassVar[str] = "ctx_append"
    ctx: str
    add: tuple = ()


@dataclass(frozen=True)
class Match(Node):
    kind: ClassVar[str] = "match"
    subject: Node
    cases: tuple = ()
    default: tuple = ()


@dataclass(frozen=True)
class Route(Node):
    kind: ClassVar[str] = "route"
    selector: Node
    cases: tuple = ()
    default: tuple = ()


@dataclass(frozen=True)
class Fallback(Node):
    kind: ClassVar[str] = "fallback"
    branches: tuple = ()
    bind: Optional[str] = None


@dataclass(frozen=True)
class Timeout(Node):
    kind: ClassVar[str] = "timeout"
    ms: int
    body: tuple = ()
    bind: Optional[str] = None


@dataclass(frozen=True)
class Budget(Node):
    kind: ClassVar[str] = "budget"
    limit: int
    body: tuple = ()
    bind: Optional[str] = None


@dataclass(frozen=True)
class CapScope(Node):
    kind: ClassVar[str] = "cap_scope"
    tools: tuple = ()
    body: tuple = ()
    bind: Optional[str] = None


@dataclass(frozen=True)
class Scope(Node):
    """RAII block; ``finally_`` is the JSON ``finally`` field."""

    kind: ClassVar[str] = "scope"
    acquire: Optional[Node] = None
    bind: Optional[str] = None
    body: tuple = ()
    finally_: tuple = ()


@dataclass(frozen=True)
class Saga(Node):
    kind: ClassVar[str] = "saga"
    steps: tuple = ()


@dataclass(frozen=True)
class Once(Node):
    kind: ClassVar[str] = "once"
    label: str
    body: tuple = ()
    bind: Optional[str] = None


@dataclass(frozen=True)
class Checkpoint(Node):
    kind: ClassVar[str] = "checkpoint"
    label: str


@dataclass(frozen=True)
class Obj(Node):
    """An object template: sorted ``(key, node)`` pairs."""

    kind: ClassVar[str] = "obj"
    fields: tuple = ()


@dataclass(frozen=True)
class ListExpr(Node):
    """A list template (JSON kind ``list``)."""

    kind: ClassVar[str] = "list"
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
