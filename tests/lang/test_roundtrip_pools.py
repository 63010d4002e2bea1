"""Every adversarial value of flux's roundtrip_property.rs pools, in every slot it can fill:
``parse(format_flow(ast)) == ast`` and formatting is idempotent (tests/lang/data/roundtrip_pools.json).
flux draws these at random; here each one is tried in each slot once, deterministically."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flux.lang.astjson import draft_from_json
from flux.lang.formatter import format_flow
from flux.lang.parser import parse

POOLS = json.loads((Path(__file__).parent / "data" / "roundtrip_pools.json").read_text("utf-8"))
V = {"kind": "var", "name": "v"}
CALL = {"kind": "call", "op": "go", "args": []}


def sym_slots(s):
    yield {"kind": "bind", "name": s, "value": V}
    yield {"kind": "var", "name": s}
    yield {"kind": "return", "value": {"kind": "var", "name": s}}
    yield {"kind": "memo", "name": s, "value": V}
    yield {"kind": "each", "in": V, "as": s, "body": [CALL], "collect": s}
    yield {"kind": "repeat", "max": 2, "body": [], "collect": s}
    yield {"kind": "seq", "body": [CALL], "bind": s}
    yield {"kind": "pipe", "steps": [CALL], "bind": s}
    yield {"kind": "ctx", "name": s, "include": [s], "exclude": [s]}
    yield {"kind": "ctx_append", "ctx": s, "add": [s]}
    yield {"kind": "parallel", "branches": [{"name": s, "body": [CALL]}]}
    yield {"kind": "race", "timeout_ms": 5, "branches": [{"name": s, "body": [CALL]}], "bind": s}
    yield {"kind": "try", "body": [CALL], "catch": s, "handler": [CALL]}
    yield {"kind": "scope", "acquire": CALL, "bind": s, "body": [CALL], "finally": []}
    yield {"kind": "await", "binding": s, "source": "src"}
    yield {"kind": "peek", "name": s}
    yield {"kind": "bind", "name": "x", "value": {"kind": "peek", "name": s}}
    yield {"kind": "bind", "name": "x", "value": {"kind": "jq", "path": ".a", "input": {"kind": "var", "name": s},
                                                  "optional": False}}
    for k in ("fallback", "timeout", "budget", "cap_scope", "retry", "loop", "once"):
        node = {"fallback": {"branches": [{"body": [CALL]}]}, "timeout": {"ms": 5, "body": [CALL]},
                "budget": {"limit": 1, "body": [CALL]}, "cap_scope": {"tools": [], "body": [CALL]},
                "retry": {"max": 1, "body": [CALL]}, "loop": {"for_ms": 1, "every_ms": 1, "body": [CALL]},
                "once": {"label": "l", "body": [CALL]}}[k]
        yield {"kind": k, **node, "bind": s}


def op_slots(op):
    yield {"kind": "call", "op": op, "args": [V]}
    yield {"kind": "bind", "name": "x", "value": {"kind": "call", "op": op, "args": [V, {"kind": "lit", "value": 1}]}}
    yield {"kind": "pipe", "steps": [{"kind": "call", "op": op, "args": []}]}


def string_slots(s):
    lit = {"kind": "lit", "value": s}
    yield lit
    yield {"kind": "bind", "name": "x", "value": {"kind": "fmt", "template": s}}
    yield {"kind": "assert", "cond": V, "message": s}
    yield {"kind": "await", "source": s}
    yield {"kind": "confirm", "message": s, "risk": s, "body": [CALL]}
    yield {"kind": "throttle", "name": s, "max": 2, "window_ms": 1000, "body": [CALL]}
    yield {"kind": "debounce", "name": s, "wait_ms": 300, "body": [CALL]}
    yield {"kind": "verify", "cmd": CALL, "expect": lit, "message": s}
    yield {"kind": "ctx", "name": "p", "purpose": s}
    yield {"kind": "route", "selector": V, "cases": [{"label": s, "body": [CALL]}]}
    yield {"kind": "once", "label": s, "body": [CALL]}
    yield {"kind": "checkpoint", "label": s}
    yield {"kind": "cap_scope", "tools": [s], "body": [CALL]}
    yield {"kind": "bind", "name": "x", "value": {"kind": "obj", "fields": {s: V}}}
    yield {"kind": "bind", "name": "x", "value": {"kind": "thing", "thing": {"kind": {"custom": s},
                                                                            "selector": {"id": s}}}}


CASES = (
    [("sym", s, n) for s in POOLS["syms"] for n in sym_slots(s)]
    + [("op", o, n) for o in POOLS["ops"] for n in op_slots(o)]
    + [("string", s, n) for s in POOLS["strings"] for n in string_slots(s)]
    + [("path", p, {"kind": "bind", "name": "x", "value": {"kind": "jq", "path": p, "input": V, "optional": o}})
       for p in POOLS["paths"] for o in (False, True)]
    + [("backoff", b, {"kind": "retry", "max": 2, "backoff": b, "body": [CALL]}) for b in POOLS["backoffs"]]
    + [("type", t, n) for t in POOLS["types"] for n in (
        {"kind": "bind", "name": "x", "value": V, "ty": t}, {"kind": "memo", "name": "x", "value": V, "ty": t},
        {"kind": "await", "binding": "x", "source": "s", "as_type": t})]
    + [("json", j, {"kind": "bind", "name": "x", "value": {"kind": "lit", "value": j}}) for j in POOLS["json_values"]]
    + [("effect", e, {"kind": "bind", "name": "x", "value": V, "effect": e}) for e in POOLS["effects"]]
    + [("thing", f"{k} {sel}", {"kind": "bind", "name": "x", "value": {
        "kind": "thing", "thing": {"kind": k, "selector": {sel: s}}}})
       for k in POOLS["thing_kinds"] for sel in POOLS["thing_selectors"] for s in POOLS["strings"]]
    + [("parse", t, {"kind": "bind", "name": "x", "value": {"kind": "parse", "value": V, "as": t}})
       for t in POOLS["parse_types"]]
)


@pytest.mark.parametrize("slot,value,node", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_every_pool_value_round_trips_in_every_slot(slot, value, node):
    draft = draft_from_json({"body": [node]})
    text = format_flow(draft)
    assert parse(text) == draft, text
    assert format_flow(parse(text)) == text
