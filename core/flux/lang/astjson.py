"""AST JSON exactly as serde writes flux's AST, and its inverse: one field table (:data:`_FIELDS`)
drives both directions. The ordering rules are in docs/flux-lang.md.
"""

from __future__ import annotations

from json.encoder import encode_basestring as json_str  # C: compact_json's own string encoder
from typing import Any, Callable

from flux.canonical import compact_json, scrub_text
from flux.errors import FluxError

from . import ast as A

__all__ = [
    "node_to_json", "node_from_json", "draft_to_json", "draft_from_json", "type_to_json",
    "type_from_json", "sort_json", "AstJsonError", "node_json_text", "draft_json_text",
    "bind_call_json_text",
]


class AstJsonError(FluxError):
    """A JSON document is not a valid Flux-Lang AST node."""


def sort_json(v: Any) -> Any:
    """A JSON value with every object's keys sorted by UTF-8 bytes (serde ``Value`` map order)."""
    if isinstance(v, dict):
        return {k: sort_json(v[k]) for k in sorted(v, key=A.utf8_key)}
    if isinstance(v, (list, tuple)):
        return [sort_json(x) for x in v]
    return v


# ---------------------------------------------------------------------------------------------
# TypeRef / ThingRef
# ---------------------------------------------------------------------------------------------

def type_to_json(t: A.TypeRef) -> Any:
    if t.tag in A.TypeRef.BUILTINS:
        return t.tag
    if t.tag == "list":
        return {"list": type_to_json(t.inner)}
    return {"named": t.name}


def type_from_json(v: Any) -> A.TypeRef:
    if isinstance(v, str) and v in A.TypeRef.BUILTINS:
        return A.TypeRef(v)
    if isinstance(v, dict) and len(v) == 1:
        (tag, inner), = v.items()
        if tag == "list":
            return A.TypeRef.list_of(type_from_json(inner))
        if tag == "named" and isinstance(inner, str):
            return A.TypeRef.named(inner)
    raise AstJsonError(f"not a type: {compact_json(v)}")


def thing_to_json(t: A.ThingRef) -> Any:
    kind: Any = {"custom": t.kind} if t.custom else t.kind
    return {"kind": kind, "selector": {t.selector: t.value}}


def _thing_from_json(v: Any) -> A.ThingRef:
    try:
        kind = v["kind"]
        (sel, val), = v["selector"].items()
    except (TypeError, KeyError, ValueError, AttributeError):
        raise AstJsonError(f"not a thing reference: {compact_json(v)}") from None
    if sel not in A.ThingRef.SELECTORS or not isinstance(val, str):
        raise AstJsonError(f"unknown thing selector: {sel}")
    if isinstance(kind, dict) and list(kind) == ["custom"] and isinstance(kind["custom"], str):
        return A.ThingRef(kind["custom"], sel, val, custom=True)
    if kind in A.ThingRef.KINDS:
        return A.ThingRef(kind, sel, val)
    raise AstJsonError(f"unknown thing kind: {compact_json(kind)}")


# ---------------------------------------------------------------------------------------------
# Field table
# ---------------------------------------------------------------------------------------------

