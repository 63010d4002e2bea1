"""Fork and resurrect engines (spec §4.5, §4.7) on copies of the real fixture and the demo store."""

from __future__ import annotations

from pathlib import Path

import pytest

from flux.agent.client import Client
from flux.errors import FluxError
from flux.model.interrupted import check_interrupted
from flux.model.session import load_session
from flux.store.store import StoreReader
from flux.timemachine import (
    ForkCancelled, fork_points, fork_session, plan_fork, plan_resurrect, replay_session, resurrect_session, run_diff,
)
from tests.helpers import tree_digest

NOW = 1_764_000_000_000




def _client(store: Path, ws: Path, **kw) -> Client:
    ws.mkdir(exist_ok=True)
    return Client(kw.pop("provider", "mock"), store=store, workspace=ws, env_secrets=False, **kw)


def _rows(store: Path, a: str, b: str) -> list[str]:
    r = StoreReader(store)
    try:
        return [row.kind for row in run_diff(r, a, r, b).rows]
    finally:
        r.close()


# ---- fork on the real fixture ------------------------------------------------------------------


def test_fork_inject_on_fixture_is_offline_and_linked(fixture_store: Path, tmp_path: Path) -> None:
    r = StoreReader(fixture_store)
    preview = plan_fork(r, "s_1", 0, inject="injected")
    r.close()
    assert preview.offline and preview.ops == () and preview.model is None
    c = _client(fixture_store, tmp_path / "ws")
    res = fork_session(c, "s_1", 0, inject="injected")
    c.close()
    assert res.hermetic and res.live_ops == [] and res.halted is None
    r = StoreReader(fixture_store)
    row = r.get_session(res.session)
    assert row.correlation_id == "s_1" and row.agent_id == "fork:s_1@0"
    d = load_session(r, res.session)
    assert [t.user_input for t in d.turns] == ["<fork s_1 @ 0>"] and d.turns[0].ended
    assert check_interrupted(d.turns, d.turn_run_trace).interrupted is None
    # The inject replaced the bind with a literal: no dispatch, no cell; the plan differs.
    assert d.cells == []
    assert [p.plan_source for p in d.accepted_plans()][0].count('"injected"') == 1
    r.close()
    assert not list((tmp_path / "ws").iterdir())  # no side effect


def test_fork_edit_runs_live_through_the_approver(fixture_store: Path, tmp_path: Path) -> None:
    plan = 'flow\n  note = append({"path":"fork.txt","content":"forked\\n"})\n'
    r = StoreReader(fixture_store)
    preview = plan_fork(r, "s_1", 0, edit=plan, catalog=_client(fixture_store, tmp_path / "ws").toolbox.catalog())
    r.close()
    assert not preview.offline and [(o.op, o.effect) for o in preview.ops] == [("append", "write")]
    # denied by the default approver: recorded as a denied cell, nothing touched
    c = _client(fixture_store, tmp_path / "ws")
    res = fork_session(c, "s_1", 0, edit=plan)
    assert res.halted and "denied" in res.halted and not (tmp_path / "ws" / "fork.txt").exists()
    c.close()
    c = _client(fixture_store, tmp_path / "ws", auto_approve=True)
    res = fork_session(c, "s_1", 0, edit=plan)
    c.close()
    assert res.halted is None and res.live_ops == ["append"]
    assert (tmp_path / "ws" / "fork.txt").read_text() == "forked\n"
    # the fork replays on its own: its tail cell is on F
    r = StoreReader(fixture_store)
    rep = replay_session(r, res.session)
    assert rep.diverged is None and rep.cells_total == 1 and rep.faithful
    r.close()


def test_fork_replan_runs_a_live_turn(fixture_store: Path, tmp_path: Path) -> None:
    c = _client(fixture_store, tmp_path / "ws", auto_approve=True)
    res = fork_session(c, "s_1", 0, prompt="write a quick note")
    c.close()
    assert res.mode == "replan" and res.turn is not None and res.turn.ok and res.turn.model_calls >= 1
    r = StoreReader(fixture_store)
    d = load_session(r, res.session)
    assert [t.user_input for t in d.turns] == ["<fork s_1 @ 0>", "write a quick note"]
    assert all(t.ended for t in d.turns)
    r.close()


def test_fork_gate_cancel_writes_nothing(fixture_store: Path, tmp_path: Path) -> None:
    before = tree_digest(fixture_store)
    c = _client(fixture_store, tmp_path / "ws", auto_approve=True)
    seen = []
    with pytest.raises(ForkCancelled):
        fork_session(c, "s_1", 0, prompt="go", confirm=lambda p: seen.append(p) or False)
    c.close()
    assert seen and seen[0].model == "mock" and not seen[0].offline
    r = StoreReader(fixture_store)
    assert [s.id for s in r.list_sessions()] == ["s_1"]
    r.close()
    del before


@pytest.mark.parametrize("kw, needle", [
    ({"session": "s_99", "at": 0, "inject": 1}, "s_99"),
    ({"session": "s_1", "at": 5, "inject": 1}, "past the end"),
    ({"session": "s_1", "at": 0, "edit": "flow\n  x = (\n"}, "does not parse"),
    ({"session": "s_1", "at": 0, "edit": "flow\n  x = nosuchop({})\n"}, "unknown op `nosuchop`"),
    ({"session": "s_1", "at": 0, "edit": "flow\n  x = append(y)\n"}, "symbol `y`"),
])
def test_bad_fork_input_is_one_line_and_writes_nothing(fixture_store: Path, kw: dict, needle: str) -> None:
    before = tree_digest(fixture_store)
    r = StoreReader(fixture_store)
    with pytest.raises(FluxError) as e:
        plan_fork(r, kw.pop("session"), kw.pop("at"), **kw)
    r.close()
    assert needle in str(e.value) and "\n" not in str(e.value)
    assert tree_digest(fixture_store) == before


