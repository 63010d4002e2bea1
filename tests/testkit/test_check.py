"""Scenario.check against scenarios recorded through the real providers — offline, and strict: every
way the run can depart from the recording fails with the call index and what differed."""

from __future__ import annotations

import dataclasses
import json

import pytest

from flux.store import Run
from flux.testkit import MissingFixture, Scenario
from flux.testkit.errors import AssertionFailed
from flux.testkit.runner import offline_client

from tests.helpers import on_cell, rewrite
from tests.testkit.conftest import change_tool_input


def check(d, **kw):
    with Scenario.load(d) as sc:
        client = offline_client(sc)
        try:
            return sc.check(client, **kw)
        finally:
            client.close()


def test_a_clean_check_passes_offline(scenario_dir):
    rep = check(scenario_dir)
    assert rep.is_clean(), rep.explain()
    assert rep.model_served == 3 and rep.model_live == 0 and rep.model_unconsumed == 0
    assert rep.status() == "✓ faithful" and rep.first_divergence is None
    assert rep.actual_ops == ["read", "append"]
    rep.assert_clean()


def test_the_recorded_files_are_flux_shaped(scenario_dir):
    names = sorted(p.name for p in scenario_dir.iterdir())
    assert names == ["events.db", "flow.db", "model.jsonl", "plan.flux.snap", "scenario.toml"]
    lines = (scenario_dir / "model.jsonl").read_text().splitlines()
    assert len(lines) == 3
    assert list(json.loads(lines[0])) == ["v", "hash", "model", "request", "chunks"]
    snap = (scenario_dir / "plan.flux.snap").read_text()
    assert "adaptive_gather_1 = read(" in snap and "\n---\n" in snap and "append(" in snap
    toml = (scenario_dir / "scenario.toml").read_text()
    assert toml.splitlines()[0] == "schema = 1" and 'flux_version = "0.1.0+flux-tui"' in toml


def test_changed_prompt_fails_at_model_call_1_naming_the_system_field(scenario_dir):
    with Scenario.load(scenario_dir) as sc:
        client = offline_client(sc)
        client.instructions = "You are a different agent."
        rep = sc.check(client)
        client.close()
    assert not rep.is_clean()
    assert rep.error.startswith("model call 1: the request differs from the recorded one — system:")
    assert "'You are a different agent.'" in rep.error
    assert rep.model_live == 1 and rep.outcome == "error"


def test_changed_tool_result_fails_at_the_call_that_sees_it(scenario_dir):
    rewrite(scenario_dir, on_cell(lambda c: Run(dataclasses.replace(c, content="# demo project\nall fine\n"))
                                  if c.op == "read" else Run(c)))
    rep = check(scenario_dir)
    assert not rep.is_clean()
    assert rep.error.startswith("model call 2: the request differs")
    assert "all fine" in rep.error and "config is wrong" in rep.error


def test_changed_model_answer_leaves_the_world_and_says_where(scenario_dir):
    change_tool_input(scenario_dir / "model.jsonl", 1, path="OTHER.md")
    rep = check(scenario_dir)
    assert rep.left_world and "≠ left the world" in rep.status()
    assert "op `read`" in rep.divergence and "no matching unconsumed recorded cell" in rep.divergence
    assert rep.error.startswith("model call 2: the request differs")
    text = rep.explain()
    assert "▶" in text and "OTHER.md" in text and "README.md" in text


def test_exhausted_cassette_names_the_call(scenario_dir):
    lines = (scenario_dir / "model.jsonl").read_text().splitlines()
    (scenario_dir / "model.jsonl").write_text("\n".join(lines[:2]) + "\n")
    rep = check(scenario_dir)
    assert rep.error.startswith("model call 3: the cassette is exhausted — it recorded 2 call(s)")
    assert rep.model_live == 1 and not rep.is_clean()


def test_an_extra_model_call_fails_loudly(scenario_dir):
    # The last answer becomes another tool call: the agent then asks a 4th time.
    (scenario_dir / "replay.override.json").write_text(json.dumps({"calls": {"3": {"kind": "chunks", "chunks": [
        {"t": "block", "c": {"type": "tool_use", "id": "x9", "name": "read", "input": {"path": "README.md"}}},
        {"t": "done", "c": {"stop_reason": "tool_use"}}]}}}))
    rep = check(scenario_dir)
    assert rep.error.startswith("model call 4: the cassette is exhausted")
    assert "made an extra one" in rep.error


def test_fewer_model_calls_than_recorded_is_not_clean(scenario_dir):
    (scenario_dir / "replay.override.json").write_text(json.dumps({"calls": {"2": {"kind": "chunks", "chunks": [
        {"t": "text_delta", "c": "done early"}, {"t": "done", "c": {"stop_reason": "end_turn"}}]}}}))
    rep = check(scenario_dir)
    assert rep.model_unconsumed == 1 and rep.plan_changed and not rep.is_clean()
    assert "✗ plan changed" in rep.status()


def test_override_throw_before_any_chunk(scenario_dir):
    (scenario_dir / "replay.override.json").write_text(json.dumps(
        {"calls": {"1": {"kind": "throw", "status": 401, "code": "auth", "message": "invalid api key"}}}))
    rep = check(scenario_dir)
    # the agent sees exactly what the provider said; the recording answered, so the check is red
    assert rep.error == "the re-drive ended in error: invalid api key" and rep.outcome == "error"
    assert not rep.is_clean()


