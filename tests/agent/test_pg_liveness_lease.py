"""Liveness leases on a shared Postgres store: a turn recorded by another process — or another
machine — reads `● recording` everywhere and is never resurrected or pruned beside its writer; the
same turn reads `⚠ interrupted` once the writer is killed with SIGKILL or its connection is gone.
Every check runs against a real PostgreSQL server (tests/servers.py) and real `flux` processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from flux.store import StoreWriter
from flux.store import pg_lease
from flux.store.lease import LeaseHolder, SessionLease, SessionLeased, lease_holder, lease_holder_on
from flux.store.location import store_location, url_schema
from tests.helpers import HOST_PLAN, REPO, pg_admin, wait_until, write_turn

OLD = 1_700_000_000_000


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "core"), os.environ.get("PYTHONPATH", "")]),
                NO_COLOR="1")


def _flux(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from flux.cli import main; main()", *args], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _flux_done(*args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    p = _flux(*args)
    out, err = p.communicate(timeout=timeout)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def _errors(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("error:")]


def _listed(url: str, sid: str) -> dict:
    r = _flux_done("sessions", "--json", "--store", url)
    assert r.returncode == 0, r.stderr
    return next(s for s in json.loads(r.stdout)["sessions"] if s["id"] == sid)


def _listed_line(url: str, sid: str) -> str:
    r = _flux_done("sessions", "--store", url)
    assert r.returncode == 0, r.stderr
    return next(ln for ln in r.stdout.splitlines() if ln.startswith(sid + " "))






def _hold_as_another_machine(url: str, session: str, *, pid: int = 4242, host: str = "laptop-b"):
    """What a writer on another laptop leaves on the server: its lease connection, named as ours are,
    holding the session's advisory lock."""
    conn = pg_admin(url)
    conn.execute("SELECT set_config('application_name', %s, false)", (f"flux-tui lease pid={pid} host={host}",))
    k1, k2 = pg_lease.lease_key(url_schema(url), session)
    assert conn.execute("SELECT pg_try_advisory_lock(%s, %s)", (k1, k2)).fetchone()[0]
    return conn


def _interrupted_session(url: str, ws: Path) -> str:
    """s_1 with an open newest turn and an accepted plan: what a writer killed mid-turn leaves."""
    (ws / "a.txt").write_text("alpha\n")
    with StoreWriter(store_location(url)) as w:
        sid = w.create_session("mock")
        write_turn(w, sid, "first", ts=OLD)
        write_turn(w, sid, "second", plan=HOST_PLAN.format(path=ws / "a.txt"), end=None, ts=OLD + 100)
    return sid


def _script(path: Path, who: str, n: int, *, hold_at: int) -> Path:
    """``n`` bash steps logging ``<who><i>`` to ops.log; step ``hold_at`` waits for a file ``go``."""
    hold = "; while [ ! -f go ]; do sleep 0.05; done"
    steps = [{"tool_calls": [{"name": "bash", "input": {
        "command": f"echo {who}{i} >> ops.log" + (hold if i == hold_at else "")}}]} for i in range(1, n + 1)]
    path.write_text(json.dumps(steps + [{"text": f"{who} done"}]))
    return path


def _ops(ws: Path) -> list[str]:
    p = ws / "ops.log"
    return p.read_text().split() if p.exists() else []


