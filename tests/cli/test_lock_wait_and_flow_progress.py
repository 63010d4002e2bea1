"""Two silences of the first hour: a store locked by another writer made the CLI wait about 5 s
without a word (it now says, once, on stderr, that it is waiting and for what), and `flux flow run`
printed nothing for the op that was running (each op is now shown as it starts)."""

from __future__ import annotations

import os
import select
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.store import sqlite_writer as store_mod
from tests.helpers import REPO


def _hold_lock(db: Path, seconds: float, ready: threading.Event) -> threading.Thread:
    """Another connection holding the write lock for ``seconds``."""
    def hold() -> None:
        c = sqlite3.connect(str(db), isolation_level=None, check_same_thread=False)
        c.execute("BEGIN EXCLUSIVE")
        ready.set()
        time.sleep(seconds)
        c.execute("COMMIT")
        c.close()

    t = threading.Thread(target=hold)
    t.start()
    return t


@pytest.fixture
def store(tmp_path: Path) -> Path:
    s = tmp_path / "st"
    r = CliRunner().invoke(main, ["run", "--store", str(s), "--workspace", str(tmp_path), "-m", "mock", "--yes", "hi"])
    assert r.exit_code == 0, r.output
    return s


def _run(store: Path, ws: Path):
    return CliRunner().invoke(main, ["run", "--store", str(store), "--workspace", str(ws), "-m", "mock", "--yes",
                                     "write a quick note"])


def _waiting_lines(output: str, store: Path) -> list[str]:
    return [ln for ln in output.splitlines() if ln.startswith("waiting for ")]


def test_a_locked_store_says_once_that_it_waits_then_runs(store: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setattr("flux.cli.common._SAID_WAITING", set())
    ready = threading.Event()
    t = _hold_lock(store / "events.db", 1.5, ready)
    ready.wait(10)
    try:
        r = _run(store, tmp_path)
    finally:
        t.join()
    assert r.exit_code == 0, r.output
    assert _waiting_lines(r.output, store) == [
        f"waiting for {store / 'events.db'}: another process is writing to it (giving up after 5 s)…"]


def test_a_store_locked_for_good_says_so_once_then_fails_in_one_line(store: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setattr("flux.cli.common._SAID_WAITING", set())
    monkeypatch.setattr(store_mod, "_LOCK_WAIT_S", 1.0)
    ready = threading.Event()
    t = _hold_lock(store / "events.db", 4.0, ready)
    ready.wait(10)
    try:
        started = time.monotonic()
        r = _run(store, tmp_path)
        waited = time.monotonic() - started
    finally:
        t.join()
    assert r.exit_code == 1 and waited < 3.5
    assert len(_waiting_lines(r.output, store)) == 1
    errors = [ln for ln in r.output.splitlines() if ln.startswith("error:")]
    assert errors == [f"error: {store / 'events.db'} is locked by a writer — wait for it to finish (or stop it) and try again"]


def test_an_unlocked_store_says_nothing_about_waiting(store: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setattr("flux.cli.common._SAID_WAITING", set())
    r = _run(store, tmp_path)
    assert r.exit_code == 0 and _waiting_lines(r.output, store) == []


def test_flow_run_shows_each_op_as_it_starts(tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    flow = tmp_path / "f.flux"
    flow.write_text('flow f\n  a = bash({"command":"while [ ! -f go ]; do sleep 0.05; done; echo went"})\n'
                    '  b = write({"path":"after.txt","content":"x"})\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "core"), os.environ.get("PYTHONPATH", "")]),
               NO_COLOR="1")
    p = subprocess.Popen([sys.executable, "-c", "from flux.cli import main; main()", "flow", "run", str(flow),
                          "--store", str(tmp_path / "st"), "--workspace", str(ws), "--yes"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while not any(ln.startswith("▸ bash") for ln in seen):
            assert time.monotonic() < deadline, f"the running op was never shown: {seen}"
            assert p.poll() is None, p.communicate()
            r, _, _ = select.select([p.stderr], [], [], 0.5)
            if r:
                seen.append(p.stderr.readline().rstrip("\n"))
        assert p.poll() is None and not (ws / "after.txt").exists()  # shown while it runs, before the next op
        (ws / "go").touch()
        out, err = p.communicate(timeout=60)
    finally:
        (ws / "go").touch()  # the command ends whatever happened (it is in a session of its own)
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    lines = seen + err.splitlines()
    ops = [ln for ln in lines if ln.startswith("▸ ")]
    assert ops == ['▸ bash {"command":"while [ ! -f go ]; do sleep 0.05; done; echo went"}',
                   '▸ write {"path":"after.txt","content":"x"}']
    assert "  ok went" in lines and "  ok wrote 1 bytes to after.txt" in lines
