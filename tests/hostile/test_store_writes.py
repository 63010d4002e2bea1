"""The store layer under hostile files and concurrent processes, each test from a reproduction:
a garbage ``flow.db`` named as such and found before ``events.db`` is opened read-write; a failed
writer open closes its connection at once; a rollback-journal store with a garbage ``-wal`` and
``-shm`` read without a byte written; a reader beside short-lived writers whose ``-wal`` vanishes
mid-snapshot; the bootstrap of a new store whole or not at all (SIGKILLed ``flux run``)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.errors import StoreError
from flux.store import Message, StoreWriter
from flux.store.store import StoreReader
from tests.hostile.corrupt import tree_state

FLUX = str(Path(sys.executable).with_name("flux"))


def _open_fds_under(d: Path) -> list[str]:
    root = str(d.resolve())
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(root + os.sep):
            out.append(target)
    return out


def _store(d: Path) -> Path:
    with StoreWriter(d) as w:
        sid = w.create_session("mock")
        w.append(sid, Message.text("user", "hello"))
    return d


def test_garbage_flow_db_is_named_and_events_db_is_not_touched(tmp_path):
    d = _store(tmp_path / "s")
    (d / "flow.db").write_bytes(os.urandom(3000))
    before = tree_state(d)
    with pytest.raises(StoreError) as e:
        StoreWriter(d)
    assert str(e.value).startswith(f"{d / 'flow.db'} is not a SQLite database")
    assert tree_state(d) == before
    assert _open_fds_under(d) == []


def test_a_writer_that_fails_to_open_closes_its_connection_at_once(tmp_path):
    """flow.db passes the header check but is malformed inside: the writer has opened events.db by
    then; the error path closes it (no handle left for the garbage collector)."""
    d = _store(tmp_path / "s")
    data = bytearray((d / "flow.db").read_bytes())
    data[100:4096] = os.urandom(3996)
    (d / "flow.db").write_bytes(bytes(data))
    import gc

    gc.disable()
    try:
        with pytest.raises(StoreError) as e:
            StoreWriter(d)
        assert str(e.value).startswith(f"{d / 'flow.db'} is corrupt")
        assert _open_fds_under(d) == []
    finally:
        gc.enable()


def test_fork_on_a_garbage_flow_db_says_flow_db(tmp_path, demo):
    (demo / "flow.db").write_bytes(os.urandom(3000))
    before = {k: v for k, v in tree_state(demo).items() if k.startswith("events.db")}
    res = CliRunner().invoke(main, ["fork", "s_7", "--at", "1", "--inject", '"x"', "--store", str(demo)])
    assert res.exit_code == 1, res.output
    last = res.stderr.strip().splitlines()[-1]  # after the fork's preview lines
    assert last.startswith("error: ") and "flow.db is not a SQLite database" in last and "events.db is" not in last
    assert {k: v for k, v in tree_state(demo).items() if k.startswith("events.db")} == before


def test_rollback_store_with_garbage_wal_and_shm_is_read_without_a_write(tmp_path):
    d = _store(tmp_path / "s")
    con = sqlite3.connect(d / "events.db")
    con.execute("PRAGMA journal_mode = DELETE")
    con.close()
    rng = random.Random(7)
    (d / "events.db-wal").write_bytes(bytes(rng.randrange(256) for _ in range(40_000)))
    (d / "events.db-shm").write_bytes(bytes(rng.randrange(256) for _ in range(32_768)))
    before = tree_state(d)
    res = CliRunner().invoke(main, ["sessions", "--store", str(d)])
    assert res.exit_code == 0, res.output
    assert "s_1" in res.stdout
    assert tree_state(d) == before


def test_a_table_less_events_db_is_called_what_it_is(tmp_path):
    """What a writer killed inside an old, in-place bootstrap left: a SQLite file with no tables."""
    d = tmp_path / "s"
    d.mkdir()
    con = sqlite3.connect(d / "events.db")
    con.execute("PRAGMA journal_mode = WAL")
    con.execute("PRAGMA user_version = 0")
    con.execute("CREATE TABLE t (x)")
    con.execute("DROP TABLE t")
    con.close()
    res = CliRunner().invoke(main, ["sessions", "--store", str(d)])
    assert res.exit_code == 1
    assert "another application" not in res.stderr and "no tables yet" in res.stderr
    with StoreWriter(d) as w:  # the next writer finishes it
        w.create_session("mock")
    with StoreReader(d) as r:
        assert [s.id for s in r.list_sessions()] == ["s_1"]


def test_a_new_store_appears_whole(tmp_path, monkeypatch):
    """The bootstrap builds the schema beside events.db and links it in: a writer killed before the
    link leaves no events.db at all, only a temp file the next writer ignores."""
    d = tmp_path / "s"
    d.mkdir()
    import flux.store.sqlite_writer as store_mod

    real_link = os.link

    def killed(*_a, **_k):
        raise KeyboardInterrupt  # the process dies here

    monkeypatch.setattr(store_mod.os, "link", killed)
    with pytest.raises(KeyboardInterrupt):
        StoreWriter(d)
    assert not (d / "events.db").exists()
    monkeypatch.setattr(store_mod.os, "link", real_link)
    with StoreWriter(d) as w:
        w.create_session("mock")
    with StoreReader(d) as r:
        assert len(r.list_sessions()) == 1
    assert sorted(p.name for p in d.iterdir() if not p.name.endswith(("-wal", "-shm"))) == ["events.db", "flow.db"]


def test_sigkill_during_the_first_run_never_leaves_a_table_less_store(tmp_path):
    """C1 for real: `flux run` on a new store, SIGKILLed at moments spread over its start-up; every
    store it leaves is either absent or readable (never "a database of another application")."""
    env = {**os.environ, "FLUX_AUTO_RESURRECT": "0"}
    bad = []
    probe = subprocess.run([FLUX, "run", "-m", "mock", "hi", "--store", str(tmp_path / "probe")],
                           capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert probe.returncode == 0, probe.stderr
    for i in range(12):
        d = tmp_path / f"s{i}"
        p = subprocess.Popen([FLUX, "run", "-m", "mock", "hi", "--store", str(d)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env, cwd=tmp_path)
        deadline = time.monotonic() + 20
        while not d.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(0.002 * i)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        if not (d / "events.db").exists():
            continue
        res = subprocess.run([FLUX, "sessions", "--store", str(d)], capture_output=True, text=True, timeout=60)
        if res.returncode != 0:
            bad.append(res.stderr.strip())
    assert bad == []


def test_sessions_beside_short_lived_writers_never_fails_on_a_vanished_wal(tmp_path):
    """C2: writers that open, append and close (checkpointing and deleting the -wal) while a reader
    snapshots; bounded loops, real processes."""
    d = _store(tmp_path / "s")
    writer = (
        "import sys\n"
        "from flux.store import Message, StoreWriter\n"
        "for i in range(60):\n"
        "    with StoreWriter(sys.argv[1]) as w:\n"
        "        w.append('s_1', Message.text('user', 'x' * 2000))\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(d)]) for _ in range(2)]
    failures = []
    n = 0
    try:
        while any(p.poll() is None for p in procs) and n < 400:
            n += 1
            try:
                with StoreReader(d) as r:
                    r.list_sessions()
            except StoreError as e:
                if "locked" not in str(e):
                    failures.append(str(e))
    finally:
        for p in procs:
            p.wait(timeout=120)
    assert all(p.returncode == 0 for p in procs)
    assert n > 10
    assert failures == []


def _child_kinds(store: Path, sid: str) -> list[str]:
    con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True)
    try:
        return [k for (k,) in con.execute("SELECT kind FROM events WHERE stream = ? ORDER BY stream_seq", (sid,))]
    finally:
        con.close()


def test_a_fork_beside_concurrent_runs_commits_whole_or_not_at_all(demo, tmp_path):
    """C3 for real: `flux fork` while two `flux run` processes write the same store, bounded loop.
    Every fork that exits 0 left a child with exactly the rows, kind for kind, that the same fork
    writes alone (turn_ended included); one that fails left no child and said why in one line."""
    import json

    env = {**os.environ, "FLUX_AUTO_RESURRECT": "0"}
    fork = [FLUX, "fork", "s_7", "--at", "1", "--inject", '"x"', "--json"]
    alone = Path(shutil.copytree(demo, tmp_path / "alone"))
    ref = subprocess.run([*fork, "--store", str(alone)], capture_output=True, text=True, env=env, timeout=120)
    assert ref.returncode == 0, ref.stderr
    want = _child_kinds(alone, json.loads(ref.stdout)["session"])
    assert "turn_ended" in want
    bad = []
    for i in range(5):
        store = Path(shutil.copytree(demo, tmp_path / f"s{i}"))
        runs = [subprocess.Popen([FLUX, "run", "-m", "mock", "-y", "--workspace", str(store / "workspace"), "write a note",
                                  "--store", str(store)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
                for _ in range(2)]
        time.sleep(0.02 * i)
        before = {s for s in _sessions(store)}
        res = subprocess.run([*fork, "--store", str(store)], capture_output=True, text=True, env=env, timeout=120)
        for r in runs:
            r.wait(timeout=120)
        if res.returncode == 0:
            got = _child_kinds(store, json.loads(res.stdout)["session"])
            if got != want:
                bad.append((i, len(got), len(want), got[-3:]))
        else:
            forks = [s for s in set(_sessions(store)) - before if s[1] and s[1].startswith("fork:")]
            if forks or not res.stderr.startswith("error: "):
                bad.append((i, res.stderr.strip()[-200:], forks))
    assert bad == []


def _sessions(store: Path) -> list[tuple]:
    con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True)
    try:
        return [tuple(r) for r in con.execute("SELECT n, agent_id FROM streams")]
    finally:
        con.close()