def test_a_turn_recorded_by_another_process_reads_recording_and_after_kill_9_interrupted(pg_url, tmp_path: Path):
    """Writer A records a turn into a Postgres store (its bash step held open). From other processes
    the session reads recording by A's pid; a second writer and a resurrect are refused in one line.
    Its broken twin, the same store after `kill -9 A`: the turn reads interrupted, and resurrect
    finishes it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps([{"text": "hello"}]))
    r = _flux_done("run", "-m", f"scripted:{seed}", "--store", pg_url, "--workspace", str(ws), "--yes", "hi")
    assert r.returncode == 0, r.stderr
    a = _flux("run", "--continue", "-m", f"scripted:{_script(tmp_path / 'a.json', 'A', 3, hold_at=2)}", "--store",
              pg_url, "--workspace", str(ws), "--yes", "three steps")
    try:
        wait_until(lambda: _ops(ws) == ["A1", "A2"], "its second op", a)
        s1 = _listed(pg_url, "s_1")
        assert s1["interrupted"] is None and s1["recording_pid"] == a.pid
        assert s1["open_turn_not_flagged"] == f"turn 2 is being recorded by pid {a.pid} — live, not interrupted"
        assert _listed_line(pg_url, "s_1").endswith(f"● recording (pid {a.pid})")
        b = _flux_done("run", "--continue", "-m", f"scripted:{seed}", "--store", pg_url, "--workspace", str(ws),
                       "--yes", "a second writer")
        assert b.returncode == 1 and "Traceback" not in b.stderr
        assert _errors(b.stderr) == [f"error: s_1's turn is being recorded by pid {a.pid} — wait for it to finish or "
                                     f"stop it (kill {a.pid}), then try again"], b.stderr
        res = _flux_done("resurrect", "s_1", "--store", pg_url, "--workspace", str(ws), "--yes")
        assert res.returncode == 1 and _errors(res.stderr)[-1].startswith(
            f"error: s_1's turn is being recorded by pid {a.pid} — wait for it"), res.stderr
        assert a.poll() is None and _ops(ws) == ["A1", "A2"]  # nothing ran beside the live turn
        os.kill(a.pid, signal.SIGKILL)
        a.wait(30)
    finally:
        (ws / "go").touch()  # A's held bash step ends whatever happened
        if a.poll() is None:
            a.kill()
            a.wait(30)
    s1 = _listed(pg_url, "s_1")  # the server dropped A's lock with its connection
    assert s1["recording_pid"] is None and s1["interrupted"] is not None and s1["interrupted"]["turn"] == 2
    assert _listed_line(pg_url, "s_1").endswith("⚠ interrupted")
    assert lease_holder(store_location(pg_url), "s_1") is None
    res = _flux_done("resurrect", "s_1", "--store", pg_url, "--workspace", str(ws), "--yes")
    assert res.returncode == 0, res.stderr
    assert _listed(pg_url, "s_1")["interrupted"] is None and _ops(ws)[:3] == ["A1", "A2", "A2"]  # the killed step re-ran


def test_a_writer_on_another_machine_reads_recording_until_the_server_drops_its_connection(pg_url, tmp_path: Path):
    """Another laptop's writer is only a connection on the shared server: while it holds the lease the
    session reads `● recording` here, and our second writer is refused naming that machine; once the
    server drops the connection (as its keepalives do for a machine that vanished) the same session
    reads interrupted and resurrects."""
    ws = tmp_path / "ws"
    ws.mkdir()
    sid = _interrupted_session(pg_url, ws)
    loc = store_location(pg_url)
    assert _listed_line(pg_url, sid).endswith("⚠ interrupted")  # no one holds it yet
    elsewhere = _hold_as_another_machine(pg_url, sid)
    try:
        assert lease_holder_on(loc, sid) == LeaseHolder(4242, "laptop-b")
        assert lease_holder(loc, sid) == 0  # a pid on another machine means nothing here
        line = _listed_line(pg_url, sid)
        assert line.endswith("● recording") and "interrupted" not in line
        s = _listed(pg_url, sid)
        assert s["interrupted"] is None and s["recording_pid"] == 0
        seed = tmp_path / "seed.json"
        seed.write_text(json.dumps([{"text": "hello"}]))
        b = _flux_done("run", "--continue", "-m", f"scripted:{seed}", "--store", pg_url, "--workspace", str(ws),
                       "--yes", "more")
        assert b.returncode == 1
        assert _errors(b.stderr) == [f"error: {sid}'s turn is being recorded by pid 4242 on laptop-b — wait for it "
                                     "to finish or stop it there, then try again"], b.stderr
        res = _flux_done("resurrect", sid, "--store", pg_url, "--workspace", str(ws), "--yes")
        assert res.returncode == 1 and _errors(res.stderr)[-1] == (
            f"error: {sid}'s turn is being recorded by pid 4242 on laptop-b — wait for it to finish or stop it there, "
            "then try again"), res.stderr
        with pg_admin(pg_url) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (elsewhere.info.backend_pid,)).fetchone()[0]
        wait_until(lambda: lease_holder_on(loc, sid) is None, "the server to drop the lease")
    finally:
        elsewhere.close()
    assert _listed_line(pg_url, sid).endswith("⚠ interrupted")
    res = _flux_done("resurrect", sid, "--store", pg_url, "--workspace", str(ws), "--yes")
    assert res.returncode == 0, res.stderr


_HOLDER = """
import sys
from flux.store import StoreWriter
from flux.store.lease import SessionLease
from flux.store.location import store_location
loc = store_location(sys.argv[1])
with StoreWriter(loc, clock=lambda: 1_700_000_000_000) as w:
    sid = w.create_session("mock")
with SessionLease.acquire(loc, sid):
    print(sid, flush=True)
    sys.stdin.read()
