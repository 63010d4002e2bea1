"""replay_input.scan_rows decodes a payload with the C scanner json.loads itself runs (``_SCANNER``),
handing json.loads every payload whose value does not start at 0 and end at its end: the rows it
keeps, skips and counts are json.loads's. The reference here is the same scan with the scanner
answering "no value at 0" for every payload, so each goes through json.loads (what scan_rows did before).
"""

from __future__ import annotations

import json
import sys

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flux.timemachine.replay_input as RI
from flux.model.session import TRACE_KINDS
from flux.timemachine.replay_input import _read


class _Rows:
    """A reader that hands scan_rows these rows (and no schema: every row's global_seq is checked)."""

    def __init__(self, rows):
        self.rows = rows
        self.skipped_rows = 0

    def query(self, sql, params=()):
        raise ValueError("no schema here")

    def scan_batches(self, sql, params, *, tolerant=False, batch=4096):
        for i in range(0, len(self.rows), 3):
            yield self.rows[i:i + 3]


def _no_scanner(payload, idx):
    raise StopIteration(idx)


def _read_both(rows, monkeypatch):
    """(ReplayInput, rows skipped) read with the scanner, then with json.loads alone."""
    r = _Rows(rows)
    got = _read(r, "s_1", tolerant=False)
    with monkeypatch.context() as m:
        m.setattr(RI, "_SCANNER", _no_scanner)
        ref = _Rows(rows)
        want = _read(ref, "s_1", tolerant=False)
    return got, r.skipped_rows, want, ref.skipped_rows


_TURN = {"kind": "turn_started", "data": {"user_input": "go", "model": "m"}}
_PLAN = {"kind": "plan_attempted", "data": {"step": 1, "outcome": "accepted",
                                            "plan_source": "flow\n  a = read({\"path\":\"x\"})\n"}}
_CELL = {"kind": "run", "data": {"event": "op_recorded", "seq": 1, "step": "s", "op": "read", "input_hash": "h" * 64,
                                 "input_view": "{\"path\":\"x\"}", "input_view_truncated": False, "content": "ok \ud83d",
                                 "is_error": False, "denied": False, "redacted": False, "truncated": False}}
_STEP = {"kind": "run", "data": {"event": "step_started", "step": "s", "op": "read", "input_hash": "h"}}
_STMT = {"kind": "run", "data": {"event": "statement_completed", "plan": "h:0123456789abcdef", "node": 0,
                                 "stmt": "0123456789abcdef", "value": "v_1", "skipped": False}}
_HALT = {"kind": "run", "data": {"event": "plan_halted", "plan": "h:0123456789abcdef", "node": 1, "stmt": "ab",
                                 "op": "read", "kind": "runtime", "error": "e"}}
_ENDED = {"kind": "turn_ended", "data": {}}

_JSONS = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=6)),
                      lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=4), kids,
                                                                                          max_size=3)),
                      max_leaves=6)


