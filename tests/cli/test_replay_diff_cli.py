"""`flux replay` and `flux diff` as a user runs them (click's runner, real stores)."""

from __future__ import annotations

import dataclasses
import json

from click.testing import CliRunner

from flux.cli import main
from flux.store.events import OpRecorded, PlanAttempted, Run
from tests.helpers import copy_fixture, tree_digest, on_cell, rewrite


def run(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env or {})


def change_content(rec: OpRecorded):
    return Run(dataclasses.replace(rec, content="appended 99 bytes to flux-mock.txt"))


# ----------------------------------------------------------------------------------------- diff


def test_diff_against_itself_is_identical_exit_0(fixture_store):
    before = tree_digest(fixture_store)
    res = run("diff", "s_1", "last", "--store", str(fixture_store))
    assert res.exit_code == 0, res.output
    assert res.stdout == "diff s_1 ↔ s_1\n  = op `append` {\"content\":\"created by flux mock\\n\",\"path\":\"flux-mock.txt\"}\nruns are identical (1 statement(s))\n"
    assert tree_digest(fixture_store) == before


def test_diff_changed_cell_is_a_world_row_exit_1(fixture_store, tmp_path):
    other = copy_fixture(tmp_path / "b")
    rewrite(other, on_cell(change_content))
    res = run("diff", "s_1", "s_1", "--store", str(fixture_store), "--store-b", str(other))
    assert res.exit_code == 1
    assert res.stdout.splitlines() == [
        f"diff s_1 ({fixture_store}) ↔ s_1 ({other})",  # each side's store, as they differ
        "  ≠ same statement, different world — op `append` {\"content\":\"created by flux mock\\n\",\"path\":\"flux-mock.txt\"}",
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


# --------------------------------------------------------------------------------------- replay


def test_replay_fixture_is_faithful_and_writes_nothing(fixture_store):
    before = tree_digest(fixture_store)
    res = run("replay", "--store", str(fixture_store))
    assert res.exit_code == 0, res.output
    assert res.stdout == "replayed 1 plan(s) · 1/1 recorded cell(s) served\n  ✓ h:0aac945488efbfd1\n"
    assert res.stderr == "replay · session s_1 · offline (no model call, no live IO)\n"
    assert tree_digest(fixture_store) == before


def test_replay_json_is_flux_shape(fixture_store):
    res = run("replay", "s_1", "--json", "--sub-agents", env={"FLUX_STORE_DIR": str(fixture_store)})
    assert res.exit_code == 0
    assert res.stdout == ('{"cells_consumed":1,"cells_total":1,"diverged":null,"missing_sources":0,'
                          '"plans":[{"flow_key":"h:0aac945488efbfd1","halted":null}],"session":"s_1","sub_agents":[]}\n')


def test_replay_divergence_exits_1(fixture_store):
    rewrite(fixture_store, lambda b: dataclasses.replace(b, plan_source=b.plan_source.replace("flux mock", "other"))
            if isinstance(b, PlanAttempted) else b)
    before = tree_digest(fixture_store)
    res = run("replay", "--store", str(fixture_store))
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert lines[0] == "replayed 1 plan(s) · 0/1 recorded cell(s) served"
    assert lines[1].startswith("  ✗ h:") and " — diverged: op `append` (input hash " in lines[1]
    assert res.stderr.splitlines()[-1].startswith("error: replay diverged from the recording: op `append` (input hash ")
    assert tree_digest(fixture_store) == before


def test_replay_truncated_cell_exits_1(fixture_store):
    rewrite(fixture_store, on_cell(lambda c: Run(dataclasses.replace(c, truncated=True))))
    res = run("replay", "--store", str(fixture_store), "--json")
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert out["diverged"].startswith("recorded cell 0 for op `append` was truncated at the capture cap")
    assert "error: replay diverged from the recording: recorded cell 0" in res.stderr


def test_replay_extra_cell_warns_and_strict_fails(fixture_store):
    from flux.model.session import load_session
    from flux.store.store import StoreReader, StoreWriter

    r = StoreReader(fixture_store)
    rec = load_session(r, "s_1").cells[0].rec
    r.close()
    with StoreWriter(fixture_store) as w:
        w.append("s_1", Run(dataclasses.replace(rec, seq=1)))
    res = run("replay", "--store", str(fixture_store))
    assert res.exit_code == 0  # flux's exit status: only a latched divergence fails
    assert res.stdout.startswith("replayed 1 plan(s) · 1/2 recorded cell(s) served\n")
    assert "warning: replay left 1 of 2 recorded cassette cells unconsumed — the run diverged silently" in res.stderr
    res = run("replay", "--store", str(fixture_store), "--strict")
    assert res.exit_code == 1
    assert res.stderr.splitlines()[-1] == "error: replay left 1 of 2 recorded cassette cells unconsumed — the run diverged silently"


def test_replay_bad_inputs_are_one_line_errors_and_write_nothing(fixture_store, tmp_path):
    before = tree_digest(fixture_store)
    cases = {
        ("replay", "--turn", "0"): "error: --turn is 1-based: got 0; pass N ≥ 1 (turn 1 is the session's first turn)",
        ("replay", "--turn", "3"): "error: session s_1 is not replayable: turn 3 does not exist (it has 1 turn(s))",
        ("replay", "s_5"): "error: no session 's_5'",
    }
    for args, expected in cases.items():
        res = run(*args, "--store", str(fixture_store))
        assert res.exit_code == 1, args
        assert res.stderr.splitlines()[-1].startswith(expected), res.stderr
        assert res.stdout == ""
    cat = tmp_path / "ops.json"
    cat.write_text(json.dumps([{"name": "read", "required": ["path"]}]))
    res = run("replay", "--store", str(fixture_store), "--catalog", str(cat))
    assert res.exit_code == 1
    assert res.stderr.splitlines()[-1] == ("error: session s_1 is not replayable: plan h:0aac945488efbfd1 uses unknown "
                                           "op `append` — the catalog has no such op")
    cat.write_text(json.dumps({"append": {"required": ["path", "content"]}}))
    assert run("replay", "--store", str(fixture_store), "--catalog", str(cat)).exit_code == 0
    cat.write_text("{not json")
    res = run("replay", "--store", str(fixture_store), "--catalog", str(cat))
    assert res.exit_code == 1 and "is not JSON" in res.stderr
    assert tree_digest(fixture_store) == before


def test_replay_unparseable_plan_and_no_cells(fixture_store, tmp_path):
    broken = copy_fixture(tmp_path / "broken")
    rewrite(broken, lambda b: dataclasses.replace(b, plan_source="flow\n  x = (\n") if isinstance(b, PlanAttempted) else b)
    res = run("replay", "--store", str(broken))
    assert res.exit_code == 1
    err = res.stderr.splitlines()[-1]
    assert err.startswith("error: session s_1 is not replayable: the accepted plan of turn 1 (attempt step 1, stream_seq 10) no longer parses: line ")

    rewrite(fixture_store, on_cell(lambda c: None))
    res = run("replay", "--store", str(fixture_store))
    assert res.exit_code == 1
    assert res.stderr.splitlines()[-1] == ("error: session s_1 is not replayable: no cassette cells recorded "
                                           "(pre-C-43 run, or FLUX_CASSETTE=0)")


def test_replay_sub_agents(tmp_path):
    from flux.canonical import canonical_json, sha256_hex
    from flux.store.store import StoreWriter
    from tests.helpers import write_turn

    plan = 'flow\n  a = read({"path":"x"})\n'
    inp = {"path": "x"}
    h = sha256_hex(canonical_json(inp))

    def good_cell(content="X"):
        return Run(OpRecorded(step=f"step_read_{h[:16]}", op="read", input_hash=h, content=content))

    store = tmp_path / "st"
    with StoreWriter(store) as w:
        parent = w.create_session("mock")
        write_turn(w, parent, "go", plan=plan, cells=[good_cell()])
        ok = w.create_session("mock", context={"correlation_id": parent, "agent_id": "subagent:a"})
        write_turn(w, ok, "go", plan=plan, cells=[good_cell()])
        idle = w.create_session("mock", context={"correlation_id": parent, "agent_id": "subagent:b"})
        write_turn(w, idle, "go", plan=plan, cells=[])
    res = run("replay", parent, "--sub-agents", "--store", str(store), "--json")
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["sub_agents"] == [{"cells_consumed": 1, "cells_total": 1, "diverged": None, "session": ok}]
    assert f"replay · sub-agent {ok}" in res.stderr and f"replay · sub-agent {idle}" in res.stderr
    res = run("replay", parent, "--sub-agents", "--store", str(store))
    assert f"  ↳ sub-agent {idle} (b) — session {idle} is not replayable: no run trace recorded" in res.stdout

    with StoreWriter(store) as w:
        bad = w.create_session("mock", context={"correlation_id": parent, "agent_id": "subagent:c"})
        write_turn(w, bad, "go", plan='flow\n  a = read({"path":"other"})\n', cells=[good_cell()])
    res = run("replay", parent, "--sub-agents", "--store", str(store))
    assert res.exit_code == 1
    assert res.stderr.splitlines()[-1].startswith(f"error: sub-agent {bad} replay diverged from the recording: op `read`")