"""


def test_prune_refuses_a_live_empty_session_and_prunes_it_once_its_writer_is_killed(pg_url):
    """A process creates an (old) empty session and holds its lease: `flux sessions --prune` refuses
    whole, nothing deleted. Its broken twin: the same session after `kill -9` of that process is
    pruned."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, pg_url], env=_env(), stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        sid = holder.stdout.readline().strip()
        assert sid == "s_1", holder.stderr.read() if holder.poll() is not None else sid
        dry = _flux_done("sessions", "--prune", "--dry-run", "--store", pg_url)
        r = _flux_done("sessions", "--prune", "--store", pg_url)
        assert r.returncode == 1 and dry.returncode == 1
        assert _errors(r.stderr) == [f"error: s_1 is being recorded by pid {holder.pid} right now — nothing was pruned; "
                                     "run `flux sessions --prune` again when its turn is done"], r.stderr
        assert _listed(pg_url, "s_1")["id"] == "s_1"  # still there
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(30)
    r = _flux_done("sessions", "--prune", "--store", pg_url)
    assert r.returncode == 0, r.stderr
    assert "s_1" in r.stderr.splitlines()[0] or "s_1" in r.stdout, (r.stdout, r.stderr)
    listed = json.loads(_flux_done("sessions", "--json", "--store", pg_url).stdout)["sessions"]
    assert [s["id"] for s in listed] == []


def _check_connection(url: str):
    return pg_lease._link(pg_lease._CHECK_LINKS, url, read_only=True)


def _own_locks(conn) -> list[tuple]:
    """The reader's own backend, asked about itself: its advisory locks and transaction locks, and
    whether it has a transaction id (a write) or a transaction open at all."""
    locks = conn.execute("SELECT locktype, mode FROM pg_locks WHERE pid = pg_backend_pid()"
                         " AND locktype IN ('advisory', 'transactionid')").fetchall()
    xid = conn.execute("SELECT pg_current_xact_id_if_assigned()").fetchone()[0]
    return locks + ([("xid", xid)] if xid is not None else [])


def test_a_liveness_check_takes_no_lock_and_opens_no_write_transaction(pg_url):
    loc = store_location(pg_url)
    with StoreWriter(loc) as w:
        sid = w.create_session("mock")
    elsewhere = _hold_as_another_machine(pg_url, sid)
    try:
        assert lease_holder_on(loc, sid) == LeaseHolder(4242, "laptop-b")
        conn = _check_connection(pg_url).conn
        assert conn.execute("SHOW transaction_read_only").fetchone()[0] == "on"
        assert _own_locks(conn) == []
        with pg_admin(pg_url) as admin:  # seen from outside: idle, no transaction, no advisory lock of its own
            row = admin.execute("SELECT a.state, a.xact_start, a.backend_xid, (SELECT count(*) FROM pg_locks l"
                                " WHERE l.pid = a.pid AND l.locktype = 'advisory') FROM pg_stat_activity a"
                                " WHERE a.pid = %s", (conn.info.backend_pid,)).fetchone()
        assert row == ("idle", None, None, 0)
    finally:
        elsewhere.close()
    # the broken twin: a check that took the lock to test it is seen by the same probe of its backend
    with pg_admin(pg_url) as bad:
        k1, k2 = pg_lease.lease_key(url_schema(pg_url), sid)
        bad.execute("SELECT pg_try_advisory_lock(%s, %s)", (k1, k2))
        assert _own_locks(bad) == [("advisory", "ExclusiveLock")]


def _refusals(url: str, sid: str, check, seconds: float) -> int:
    """How often a writer taking and releasing ``sid``'s lease in a loop is refused while another
    thread runs ``check`` in a loop."""
    loc = store_location(url)
    stop, refused = threading.Event(), [0]

    def writer() -> None:
        while not stop.is_set():
            try:
                with SessionLease.acquire(loc, sid):
                    pass
            except SessionLeased:
                refused[0] += 1

    t = threading.Thread(target=writer)
    t.start()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline and not refused[0]:
            check()
    finally:
        stop.set()
        t.join(30)
    return refused[0]


def test_liveness_checks_never_make_a_writer_fail(pg_url):
    """A check that reads pg_locks never collides with a writer taking the lease; the broken twin, a
    check that tries the lock and drops it (how a file lease is tested without OFD locks), does."""
    loc = store_location(pg_url)
    with StoreWriter(loc) as w:
        sid = w.create_session("mock")
    assert _refusals(pg_url, sid, lambda: lease_holder(loc, sid), 3.0) == 0
    k1, k2 = pg_lease.lease_key(url_schema(pg_url), sid)
    with pg_admin(pg_url) as prober:
        def try_and_drop() -> None:
            if prober.execute("SELECT pg_try_advisory_lock(%s, %s)", (k1, k2)).fetchone()[0]:
                prober.execute("SELECT pg_advisory_unlock(%s, %s)", (k1, k2))

        assert _refusals(pg_url, sid, try_and_drop, 30.0) > 0


