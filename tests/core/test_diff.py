"""Run diff (§4.6) on the real fixture, tampered copies and writer-built statement traces."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from flux.errors import SessionNotFound
from flux.model.session import StmtRow
from flux.store.events import (
    OpRecorded, PlanAttempted, Run, StatementCompleted, StepStarted, StepSucceeded,
)
from flux.store.store import StoreReader, StoreWriter
from flux.timemachine.diff import (
    MISSING_STMT, align_rows, excerpt, payload_diff, payload_diff_values, run_diff,
)

from tests.helpers import copy_fixture, on_cell, rewrite


def tamper_cells(store: Path, fn) -> None:
    """Rewrite every op_recorded cell of the copy through ``fn(OpRecorded) -> OpRecorded``."""
    rewrite(store, on_cell(lambda c: Run(fn(c))))


def test_fixture_against_itself_is_identical(tmp_path):
    store = copy_fixture(tmp_path / "fx")
    r = StoreReader(store)
    d = run_diff(r, "s_1", r, "last")
    assert d.identical
    assert d.first_divergence is None
    assert d.summary == {"output": 0, "plan": 0, "same": 1}
    assert [row.to_json() for row in d.rows] == [{"kind": "same", "node": 0, "stmt": "call:append:7b7d06ae306ee31a"}]
    assert d.render_text() == (
        "diff s_1 ↔ s_1\n"
        "  = op `append` {\"content\":\"created by flux mock\\n\",\"path\":\"flux-mock.txt\"}\n"
        "runs are identical (1 statement(s))\n"
    )
    assert json.loads(d.json_text()) == {
        "a": "s_1", "b": "s_1", "identical": True, "first_divergence": None,
        "summary": {"output": 0, "plan": 0, "same": 1},
        "rows": [{"kind": "same", "node": 0, "stmt": "call:append:7b7d06ae306ee31a"}],
    }
    # keys come out sorted, compact, like serde_json's Value
    assert d.json_text().startswith('{"a":"s_1","b":"s_1","first_divergence":null,"identical":true,"rows":[{"kind"')


def test_changed_cell_content_is_same_statement_different_world(tmp_path):
    a = copy_fixture(tmp_path / "a")
    b = copy_fixture(tmp_path / "b")
    tamper_cells(b, lambda c: dataclasses.replace(c, content="appended 99 bytes to flux-mock.txt"))
    d = run_diff(StoreReader(a), "s_1", StoreReader(b), "s_1")
    assert not d.identical
    assert d.first_divergence == 0
    assert d.summary == {"output": 1, "plan": 0, "same": 0}
    row = d.rows[0]
    assert (row.kind, row.node, row.op, row.stmt) == ("output", 0, "append", "call:append:7b7d06ae306ee31a")
    assert row.to_json() == {
        "a": "appended 21 bytes to flux-mock.txt", "b": "appended 99 bytes to flux-mock.txt",
        "kind": "output", "node": 0, "op": "append", "stmt": "call:append:7b7d06ae306ee31a",
    }
    assert d.render_text() == (
        "diff s_1 ↔ s_1\n"
        "  ≠ same statement, different world — op `append` {\"content\":\"created by flux mock\\n\",\"path\":\"flux-mock.txt\"}\n"
        "    op `append`:\n"
        "    - appended 21 bytes to flux-mock.txt\n"
        "    + appended 99 bytes to flux-mock.txt\n"
    )
    pd = payload_diff(d, 0)
    assert pd.kind == "text"
    assert "-appended 21 bytes to flux-mock.txt" in pd.lines and "+appended 99 bytes to flux-mock.txt" in pd.lines


def test_changed_input_is_a_plan_divergence(tmp_path):
    a = copy_fixture(tmp_path / "a")
    b = copy_fixture(tmp_path / "b")
    tamper_cells(b, lambda c: dataclasses.replace(c, input_hash="ab" * 32))
    d = run_diff(StoreReader(a), "s_1", StoreReader(b), "s_1")
    assert [r.to_json() for r in d.rows] == [
        {"a_stmt": "call:append:7b7d06ae306ee31a", "b_stmt": "call:append:abababababababab", "kind": "plan", "node": 0},
    ]
    assert d.render_text().splitlines()[1:] == [
        "  ~ plan diverges:",
        "    - op `append` {\"content\":\"created by flux mock\\n\",\"path\":\"flux-mock.txt\"} [call:append:7b7d06ae306ee31a]",
        "    + op `append` {\"content\":\"created by flux mock\\n\",\"path\":\"flux-mock.txt\"} [call:append:abababababababab]",
    ]


def test_unknown_session_is_a_clear_error(tmp_path):
    r = StoreReader(copy_fixture(tmp_path / "fx"))
    with pytest.raises(SessionNotFound, match="no session 's_7'"):
        run_diff(r, "s_1", r, "s_7")


# ------------------------------------------------------------------ statement rows (ledgered runs)

PLAN = 'flow\n  a = read({"path":"x"})\n  b = write({"path":"y"})\n'
PLAN_B = 'flow\n  a = read({"path":"x"})\n  b = write({"path":"z"})\n'


def _write_ledgered(w: StoreWriter, plan_src: str, stmts, contents) -> str:
    """A session with one accepted plan and a statement_completed row after each statement's cell."""
    from flux.lang.hashes import flow_key, stmt_hash16
    from flux.lang.parser import parse

    sid = w.create_session("mock")
    turn = w.begin_turn(sid, "go", "mock")
    draft = parse(plan_src)
    key = flow_key(draft.name, draft.body)
    w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=plan_src), turn_id=turn)
    for i, (node, (op, content)) in enumerate(zip(draft.body, contents)):
        h = f"{i:02d}" * 32
        w.append(sid, Run(StepStarted(step=f"step_{op}_{h[:16]}", op=op, input_hash=h)))
        w.append(sid, Run(OpRecorded(seq=i, step=f"step_{op}_{h[:16]}", op=op, input_hash=h, content=content)))
        w.append(sid, Run(StepSucceeded(step=f"step_{op}_{h[:16]}", output=f"v_{i}")))
        w.append(sid, Run(StatementCompleted(plan=key, node=i, stmt=stmt_hash16(node), value=f"v_{i}")))
    return sid


