"""``flux store copy`` from a damaged source and into a destination that diverged: damaged rows are
left behind and counted while every whole row is copied byte for byte at its place (fuzzed with
hypothesis), a killed copy — between transactions or inside one — leaves whole transactions only,
and a diverged destination is a one-line error that writes nothing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.cli import main as flux_main
from flux.store import CallUsage, Message, StoreReader, StoreWriter, TurnEnded, Usage
from flux.store.copy import copy_store
from flux.store.store import store_location

FLUX = str(Path(sys.executable).parent / "flux")
_COLS = "stream_seq, id, kind, ts, payload, turn_id"


def _build_source(path: Path, sessions: int = 4, turns: int = 3) -> Path:
    """A small store of ordinary sessions: messages, turns with usage, one session forked from another."""
    clock = iter(range(1_700_000_000_000, 1_800_000_000_000, 5))
    with StoreWriter(path, clock=lambda: next(clock)) as w:
        first = None
        for s in range(sessions):
            ctx = {"correlation_id": first} if s == 2 else None
            sid = w.create_session("anthropic:claude-sonnet-4-5", context=ctx)
            first = first or sid
            for t in range(turns):
                w.append(sid, Message.text("user", f"do {s}.{t}"))
                tid = w.begin_turn(sid, f"do {s}.{t}", "anthropic:claude-sonnet-4-5")
                w.append(sid, CallUsage(model="anthropic:claude-sonnet-4-5", usage=Usage(input_tokens=10 + t, output_tokens=3)),
                         turn_id=tid)
                w.append(sid, TurnEnded(outcome="ok", iterations=1, answer="done", usage=Usage(input_tokens=10 + t)),
                         turn_id=tid)
                w.append(sid, Message.text("assistant", f"done {s}.{t} ✓"))
    return path


@pytest.fixture(scope="module")
def source_template(tmp_path_factory) -> Path:
    return _build_source(tmp_path_factory.mktemp("copy-hostile") / "src")


def _clone(template: Path, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    for name in ("events.db", "flow.db"):
        shutil.copyfile(template / name, into / name)
    return into


# How a row is damaged (SQLite lets any cell hold anything): each leaves the row not whole.
DAMAGE = {
    "blob payload": "UPDATE events SET payload = X'7B7D' WHERE global_seq = ?",
    "not UTF-8": "UPDATE events SET payload = CAST(X'7B2280FF227D' AS TEXT) WHERE global_seq = ?",
    "NUL in payload": "UPDATE events SET payload = '{\"a\":\"' || char(0) || '\"}' WHERE global_seq = ?",
    "ts is text": "UPDATE events SET ts = 'soon' WHERE global_seq = ?",
    "turn_id is real": "UPDATE events SET turn_id = 1.5 WHERE global_seq = ?",
}


def _damage(store: Path, hits: list[tuple[int, str]]) -> set[int]:
    """Damage rows by global_seq; the global_seqs damaged."""
    con = sqlite3.connect(store / "events.db")
    with con:
        for gs, how in hits:
            con.execute(DAMAGE[how], (gs,))
    con.close()
    return {gs for gs, _ in hits}


def _whole_source_rows(store: Path, damaged: set[int]) -> dict[str, list[tuple]]:
    """What a copy must bring over: per session whose first row is whole, its whole rows whose
    turn id names a whole turn of the session (``(stream_seq, id, kind, ts)``, text as bytes)."""
    con = sqlite3.connect(store / "events.db")
    con.text_factory = bytes
    out: dict[str, list[tuple]] = {}
    turns: dict[str, set[int]] = {}
    for gs, stream, seq, eid, kind, ts, _payload, turn_id in con.execute(
            f"SELECT global_seq, stream, {_COLS} FROM events ORDER BY stream, stream_seq"):
        s = stream.decode()
        if gs in damaged:
            continue
        if seq == 0:
            out[s] = []
        if s not in out:
            continue  # its session_started row was damaged: the session stays behind whole
        if kind == b"turn_started":
            turns.setdefault(s, set()).add(gs)
        if turn_id is None or turn_id in turns.get(s, set()):
            out[s].append((seq, eid, kind, ts))
    con.close()
    return out


def _dest_rows(loc: Path, sid: str) -> list[tuple]:
    with StoreReader(loc) as r:
        return [tuple(x.encode() if isinstance(x, str) else x for x in row[:4] + (row[4].encode(),))
                for row in r.query(f"SELECT {_COLS} FROM events WHERE stream = ? ORDER BY stream_seq", (sid,))]


def _check_copied(src: Path, dst: Path, damaged: set[int], report) -> None:
    want = _whole_source_rows(src, damaged)
    for s, d in report.sessions.items():
        got = _dest_rows(dst, d)
        assert [r[:4] for r in got] == [(r[0], r[1], r[2], r[3]) for r in want[s]], s  # stream_seq, id, kind, ts
        con = sqlite3.connect(src / "events.db")
        con.text_factory = bytes
        payloads = {row[0]: row[1] for row in con.execute("SELECT stream_seq, payload FROM events WHERE stream = ?", (s,))}
        con.close()
        assert all(payloads[r[0]] == r[4] for r in got)  # every copied payload byte for byte
    with StoreReader(dst) as r:
        for d in report.sessions.values():
            started = {gs for (gs,) in r.query("SELECT global_seq FROM events WHERE stream = ? AND kind = 'turn_started'", (d,))}
            scoped = {t for (t,) in r.query("SELECT turn_id FROM events WHERE stream = ? AND turn_id IS NOT NULL", (d,))}
            assert scoped <= started  # the turn ids name the destination's turns


@pytest.mark.parametrize("dst_kind", ["sqlite", "postgres"])
def test_damaged_rows_are_left_behind_and_the_rest_copied_in_place(source_template, tmp_path, request, dst_kind):
    src = _clone(source_template, tmp_path / "src")
    damaged = _damage(src, [(3, "blob payload"), (7, "not UTF-8"), (12, "NUL in payload"), (20, "ts is text"),
                            (33, "turn_id is real")])
    dst = tmp_path / "dst" if dst_kind == "sqlite" else store_location(request.getfixturevalue("pg_url"))
    with StoreReader(src) as r, StoreWriter(dst) as w:
        report = copy_store(r, w)
    want = _whole_source_rows(src, damaged)
    with StoreReader(src) as r:
        total = r.count_events()
    assert report.total_rows == sum(len(v) for v in want.values())
    assert report.skipped_rows == total - report.total_rows > len(damaged)  # (the damaged turn's rows stay too)
    _check_copied(src, dst, damaged, report)
    with StoreReader(src) as r, StoreWriter(dst) as w:  # again: nothing is added, the damaged rows are still counted
        again = copy_store(r, w)
    assert again.total_rows == 0 and again.sessions == report.sessions
    # the copied session with a gap where the damaged row was reads as the source does
    a = CliRunner().invoke(flux_main, ["show", "s_1", "--json", "--store", str(src)])
    b = CliRunner().invoke(flux_main, ["show", report.sessions["s_1"], "--json", "--store", str(dst)])
    assert a.exit_code == b.exit_code == 0, (a.output, b.output)
    assert len(json.loads(a.stdout)["turns"]) == len(json.loads(b.stdout)["turns"])


def test_a_session_whose_first_row_is_damaged_is_left_behind_whole(source_template, tmp_path):
    src = _clone(source_template, tmp_path / "src")
    with StoreReader(src) as r:
        gs0 = r.query("SELECT global_seq FROM events WHERE stream = 's_2' AND stream_seq = 0")[0][0]
        rows_s2 = r.count_events("s_2")
    _damage(src, [(gs0, "blob payload")])
    with StoreReader(src) as r, StoreWriter(tmp_path / "dst") as w:
        report = copy_store(r, w)
        again = copy_store(r, w)  # (known by nothing: it would be copied twice if it were copied at all)
    assert "s_2" not in report.sessions and report.skipped_rows == rows_s2 == again.skipped_rows
    assert again.total_rows == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hits=st.lists(st.tuples(st.integers(1, 4 * (1 + 3 * 5)), st.sampled_from(sorted(DAMAGE))), max_size=8,
                     unique_by=lambda h: h[0]),
       batch=st.sampled_from([1, 3, 7, 5_000]))
def test_fuzzed_damage_copies_every_whole_row_once(source_template, hits, batch, monkeypatch):
    from flux.store import copy as copy_mod

    monkeypatch.setattr(copy_mod, "_BATCH_ROWS", batch)
    with tempfile.TemporaryDirectory() as tmp:
        src = _clone(source_template, Path(tmp) / "src")
        damaged = _damage(src, hits)
        dst = Path(tmp) / "dst"
        with StoreReader(src) as r, StoreWriter(dst) as w:
            report = copy_store(r, w)
            again = copy_store(r, w)
        want = _whole_source_rows(src, damaged)
        assert report.total_rows == sum(len(v) for v in want.values())
        assert again.total_rows == 0
        _check_copied(src, dst, damaged, report)


def test_a_destination_that_diverged_is_one_line_and_writes_nothing(source_template, tmp_path):
    src = _clone(source_template, tmp_path / "src")
    dst = tmp_path / "dst"
    with StoreReader(src) as r, StoreWriter(dst) as w:
        copy_store(r, w)
    with StoreWriter(dst) as w:  # the copy lives on in the destination: it is not the source's session any more
        w.append("s_1", Message.text("user", "an answer only the destination has"))
    with StoreWriter(src) as w:  # and the source recorded more of it
        w.append("s_1", Message.text("user", "the source's own next message"))
    with StoreReader(dst) as r:
        before = r.count_events()
    proc = subprocess.run([FLUX, "store", "copy", str(src), str(dst)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "diverged" in lines[0], proc.stderr
    with StoreReader(dst) as r:
        assert r.count_events() == before


_KILLED_INSIDE = """
import sys, time
from flux.store import copy as copy_mod
from flux.store.writer import StoreWriter
from flux.store.store import StoreReader
real = StoreWriter.insert_copied
calls = []
def slow(self, *a, **k):
    real(self, *a, **k)
    calls.append(1)
    if len(calls) == 3:  # the third transaction's rows are written, not committed
        print("inside", flush=True)
        time.sleep(600)