@st.composite
def _payloads(draw):
    """A payload text: a row flux writes, a JSON value, or either spelled or damaged in the ways
    json.loads tells apart from the scanner's one call (whitespace around it, a BOM, data after it,
    cut short, nested past the recursion limit, NaN, an integer over the digit limit, a lone surrogate)."""
    base = draw(st.one_of(st.sampled_from([_TURN, _PLAN, _CELL, _STEP, _STMT, _HALT, _ENDED]), _JSONS))
    kind = base["kind"] if isinstance(base, dict) and base.get("kind") in TRACE_KINDS \
        else draw(st.sampled_from(TRACE_KINDS))
    text = json.dumps(base, separators=(",", ":"), ensure_ascii=draw(st.booleans()))
    how = draw(st.sampled_from(["as is"] * 6 + ["lead", "trail", "both", "bom", "extra", "cut", "deep", "deep-ok",
                                                 "nan", "digits", "surrogate", "empty", "array-top", "odd-kind"]))
    ws = draw(st.sampled_from([" ", "\n", "\t", "\r", " \n "]))
    if how == "lead":
        text = ws + text
    elif how == "trail":
        text = text + ws
    elif how == "both":
        text = ws + text + ws
    elif how == "bom":
        text = "\ufeff" + text
    elif how == "extra":
        text = text + draw(st.sampled_from(["{}", " 1", "x", ",", "]"]))
    elif how == "cut":
        text = text[:draw(st.integers(0, max(0, len(text) - 1)))]
    elif how == "deep":
        n = draw(st.sampled_from([RI._SHALLOW - 1, RI._SHALLOW, sys.getrecursionlimit() + 10]))
        text = '{"kind":"run","data":' + "[" * n + "]" * n + "}"
    elif how == "deep-ok":
        text = '{"kind":"turn_ended","data":{"x":' + "[" * 40 + "]" * 40 + "}}"
    elif how == "nan":
        text = '{"kind":"run","data":{"event":"step_started","step":NaN,"op":Infinity}}'
    elif how == "digits":
        text = '{"kind":"turn_ended","data":{"n":' + "9" * 5000 + "}}"
    elif how == "surrogate":
        text = text.replace("ok", "ok \\udc80", 1) if "ok" in text else text + "\\ud800"
    elif how == "empty":
        text = draw(st.sampled_from(["", " ", "null", "[]", "\"x\""]))
    elif how == "array-top":
        text = "[" + text + "]"
    elif how == "odd-kind":  # a kind that is no text (the row's column kind stands in) or another text
        odd = draw(st.sampled_from(["7", "null", "[\"run\"]", "{}", "\"turn_ended\"", "\"Run\""]))
        text = text.replace('"kind":"run"', '"kind":' + odd, 1).replace('"kind":"plan_attempted"', '"kind":' + odd, 1)
    return kind, text


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payloads=st.lists(_payloads(), min_size=1, max_size=12))
def test_the_scanner_reads_every_payload_as_json_loads_reads_it(payloads, monkeypatch):
    rows = []
    turn = None
    for i, (kind, p) in enumerate(payloads, 1):
        if kind == "turn_started":
            turn = i
        rows.append((i, "s_1", i, f"e{i}", kind, 1000 + i, turn if kind == "plan_attempted" else None, p))
    got, got_skipped, want, want_skipped = _read_both(rows, monkeypatch)
    assert (got.turns, got.cells, got.executions, got.has_trace) == (want.turns, want.cells, want.executions,
                                                                     want.has_trace)
    assert got_skipped == want_skipped


def test_the_cases_reach_both_ways_through():
    """The payloads the property draws include ones the scanner takes and ones json.loads alone decides."""
    taken = RI._SCANNER('{"kind":"run","data":{}}', 0)
    assert taken == ({"kind": "run", "data": {}}, len('{"kind":"run","data":{}}'))
    for text in (' {"a":1}', '\ufeff{}', ""):
        try:
            RI._SCANNER(text, 0)
        except StopIteration:
            continue
        raise AssertionError(f"the scanner read {text!r} at 0")
    assert RI._SCANNER('{"a":1} ', 0)[1] == 7  # ends before the text does: json.loads decides


def _at_depth(n, fn):
    return fn() if n <= 0 else _at_depth(n - 1, fn)


def test_a_deeply_nested_payload_is_json_loads_s_verdict_near_the_recursion_limit(monkeypatch):
    """The scanner's nesting counts against the recursion limit from a few frames less deep than
    json.loads's: a payload that could tell the two apart (as many brackets as _SHALLOW, or more) goes
    through json.loads itself. Tried from every stack depth around where the two would part."""
    n = RI._SHALLOW + 2
    rows = [(1, "s_1", 1, "e1", "run", 1, None, '{"kind":"run","data":{"event":"x","v":' + "[" * n + "]" * n + "}}")]
    limit = sys.getrecursionlimit()
    here = len(__import__("inspect").stack())
    for depth in range(limit - n - here - 40, limit - n - here + 5):
        try:
            got = _at_depth(depth, lambda: _read_both(rows, monkeypatch))
        except RecursionError:
            continue
        assert (got[0].has_trace, got[1]) == (got[2].has_trace, got[3]), depth