def test_leases_are_per_session_per_schema_and_not_the_append_lock(pg_url, pg_server, monkeypatch, tmp_path):
    """s_1's lease in one schema is not s_1's in another, nor s_2's; holding it does not block appends
    to the session (the per-stream append lock is another key); a second thread is refused."""
    loc = store_location(pg_url)
    other_url = f"{pg_server.dsn}?schema=t_other_{os.getpid()}"
    other = store_location(other_url)
    for where in (loc, other):
        with StoreWriter(where) as w:
            w.create_session("mock")
            w.create_session("mock")
    with SessionLease.acquire(loc, "s_1"):
        with SessionLease.acquire(loc, "s_1"):  # the holding thread may take it again
            pass
        assert lease_holder_on(other, "s_1") is None and lease_holder_on(loc, "s_2") is None
        assert lease_holder(loc, "s_1") is None  # the caller's own lease is not someone else's
        seen: list = []
        t = threading.Thread(target=lambda: seen.append((lease_holder(loc, "s_1"), _try(loc, "s_1"))))
        t.start()
        t.join(30)
        assert seen == [(os.getpid(), os.getpid())]
        with SessionLease.acquire(other, "s_1"):
            pass
        r = subprocess.run([sys.executable, "-c", "import sys\nfrom flux.store import Message, StoreWriter\n"
                            "with StoreWriter(sys.argv[1]) as w:\n    w.append('s_1', Message.text('user', 'x'))\n",
                            str(loc)], env=_env(), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert lease_holder_on(loc, "s_1") is None  # still ours, and still held
        with pg_admin(pg_url) as admin:
            assert lease_holder_on(other, "s_1") is None
            assert admin.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2"
                                 " AND pid <> pg_backend_pid()").fetchone()[0] == 1
    assert lease_holder_on(loc, "s_1") is None
    with pg_admin(pg_url) as admin:  # released at once, not when the connection ends
        assert admin.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone()[0] == 0


def _try(loc, sid) -> int | None:
    try:
        with SessionLease.acquire(loc, sid):
            return None
    except SessionLeased as e:
        return e.pid


