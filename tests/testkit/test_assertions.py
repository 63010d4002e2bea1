"""Assertion messages a person can act on, and the volatile fields found by running a scenario twice."""

from __future__ import annotations

import dataclasses
import json

import pytest

from flux.agent.client import Client
from flux.model.session import load_session
from flux.store import Run
from flux.store.store import StoreReader
from flux.testkit import Scenario, assert_compensated_with, assert_diverges_at
from flux.testkit.errors import AssertionFailed
from flux.testkit.runner import offline_client
from flux.model.surfaces import VOLATILE_KEYS, discover_volatile, event_log

from tests.helpers import on_cell, rewrite


def test_replay_assertions_pass_and_fail_with_what_happened(openai_dir):
    with Scenario.load(openai_dir) as sc:
        out = sc.replay()
        out.assert_calls(["read", "append"]).assert_calls(["append"]).assert_calls(["read", "append"], exact=True)
        out.assert_never_calls("bash", "write").assert_text_contains("root cause")
        with pytest.raises(AssertionFailed) as e:
            out.assert_calls(["append", "read"])
        assert "the recording made ['read', 'append'] (not found in order: ['read'])" in str(e.value)
        with pytest.raises(AssertionFailed, match=r"expected no call to 'append'; the recording made `append` \(call 2\)"):
            out.assert_never_calls("append")
        with pytest.raises(AssertionFailed, match="does not contain 'success'") as e:
            out.assert_text_contains("success")
        assert "Wrote note.txt" in str(e.value)
        assert sc.assertions == 8


def test_cost_uses_the_one_pricing_module(openai_dir, tmp_path, monkeypatch):
    with Scenario.load(openai_dir) as sc:
        out = sc.replay()
        with pytest.raises(AssertionFailed, match="the cost is unknown — no price for openai:test-model"):
            out.assert_cost_below(1.0)
        prices = tmp_path / "prices.json"
        prices.write_text(json.dumps({"test-model": {"input": 1000.0, "output": 2000.0}}))
        monkeypatch.setenv("FLUX_PRICES", str(prices))
        cost, unknown = out.cost()
        assert unknown == [] and cost == pytest.approx((11 * 3 * 1000 + 7 * 3 * 2000) / 1e6)
        out.assert_cost_below(1.0)
        with pytest.raises(AssertionFailed, match=r"cost \$0\.075000, not below the budget \$0\.010000"):
            out.assert_cost_below(0.01)


def test_unfaithful_replay_names_the_divergence(openai_dir):
    rewrite(openai_dir, on_cell(lambda c: Run(dataclasses.replace(c, input_hash="0" * 64)) if c.op == "append" else Run(c)))
    with Scenario.load(openai_dir) as sc:
        with pytest.raises(AssertionFailed) as e:
            sc.replay().assert_faithful()
    msg = str(e.value)
    assert "the replay is not faithful — op `append`" in msg and "has no matching unconsumed recorded cell" in msg
    assert "replayed 2 plan(s) · 1/2 recorded cell(s) served" in msg and "re-record" in msg


def test_plan_snapshot_mismatch_names_the_line_and_the_re_baseline_command(openai_dir):
    """One complete line (no dangling ':'), the first differing line, and the command a user
    runs — ``flux test --update`` — with flux's per-line diff below it."""
    snap = openai_dir / "plan.flux.snap"
    snap.write_text(snap.read_text().replace("README.md", "OLD.md"))
    with Scenario.load(openai_dir) as sc:
        with pytest.raises(AssertionFailed) as e:
            sc.replay().assert_plan_snapshot()
    assert e.value.summary == (
        "openai: plan snapshot mismatch — plan.flux.snap line 2 is '  adaptive_gather_1 = read({\"path\":\"OLD.md\"})', "
        "the recorded plans have '  adaptive_gather_1 = read({\"path\":\"README.md\"})'; if the change is intended, "
        "re-baseline: flux test --update (pytest --flux-update)")
    msg = str(e.value)
    assert f"\n\n{snap}\n  flow\n" in msg
    assert '- flow\n' not in msg and '  flow' in msg
    assert '-   adaptive_gather_1 = read({"path":"OLD.md"})' in msg
    assert '+   adaptive_gather_1 = read({"path":"README.md"})' in msg


def test_diverges_at_and_compensated_with_on_a_check(openai_dir):
    (openai_dir / "replay.override.json").write_text(json.dumps({"calls": {"2": {"kind": "chunks", "chunks": [
        {"t": "block", "c": {"type": "tool_use", "id": "c2", "name": "append",
                             "input": {"path": "note.txt", "content": "something else\n"}}},
        {"t": "done", "c": {"stop_reason": "tool_use"}}]}}}))
    with Scenario.load(openai_dir) as sc:
        rep = sc.check(offline_client(sc))
    assert not rep.is_clean() and rep.left_world
    assert_diverges_at(rep, 1)
    assert_compensated_with(rep, "append")
    with pytest.raises(AssertionFailed, match="expected the first divergence at statement 0; it diverges first at statement 1"):
        assert_diverges_at(rep, 0)
    with pytest.raises(AssertionFailed, match="expected the run to compensate with `bash`; it called \\['read', 'append'\\]"):
        assert_compensated_with(rep, "bash")
    with pytest.raises(AssertionFailed) as e:
        rep.assert_clean()
    assert "golden" in str(e.value) and "this run" in str(e.value) and "▶" in str(e.value)


def test_volatile_keys_are_what_differs_between_two_runs(tmp_path):
    """Record the same turn twice with the deterministic mock model: the keys whose values differ
    are exactly the ones the event-log surface treats as volatile, and after normalising the two
    logs are equal."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("# x\n")
    with Client("mock", workspace=ws, store=tmp_path / "st", auto_approve=True, env_secrets=False) as c:
        c.session().send_sync("write a quick note")
        (ws / "flux-mock.txt").unlink()
        c.session().send_sync("write a quick note")
    with StoreReader(tmp_path / "st") as r:
        a, b = load_session(r, "s_1"), load_session(r, "s_2")
    found = discover_volatile(a.events, b.events)
    assert {"session_id", "turn_id"} <= found <= VOLATILE_KEYS
    assert event_log(a) == event_log(b)


def test_atif_volatile_fields_are_what_differs_between_two_runs(tmp_path):
    pytest.importorskip("atif")
    from flux.testkit.atif import ATIF_VOLATILE, discover_volatile as atif_volatile, export, normalize

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("# x\n")
    t = [1_700_000_000_000]

    def clock() -> int:
        t[0] += 7
        return t[0]

    with Client("mock", workspace=ws, store=tmp_path / "st", auto_approve=True, env_secrets=False, clock=clock) as c:
        c.session().send_sync("write a quick note")
        (ws / "flux-mock.txt").unlink()
        c.session().send_sync("write a quick note")
    with StoreReader(tmp_path / "st") as r:
        a, b = export(load_session(r, "s_1")), export(load_session(r, "s_2"))
    found = atif_volatile(a, b)
    assert found <= set(ATIF_VOLATILE) | {"flux_session"} and {"session_id", "timestamp"} <= found
    assert normalize(a) == normalize(b)
    assert normalize(a)["schema_version"] == a["schema_version"] == "ATIF-v1.8"