def test_ledgered_runs_align_by_statement_and_name_statements(tmp_path):
    w = StoreWriter(tmp_path / "st")
    a = _write_ledgered(w, PLAN, None, [("read", '{"size":1,"tags":["a"]}'), ("write", "ok")])
    b = _write_ledgered(w, PLAN_B, None, [("read", '{"size":2,"tags":["a","b"]}'), ("write", "ok")])
    w.close()
    d = run_diff(StoreReader(tmp_path / "st"), a, None, b)
    assert [r.kind for r in d.rows] == ["output", "plan"]
    text = d.render_text().splitlines()
    assert text[0] == f"diff {a} ↔ {b}"
    assert text[1] == '  ≠ same statement, different world — flow ⏎   a = read({"path":"x"})'
    assert text[5:] == [
        "  ~ plan diverges:",
        '    - flow ⏎   b = write({"path":"y"})',
        '    + flow ⏎   b = write({"path":"z"})',
    ]
    pd = payload_diff(d, 0)
    assert pd.kind == "json"
    assert pd.changes["values_changed"]["root['size']"] == {"new_value": 2, "old_value": 1}
    assert "iterable_item_added" in pd.changes
    plan_pd = payload_diff(d, 1)
    assert plan_pd.kind == "text" and any(line.startswith("+") and '"z"' in line for line in plan_pd.lines)
    assert d.summary_line() == "0 same · 1 plan · 1 world · first divergence at row 0 (node 0)"


def test_one_side_without_statement_rows_falls_back_to_cell_rows_for_both(tmp_path):
    w = StoreWriter(tmp_path / "st")
    a = _write_ledgered(w, PLAN, None, [("read", "r"), ("write", "ok")])
    w.close()
    copy = copy_fixture(tmp_path / "fx")
    d = run_diff(StoreReader(tmp_path / "st"), a, StoreReader(copy), "s_1")
    assert all(r.kind == "plan" for r in d.rows)
    assert d.rows[0].a_stmt.startswith("call:read:") and d.rows[0].b_stmt == "call:append:7b7d06ae306ee31a"
    assert d.rows[1].b_stmt is None
    assert f"    + {MISSING_STMT}" in d.render_text().splitlines()


def _row(node, stmt, *cells):
    return StmtRow(node, stmt, False, tuple(cells))


def test_align_rules():
    # cells differ pairwise → first differing pair; a's op
    rows = align_rows([_row(0, "s", ("read", "1"), ("x", "2"))], [_row(0, "s", ("read", "1"), ("y", "3"))])
    assert rows[0].to_json() == {"a": "2", "b": "3", "kind": "output", "node": 0, "op": "x", "stmt": "s"}
    # counts differ → first unpaired cell, the shorter side's content is ""
    rows = align_rows([_row(0, "s", ("read", "1"))], [_row(0, "s", ("read", "1"), ("extra", "e"))])
    assert rows[0].to_json() == {"a": "", "b": "e", "kind": "output", "node": 0, "op": "extra", "stmt": "s"}
    rows = align_rows([_row(0, "s", ("read", "1"), ("gone", "g"))], [_row(0, "s", ("read", "1"))])
    assert rows[0].to_json()["a"] == "g" and rows[0].to_json()["b"] == ""
    # one side missing → plan row with b's node
    rows = align_rows([], [_row(3, "t")])
    assert rows[0].to_json() == {"a_stmt": None, "b_stmt": "t", "kind": "plan", "node": 3}
    assert align_rows([], []) == []


def test_excerpt_is_char_safe_and_marks_cuts():
    assert excerpt("a\nb") == "a b"
    assert excerpt("x" * 96) == "x" * 96
    assert excerpt("x" * 97) == "x" * 96 + "…"
    # a 3-byte char straddling byte 96 is dropped whole
    s = "x" * 95 + "€" + "tail"
    assert excerpt(s) == "x" * 95 + "…"


def test_payload_diff_values():
    assert payload_diff_values("same", "same").kind == "none"
    assert payload_diff_values('{"a":1}', '{"a":1}').kind == "none"
    j = payload_diff_values('{"a":1}', '{"a":1,"b":2}')
    assert j.kind == "json" and "dictionary_item_added" in j.changes and j.lines
    t = payload_diff_values("one\ntwo", "one\nthree")
    assert t.kind == "text" and "-two" in t.lines and "+three" in t.lines
    # a JSON scalar is compared as text
    assert payload_diff_values("1", "2").kind == "text"