_FORKED = """
import multiprocessing as mp, os, sys
from flux.store.lease import SessionLease, SessionLeased, lease_holder
from flux.store.location import store_location
loc = store_location(sys.argv[1])

def child(q):
    try:
        with SessionLease.acquire(loc, "s_1"):
            q.put("took it")
    except SessionLeased as e:
        q.put(e.pid)

with SessionLease.acquire(loc, "s_1"):
    q = mp.get_context("fork").Queue()
    p = mp.get_context("fork").Process(target=child, args=(q,))  # a pool's worker
    p.start()
    print(q.get(timeout=30), flush=True)
    p.join(30)
    pid = os.fork()
    if pid == 0:  # a bare fork that unwinds the parent's `with` and runs its exit handlers
        try:
            with SessionLease.acquire(loc, "s_1"):
                print("took it", flush=True)
        except SessionLeased as e:
            print(e.pid, flush=True)
        sys.exit(0)
    os.waitpid(pid, 0)
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_forked_worker_neither_inherits_nor_ends_its_parents_lease(pg_url):
    loc = store_location(pg_url)
    with StoreWriter(loc) as w:
        w.create_session("mock")
    p = subprocess.Popen([sys.executable, "-c", _FORKED, pg_url], env=_env(), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = [p.stdout.readline().strip() for _ in range(3)]
        assert lines == [str(p.pid), str(p.pid), "held"], p.stderr.read() if p.poll() is not None else lines
        assert lease_holder(loc, "s_1") == p.pid  # the children's exits left the parent's connection alone
    finally:
        p.kill()
        p.wait(30)
    wait_until(lambda: lease_holder(loc, "s_1") is None, "the killed parent's lease to go")


def test_an_unreachable_server_is_one_line(pg_server, tmp_path, monkeypatch):
    monkeypatch.setenv("FLUX_PG_LOCAL_DIR", str(tmp_path / "pg-local"))
    from tests.servers import free_port

    loc = store_location(f"postgresql://nobody@127.0.0.1:{free_port()}/none")
    with pytest.raises(Exception) as e:
        SessionLease.acquire(loc, "s_1")
    assert type(e.value).__name__ == "StoreError" and "\n" not in str(e.value)
    assert str(e.value).startswith("cannot connect to the postgres store postgresql://nobody@127.0.0.1:")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=80))
def test_any_application_name_reads_as_a_holder(name):
    holder = pg_lease._holder_of((1, name))
    assert isinstance(holder, LeaseHolder) and holder.pid >= 0 and isinstance(holder.host, str)
    assert pg_lease._holder_of(None) is None


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40), st.text(max_size=140))
def test_any_schema_and_name_give_a_two_int_key(schema, session):
    k1, k2 = pg_lease.lease_key(schema, session)
    assert 0 <= k1 < 2 ** 31 and 0 <= k2 < 2 ** 31
    assert pg_lease.lease_key(schema, session) == (k1, k2)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=40), st.integers(1, 2 ** 31 - 1), st.integers(1, 2 ** 31 - 1))
def test_two_numbered_sessions_never_share_a_key(schema, a, b):
    ka, kb = pg_lease.lease_key(schema, f"s_{a}"), pg_lease.lease_key(schema, f"s_{b}")
    assert (ka == kb) == (a == b)
    assert ka != pg_lease.lease_key(schema, f"s_0{a}")  # not the numbered form: the other half of k1's space


def test_the_lease_connection_gives_up_on_a_vanished_peer_and_is_made_again_when_dropped(pg_url):
    """The lease connection's server side gives up on a silent machine within about a minute (its
    keepalives) and never times out idle; dropped by the server, it is made again on the next acquire."""
    loc = store_location(pg_url)
    with StoreWriter(loc) as w:
        w.create_session("mock")
        w.create_session("mock")
    with SessionLease.acquire(loc, "s_1"):
        link = pg_lease._link(pg_lease._LEASE_LINKS, pg_url, read_only=False)
        conn = link.conn
        settings_seen = [conn.execute(f"SHOW {name}").fetchone()[0] for name in
                         ("tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "idle_session_timeout")]
        assert settings_seen == ["20", "10", "3", "0"]
        with pg_admin(pg_url) as admin:
            assert admin.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,)).fetchone()[0]
        wait_until(lambda: lease_holder_on(loc, "s_1") is None, "the server to drop the connection's lease")
    with SessionLease.acquire(loc, "s_2"):  # a fresh connection
        assert link.conn is not conn
        holder = subprocess.run([sys.executable, "-c", "import sys\nfrom flux.store.lease import lease_holder\n"
                                 "print(lease_holder(sys.argv[1], 's_2'))", str(loc)], env=_env(),
                                capture_output=True, text=True, timeout=60)
        assert holder.stdout.strip() == str(os.getpid()), holder.stderr


def test_a_lease_snapshot_changes_when_a_writer_starts_or_dies_and_sees_only_its_schema(pg_url, pg_server):
    loc = store_location(pg_url)
    other = store_location(f"{pg_server.dsn}?schema=t_snap_{os.getpid()}")
    for where in (loc, other):
        with StoreWriter(where) as w:
            w.create_session("mock")
    from flux.store.lease import lease_snapshot

    empty = lease_snapshot(loc)
    assert empty == frozenset()
    elsewhere = _hold_as_another_machine(pg_url, "s_1")
    try:
        held = lease_snapshot(loc)
        assert held == {pg_lease.lease_key(url_schema(pg_url), "s_1")}
        assert lease_snapshot(other) == frozenset()  # another schema's s_1 is another lease
    finally:
        elsewhere.close()
    wait_until(lambda: lease_snapshot(loc) == empty, "the snapshot to lose the dead writer")


def test_prune_skips_nothing_beside_a_writer_on_another_machine(pg_url):
    """An old empty session another machine's writer holds: the prune is refused whole; once the
    server dropped that writer's connection, the same prune deletes it."""
    loc = store_location(pg_url)
    with StoreWriter(loc, clock=lambda: OLD) as w:
        sid = w.create_session("mock")
    elsewhere = _hold_as_another_machine(pg_url, sid)
    try:
        r = _flux_done("sessions", "--prune", "--store", pg_url)
        assert r.returncode == 1
        assert _errors(r.stderr) == [f"error: {sid} is being recorded by pid 4242 on laptop-b right now — nothing "
                                     "was pruned; run `flux sessions --prune` again when its turn is done"], r.stderr
    finally:
        elsewhere.close()
    wait_until(lambda: lease_holder_on(loc, sid) is None, "the server to drop the lease")
    r = _flux_done("sessions", "--prune", "--store", pg_url)
    assert r.returncode == 0, r.stderr
    assert json.loads(_flux_done("sessions", "--json", "--store", pg_url).stdout)["sessions"] == []