# presence: "req" always written and required on read; "opt" omitted when None; "list" always
# written, defaults to empty on read; "flat" omitted when False; "bool" always written, default
# False on read; "dflt0" always written, defaults to 0 on read (loop.every_ms).
_FIELDS: dict[type, list[tuple[str, str, str, str]]] = {
    A.Call: [("op", "op", "str", "req"), ("args", "args", "nodes", "list")],
    A.Bind: [("name", "name", "str", "req"), ("value", "value", "node", "req"),
             ("ty", "ty", "ty", "opt"), ("effect", "effect", "effect", "opt")],
    A.When: [("cond", "cond", "node", "req"), ("then", "then", "nodes", "list"),
             ("otherwise", "otherwise", "nodes", "list")],
    A.Repeat: [("max", "max", "int", "req"), ("until", "until", "node", "opt"),
               ("body", "body", "nodes", "list"), ("collect", "collect", "str", "opt")],
    A.Each: [("source", "in", "node", "req"), ("item", "as", "str", "req"),
             ("body", "body", "nodes", "list"), ("collect", "collect", "str", "opt"),
             ("flat", "flat", "bool", "flat")],
    A.Assert: [("cond", "cond", "node", "req"), ("message", "message", "str", "opt")],
    A.Pipe: [("steps", "steps", "nodes", "list"), ("bind", "bind", "str", "opt")],
    A.Seq: [("body", "body", "nodes", "list"), ("bind", "bind", "str", "opt")],
    A.Memo: [("name", "name", "str", "req"), ("value", "value", "node", "req"),
             ("ty", "ty", "ty", "opt"), ("effect", "effect", "effect", "opt")],
    A.Parallel: [("branches", "branches", "branches", "list")],
    A.Await: [("binding", "binding", "str", "opt"), ("source", "source", "str", "req"),
              ("as_type", "as_type", "ty", "opt"), ("condition", "condition", "node", "opt")],
    A.Retry: [("max", "max", "int", "req"), ("backoff", "backoff", "str", "opt"),
              ("delay_ms", "delay_ms", "int", "opt"), ("body", "body", "nodes", "list"),
              ("bind", "bind", "str", "opt")],
    A.Try: [("body", "body", "nodes", "list"), ("catch", "catch", "str", "opt"),
            ("handler", "handler", "nodes", "list")],
    A.Confirm: [("message", "message", "str", "req"), ("risk", "risk", "str", "opt"),
                ("body", "body", "nodes", "list")],
    A.Loop: [("for_ms", "for_ms", "int", "req"), ("every_ms", "every_ms", "int", "dflt0"),
             ("until", "until", "node", "opt"), ("body", "body", "nodes", "list"),
             ("bind", "bind", "str", "opt")],
    A.Race: [("timeout_ms", "timeout_ms", "int", "req"),
             ("branches", "branches", "branches", "list"), ("bind", "bind", "str", "opt")],
    A.Throttle: [("name", "name", "str", "req"), ("max", "max", "int", "req"),
                 ("window_ms", "window_ms", "int", "req"), ("body", "body", "nodes", "list")],
    A.Debounce: [("name", "name", "str", "req"), ("wait_ms", "wait_ms", "int", "req"),
                 ("body", "body", "nodes", "list")],
    A.Unless: [("cond", "cond", "node", "req"), ("body", "body", "nodes", "list")],
    A.Verify: [("cmd", "cmd", "node", "req"), ("expect", "expect", "node", "req"),
               ("message", "message", "str", "opt")],
    A.Return: [("value", "value", "node", "req")],
    A.Peek: [("name", "name", "str", "req")],
    A.Var: [("name", "name", "str", "req")],
    A.Lit: [("value", "value", "json", "req")],
    A.Thing: [("thing", "thing", "thing", "req")],
    A.Expr: [("formula", "formula", "str", "req"), ("vars", "vars", "nodemap", "list")],
    A.Fmt: [("template", "template", "str", "req")],
    A.Jq: [("path", "path", "str", "req"), ("input", "input", "node", "req"),
           ("optional", "optional", "bool", "bool")],
    A.Parse: [("value", "value", "node", "req"), ("as_type", "as", "str", "req")],
    A.Ctx: [("name", "name", "str", "req"), ("purpose", "purpose", "str", "opt"),
            ("include", "include", "strs", "list"), ("exclude", "exclude", "strs", "list"),
            ("budget", "budget", "int", "opt")],
    A.CtxAppend: [("ctx", "ctx", "str", "req"), ("add", "add", "strs", "list")],
    A.Match: [("subject", "subject", "node", "req"), ("cases", "cases", "mcases", "list"),
              ("default", "default", "nodes", "list")],
    A.Route: [("selector", "selector", "node", "req"), ("cases", "cases", "rcases", "list"),
              ("default", "default", "nodes", "list")],
    A.Fallback: [("branches", "branches", "fbranches", "list"), ("bind", "bind", "str", "opt")],
    A.Timeout: [("ms", "ms", "int", "req"), ("body", "body", "nodes", "list"),
                ("bind", "bind", "str", "opt")],
    A.Budget: [("limit", "limit", "int", "req"), ("body", "body", "nodes", "list"),
               ("bind", "bind", "str", "opt")],
    A.CapScope: [("tools", "tools", "strs", "list"), ("body", "body", "nodes", "list"),
                 ("bind", "bind", "str", "opt")],
    A.Scope: [("acquire", "acquire", "node", "opt"), ("bind", "bind", "str", "opt"),
              ("body", "body", "nodes", "list"), ("finally_", "finally", "nodes", "list")],
    A.Saga: [("steps", "steps", "saga", "list")],
    A.Once: [("label", "label", "str", "req"), ("body", "body", "nodes", "list"),
             ("bind", "bind", "str", "opt")],
    A.Checkpoint: [("label", "label", "str", "req")],
    A.Obj: [("fields", "fields", "nodemap", "list")],
    A.ListExpr: [("items", "items", "nodes", "list")],
}