def test_override_throw_after_prefix_chunks(scenario_dir):
    (scenario_dir / "replay.override.json").write_text(json.dumps([
        {"kind": "throw", "chunks": [{"t": "text_delta", "c": "partial"}], "message": "stream reset", "status": 500}]))
    with Scenario.load(scenario_dir) as sc:
        client = offline_client(sc)
        seen = []
        client.on_event = seen.append
        rep = sc.check(client)
        client.close()
    assert rep.error == "the re-drive ended in error: stream reset" and rep.model_served == 1


def test_override_hang_is_cut_by_the_timeout(scenario_dir):
    (scenario_dir / "replay.override.json").write_text(json.dumps({"calls": {"1": {"kind": "hang"}}}))
    rep = check(scenario_dir, timeout=0.2)
    assert rep.error.startswith("model call 1 hung (replay.override.json hang)")
    assert rep.outcome == "cancelled" and not rep.is_clean()


def test_a_bad_override_is_one_line(scenario_dir):
    (scenario_dir / "replay.override.json").write_text(json.dumps({"calls": {"1": {"kind": "explode"}}}))
    with pytest.raises(Exception) as e:
        check(scenario_dir)
    assert "unknown kind 'explode'" in str(e.value) and "\n" not in str(e.value)


def test_missing_fixture_says_record_first(tmp_path, offline):
    with pytest.raises(MissingFixture, match="record first"):
        Scenario.load(tmp_path / "nothing-here")


def test_missing_model_cassette_says_record_first(scenario_dir):
    (scenario_dir / "model.jsonl").unlink()
    with pytest.raises(MissingFixture, match="record first"):
        check(scenario_dir)


def test_the_real_flux_fixture_replays_green_and_check_is_replay_only(fixture_store, offline):
    d = fixture_store
    with Scenario.load(d) as sc:
        out = sc.replay()
        out.assert_faithful().assert_plan_snapshot().assert_calls(["append"]).assert_text_contains("Finished.")
        rep = sc.check(offline_client(sc))
    assert rep.replay_only and not rep.is_clean()
    assert rep.status() == "replay only"
    assert "recorded by flux 0.26.0" in rep.note and "\n" not in rep.note
    with pytest.raises(AssertionFailed, match="check cannot run"):
        rep.assert_clean()


def test_record_refuses_to_clobber_without_update(scenario_dir, monkeypatch):
    from flux.agent.client import Client
    from flux.testkit import ScenarioError

    c = Client("mock", workspace=scenario_dir, env_secrets=False, auto_approve=True)
    try:
        with pytest.raises(ScenarioError, match="FLUX_GOLDEN=update"):
            Scenario.record(c, "hi", scenario_dir)
        monkeypatch.setenv("FLUX_GOLDEN", "update")
        Scenario.record(c, "write a quick note", scenario_dir).close()
    finally:
        c.close()
    with Scenario.load(scenario_dir) as sc:
        assert sc.manifest.model == "mock" and sc.manifest.input == "write a quick note"


def test_check_under_update_re_records_and_reports_the_change(scenario_dir, monkeypatch):
    from flux.agent.client import Client

    monkeypatch.setenv("FLUX_GOLDEN", "update")
    c = Client("mock", workspace=scenario_dir.parent, env_secrets=False, auto_approve=True)
    try:
        with Scenario.load(scenario_dir) as sc:
            rep = sc.check(c)
            assert rep.left_world and rep.rebaselined and rep.note == "re-recorded under FLUX_GOLDEN=update"
            assert sc.manifest.model == "mock"
    finally:
        c.close()


def test_inject_at_forks_the_work_copy_and_reports_where_it_diverged(openai_dir):
    from flux.agent.approver import DenyAll
    from flux.agent.client import Client
    from tests.helpers import tree_digest

    before = tree_digest(openai_dir)
    ws = openai_dir.parent / "ws"
    ws.mkdir()
    with Client("mock", workspace=ws, env_secrets=False, approver=DenyAll()) as c, Scenario.load(openai_dir) as sc:
        cf = sc.inject_at(c, 0, {"error": "disk full"})
        # The read's result is replaced; the append that followed still runs, served from the tape.
        assert cf.actual_ops == ["append"] and cf.hermetic and cf.halted is None
        fd = cf.first_divergence()
        assert (fd.node, fd.kind) == (0, "Plan") and cf.at == 0 and cf.fork.session == cf.session
        assert type(cf) is __import__("flux.timemachine", fromlist=["Counterfactual"]).Counterfactual  # one concept
        cf.assert_diverges_at(0).assert_compensated_with("append")
        with pytest.raises(AssertionFailed, match="expected the run to compensate with `bash`"):
            cf.assert_compensated_with("bash")
        assert "read {\"path\":\"README.md\"} → # demo project" in cf.trajectory_diff()
        assert sc.assertions == 3
    assert tree_digest(openai_dir) == before, "inject_at writes the work copy, never the fixture"
    assert not (ws / "note.txt").exists()
