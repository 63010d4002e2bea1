"""``flux store copy SRC DST``: a directory into a shared Postgres store and back, payloads and
event ids byte for byte, sessions renumbered into the destination's free numbers (streams,
correlation ids and turn ids following), resumable after a copy killed with ``kill -9``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main as flux_main
from flux.store import Message, StoreReader, StoreWriter
from flux.store.store import store_location

FLUX = str(Path(sys.executable).parent / "flux")
DEMO_NOW = 1_764_000_000_000


def _rows(loc: Path, sid: str) -> list[tuple]:
    with StoreReader(loc) as r:
        return r.query("SELECT stream_seq, id, kind, ts, payload FROM events WHERE stream = ? ORDER BY stream_seq", (sid,))


def _copy(*args: str) -> dict:
    res = CliRunner().invoke(flux_main, ["store", "copy", *args, "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory) -> Path:
    from flux.demo import build_demo_store

    return build_demo_store(tmp_path_factory.mktemp("copy-demo") / "store", now_ms=DEMO_NOW)


def test_a_directory_goes_into_a_shared_store_that_has_sessions_and_comes_back_whole(demo_dir, pg_url, tmp_path):
    shared = store_location(pg_url)
    with StoreWriter(shared) as w:  # a teammate's session is already there
        w.append(w.create_session("theirs"), Message.text("user", "hello team"))
    out = _copy(str(demo_dir), pg_url)
    with StoreReader(demo_dir) as r:
        src_sessions = sorted((s.id for s in r.list_sessions()), key=lambda s: int(s[2:]))
        src_rows = {s: r.count_events(s) for s in src_sessions}
        src_children = {s: r.get_session(s).correlation_id for s in src_sessions}
    mapping = {row["source"]: row["destination"] for row in out["sessions"]}
    assert list(mapping) == src_sessions
    assert mapping["s_1"] == "s_2"  # the next free number: s_1 is the teammate's
    assert out["rows_added"] == sum(src_rows.values())
    for s, d in mapping.items():
        assert _rows(shared, d) == _rows(demo_dir, s)  # payloads, ids, kinds, ts: byte for byte
    with StoreReader(shared) as r:
        for s, d in mapping.items():
            row = r.get_session(d)
            parent = src_children[s]
            assert row.correlation_id == (mapping.get(parent, parent) if parent else None)
            started = {e.global_seq for e in r.events(d, kinds=("turn_started",))}
            scoped = {e.turn_id for e in r.events(d) if e.turn_id is not None}
            assert scoped <= started  # every turn id names a turn of the session, in the destination
    # the same sessions read the same: every session's show/replay JSON matches the source's
    for s, d in list(mapping.items())[:4]:
        a = CliRunner().invoke(flux_main, ["replay", s, "--json", "--store", str(demo_dir)])
        b = CliRunner().invoke(flux_main, ["replay", d, "--json", "--store", pg_url])
        assert (a.exit_code, json.loads(a.stdout)["cells_consumed"]) == (b.exit_code, json.loads(b.stdout)["cells_consumed"])
    # and back into a fresh directory: the same rows again
    back = tmp_path / "back"
    out_back = _copy(pg_url, str(back))
    assert len(out_back["sessions"]) == len(src_sessions) + 1
    again = _copy(str(demo_dir), pg_url)  # nothing new: nothing added
    assert again["rows_added"] == 0 and {r["destination"] for r in again["sessions"]} == set(mapping.values())


_KILLED_COPY = """
import os, sys, time
from flux.store import copy as copy_mod
from flux.store.store import StoreReader, StoreWriter
real = copy_mod._flush
calls = []
def slow(*a, **k):
    n = real(*a, **k)
    calls.append(n)
    if len(calls) == 3:
        print("copied", flush=True)
        time.sleep(600)
    return n
copy_mod._flush = slow
copy_mod._BATCH_ROWS = 40
with StoreReader(sys.argv[1]) as r, StoreWriter(sys.argv[2]) as w:
    copy_mod.copy_store(r, w)
"""


@pytest.mark.parametrize("dst_kind", ["postgres", "sqlite"])
def test_a_copy_killed_midway_resumes_to_the_same_rows(demo_dir, pg_url, tmp_path, dst_kind):
    dst = store_location(pg_url) if dst_kind == "postgres" else tmp_path / "dst"
    p = subprocess.Popen([sys.executable, "-c", _KILLED_COPY, str(demo_dir), str(dst)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert p.stdout.readline().strip() == "copied", p.stderr.read()
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
    with StoreReader(dst) as r:
        partial = r.count_events()
    with StoreReader(demo_dir) as r:
        total = r.count_events()
    assert 0 < partial < total
    proc = subprocess.run([FLUX, "store", "copy", str(demo_dir), str(dst), "--json"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert partial + out["rows_added"] == total
    for row in out["sessions"]:
        assert _rows(dst, row["destination"]) == _rows(demo_dir, row["source"])


def test_copy_input_errors_are_one_line(demo_dir, tmp_path):
    for args, needle in ((["store", "copy", str(demo_dir), str(demo_dir)], "the same store"),
                         (["store", "copy", str(tmp_path / "nope"), str(tmp_path / "d")], "does not exist"),
                         (["store", "copy", str(demo_dir), str(tmp_path / "d"), "--session", "s_99"], "no session 's_99'")):
        proc = subprocess.run([FLUX, *args], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 1, proc.stdout
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], proc.stderr
    assert not (tmp_path / "d").exists()  # nothing written for a refused copy
