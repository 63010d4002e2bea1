"""A store bootstrap killed with ``kill -9`` before it linked its schema into place leaves a temp
file (``.events.db.<pid>.<ulid>.creating``): the next write open removes it when no live process
owns it, a read open leaves every byte alone, and no verb takes it for a store or a session."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from flux.store.store import StoreReader, StoreWriter, remove_stale_creating
from tests.hostile.corrupt import tree_state

FLUX = str(Path(sys.executable).with_name("flux"))
TEMP = re.compile(r"\.(events|flow)\.db\.(\d+)\.[0-9A-Z]{26}\.creating")

# A real `flux run` process stopped at the one moment the bootstrap's temp file exists: its link
# into place never returns (the test kills it there, or lets it live).
CHILD = """
import os, sys, time
import flux.store.sqlite_writer as store
def never_returns(*_a, **_k):
    print("linking", flush=True)
    time.sleep(600)
store.os.link = never_returns
from flux.cli import main
main(["run", "-m", "mock", "hi", "--store", sys.argv[1], "--yes"])
"""


def _creating(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if TEMP.fullmatch(p.name))


def _child_at_link(d: Path) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(d)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env={**os.environ, "FLUX_AUTO_RESURRECT": "0"})
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.strip() == "linking", (line, p.stderr.read() if p.poll() is not None else "")
    return p


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([FLUX, *args], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, "FLUX_AUTO_RESURRECT": "0"})


def test_a_killed_first_run_leaves_a_temp_file_the_next_run_removes(tmp_path):
    d = tmp_path / "store"
    child = _child_at_link(d)
    (name,) = _creating(d)
    assert int(TEMP.fullmatch(name).group(2)) == child.pid
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    assert not (d / "events.db").exists()

    # Reads: the directory is no store yet — one line — and not a byte or an mtime changes.
    before = tree_state(d)
    for args in (["sessions"], ["sessions", "--json"], ["show", "last"]):
        res = _run(*args, "--store", str(d), cwd=tmp_path)
        assert res.returncode == 1, res
        assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1, res.stderr
        assert "has no events.db" in res.stderr
    assert tree_state(d) == before

    # The next write open removes the dead bootstrap's file and makes the store whole.
    res = _run("run", "-m", "mock", "hi", "--store", str(d), "--yes", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert _creating(d) == []
    res = _run("sessions", "--json", "--store", str(d), cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.count('"id"') == 1, res.stdout


def test_a_live_bootstrap_keeps_its_temp_file(tmp_path):
    """A second writer opening the same directory while the first still bootstraps never removes
    the first one's file (its creator is alive and may still link it in)."""
    d = tmp_path / "store"
    child = _child_at_link(d)
    try:
        (name,) = _creating(d)
        with StoreWriter(d) as w:
            w.create_session("mock")
        assert name in _creating(d)
        with StoreReader(d) as r:
            assert [s.id for s in r.list_sessions()] == ["s_1"]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    assert remove_stale_creating(d) == [name]
    assert _creating(d) == []


def test_only_bootstrap_temp_files_are_removed(tmp_path):
    """Names that merely look alike, a directory with the name, an old file of a live pid."""
    d = tmp_path / "s"
    d.mkdir()
    dead = 2 ** 22 + 12345  # above pid_max's default: no such process
    keep = [f".events.db.{dead}.creating", f"events.db.{dead}.01HZX3J5Q8W2K7M9N4P6R0T1VS.creating",
            f".events.db.{dead}.01HZX3J5Q8W2K7M9N4P6R0T1VS.creating.bak",
            f".events.db.{os.getpid()}.01HZX3J5Q8W2K7M9N4P6R0T1VS.creating"]
    for n in keep:
        (d / n).write_bytes(b"x")
    (d / f".flow.db.{dead}.01HZX3J5Q8W2K7M9N4P6R0T1VT.creating").mkdir()
    gone = [f".events.db.{dead}.01HZX3J5Q8W2K7M9N4P6R0T1VS.creating",
            f".events.db.{dead}.01HZX3J5Q8W2K7M9N4P6R0T1VS.creating-wal",
            f".flow.db.{os.getppid()}.01HZX3J5Q8W2K7M9N4P6R0T1VW.creating"]
    for n in gone:
        (d / n).write_bytes(b"x")
    old = time.time() - 3600
    os.utime(d / gone[2], (old, old))  # a live pid (ours' parent), but older than any bootstrap
    assert sorted(remove_stale_creating(d)) == sorted(gone)
    assert sorted(p.name for p in d.iterdir()) == sorted(keep + [f".flow.db.{dead}.01HZX3J5Q8W2K7M9N4P6R0T1VT.creating"])
