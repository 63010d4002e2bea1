"""What flux promises of concurrent writers, on both backends, with real processes: N processes
appending to one stream get contiguous ``stream_seq`` (no gap, no duplicate); a reader during the
writes sees whole events only, and never loses one it saw; a writer killed (``kill -9``) inside
its transaction loses only its own uncommitted append, and the next writer goes on at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flux.store import Message, StoreReader, StoreWriter
from flux.store.store import store_location

REPO = Path(__file__).resolve().parents[2]

_APPENDER = """
import sys
from flux.store import Message, StoreWriter
loc, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
with StoreWriter(loc) as w:
    for i in range(n):
        w.append("s_1", Message.text("user", f"{who}-{i}:" + "x" * 2000))
"""

_READER = """
import json, os, sys
from flux.store import StoreReader
loc, stop = sys.argv[1], sys.argv[2]
seen = []
while not seen or not os.path.exists(stop):  # reads until the writers are done, at least once
    with StoreReader(loc) as r:
        evs = r.events("s_1")
        seqs = [e.stream_seq for e in evs]
        whole = all(e.kind == "session_started" or
                    (e.body.content[0]["text"].endswith("x" * 2000) and ":" in e.body.content[0]["text"]) for e in evs)
        seen.append([len(evs), seqs == list(range(len(evs))), whole, r.skipped_rows])
print(json.dumps(seen))
"""

_KILLED = """
import sys, time
from flux.store import Message, StoreWriter
loc = sys.argv[1]
w = StoreWriter(loc)
with w.transaction():
    for i in range(3):
        w.append("s_1", Message.text("user", f"doomed-{i}"))
    print("inside", flush=True)
    time.sleep(120)
"""


@pytest.fixture(params=("sqlite", "postgres"))
def location(request, tmp_path: Path) -> Path:
    loc = tmp_path / "store" if request.param == "sqlite" else store_location(request.getfixturevalue("pg_url"))
    with StoreWriter(loc) as w:
        assert w.create_session("mock") == "s_1"
    return loc


def _python(script: str, *args: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ})


def test_concurrent_appenders_get_contiguous_stream_seq(location, tmp_path):
    writers, each = 6, 20
    stop = tmp_path / "writers-done"
    reader = _python(_READER, location, stop)
    procs = [_python(_APPENDER, location, f"w{k}", each) for k in range(writers)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    stop.touch()
    out, err = reader.communicate(timeout=300)
    assert reader.returncode == 0, err
    with StoreReader(location) as r:
        evs = r.events("s_1")
        row = r.get_session("s_1")
    assert [e.stream_seq for e in evs] == list(range(1 + writers * each))
    texts = [e.body.content[0]["text"].split(":")[0] for e in evs[1:]]
    assert sorted(texts) == sorted(f"w{k}-{i}" for k in range(writers) for i in range(each))  # none lost, none twice
    for k in range(writers):  # each writer's own appends in its order
        mine = [int(t.split("-")[1]) for t in texts if t.startswith(f"w{k}-")]
        assert mine == list(range(each))
    assert (row.last_seq, row.msg_count) == (writers * each, writers * each)
    seen = json.loads(out)
    assert seen, "the reader never read"
    assert all(contiguous and whole and skipped == 0 for _n, contiguous, whole, skipped in seen)
    counts = [n for n, *_ in seen]
    assert counts == sorted(counts)  # a row once seen is never gone


def test_a_writer_killed_inside_its_transaction_loses_only_its_own_append(location):
    with StoreWriter(location) as w:
        w.append("s_1", Message.text("user", "before"))
    doomed = _python(_KILLED, location)
    try:
        assert doomed.stdout.readline().strip() == "inside", doomed.stderr.read()
        with StoreReader(location) as r:
            assert r.count_events("s_1") == 2  # its rows are not visible while it is open
    finally:
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(timeout=30)
    assert doomed.returncode == -signal.SIGKILL
    t0 = time.monotonic()
    with StoreWriter(location) as w:
        w.append("s_1", Message.text("user", "after"))
    assert time.monotonic() - t0 < 10  # the dead writer's lock went with it
    with StoreReader(location) as r:
        texts = [e.body.content[0]["text"] for e in r.events("s_1")[1:]]
        seqs = [e.stream_seq for e in r.events("s_1")]
        assert r.get_session("s_1").msg_count == 2
    assert texts == ["before", "after"]
    assert seqs == [0, 1, 2]
