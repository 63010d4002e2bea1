"""A fork killed by SIGKILL (a real subprocess, killed where it stands) leaves the source untouched
and no half-written child: an offline fork is one transaction, so killed inside its prefix or
while its tail runs, no child session exists at all. The store opens and passes SQLite's
integrity check either way."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from flux.store import StoreWriter
from tests.helpers import REPO

N = 120  # statements of the source; the fork is at N - 1

# Runs a fork in a child process; `hook` pauses it (and says so on stdout) at the point the parent kills it.
_DRIVER = r"""
import sys, time
from pathlib import Path
import flux.timemachine.fork as fork_mod
from flux.agent.client import Client

store, ws, sid, at, where = sys.argv[1:6]

def pause(label):
    print(label, flush=True)
    time.sleep(60)

if where == "in-transaction":  # the prefix's rows are inserted; the transaction has not committed
    real = fork_mod.flush_events
    def flush_events(*a, **k):
        real(*a, **k)
        pause("inside")
    fork_mod.flush_events = flush_events
else:  # the prefix committed; the tail's first attempt is being recorded
    real_attempt = fork_mod.accepted_attempt
    calls = []
    def _attempt(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            pause("tail")
        return real_attempt(*a, **k)
    fork_mod.accepted_attempt = _attempt
c = Client("mock", store=Path(store), workspace=Path(ws), env_secrets=False)
fork_mod.fork_session(c, sid, int(at), inject="injected")
print("finished", flush=True)
"""


def _dump(store: Path) -> tuple[list, list]:
    con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        rows = con.execute("SELECT global_seq, stream, stream_seq, id, kind, schema_version, ts, payload, turn_id"
                           " FROM events ORDER BY global_seq").fetchall()
        streams = con.execute("SELECT * FROM streams ORDER BY n").fetchall()
    finally:
        con.close()
    return rows, streams


@pytest.mark.parametrize("where", ["in-transaction", "tail"])
def test_a_killed_fork_leaves_the_source_untouched_and_no_half_written_child(tmp_path: Path, where: str) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import bench_timemachine
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    store, ws = tmp_path / "store", tmp_path / "ws"
    ws.mkdir()
    with StoreWriter(store) as w:
        sid = bench_timemachine.write_ledgered(w, 1, N)
    before_rows, before_streams = _dump(store)
    driver = tmp_path / "driver.py"
    driver.write_text(_DRIVER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "core"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, str(driver), str(store), str(ws), sid, str(N - 1), where], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line in ("inside", "tail"), (line, proc.stderr.read() if proc.poll() is not None else "")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == -signal.SIGKILL
    rows, streams = _dump(store)
    source = [r for r in rows if r[1] == sid]
    assert source == [r for r in before_rows if r[1] == sid]  # the source: every row, byte for byte
    assert streams[0] == before_streams[0]
    child = [r for r in rows if r[1] != sid]
    # this fork is offline (inject, the tail from tape): one transaction, so killed inside the prefix or
    # inside the tail, no child exists at all
    assert child == [] and len(streams) == len(before_streams) and rows == before_rows
