"""The demo store is recorded by the runtime: every feature is present, replays are faithful
(except where a truncated cell honestly refuses), timestamps are a function of now_ms."""

from __future__ import annotations

import sqlite3

import pytest

from flux.demo import STAGING_ENV, build_demo_store
from flux.errors import FluxError
from flux.model.listing import list_sessions
from flux.model.session import load_session
from flux.store.store import StoreReader
from flux.timemachine.replay import replay_session

NOW = 1_785_193_560_000


def rows(store):
    with sqlite3.connect(store / "events.db") as c:
        return c.execute("SELECT stream, stream_seq, kind, ts, turn_id, payload FROM events ORDER BY global_seq").fetchall()


def test_demo_recorded_by_the_runtime_has_every_feature(tmp_path):
    d = build_demo_store(tmp_path / "demo", now_ms=NOW)
    with StoreReader(d) as r:
        sessions = {s.id: s for s in list_sessions(r, limit=None)}
        details = {sid: load_session(r, sid) for sid in sessions}
        reports = {sid: replay_session(r, sid) for sid in sessions}
        rows_ = {s.id: s for s in r.list_sessions()}
    assert len(sessions) == 11
    assert {sid for sid, s in sessions.items() if s.interrupted} == {"s_8", "s_9"}
    assert rows_["s_2"].agent_id == "subagent:explorer" and rows_["s_2"].correlation_id == "s_1"
    assert rows_["s_6"].agent_id == "fork:s_1@3" and rows_["s_6"].correlation_id == "s_1"
    assert rows_["s_10"].agent_id == "what_if:s_1@latest" and rows_["s_10"].correlation_id == "s_1"
    assert [t.outcome for t in details["s_11"].turns] == ["resurrected"]
    assert sum(1 for dt in details.values() if len(dt.turns) >= 2) >= 3
    cells = [c.rec for dt in details.values() for c in dt.cells]
    assert any(c.is_error and not c.denied for c in cells)
    assert any(c.denied and c.op == "write" for c in cells)
    assert any(c.redacted for c in cells) and any(c.truncated for c in cells)
    s5 = details["s_5"]
    assert "parallel" in s5.turns[0].accepted_plans[0].plan_source and "saga" in s5.turns[0].accepted_plans[0].plan_source
    # every complete session replays faithfully; the truncated one refuses loudly
    for sid in ("s_1", "s_2", "s_3", "s_5", "s_6", "s_7", "s_10", "s_11"):
        rep = reports[sid]
        assert rep.diverged is None and rep.cells_consumed == rep.cells_total, (sid, rep)
    assert "truncated at the capture cap" in reports["s_4"].diverged
    # the killed sessions replay up to the kill: the tape ends at the op in flight (publish), no divergence
    for sid in ("s_8", "s_9"):
        rep = reports[sid]
        assert rep.cells_consumed == rep.cells_total == 2 and rep.diverged is None, (sid, rep)
        assert rep.tape_end is not None and rep.tape_end.op == "publish", (sid, rep)
    # the staging secrets never reached the store
    data = (d / "events.db").read_bytes() + b"".join(p.read_bytes() for p in d.iterdir() if p.name.endswith("-wal"))
    for secret in ("Zq7-staging-pw-41", "tok_live_9f8e7d6c5b4a39281706"):
        assert secret in STAGING_ENV and secret.encode() not in data


def test_demo_is_deterministic_given_now(tmp_path):
    a = build_demo_store(tmp_path / "a", now_ms=NOW)
    b = build_demo_store(tmp_path / "b", now_ms=NOW)
    assert rows(a) == rows(b)
    ts = [r[3] for r in rows(a)]
    assert min(ts) >= NOW - 3 * 86_400_000 and max(ts) < NOW


def test_demo_refuses_an_existing_store_unless_overwrite(tmp_path):
    d = build_demo_store(tmp_path / "d", now_ms=NOW)
    with pytest.raises(FluxError, match="already holds a store"):
        build_demo_store(d, now_ms=NOW)
    build_demo_store(d, now_ms=NOW + 1, overwrite=True)
    assert rows(d)[0][3] > NOW - 3 * 86_400_000


def test_demo_fork_diff_shows_the_shared_prefix_then_plan_and_world_rows(tmp_path):
    from flux.timemachine import run_diff

    d = build_demo_store(tmp_path / "demo", now_ms=NOW)
    with StoreReader(d) as r:
        kinds = [row.kind for row in run_diff(r, "s_1", r, "s_6").rows]
    assert kinds == ["same", "same", "same", "plan", "output", "plan", "plan"]