# ---- fork on the demo ---------------------------------------------------------------------------


def test_demo_fork_positions_and_inject_on_non_bind(demo: Path) -> None:
    r = StoreReader(demo)
    pts = fork_points(load_session(r, "s_5"))
    assert pts[0].binder == "version" and pts[1].binder is None
    with pytest.raises(FluxError, match="needs a top-level `bind`"):
        plan_fork(r, "s_5", 1, inject="x")
    r.close()


def test_demo_fork_inject_mid_flow_aligns_prefix(demo: Path, tmp_path: Path) -> None:
    """Fork the authored release flow at its first statement with another version: the prefix is
    empty, the bind differs (~), and the all-tape tail is served from tape."""
    c = _client(demo, tmp_path / "ws")
    res = fork_session(c, "s_1", 2, inject="F. injected failure")
    c.close()
    assert res.prefix_served == 2 and res.hermetic
    kinds = _rows(demo, "s_1", res.session)
    assert kinds[:2] == ["same", "same"] and "plan" in kinds[2:]


# ---- resurrect ------------------------------------------------------------------------------------


def test_resurrect_flow_fast_forwards_and_runs_the_in_flight_op(demo: Path, tmp_path: Path) -> None:
    r = StoreReader(demo)
    preview = plan_resurrect(r, "s_9")
    r.close()
    assert preview is not None and not preview.offline
    assert [o.op for o in preview.ops][0] == "publish" and preview.ops[0].why == "in flight"
    c = _client(demo, tmp_path / "ws", auto_approve=True, ops=_publish_ops(tmp_path / "ws"))
    rep = resurrect_session(c, "s_9")
    c.close()
    assert rep.statements_fast_forwarded == 2 and rep.ops_run_live == 2 and rep.outcome == "resurrected"
    assert (tmp_path / "ws" / "uploads.txt").read_text() == "pypi\n"
    r = StoreReader(demo)
    d = load_session(r, "s_9")
    assert d.turns[-1].ended and check_interrupted(d.turns, d.turn_run_trace).interrupted is None
    r.close()
    c = _client(demo, tmp_path / "ws", auto_approve=True, ops=_publish_ops(tmp_path / "ws"))
    assert resurrect_session(c, "s_9") is None  # nothing left to do
    c.close()


def _publish_ops(ws: Path) -> list:
    from flux.agent.builtin_ops import coding_ops
    from flux.agent.ops import op

    ws.mkdir(exist_ok=True)

    @op(effect="network")
    def publish(repository: str) -> str:
        """Upload."""
        with (ws / "uploads.txt").open("a") as f:
            f.write(repository + "\n")
        return f"uploaded to {repository}"

    @op(effect="exec")
    def run_tests(path: str = "tests") -> str:
        """Run tests."""
        return "2 passed"

    return coding_ops(ws) + [publish, run_tests]


def test_resurrect_refuses_a_turn_flux_does_not_flag(fixture_store: Path, tmp_path: Path) -> None:
    r = StoreReader(fixture_store)
    assert plan_resurrect(r, "s_1") is None  # closed turn: nothing to do
    r.close()


def test_resurrect_serves_unanchored_cells_once_and_the_session_replays_faithfully(tmp_path: Path) -> None:
    """A killed turn with no statement rows: the recorded cells are served (not recorded a second
    time — flux's Resume scope records only misses), the op in flight with no cell runs live and is
    recorded, and the healed session replays with every cell consumed exactly once."""
    from flux.canonical import canonical_json, sha256_hex
    from flux.lang.formatter import format_flow
    from flux.lang.parser import parse
    from flux.store import Message, OpRecorded, PlanAttempted, Run, StepStarted, StepSucceeded, StoreWriter

    store = tmp_path / "store"
    inputs = [{"content": f"step {k}", "path": f"out/{k}.txt"} for k in range(4)]
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        w.append(sid, Message.text("user", "build"))
        tid = w.begin_turn(sid, "build", "mock")
        body = "".join(f"  s{k} = write({canonical_json(i)})\n" for k, i in enumerate(inputs))
        w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=format_flow(parse(f"flow\n{body}"))),
                 turn_id=tid)
        for k, i in enumerate(inputs):
            ij = canonical_json(i)
            h = sha256_hex(ij)
            w.append(sid, Run(StepStarted(step=f"step_write_{h[:16]}", op="write", input_hash=h)))
            if k == 3:
                break  # killed mid-dispatch: the last write has no cell
            w.append(sid, Run(OpRecorded(seq=k, step=f"step_write_{h[:16]}", op="write", input_hash=h,
                                         input_view=ij, content=f"wrote {k}")))
            w.append(sid, Run(StepSucceeded(step=f"step_write_{h[:16]}", output=f"v_{k}")))
    c = _client(store, tmp_path / "ws", auto_approve=True)
    rep = resurrect_session(c, sid)
    c.close()
    assert rep is not None and rep.outcome == "resurrected", rep.halt
    assert (rep.ops_served_from_cassette, rep.ops_run_live, rep.unanchored_served) == (3, 1, 3)
    assert sorted(p.name for p in (tmp_path / "ws" / "out").iterdir()) == ["3.txt"]  # only the in-flight op ran
    r = StoreReader(store)
    d = load_session(r, sid)
    assert [c.op for c in d.cells] == ["write"] * 4 and len({c.rec.input_hash for c in d.cells}) == 4
    assert d.turns[-1].ended
    replay = replay_session(r, sid)
    r.close()
    assert replay.faithful and replay.diverged is None, replay.unfaithful_reason