def _enc(conv: str, v: Any) -> Any:
    if conv in ("str", "int", "bool", "effect"):
        return v
    if conv == "node":
        return node_to_json(v)
    if conv == "nodes":
        return [node_to_json(n) for n in v]
    if conv == "ty":
        return type_to_json(v)
    if conv == "json":
        return sort_json(v)
    if conv == "thing":
        return thing_to_json(v)
    if conv == "nodemap":
        return {k: node_to_json(n) for k, n in v}  # already sorted
    if conv == "strs":
        return list(v)
    if conv == "branches":
        return [{"name": b.name, "body": [node_to_json(n) for n in b.body]} for b in v]
    if conv == "mcases":
        return [{"value": node_to_json(c.value), "body": [node_to_json(n) for n in c.body]}
                for c in v]
    if conv == "rcases":
        return [{"label": c.label, "body": [node_to_json(n) for n in c.body]} for c in v]
    if conv == "fbranches":
        return [{"body": [node_to_json(n) for n in b.body]} for b in v]
    if conv == "saga":
        return [{"body": [node_to_json(n) for n in s.body],
                 "undo": [node_to_json(n) for n in s.undo]} for s in v]
    raise AssertionError(conv)


def node_to_json(node: A.Node) -> dict:
    """The node as an insertion-ordered dict in serde's declared field order."""
    out: dict[str, Any] = {"kind": node.kind}
    for attr, key, conv, presence in _FIELDS[type(node)]:
        v = getattr(node, attr)
        if presence == "opt" and v is None:
            continue
        if presence == "flat" and not v:
            continue
        out[key] = _enc(conv, v)
    return out


def draft_to_json(draft: A.DraftAst) -> dict:
    out = draft_to_json_head(draft)
    out["body"] = [node_to_json(n) for n in draft.body]
    return out


def node_json_text(node: A.Node) -> str:
    """``serde_json::to_string(&node)``.

    Nodes are immutable, so the text is computed once and kept on the node (outside its dataclass
    fields, so equality and hashing are untouched): a replay hashes each statement several times.
    """
    cached = node.__dict__.get("_json_text")
    if cached is None:
        try:
            # Unpaired surrogates (possible only in nodes built in code: the parser scrubs) are
            # written as U+FFFD, the one rule, so the text always encodes and hashes.
            cached = scrub_text(compact_json(node_to_json(node)))
        except RecursionError:
            raise AstJsonError("the AST nests too deeply to serialize") from None
        object.__setattr__(node, "_json_text", cached)
    return cached


def bind_call_json_text(name: str, op: str, value: Any) -> str:
    """:func:`node_json_text` of ``Bind(name, Call(op, (Lit(value),)))`` written from its parts
    (an adaptive turn's host-plan statement, flux.agent.loop): the node dict is never built. A
    property test checks it equals :func:`node_json_text` of the node."""
    return scrub_text('{"kind":"bind","name":' + json_str(name) + ',"value":{"kind":"call","op":'
                      + json_str(op) + ',"args":[{"kind":"lit","value":' + compact_json(sort_json(value))
                      + "}]}}")


def draft_json_text(draft: A.DraftAst) -> str:
    # ``{…head…,"body":[…]}`` assembled from the cached statement texts (params is always written).
    head = scrub_text(compact_json(draft_to_json_head(draft)))
    return head[:-1] + ',"body":[' + ",".join(node_json_text(n) for n in draft.body) + "]}"


def draft_to_json_head(draft: A.DraftAst) -> dict:
    """The DraftAst JSON fields that precede ``body`` (``name``?, ``params``, ``returns``?)."""
    out: dict = {}
    if draft.name is not None:
        out["name"] = draft.name
    out["params"] = [{"name": p.name, "ty": type_to_json(p.ty)} for p in draft.params]
    if draft.returns is not None:
        out["returns"] = type_to_json(draft.returns)
    return out


# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------

def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise AstJsonError(what)


def _list(v: Any, what: str) -> list:
    _expect(isinstance(v, list), f"{what} must be a list")
    return v


def _body(obj: Any, key: str, what: str) -> tuple:
    _expect(isinstance(obj, dict), f"{what} must be an object")
    return tuple(_node_from_json(n) for n in _list(obj.get(key, []), f"{what}.{key}"))


_DECODERS: dict[str, Callable[[Any, str], Any]] = {}


