"""`flux sessions`, `flux show`, `flux demo` as a user runs them (click's runner, real stores)."""

from __future__ import annotations

import json
import sqlite3

from click.testing import CliRunner

from flux.cli import main
from flux.store import StoreWriter
from tests.helpers import HOST_PLAN, fixture_dir, cell, tree_digest, write_turn


def run(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env or {})


def test_sessions_json_lists_the_fixture_session(fixture_store):
    before = tree_digest(fixture_store)
    res = run("sessions", "--store", str(fixture_store), "--json")
    assert res.exit_code == 0, res.output
    [s] = json.loads(res.output)["sessions"]
    assert (s["id"], s["model"], s["messages"], s["interrupted"]) == ("s_1", "mock", 2, None)
    assert tree_digest(fixture_store) == before


def test_sessions_human_line_matches_flux(fixture_store):
    res = run("sessions", "--store", str(fixture_store))
    assert res.exit_code == 0
    line = res.output.splitlines()[0]
    assert line.startswith("s_1    2 msg  mock                   ")
    assert line.endswith(" ago")


def test_store_from_environment(fixture_store):
    res = run("sessions", env={"FLUX_STORE_DIR": str(fixture_store)})
    assert res.exit_code == 0 and res.output.startswith("s_1")


def test_show_json_holds_turn_plan_and_cell(fixture_store):
    res = run("show", "s_1", "--store", str(fixture_store), "--json")
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    [t] = data["turns"]
    assert t["outcome"] == "ok"
    accepted = [p for p in t["plans"] if p["accepted"]]
    assert [p["plan_source"] for p in accepted] == [(fixture_dir() / "plan.flux.snap").read_text()]
    [c] = t["cells"]
    assert (c["op"], c["content"]) == ("append", "appended 21 bytes to flux-mock.txt")
    assert data["cost_usd"] == 0.0 and data["interrupted"] is None


def test_show_human_and_last(fixture_store):
    res = run("show", "--store", str(fixture_store))
    assert res.exit_code == 0
    assert "appended 21 bytes to flux-mock.txt" in res.output
    assert "adaptive_batch_ae51354e0a259cd3c68b_action_1 = append(" in res.output


def test_interrupted_store_is_flagged_in_json_and_human(tmp_path):
    d = tmp_path / "s"
    with StoreWriter(d) as w:
        sid = w.create_session("mock")
        write_turn(w, sid, "go", plan=HOST_PLAN.format(path="a"), cells=[cell("read", {"path": "a"}, "A")], end=None)
    res = run("sessions", "--store", str(d), "--json")
    [s] = json.loads(res.output)["sessions"]
    assert s["interrupted"]["turn"] == 1
    res = run("sessions", "--store", str(d))
    assert "⚠ interrupted" in res.output
    assert "1 interrupted session(s) — the next turn entered on one" in res.output  # stderr is mixed in by CliRunner
    assert "the REPL" not in res.output and "flux tui" not in res.output  # neither exists here (issue 11 item 13)
    assert "`flux resurrect s_<n>`" in res.output
    shown = json.loads(run("show", sid, "--store", str(d), "--json").output)
    assert shown["interrupted"]["completed"] == 0


def test_empty_store_and_no_match_messages(tmp_path):
    d = tmp_path / "s"
    StoreWriter(d).close()
    res = run("sessions", "--store", str(d))
    assert res.exit_code == 0 and "no sessions yet" in res.output
    res = run("sessions", "--store", str(d), "--query", "x")
    assert "no sessions match the given filter(s)" in res.output


def _errline(res):
    lines = [l for l in res.output.splitlines() if l.strip()]
    assert len(lines) == 1, res.output
    assert lines[0].startswith("error: ")
    assert "Traceback" not in res.output
    return lines[0]


def test_bad_inputs_exit_1_with_one_line(tmp_path, fixture_store):
    assert "does not exist" in _errline(run("sessions", "--store", str(tmp_path / "nope")))
    (tmp_path / "empty").mkdir()
    assert "no events.db" in _errline(run("sessions", "--store", str(tmp_path / "empty")))
    (tmp_path / "text").mkdir()
    (tmp_path / "text" / "events.db").write_text("not sqlite")
    assert "not a SQLite database" in _errline(run("sessions", "--store", str(tmp_path / "text")))
    (tmp_path / "other").mkdir()
    con = sqlite3.connect(tmp_path / "other" / "events.db")
    con.execute("CREATE TABLE cookies (x)")
    con.commit()
    assert "another application" in _errline(run("show", "--store", str(tmp_path / "other")))
    res = run("show", "s_42", "--store", str(fixture_store))
    assert res.exit_code == 1 and "no session 's_42'" in _errline(res)
    res = run("show", "s_1", "--turn", "5", "--store", str(fixture_store))
    assert res.exit_code == 1 and "no turn 5" in _errline(res)
    res = run("sessions", "--store", str(fixture_store), "--since", "yesterday-ish")
    assert res.exit_code == 1 and "cannot read time" in _errline(res)
    assert not (tmp_path / "empty" / "events.db").exists()


def test_corrupt_row_is_skipped_and_counted(fixture_store):
    con = sqlite3.connect(fixture_store / "events.db")
    con.execute("UPDATE events SET payload = '{broken' WHERE stream_seq = 30")
    con.commit()
    con.close()
    res = run("show", "s_1", "--store", str(fixture_store), "--json")
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    assert data["skipped_rows"] == 1


def test_demo_builds_a_store_with_every_feature(tmp_path):
    d = tmp_path / "demo"
    res = run("demo", "--store", str(d))
    assert res.exit_code == 0, res.output
    data = json.loads(run("sessions", "--store", str(d), "--json").output)["sessions"]
    assert len(data) >= 6
    assert sum(1 for s in data if s["interrupted"]) >= 1
    assert any(s["lineage"] and s["lineage"]["kind"] == "fork" for s in data)
    assert any(s["turns"] >= 2 for s in data)
    shows = [json.loads(run("show", s["id"], "--store", str(d), "--json").output) for s in data]
    cells = [c for sh in shows for t in sh["turns"] for c in t["cells"]]
    for flag in ("is_error", "denied", "redacted", "truncated"):
        assert any(c[flag] for c in cells), flag
    again = run("demo", "--store", str(d))
    assert again.exit_code == 1 and "already holds a store" in again.output
