"""What an imported run supports: replay with tools served from the imported cells, diff (between
imports and against a native run), the ATIF round trip, golden trajectories, a scenario made from
an import (`flux record --from-import`) under `flux test`, and a deepseek snapshot directory under
`flux test` — each with the broken variant that fails."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.testkit.imported import roundtrip_differences
from tests.importers.foreign_logs import (
    atif_doc, claude_code_session, codex_rollout, deepseek_override, deepseek_session,
)


def flux(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, env=env)


def _import(log: Path, store: Path) -> str:
    res = flux("import", log, "--store", store, "--json")
    assert res.exit_code == 0, res.output
    return json.loads(res.output)["files"][0]["session"]


def _atif(tmp_path: Path, doc: dict | None = None, name: str = "run.json") -> Path:
    p = tmp_path / "atif" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc or atif_doc(), indent=1), encoding="utf-8")
    return p


@pytest.mark.parametrize("fmt", ["atif", "claude-code", "codex", "deepseek"])
def test_an_imported_run_replays_offline_from_its_cells(tmp_path, fmt):
    logs = tmp_path / "logs"
    log = {"atif": lambda: _atif(tmp_path), "claude-code": lambda: claude_code_session(logs),
           "codex": lambda: codex_rollout(logs), "deepseek": lambda: deepseek_session(logs)}[fmt]()
    store = tmp_path / "store"
    sid = _import(log, store)
    res = flux("replay", sid, "--store", store, "--strict", "--sub-agents", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["cells_consumed"] == out["cells_total"] > 0 and all(s["diverged"] is None for s in out["sub_agents"])


def test_replay_of_an_import_whose_cell_was_tampered_fails(tmp_path):
    store = tmp_path / "store"
    sid = _import(codex_rollout(tmp_path / "logs"), store)
    assert flux("replay", sid, "--store", store, "--strict").exit_code == 0
    import sqlite3

    con = sqlite3.connect(store / "events.db")
    row = con.execute("SELECT global_seq, payload FROM events WHERE payload LIKE '%op_recorded%' ORDER BY global_seq"
                      " LIMIT 1").fetchone()
    body = json.loads(row[1])
    body["data"]["input_hash"] = "0" * 64
    con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (json.dumps(body), row[0]))
    con.commit()
    con.close()
    res = flux("replay", sid, "--store", store, "--strict")
    assert res.exit_code == 1


def test_diff_between_two_imports_and_against_a_native_run(tmp_path):
    store = tmp_path / "store"
    a = _import(_atif(tmp_path, name="a.json"), store)
    doc = atif_doc()
    doc["steps"][4]["observation"]["results"][0]["content"] = "edit refused: file is read-only"
    doc["steps"][4]["observation"]["results"][0]["extra"] = {"is_error": True}
    b = _import(_atif(tmp_path, doc, name="b.json"), store)
    same = flux("diff", a, a, "--store", store, "--json")
    assert same.exit_code == 0 and json.loads(same.stdout)["identical"] is True
    changed = flux("diff", a, b, "--store", store, "--json")
    assert changed.exit_code == 1  # the runs differ
    out = json.loads(changed.stdout)
    assert out["summary"] == {"output": 1, "plan": 0, "same": 2}
    [row] = [r for r in out["rows"] if r["kind"] == "output"]
    assert row["op"] == "edit_file" and row["b"] == "edit refused: file is read-only"
    # against a native run of this runtime in the same store
    native = flux("run", "write a quick note", "-m", "mock", "--store", store, "--workspace", tmp_path, "--yes")
    assert native.exit_code == 0, native.output
    res = flux("diff", a, "last", "--store", store, "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)["summary"]["same"] == 0


def test_atif_round_trip_is_equal_after_normalisation(tmp_path):
    src = atif_doc()
    store = tmp_path / "store"
    sid = _import(_atif(tmp_path, src), store)
    res = flux("export", sid, "--format", "atif", "--store", store)
    assert res.exit_code == 0, res.output
    exported = json.loads(res.output)
    assert roundtrip_differences(src, exported) == []
    # the same comparison sees a changed tool result, a dropped step and a changed token count
    broken = json.loads(res.output)
    broken["steps"][2]["observation"]["results"][0]["content"] = "something else"
    assert roundtrip_differences(src, broken)
    fewer = json.loads(res.output)
    del fewer["steps"][-1]
    assert roundtrip_differences(src, fewer)
    tokens = json.loads(res.output)
    tokens["steps"][1]["metrics"]["completion_tokens"] += 1
    assert roundtrip_differences(src, tokens)


def test_golden_check_on_an_imported_run(tmp_path):
    store = tmp_path / "store"
    sid = _import(claude_code_session(tmp_path / "logs"), store)
    golden = tmp_path / "golden.json"
    assert flux("golden", "update", sid, golden, "--store", store).exit_code == 0
    assert flux("golden", "check", sid, golden, "--store", store).exit_code == 0
    doc = json.loads(golden.read_text())
    doc["steps"][1]["tool_calls"][0]["function_name"] = "Write"
    golden.write_text(json.dumps(doc))
    res = flux("golden", "check", sid, golden, "--store", store)
    assert res.exit_code == 1


def test_record_from_import_makes_a_scenario_flux_test_passes_and_fails_when_broken(tmp_path):
    store = tmp_path / "store"
    sid = _import(claude_code_session(tmp_path / "logs"), store)
    scen = tmp_path / "scenarios"
    res = flux("record", "fix-parser", "--from-import", sid, "--store", store, "--dir", scen)
    assert res.exit_code == 0, res.output
    d = scen / "fix-parser"
    assert sorted(p.name for p in d.iterdir()) == ["events.db", "flow.db", "model.jsonl", "plan.flux.snap",
                                                   "scenario.toml", "trajectory.golden.json"]
    assert 'flux_version = "import:claude-code:2.0.14"' in (d / "scenario.toml").read_text()
    assert len((d / "model.jsonl").read_text().splitlines()) == 6  # 4 calls of the session, 2 of its sub-agent
    ok = flux("test", d, "--json")
    assert ok.exit_code == 0, ok.output
    [r] = json.loads(ok.stdout)["scenarios"]
    assert r["ok"] and r["replay"] == "✓ faithful" and r["check"].startswith("replay only")
    golden = json.loads((d / "trajectory.golden.json").read_text())
    # broken: the committed golden says the Bash call succeeded with other output
    bad = shutil.copytree(d, tmp_path / "bad" / "fix-parser")
    g = json.loads(json.dumps(golden))
    g["steps"][1]["observation"]["results"][0]["content"] = "all tests passed"
    (bad / "trajectory.golden.json").write_text(json.dumps(g))
    res = flux("test", bad)
    assert res.exit_code == 1 and "trajectory differs" in res.output
    # broken: the plan snapshot no longer matches the recorded plans
    bad2 = shutil.copytree(d, tmp_path / "bad2" / "fix-parser")
    (bad2 / "plan.flux.snap").write_text((d / "plan.flux.snap").read_text().replace("pytest -q", "pytest -x"))
    assert flux("test", bad2).exit_code == 1
    # a session flux import did not make is refused in one line
    assert flux("run", "hello", "-m", "mock", "--store", store, "--workspace", tmp_path, "--yes").exit_code == 0
    res = flux("record", "native", "--from-import", "last", "--store", store, "--dir", scen)
    assert res.exit_code == 1 and res.output.count("\n") == 1 and "was not made by `flux import`" in res.output


def test_a_deepseek_snapshot_directory_under_flux_test(tmp_path, monkeypatch):
    root = tmp_path / "snapshots"
    snap = root / "bash-tool-turn"
    deepseek_session(snap)
    res = flux("test", root, "--json")
    assert res.exit_code == 0, res.output
    [r] = json.loads(res.stdout)["scenarios"]
    assert r["ok"] and r["replay"] == "✓ faithful" and "deepseek" in r["check"]
    assert flux("test", root, "--update").exit_code == 0
    monkeypatch.delenv("FLUX_GOLDEN", raising=False)  # (--update in-process sets it for the process)
    assert (snap / "trajectory.golden.json").is_file()
    assert flux("test", root).exit_code == 0
    log = snap / "session.jsonl"
    good = log.read_text()
    # broken: the recorded tool output changed since the golden was accepted
    log.write_text(good.replace('"TERMINAL_OK\\n"', '"TERMINAL_KO\\n"'))
    res = flux("test", root)
    assert res.exit_code == 1 and "trajectory differs" in res.output
    # broken: a damaged line is that scenario's error, naming the line
    lines = good.splitlines()
    lines[5] = lines[5][:20]
    log.write_text("\n".join(lines) + "\n")
    res = flux("test", root)
    assert res.exit_code == 1 and "line 6 is not JSON" in res.output
    # broken: an override entry more than the log's turns use
    log.write_text(good)
    deepseek_override(snap)
    entries = json.loads((snap / "replay.override.json").read_text())
    (snap / "replay.override.json").write_text(json.dumps(entries + entries))
    res = flux("test", root)
    assert res.exit_code == 1 and "more than the log's turns use" in res.output


def test_re_driving_an_imported_run_with_our_agent_loop_is_refused_in_one_line(tmp_path):
    store = tmp_path / "store"
    sid = _import(codex_rollout(tmp_path / "logs"), store)
    before = (store / "events.db").read_bytes()
    for args in (["run", "and now?", "-m", "mock", "--session", sid, "--workspace", tmp_path, "--yes"],
                 ["run", "and now?", "-m", "mock", "--continue", "--workspace", tmp_path, "--yes"],
                 ["fork", sid, "--at", "1", "--replan", "-m", "mock", "--workspace", tmp_path],
                 ["what-if", sid, "--substitute", "shell=\"ok\"", "--workspace", tmp_path]):
        res = flux(*args, "--store", store)
        assert res.exit_code == 1, (args, res.output)
        assert res.output.count("\n") == 1 and "re-drive another agent's loop" in res.output, res.output
    assert (store / "events.db").read_bytes() == before
    # a native session of the same store is not refused
    assert flux("run", "note", "-m", "mock", "--store", store, "--workspace", tmp_path, "--yes").exit_code == 0
    assert flux("run", "again", "-m", "mock", "--continue", "--store", store, "--workspace", tmp_path, "--yes").exit_code == 0
