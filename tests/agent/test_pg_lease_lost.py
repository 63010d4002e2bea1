"""A Postgres liveness lease the server drops while a turn is recorded (its connection ended with
`pg_terminate_backend`) is noticed by the writer before it commits again: taken back on a fresh
connection when no one holds it (one warning line), or — when another process took it meanwhile —
the writer stops writing that session with one error line naming the holder, adding no row.
Real `flux run` processes against a real PostgreSQL server (tests/servers.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flux.store import Message, StoreWriter, pg_lease
from flux.store.events import TurnEnded
from flux.store.lease import LeaseHolder, LeaseLost, SessionLease, lease_holder_on
from flux.store.location import store_location, url_schema
from tests.helpers import REPO, pg_admin, wait_until

RETAKEN = "warning: s_1's lease was lost (the server dropped its connection) and re-taken"


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "core"), os.environ.get("PYTHONPATH", "")]),
                NO_COLOR="1")






def _ops(ws: Path) -> list[str]:
    p = ws / "ops.log"
    return p.read_text().split() if p.exists() else []


def _start_turn(pg_url: str, tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """`flux run` of three bash steps into a new session s_1, its second step held open (until a
    file `go` appears) once the first two have run: the turn is being recorded, its lease held."""
    ws = tmp_path / "ws"
    ws.mkdir()
    hold = "; while [ ! -f go ]; do sleep 0.05; done"
    steps = [{"tool_calls": [{"name": "bash", "input": {"command": f"echo A{i} >> ops.log" + (hold if i == 2 else "")}}]}
             for i in (1, 2, 3)]
    script = tmp_path / "a.json"
    script.write_text(json.dumps(steps + [{"text": "A done"}]))
    a = subprocess.Popen([sys.executable, "-c", "from flux.cli import main; main()", "run", "-m", f"scripted:{script}",
                          "--store", pg_url, "--workspace", str(ws), "--yes", "three steps"],
                         env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: _ops(ws) == ["A1", "A2"], "its second op", a)
    return a, ws


def _kill_lease_connection(pg_url: str, pid: int) -> None:
    """End the writer's lease connection from another connection, as a server restart or an idle
    kill would, and wait until the server has let the lease go."""
    name = f"flux-tui lease pid={pid} host={pg_lease.this_host()}"
    with pg_admin(pg_url) as admin:
        (backend,) = admin.execute("SELECT pid FROM pg_stat_activity WHERE application_name = %s", (name,)).fetchone()
        assert admin.execute("SELECT pg_terminate_backend(%s)", (backend,)).fetchone()[0]
    wait_until(lambda: lease_holder_on(store_location(pg_url), "s_1") is None, "the server to drop the lease")


def _finish(a: subprocess.Popen, ws: Path) -> tuple[int, str]:
    (ws / "go").touch()
    _, err = a.communicate(timeout=90)
    return a.returncode, err


def _rows(pg_url: str) -> list[tuple[int, str]]:
    with pg_admin(pg_url) as admin:
        return admin.execute("SELECT stream_seq, kind FROM events WHERE stream = 's_1' ORDER BY stream_seq").fetchall()


def _finished_and_free(pg_url: str) -> None:
    rows = _rows(pg_url)
    assert [seq for seq, _ in rows] == list(range(len(rows)))
    kinds = [k for _, k in rows]
    assert kinds.count("turn_started") == 1 and kinds.count("turn_ended") == 1, kinds
    assert kinds.index("turn_started") < kinds.index("turn_ended")
    r = subprocess.run([sys.executable, "-c", "from flux.cli import main; main()", "sessions", "--json", "--store",
                        pg_url], env=_env(), capture_output=True, text=True, timeout=90)
    s1 = next(s for s in json.loads(r.stdout)["sessions"] if s["id"] == "s_1")
    assert s1["interrupted"] is None and s1["recording_pid"] is None, s1


def _stop(a: subprocess.Popen, ws: Path) -> None:
    (ws / "go").touch()
    if a.poll() is None:
        a.kill()
        a.wait(30)


def test_a_lease_the_server_dropped_mid_turn_is_taken_again_and_said_once(pg_url, tmp_path: Path):
    a, ws = _start_turn(pg_url, tmp_path)
    try:
        _kill_lease_connection(pg_url, a.pid)
        code, err = _finish(a, ws)
    finally:
        _stop(a, ws)
    assert code == 0 and "Traceback" not in err, err
    assert [ln for ln in err.splitlines() if ln.startswith("warning:")] == [RETAKEN], err
    assert _ops(ws) == ["A1", "A2", "A3"]
    _finished_and_free(pg_url)


def test_a_lease_another_process_took_after_the_drop_stops_the_writer_with_one_line(pg_url, tmp_path: Path):
    """Once the writer's lease is gone, another process (here a connection that names itself as
    another machine's writer) takes it: the writer's next commit is refused — one error line naming
    that holder, no step run beside it, no row added to the session after the refusal."""
    a, ws = _start_turn(pg_url, tmp_path)
    taker = None
    try:
        _kill_lease_connection(pg_url, a.pid)
        taker = pg_admin(pg_url)
        taker.execute("SELECT set_config('application_name', 'flux-tui lease pid=4242 host=laptop-b', false)")
        k1, k2 = pg_lease.lease_key(url_schema(pg_url), "s_1")
        assert taker.execute("SELECT pg_try_advisory_lock(%s, %s)", (k1, k2)).fetchone()[0]
        before = _rows(pg_url)
        code, err = _finish(a, ws)
        after = _rows(pg_url)
        assert lease_holder_on(store_location(pg_url), "s_1") == LeaseHolder(4242, "laptop-b")  # never given up by A
    finally:
        _stop(a, ws)
        if taker is not None:
            taker.close()
    assert code == 1 and "Traceback" not in err, err
    assert [ln for ln in err.splitlines() if ln.startswith(("error:", "warning:"))] == [
        "error: s_1's lease was lost (the server dropped its connection) and pid 4242 on laptop-b holds it now — "
        "this process stopped writing s_1; what it committed before is kept"], err
    assert _ops(ws) == ["A1", "A2"]  # the third step was never dispatched beside the new holder
    assert after == before and [seq for seq, _ in after] == list(range(len(after)))  # whole, nothing added
    assert "turn_ended" not in [k for _, k in after]


def test_a_turn_whose_lease_connection_lives_says_nothing(pg_url, tmp_path: Path):
    """The control: the same turn with its lease connection left alone finishes with no warning."""
    a, ws = _start_turn(pg_url, tmp_path)
    try:
        code, err = _finish(a, ws)
    finally:
        _stop(a, ws)
    assert code == 0 and "Traceback" not in err, err
    assert [ln for ln in err.splitlines() if ln.startswith(("warning:", "error:"))] == [], err
    assert _ops(ws) == ["A1", "A2", "A3"]
    _finished_and_free(pg_url)


def _lease_lost_quietly(pg_url: str, sid: str, lease: SessionLease) -> None:
    """The lock let go on the lease connection itself: the connection lives and has nothing to say,
    so only asking the server can tell the lease is gone."""
    lease.remote.link.conn.execute("SELECT pg_advisory_unlock_all()")
    with pg_admin(pg_url) as admin:
        assert admin.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2").fetchone()[0] == 0


def _held_by(pg_url: str, sid: str) -> list[int]:
    k1, k2 = pg_lease.lease_key(url_schema(pg_url), sid)
    with pg_admin(pg_url) as admin:
        return [r[0] for r in admin.execute("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2"
                                            " AND classid = %s::oid AND objid = %s::oid", (k1, k2)).fetchall()]


def test_the_commit_that_ends_a_turn_asks_the_server_whatever_the_pace(pg_url, capsys):
    """A lease lost with no word on its connection, just after the turn began: the commit of its
    `turn_ended` confirms the lease at once (not at the once-a-second pace), takes it again and
    says so once; the lease is held again by the lease connection."""
    loc = store_location(pg_url)
    with StoreWriter(loc) as w:
        sid = w.create_session("mock")
        with SessionLease.acquire(loc, sid) as lease:
            tid = w.begin_turn(sid, "hi", "mock")
            _lease_lost_quietly(pg_url, sid, lease)
            w.append(sid, TurnEnded(outcome="ok", answer="a"), turn_id=tid)
            assert _held_by(pg_url, sid) == [lease.remote.link.conn.info.backend_pid]
        assert _held_by(pg_url, sid) == []  # released at the end as ever
    assert capsys.readouterr().err.splitlines() == [f"warning: {sid}'s lease was lost (the server dropped its "
                                                    "connection) and re-taken"]


def test_a_turn_end_refused_for_a_lost_lease_writes_nothing_then_or_later(pg_url, capsys):
    """The same quiet loss, and another process takes the key before the turn ends: `turn_ended`'s
    commit is refused naming the holder and rolled back, and so is every later commit to the session."""
    loc = store_location(pg_url)
    with StoreWriter(loc) as w:
        sid = w.create_session("mock")
        with SessionLease.acquire(loc, sid) as lease:
            tid = w.begin_turn(sid, "hi", "mock")
            before = w.conn.execute("SELECT count(*) FROM events WHERE stream = ?", (sid,)).fetchone()[0]
            _lease_lost_quietly(pg_url, sid, lease)
            with pg_admin(pg_url) as taker:
                taker.execute("SELECT set_config('application_name', 'flux-tui lease pid=77 host=laptop-c', false)")
                k1, k2 = pg_lease.lease_key(url_schema(pg_url), sid)
                assert taker.execute("SELECT pg_try_advisory_lock(%s, %s)", (k1, k2)).fetchone()[0]
                with pytest.raises(LeaseLost) as e:
                    w.append(sid, TurnEnded(outcome="ok", answer="a"), turn_id=tid)
                assert str(e.value) == (f"{sid}'s lease was lost (the server dropped its connection) and pid 77 on "
                                        f"laptop-c holds it now — this process stopped writing {sid}; what it "
                                        "committed before is kept")
                with pytest.raises(LeaseLost):
                    w.append(sid, Message.text("assistant", "late"))
                other = w.create_session("mock")  # another session is written as before
                w.append(other, Message.text("user", "fine"))
                after = w.conn.execute("SELECT count(*) FROM events WHERE stream = ?", (sid,)).fetchone()[0]
                assert after == before
                assert _held_by(pg_url, sid) == [taker.info.backend_pid]
    assert capsys.readouterr().err == ""
