"""A live turn is never resurrected: the concurrent-writer race (two real `flux run --continue`
processes on one store, the second started while the first's slow ops run), counted as side
effects in the workspace — each op exactly once — plus the lease itself: held while a turn runs,
released on exit and by the kernel on a kill, checked read-only."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from flux.agent import Client
from flux.model.interrupted import check_session_interrupted
from flux.model.listing import interrupted_sessions, list_sessions
from flux.model.session import load_session
from flux.store import lease as lease_mod
from flux.store.lease import SessionLease, SessionLeased, lease_holder, lease_path
from flux.store.store import StoreReader, StoreWriter
from tests.helpers import HOST_PLAN, REPO, write_turn

_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "core"), os.environ.get("PYTHONPATH", "")]),
            FLUX_AUTO_RESURRECT="1", NO_COLOR="1")


def _flux(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from flux.cli import main; main()", *args], env=_ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _flux_done(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    p = _flux(*args)
    out, err = p.communicate(timeout=timeout)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def _script(path: Path, who: str, n: int, sleep_s: float, *, hold_at: int = 0) -> Path:
    """``n`` bash steps, each logging ``<who><i>`` to ``ops.log`` then sleeping; step ``hold_at``
    also waits until the workspace has a file ``go`` (the test decides how long the turn stays live)."""
    hold = "; while [ ! -f go ]; do sleep 0.05; done"
    steps = [{"tool_calls": [{"name": "bash", "input": {
        "command": f"echo {who}{i} >> ops.log; sleep {sleep_s}" + (hold if i == hold_at else "")}}]}
        for i in range(1, n + 1)]
    path.write_text(json.dumps(steps + [{"text": f"{who} done"}]))
    return path


def _ops(ws: Path) -> list[str]:
    p = ws / "ops.log"
    return p.read_text().split() if p.exists() else []


def _turn_rows(store: Path) -> list[tuple]:
    con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True, timeout=5)
    try:
        return con.execute("SELECT stream, COALESCE(turn_id, global_seq), kind, json_extract(payload, '$.data.outcome') FROM events"
                           " WHERE kind IN ('turn_started', 'turn_ended') ORDER BY global_seq").fetchall()
    finally:
        con.close()


def _wait(cond, what: str, proc: subprocess.Popen, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while not cond():
        assert proc.poll() is None, f"writer A exited before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"never reached {what}"
        time.sleep(0.02)


@pytest.fixture
def seeded(tmp_path: Path):
    """A store with one finished session s_1 and a workspace for the race."""
    ws, store = tmp_path / "ws", tmp_path / "st"
    ws.mkdir()
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps([{"text": "hello"}]))
    r = _flux_done("run", "-m", f"scripted:{seed}", "--store", str(store), "--workspace", str(ws), "--yes", "hi")
    assert r.returncode == 0, r.stderr
    return tmp_path, ws, store


def test_c4_race_second_writer_refuses_the_live_turn_and_each_op_runs_once(seeded):
    tmp, ws, store = seeded
    a_script, b_script = _script(tmp / "a.json", "A", 4, 0.3, hold_at=2), _script(tmp / "b.json", "B", 4, 0)
    a = _flux("run", "--continue", "-m", f"scripted:{a_script}", "--store", str(store), "--workspace", str(ws),
              "--yes", "four slow steps")
    try:
        _wait(lambda: _ops(ws) == ["A1", "A2"], "its second op", a)  # A's turn is live (A2 holds until `go`)
        b = _flux_done("run", "--continue", "-m", f"scripted:{b_script}", "--store", str(store), "--workspace",
                       str(ws), "--yes", "four more steps")
        assert a.poll() is None, "A finished before B was refused: the race was not run"
        assert b.returncode == 1
        err = [ln for ln in b.stderr.splitlines() if ln.startswith("error:")]
        assert err == [f"error: s_1's turn is being recorded by pid {a.pid} — wait for it to finish or stop it "
                       f"(kill {a.pid}), then try again"], b.stderr
        assert "Traceback" not in b.stderr and "resurrect" not in b.stderr
        # the other surfaces agree while A runs: not interrupted, being recorded by A
        listed = json.loads(_flux_done("sessions", "--json", "--store", str(store)).stdout)["sessions"]
        s1 = next(s for s in listed if s["id"] == "s_1")
        assert s1["interrupted"] is None and s1["recording_pid"] == a.pid
        assert s1["open_turn_not_flagged"] == f"turn 2 is being recorded by pid {a.pid} — live, not interrupted"
        r = _flux_done("resurrect", "s_1", "--store", str(store), "--workspace", str(ws), "--yes")
        assert r.returncode == 1 and r.stderr.strip().splitlines()[-1].startswith(
            f"error: s_1's turn is being recorded by pid {a.pid} — wait for it"), r.stderr
        assert a.poll() is None and _ops(ws) == ["A1", "A2"]
        (ws / "go").touch()
        a_out, a_err = a.communicate(timeout=60)
    finally:
        (ws / "go").touch()  # A's held op ends whatever happened (it is in a session of its own)
        if a.poll() is None:
            a.kill()
    assert a.returncode == 0, a_err
    assert _ops(ws) == ["A1", "A2", "A3", "A4"]  # B ran nothing, and nothing of A ran twice
    rows = _turn_rows(store)
    a_turn = [tid for s, tid, k, _ in rows if k == "turn_started"][-1]
    assert [(k, o) for s, tid, k, o in rows if tid == a_turn] == [("turn_started", None), ("turn_ended", "ok")]
    # once A is done, B's turn runs (the "wait for it" the refusal asks for): 8 ops, each exactly once
    b2 = _flux_done("run", "--continue", "-m", f"scripted:{b_script}", "--store", str(store), "--workspace", str(ws),
                    "--yes", "four more steps")
    assert b2.returncode == 0, b2.stderr
    assert sorted(_ops(ws)) == ["A1", "A2", "A3", "A4", "B1", "B2", "B3", "B4"]
    assert [k for _, _, k, _ in _turn_rows(store)].count("turn_ended") == 3  # seed, A, B: each ended once
    assert not (store / "leases").exists()  # released leases leave nothing behind


def test_a_killed_writer_leaves_no_lease_its_turn_is_interrupted_and_resurrected(seeded):
    """The broken half of the race: the same writer killed -9 mid-turn leaves its lease file but not
    its lock — the turn is interrupted (flagged, resurrectable), and browsing it writes nothing."""
    tmp, ws, store = seeded
    a_script = _script(tmp / "a.json", "A", 4, 0.7)
    a = _flux("run", "--continue", "-m", f"scripted:{a_script}", "--store", str(store), "--workspace", str(ws),
              "--yes", "four slow steps")
    try:
        _wait(lambda: _ops(ws) == ["A1"], "its first op", a)
        assert lease_holder(store, "s_1") == a.pid
        os.kill(a.pid, signal.SIGKILL)
        a.wait(10)
    finally:
        if a.poll() is None:
            a.kill()
    assert lease_path(store, "s_1").exists() and lease_holder(store, "s_1") is None

    def digest() -> dict:
        return {str(p.relative_to(store)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(store.rglob("*"))
                if p.is_file()}

    before = digest()
    listed = json.loads(_flux_done("sessions", "--json", "--store", str(store)).stdout)["sessions"]
    assert _flux_done("show", "s_1", "--store", str(store)).returncode == 0
    assert digest() == before  # the lease check (and the whole browse) is read-only
    s1 = next(s for s in listed if s["id"] == "s_1")
    assert s1["interrupted"] is not None and s1["recording_pid"] is None
    r = _flux_done("resurrect", "s_1", "--store", str(store), "--workspace", str(ws), "--yes")
    assert r.returncode == 0, r.stderr
    assert _ops(ws).count("A1") >= 1 and _turn_rows(store)[-1][2:] == ("turn_ended", "resurrected")
    assert not lease_path(store, "s_1").exists()  # the resurrect reused the stale file and removed it


# ------------------------------------------------------------------ the lease itself, in-process


def test_lease_is_held_by_a_running_turn_and_released_after(tmp_path: Path):
    seen: list = []

    def op_probe(command: str) -> str:
        """Probe the lease from another thread while the turn runs."""
        box: list = []
        t = threading.Thread(target=lambda: box.append(lease_holder(tmp_path / "st", "s_1")))
        t.start()
        t.join()
        seen.append(box[0])
        return "ok"

    from flux.agent.ops import op

    probe = op(effect="read", name="bash")(op_probe)
    from flux.agent.providers.scripted import ScriptedProvider

    prov = ScriptedProvider(responses=[{"tool_calls": [{"name": "bash", "input": {"command": "x"}}]}, {"text": "ok"}])
    with Client(prov, store=tmp_path / "st", ops=[probe], auto_approve=True) as c:
        s = c.session()
        out = s.send_sync("go")
    assert out.outcome == "ok"
    assert seen == [os.getpid()]  # another thread sees the turn as being recorded by this process
    assert lease_holder(tmp_path / "st", "s_1") is None and not lease_path(tmp_path / "st", "s_1").exists()


def test_same_thread_reenters_other_thread_conflicts(tmp_path: Path):
    with SessionLease.acquire(tmp_path, "s_1"):
        with SessionLease.acquire(tmp_path, "s_1"):  # a turn's own auto-resurrect
            assert lease_holder(tmp_path, "s_1") is None  # the caller's own turn is not someone else's
        errors: list = []

        def other() -> None:
            try:
                SessionLease.acquire(tmp_path, "s_1")
            except SessionLeased as e:
                errors.append(e)
            assert lease_holder(tmp_path, "s_1") == os.getpid()

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert [e.pid for e in errors] == [os.getpid()]
        assert lease_path(tmp_path, "s_1").exists()  # still held once: the inner release did not drop it
        with SessionLease.acquire(tmp_path, "s_2"):  # leases are per session
            pass
    assert lease_holder(tmp_path, "s_1") is None
    with SessionLease.acquire(tmp_path, "s_1"):  # free again for anyone
        pass


def test_a_second_process_is_refused_and_a_dead_holder_frees_it(tmp_path: Path):
    code = ("import sys, time; from flux.store.lease import SessionLease; "
            f"l = SessionLease.acquire({str(tmp_path)!r}, 's_7'); print('held', flush=True); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code], env=_ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        assert lease_holder(tmp_path, "s_7") == p.pid
        with pytest.raises(SessionLeased) as e:
            SessionLease.acquire(tmp_path, "s_7")
        assert e.value.pid == p.pid and str(e.value).startswith(f"s_7's turn is being recorded by pid {p.pid} — wait for it")
        p.kill()
        p.wait(10)
    finally:
        if p.poll() is None:
            p.kill()
    assert lease_holder(tmp_path, "s_7") is None
    with SessionLease.acquire(tmp_path, "s_7"):
        assert lease_path(tmp_path, "s_7").read_text().strip() == str(os.getpid())


def test_lease_check_writes_nothing_and_needs_no_write_access(tmp_path: Path):
    store = tmp_path / "ro"
    store.mkdir()
    assert lease_holder(store, "s_1") is None
    assert not (store / "leases").exists()  # the check creates nothing
    (store / "leases").mkdir()
    lease_path(store, "s_1").write_text("123\n")  # a dead holder's file
    os.chmod(lease_path(store, "s_1"), 0o444)
    os.chmod(store / "leases", 0o555)
    try:
        st0 = lease_path(store, "s_1").stat()
        assert lease_holder(store, "s_1") is None
        assert lease_path(store, "s_1").stat().st_mtime_ns == st0.st_mtime_ns
    finally:
        os.chmod(store / "leases", 0o755)


def test_hostile_lease_files_never_hang_or_raise(tmp_path: Path):
    (tmp_path / "leases").mkdir()
    os.mkfifo(lease_path(tmp_path, "s_1"))
    lease_path(tmp_path, "s_2").mkdir()
    os.symlink("/dev/zero", lease_path(tmp_path, "s_3"))
    for sid in ("s_1", "s_2", "s_3"):
        assert lease_holder(tmp_path, sid) is None
        with pytest.raises(lease_mod.StoreError) as e:
            SessionLease.acquire(tmp_path, sid)
        assert "\n" not in str(e.value) and "lease" in str(e.value)
    (tmp_path / "blocked").write_text("a file where the store's leases directory would go")
    with pytest.raises(lease_mod.StoreError):
        SessionLease.acquire(tmp_path / "blocked", "s_1")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=64))
def test_fuzzed_pid_contents_read_as_a_pid_or_unknown(tmp_path: Path, content: bytes):
    d = tmp_path / "fz"
    d.mkdir(exist_ok=True)
    (d / "leases").mkdir(exist_ok=True)
    p = lease_path(d, "s_1")
    p.write_bytes(content)
    assert lease_holder(d, "s_1") is None  # unlocked: whatever it says, no one holds it
    code = ("import os, sys, fcntl, struct; from flux.store import lease as L; "
            f"fd = os.open({str(p)!r}, os.O_RDWR); assert L._try_lock(fd); print('held', flush=True); sys.stdin.read()")
    h = subprocess.Popen([sys.executable, "-c", code], env=_ENV, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)
    try:
        assert h.stdout.readline().strip() == "held"
        pid = lease_holder(d, "s_1")
        text = content.decode("ascii", "replace").strip()
        assert pid == (int(text) if text.isdigit() and len(text) < 12 else 0)
    finally:
        h.kill()
        h.wait(10)


def test_flock_fallback_behaves_the_same(tmp_path: Path, monkeypatch):
    monkeypatch.setattr(lease_mod, "_OFD", False)
    with SessionLease.acquire(tmp_path, "s_1"):
        box: list = []
        t = threading.Thread(target=lambda: box.append((lease_holder(tmp_path, "s_1"), _refused(tmp_path))))
        t.start()
        t.join()
        assert box == [(os.getpid(), True)]
    assert lease_holder(tmp_path, "s_1") is None


def _refused(d: Path) -> bool:
    try:
        SessionLease.acquire(d, "s_1").release()
    except SessionLeased:
        return True
    return False


def test_model_layer_reports_a_leased_open_turn_as_recording(tmp_path: Path):
    """What the app's session list and session screen read: the same store, leased and not."""
    store = tmp_path / "st"
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        write_turn(w, sid, "read it", plan=HOST_PLAN.format(path="a.txt"), end=None)
    with StoreReader(store) as r:
        assert list(interrupted_sessions(r)) == [sid]
        assert check_session_interrupted(store, load_session(r, sid)).interrupted is not None
    box: list = []
    lease = SessionLease.acquire(store, sid)
    try:
        def look() -> None:
            with StoreReader(store) as r:
                summary = next(s for s in list_sessions(r) if s.id == sid)
                box.append((sid in interrupted_sessions(r), summary.interrupted, summary.interrupt.recording_pid,
                            check_session_interrupted(store, load_session(r, sid)).recording_pid))

        t = threading.Thread(target=look)
        t.start()
        t.join()
    finally:
        lease.release()
    assert box == [(False, False, os.getpid(), os.getpid())]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(max_size=40) | st.sampled_from(["..", "../x", "s_1/../../etc", "a\x00b", "s_1.lock", ""]))
def test_fuzzed_session_names_never_leave_the_leases_dir_or_raise(tmp_path: Path, name: str):
    """A hostile store's stream names reach the check (the listing asks for every open stream):
    it answers, never raises, and creates nothing; a writer refuses a name it could not hold."""
    assert lease_holder(tmp_path, name) is None
    assert not (tmp_path / "leases").exists()
    try:
        lease = SessionLease.acquire(tmp_path, name)
    except lease_mod.StoreError as e:
        assert "\n" not in str(e)
        return
    try:
        assert lease.path.parent == tmp_path / "leases" and lease.path.name == f"{name}.lock"
    finally:
        lease.release()
