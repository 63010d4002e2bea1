"""Fork and what-if children hold a liveness lease while they are written, as a recorded turn does:
to every other process a child whose writer is alive is *recording* — not flagged, not resurrected,
no turn started beside it — and once that writer is killed it reads as the interrupted turn it is.
Real writer processes, killed with SIGKILL mid-op (the live op's subprocess too)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flux.store.lease import lease_holder
from tests.helpers import descendants, kill_tree
from tests.hostile.corrupt_writes import build_store_base

FLUX = str(Path(sys.executable).with_name("flux"))
ENV = {**os.environ, "FLUX_AUTO_RESURRECT": "0"}


@pytest.fixture(scope="module")
def demo_base(tmp_path_factory) -> Path:
    return build_store_base(tmp_path_factory.mktemp("leased-base") / "store")


def _flux(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([FLUX, *args], capture_output=True, text=True, timeout=120, cwd=cwd, env=ENV)


def _listed(store: Path, sid: str, cwd: Path) -> dict:
    res = _flux("sessions", "--json", "--limit", "100", "--store", str(store), cwd=cwd)
    assert res.returncode == 0, res.stderr
    return next(r for r in json.loads(res.stdout)["sessions"] if r["id"] == sid)


def _wait_for_lease(store: Path, sid: str, proc: subprocess.Popen, timeout_s: float = 90) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pid = lease_holder(store, sid)
        if pid is not None:
            return pid
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError(f"{sid} was never leased")


def _child_sid(store: Path) -> str:
    """The id the next session of ``store`` gets (the writer about to start creates it)."""
    import sqlite3

    con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True)
    try:
        (n,) = con.execute("SELECT seq FROM sqlite_sequence WHERE name = 'streams'").fetchone()
    finally:
        con.close()
    return f"s_{n + 1}"


def _live_then_killed(store: Path, sid: str, argv: list[str], cwd: Path, turn: int = 1) -> None:
    """Start the writer, check the live child from outside, SIGKILL the writer mid-write, check again."""
    proc = subprocess.Popen([FLUX, *argv, "--store", str(store)], cwd=cwd, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        pid = _wait_for_lease(store, sid, proc)
        assert pid == proc.pid
        deadline = time.monotonic() + 90
        while "sleep" not in {n for _, n in descendants(proc.pid)}:  # the live op is running: mid-write
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        row = _listed(store, sid, cwd)
        assert row["interrupted"] is None and row["recording_pid"] == proc.pid, row
        shown = _flux("show", sid, "--store", str(store), cwd=cwd)
        assert "● recording" in shown.stdout and "⚠ interrupted" not in shown.stdout, shown.stdout
        for verb in (["resurrect", sid, "--yes"], ["run", "--session", sid, "-m", "mock", "--yes", "steal it"]):
            res = _flux(*verb, "--store", str(store), cwd=cwd)
            assert res.returncode == 1 and res.stdout == "", (verb, res)
            assert res.stderr == f"error: {sid}'s turn is being recorded by pid {proc.pid} — wait for it to finish " \
                                 f"or stop it (kill {proc.pid}), then try again\n", res.stderr
    finally:
        kill_tree(proc.pid)
        proc.communicate(timeout=60)
    assert lease_holder(store, sid) is None
    row = _listed(store, sid, cwd)
    assert row["recording_pid"] is None
    assert row["interrupted"] is not None and row["interrupted"]["turn"] == turn, row
    shown = _flux("show", sid, "--store", str(store), cwd=cwd)
    assert f"⚠ interrupted: turn {turn} after 0 statement(s)" in shown.stdout, shown.stdout


def test_a_forks_live_tail_is_recording_then_interrupted(demo_base, tmp_path):
    """`fork --edit` whose tail runs `bash sleep` live: the child's turn is open while it sleeps."""
    store = Path(shutil.copytree(demo_base, tmp_path / "s"))
    edit = tmp_path / "slow.flux"
    edit.write_text('flow\n  x = bash({"command":"sleep 60"})\n', encoding="utf-8")
    _live_then_killed(store, _child_sid(store), ["fork", "s_7", "--at", "0", "--edit", str(edit), "--yes"], tmp_path)


def test_a_replanned_what_if_is_recording_then_interrupted(demo_base, tmp_path):
    """`what-if -m scripted:…` whose re-planned turn calls `bash sleep` off tape, live: the child's
    turn 2 (turn 1 is s_7's earlier turns replayed, closed) is open while it sleeps."""
    store = Path(shutil.copytree(demo_base, tmp_path / "s"))
    script = tmp_path / "slow.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "bash", "input": {"command": "sleep 60"}}]},
                                  {"text": "done"}]), encoding="utf-8")
    sid = _child_sid(store)
    argv = ["what-if", "s_7", "-m", f"scripted:{script}", "--off-tape", "live", "--yes"]
    _live_then_killed(store, sid, argv, tmp_path, turn=2)