StoreWriter.insert_copied = slow
copy_mod._BATCH_ROWS = 40
with StoreReader(sys.argv[1]) as r, StoreWriter(sys.argv[2]) as w:
    copy_mod.copy_store(r, w)
"""


@pytest.mark.parametrize("dst_kind", ["postgres", "sqlite"])
def test_a_copy_killed_inside_a_transaction_leaves_the_committed_ones_only(source_template, tmp_path, request, dst_kind):
    src = _build_source(tmp_path / "src", sessions=12)
    dst = tmp_path / "dst" if dst_kind == "sqlite" else store_location(request.getfixturevalue("pg_url"))
    p = subprocess.Popen([sys.executable, "-c", _KILLED_INSIDE, str(src), str(dst)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert p.stdout.readline().strip() == "inside", p.stderr.read()
    finally:
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
    with StoreReader(dst) as r:
        assert r.count_events() == 80  # two whole transactions of 40 rows; the third is gone
        copied = {s.id for s in r.list_sessions()}
        assert all(r.count_events(s) > 0 for s in copied)  # no registry row without its rows
    proc = subprocess.run([FLUX, "store", "copy", str(src), str(dst), "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    with StoreReader(src) as r:
        assert 80 + out["rows_added"] == r.count_events()
    for row in out["sessions"]:
        assert _dest_rows(dst, row["destination"]) == _dest_rows(src, row["source"])