#: The sub-structures headed by one field — its key, the class, what a part lacking it is told — each
#: with a body: a ``parallel``/``race`` branch (a name), a ``match`` case (a value node), a ``route`` case
#: (a label).
_HEADED_PARTS: dict[str, tuple[str, type, str]] = {
    "branches": ("name", A.Branch, "a branch needs a name"),
    "mcases": ("value", A.MatchCase, "a case needs a value"),
    "rcases": ("label", A.RouteCase, "a case needs a label"),
}


def _headed_parts(v: Any, what: str, key: str, cls: type, needs: str) -> tuple:
    out = []
    for part in _list(v, what):
        _expect(isinstance(part, dict) and key in part and (key == "value" or isinstance(part[key], str)),
                f"{what}: {needs}")
        head = _node_from_json(part[key]) if key == "value" else part[key]
        out.append(cls(head, _body(part, "body", what)))
    return tuple(out)


def _dec(conv: str, v: Any, what: str) -> Any:
    if conv == "str" or conv == "effect":
        _expect(isinstance(v, str), f"{what} must be a string")
        if conv == "effect":
            _expect(v in A.FLOW_EFFECTS, f"{what}: unknown effect {v!r}")
        return v
    if conv == "int":
        _expect(isinstance(v, int) and not isinstance(v, bool) and v >= 0,
                f"{what} must be a non-negative integer")
        return v
    if conv == "bool":
        _expect(isinstance(v, bool), f"{what} must be a boolean")
        return v
    if conv == "node":
        return _node_from_json(v)
    if conv == "nodes":
        return tuple(_node_from_json(n) for n in _list(v, what))
    if conv == "ty":
        return type_from_json(v)
    if conv == "json":
        return v
    if conv == "thing":
        return _thing_from_json(v)
    if conv == "nodemap":
        _expect(isinstance(v, dict), f"{what} must be an object")
        return tuple((k, _node_from_json(n)) for k, n in v.items())
    if conv == "strs":
        items = _list(v, what)
        _expect(all(isinstance(s, str) for s in items), f"{what} must hold strings")
        return tuple(items)
    if conv in _HEADED_PARTS:
        return _headed_parts(v, what, *_HEADED_PARTS[conv])
    if conv == "fbranches":
        return tuple(A.FallbackBranch(_body(b, "body", what)) for b in _list(v, what))
    if conv == "saga":
        return tuple(A.SagaStep(_body(s, "body", what), _body(s, "undo", what))
                     for s in _list(v, what))
    raise AssertionError(conv)


def node_from_json(v: Any) -> A.Node:
    """Decode one node (the ``@json`` payload, ``suspensions.body`` entries, …).

    Raises :class:`AstJsonError` and nothing else, also for a value nested too deeply to walk.
    """
    try:
        return _node_from_json(v)
    except RecursionError:
        raise AstJsonError("the AST nests too deeply to decode") from None


def _node_from_json(v: Any) -> A.Node:
    _expect(isinstance(v, dict), "an AST node must be a JSON object")
    kind = v.get("kind")
    cls = A.NODE_CLASSES.get(kind) if isinstance(kind, str) else None
    _expect(cls is not None, f"unknown node kind {kind!r}")
    kwargs: dict[str, Any] = {}
    for attr, key, conv, presence in _FIELDS[cls]:
        what = f"{kind}.{key}"
        if key not in v or (v[key] is None and presence == "opt"):
            if presence == "req":
                raise AstJsonError(f"{what} is missing")
            if presence == "dflt0":
                kwargs[attr] = 0
            elif presence in ("flat", "bool"):
                kwargs[attr] = False
            elif presence == "list":
                kwargs[attr] = ()
            else:
                kwargs[attr] = None
            continue
        kwargs[attr] = _dec(conv, v[key], what)
    return cls(**kwargs)


def draft_from_json(v: Any) -> A.DraftAst:
    try:
        return _draft_from_json(v)
    except RecursionError:
        raise AstJsonError("the AST nests too deeply to decode") from None


def _draft_from_json(v: Any) -> A.DraftAst:
    _expect(isinstance(v, dict), "a DraftAst must be a JSON object")
    name = v.get("name")
    _expect(name is None or isinstance(name, str), "name must be a string")
    params = []
    for p in _list(v.get("params", []), "params"):
        _expect(isinstance(p, dict) and isinstance(p.get("name"), str) and "ty" in p,
                "a param needs name and ty")
        params.append(A.Param(p["name"], type_from_json(p["ty"])))
    returns = v.get("returns")
    return A.DraftAst(
        name=name,
        params=tuple(params),
        returns=type_from_json(returns) if returns is not None else None,
        body=tuple(_node_from_json(n) for n in _list(v.get("body", []), "body")),
    )
