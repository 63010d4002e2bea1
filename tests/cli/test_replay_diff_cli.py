"""`flux replay` and `flux diff` as a user runs them (click's runner, real stores)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from flux.cli import main
from flux.store.events import OpRecorded, PlanAttempted, Run, decode_payload, encode_payload
from tests.helpers import FIXTURE, copy_store, tree_digest


def run(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env or {})


def rewrite(store: Path, fn) -> None:
    """Rewrite payloads of a store copy: ``fn(body) -> body | None`` (None deletes the row)."""
    con = sqlite3.connect(store / "events.db")
    try:
        for gs, kind, payload in con.execute("SELECT global_seq, kind, payload FROM events").fetchall():
            body = decode_payload(kind, payload)
            new = fn(body)
            if new is None:
                con.execute("DELETE FROM events WHERE global_seq = ?", (gs,))
            elif new is not body:
                con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (encode_payload(new), gs))
        con.commit()
    finally:
        con.close()


def on_cell(fn):
    def go(body):
        if isinstance(body, Run) and isinstance(body.event, OpRecorded):
            return fn(body.event)
        return body
    return go


def change_content(rec: OpRecorded):
    return Run(dataclasses.replace(rec, content="appended 99 bytes to flux-mock.txt"))


# ----------------------------------------------------------------------------------------- diff


def test_diff_against_itself_is_identical_exit_0(fixture_store):
    before = tree_digest(fixture_store)
    res = run("diff", "s_1", "last", "--store", str(fixture_store))
    assert res.exit_code == 0, res.output
    assert res.stdout == "diff s_1 ↔ s_1\n  = op `append` (7b7d06ae306ee31a…)\nruns are identical (1 statement(s))\n"
    assert tree_digest(fixture_store) == before


def test_diff_changed_cell_is_a_world_row_exit_1(fixture_store, tmp_path):
    other = copy_store(FIXTURE, tmp_path / "b")
    rewrite(other, on_cell(change_content))
    res = run("diff", "s_1", "s_1", "--store", str(fixture_store), "--store-b", str(other))
    assert res.exit_code == 1
    assert res.stdout.splitlines() == [
        "diff s_1 ↔ s_1",
        "  ≠ same statement, different world — op `append` (7b7d06ae306ee31a…)",
        "    op `append`:",
        "    - appended 21 bytes to flux-mock.txt",
        "    + appended 99 bytes to flux-mock.txt",
    ]
    assert "0 same · 0 plan · 1 world · first divergence at row 0 (node 0)" in res.stderr

    res = run("diff", "s_1", "s_1", "--store", str(fixture_store), "--store-b", str(other), "--json")
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert out["rows"] == [{
        "a": "appended 21 bytes to flux-mock.txt", "b": "appended 99 bytes to flux-mock.txt",
        "kind": "output", "node": 0, "op": "append", "stmt": "call:append:7b7d06ae306ee31a",
    }]
    assert (out["identical"], out["first_divergence"], out["summary"]) == (False, 0, {"output": 1, "plan": 0, "same": 0})
    assert res.stdout.count("\n") == 1  # one compact line

    res = run("diff", "s_1", "s_1", "--store", str(fixture_store), "--store-b", str(other), "--explain")
    assert "      -appended 21 bytes to flux-mock.txt" in res.stdout


def test_diff_unknown_session_is_a_one_line_error(fixture_store):
    res = run("diff", "s_1", "s_9", "--store", str(fixture_store))
    assert res.exit_code == 1
    assert res.stderr.startswith("error: no session 's_9'") and res.stderr.count("\n") == 1
    assert res.stdout == ""
