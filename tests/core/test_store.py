"""The store layer against the real flux 0.26.0 fixture and stores built through our writer."""

from __future__ import annotations

import contextlib
import json
import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.errors import SessionNotFound, StoreError, StoreLockedError
from flux.store import (
    Compacted,
    CallUsage, Message, OpRecorded, PlanAttempted, Run, StepStarted, StoreReader, StoreWriter,
    TurnEnded, UnknownEvent, UnknownRun, Usage, encode_payload,
)
from tests.helpers import tree_digest


def test_fixture_payloads_round_trip_byte_for_byte(fixture_store):
    with StoreReader(fixture_store) as r:
        evs = r.events("s_1")
        raw = [p for (p,) in r.query("SELECT payload FROM events WHERE stream = 's_1' ORDER BY stream_seq")]
    assert len(evs) == 64
    assert [encode_payload(e.body) for e in evs] == raw


def test_fixture_registry_and_cell(fixture_store):
    with StoreReader(fixture_store) as r:
        [row] = r.list_sessions()
        assert (row.id, row.model, row.msg_count, row.last_seq) == ("s_1", "mock", 2, 63)
        cells = [e.body.event for e in r.events("s_1") if isinstance(e.body, Run) and isinstance(e.body.event, OpRecorded)]
    assert len(cells) == 1
    assert cells[0].op == "append"
    assert cells[0].content == "appended 21 bytes to flux-mock.txt"
    assert cells[0].input_hash.startswith("7b7d06ae306ee31a")


def test_browsing_leaves_every_file_byte_identical_and_creates_none(fixture_store):
    before = tree_digest(fixture_store)
    with StoreReader(fixture_store) as r:
        r.list_sessions()
        r.events("s_1")
        r.change_token()
    assert tree_digest(fixture_store) == before


def test_browsing_a_wal_store_without_sidecars_creates_none(tmp_path):
    d = tmp_path / "s"
    with StoreWriter(d) as w:
        w.create_session("mock")
    for side in ("events.db-wal", "events.db-shm"):
        (d / side).unlink(missing_ok=True)
    before = tree_digest(d)
    with StoreReader(d) as r:
        assert [s.id for s in r.list_sessions()] == ["s_1"]
    assert tree_digest(d) == before


def test_reader_sees_rows_still_in_the_wal_of_a_crashed_writer(tmp_path):
    d = tmp_path / "s"
    w = StoreWriter(d)
    w.conn.execute("PRAGMA wal_autocheckpoint = 0")
    sid = w.create_session("mock")
    w.append(sid, Message.text("user", "hello"))
    # Snapshot the files while the writer is still open (as a crash would leave them), minus -shm.
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    for name in ("events.db", "events.db-wal", "flow.db"):
        (crashed / name).write_bytes((d / name).read_bytes())
    w.close()
    before = tree_digest(crashed)
    with StoreReader(crashed) as r:
        assert r.mode == "snapshot"
        assert r.count_events("s_1") == 2
    assert tree_digest(crashed) == before


def test_writer_follows_flux_write_rules(tmp_path):
    with StoreWriter(tmp_path / "s", clock=lambda: 1_000) as w:
        sid = w.create_session("mock", context={"agent_id": "a", "correlation_id": None})
        w.append(sid, Message.text("user", "hi"), ts=1_001)
        tid = w.begin_turn(sid, "hi", "mock", ts=1_002)
        w.append(sid, PlanAttempted(step=1, plan_source="flow\n"), turn_id=tid, ts=1_003)
        w.append(sid, Run(event=StepStarted(step="s", op="read", input_hash="x")), ts=1_004)
        w.append(sid, CallUsage(model="mock", usage=Usage(input_tokens=3)), turn_id=tid, ts=1_005)
        w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid, ts=1_006)
        w.append(sid, Message.text("assistant", "done"), ts=1_007)
        with pytest.raises(ValueError):
            w.append(sid, Message.text("user", "x"), turn_id=tid)
    con = sqlite3.connect(tmp_path / "s" / "events.db")
    rows = con.execute("SELECT global_seq, stream_seq, kind, ts, turn_id, length(id) FROM events ORDER BY global_seq").fetchall()
    assert [r[1] for r in rows] == list(range(8))
    assert rows[2][2] == "turn_started" and rows[2][0] == tid
    assert [r[4] for r in rows] == [None, None, None, tid, None, tid, tid, None]
    assert all(r[5] == 26 for r in rows)
    reg = con.execute("SELECT model, created_at, updated_at, last_seq, msg_count, agent_id FROM streams").fetchone()
    assert reg == ("mock", 1_000, 1_007, 7, 2, "a")
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cols = [r[1] for r in con.execute("PRAGMA table_info(streams)")]
    assert cols[-4:] == ["account", "agent_id", "agent_version", "correlation_id"]
    flow = sqlite3.connect(tmp_path / "s" / "flow.db")
    assert {r[0] for r in flow.execute("SELECT name FROM sqlite_master WHERE type='table'")} >= {"values_store", "symbols", "suspensions", "session_composites"}


def test_transaction_rolls_back_as_a_whole(tmp_path):
    with StoreWriter(tmp_path / "s") as w:
        sid = w.create_session("mock")
        with pytest.raises(RuntimeError):
            with w.transaction():
                w.append(sid, Message.text("user", "a"))
                raise RuntimeError("boom")
    with StoreReader(tmp_path / "s") as r:
        assert r.count_events(sid) == 1
        assert r.get_session(sid).msg_count == 0


def test_tolerant_decoding_unknown_kinds_variants_and_corrupt_rows(tmp_path):
    d = tmp_path / "s"
    with StoreWriter(d) as w:
        sid = w.create_session("mock")
        w.append(sid, Message.text("user", "hi"))
    con = sqlite3.connect(d / "events.db")
    rows = [
        ("future_kind", json.dumps({"kind": "future_kind", "data": {"x": 1}})),
        ("run", json.dumps({"kind": "run", "data": {"event": "teleported", "where": "mars"}})),
        ("run", "{not json"),
        ("run", json.dumps({"kind": "run", "data": {"event": "op_recorded", "step": "s", "op": "read", "input_hash": "h"}})),
        ("turn_ended", json.dumps({"kind": "turn_ended", "data": {"outcome": "ok", "iterations": "three", "usage": {"input_tokens": 5}}})),
    ]
    for i, (kind, payload) in enumerate(rows, start=2):
        con.execute("INSERT INTO events (stream, stream_seq, id, kind, ts, payload) VALUES (?,?,?,?,?,?)",
                    (sid, i, f"id{i}", kind, 1, payload))
    con.commit()
    con.close()
    with StoreReader(d) as r:
        evs = r.events(sid)
        assert r.skipped_rows == 1
    bodies = [e.body for e in evs]
    assert isinstance(bodies[2], UnknownEvent) and bodies[2].kind == "future_kind"
    assert isinstance(bodies[3].event, UnknownRun) and bodies[3].event.event == "teleported"
    cell = bodies[4].event
    assert isinstance(cell, OpRecorded) and cell.content == "" and cell.seq == 0 and not cell.truncated
    ended = bodies[5]
    assert isinstance(ended, TurnEnded) and ended.iterations == 0 and ended.usage.input_tokens == 5 and ended.usage.output_tokens == 0


@pytest.mark.parametrize("setup, needle", [
    (lambda d: None, "does not exist"),
    (lambda d: d.mkdir(), "no events.db"),
    (lambda d: (d.mkdir(), (d / "events.db").write_text("hello, I am text")), "not a SQLite database"),
    (lambda d: (d.mkdir(), (d / "events.db").write_bytes(b"")), "empty"),
    (lambda d: (d.mkdir(), sqlite3.connect(d / "events.db").execute("CREATE TABLE moz_places (id INTEGER)").connection.commit()),
     "another application"),
    (lambda d: d.write_text("x"), "not a directory"),
])
def test_bad_store_inputs_give_one_line_errors(tmp_path, setup, needle):
    d = tmp_path / "store"
    setup(d)
    with pytest.raises(StoreError) as e:
        StoreReader(d)
    assert needle in str(e.value)
    assert "\n" not in str(e.value)


def test_missing_session_is_a_clear_error(fixture_store):
    with StoreReader(fixture_store) as r:
        with pytest.raises(SessionNotFound, match="no session 's_9'"):
            r.get_session("s_9")


def test_rollback_journal_store_locked_by_a_writer(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    con = sqlite3.connect(d / "events.db", isolation_level=None)
    con.execute("CREATE TABLE events (global_seq INTEGER PRIMARY KEY, stream TEXT, stream_seq INTEGER, id TEXT, kind TEXT, schema_version INTEGER, ts INTEGER, payload TEXT, turn_id INTEGER)")
    con.execute("BEGIN EXCLUSIVE")
    con.execute("INSERT INTO events VALUES (1,'s_1',0,'a','message',1,1,'{}',NULL)")
    try:
        with pytest.raises(StoreLockedError, match="locked by a writer"):
            r = StoreReader(d, busy_timeout_s=0.2)
            r.events("s_1")
    finally:
        con.execute("ROLLBACK")
        con.close()


_KILLED_IN_A_TRANSACTION = """
import os, sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("PRAGMA cache_size = 1")  # spill: the database file itself holds uncommitted pages
con.execute("BEGIN IMMEDIATE")
con.execute("UPDATE events SET payload = payload || ' '")
con.execute("INSERT INTO events (stream, stream_seq, id, kind, ts, payload) VALUES ('s_1', 99, 'x', 'message', 1, '{}')")
os._exit(0)  # killed: no rollback, no unlock
"""


def test_a_hot_rollback_journal_is_read_as_the_store_before_the_killed_transaction(tmp_path):
    """A writer killed inside a transaction of a rollback-journal store (inside the bootstrap, before
    WAL mode) leaves a hot -journal that a read-only connection may not roll back ("attempt to write
    a readonly database"): the reader reads a private copy rolled back, and touches nothing."""
    import subprocess
    import sys

    d = tmp_path / "s"
    w = StoreWriter(d)
    sid = w.create_session("mock")
    for i in range(40):
        w.append(sid, Message.text("user", f"message {i} " + "x" * 200))
    w.close()
    con = sqlite3.connect(d / "events.db", isolation_level=None)
    con.execute("PRAGMA journal_mode = DELETE")
    committed = con.execute("SELECT global_seq, payload FROM events ORDER BY global_seq").fetchall()
    con.close()
    subprocess.run([sys.executable, "-c", _KILLED_IN_A_TRANSACTION, str(d / "events.db")], check=True, timeout=60)
    assert (d / "events.db-journal").stat().st_size > 0
    before = tree_digest(d)
    with StoreReader(d) as r:
        assert r.mode == "snapshot"
        assert r.count_events(sid) == 41  # 40 messages + session_started; not the killed insert
        rows = r._query("SELECT global_seq, payload FROM events ORDER BY global_seq")
    assert rows == committed
    assert tree_digest(d) == before  # the journal is left for the next writer to roll back
    w = StoreWriter(d)  # which it does
    assert w.conn.execute("SELECT global_seq, payload FROM events ORDER BY global_seq").fetchall() == committed
    w.close()


def test_wal_store_mid_transaction_reads_committed_rows(tmp_path):
    d = tmp_path / "s"
    w = StoreWriter(d)
    sid = w.create_session("mock")
    w.conn.execute("BEGIN IMMEDIATE")
    w.conn.execute("INSERT INTO events (stream, stream_seq, id, kind, ts, payload) VALUES (?, 1, 'x', 'message', 1, '{}')", (sid,))
    try:
        with StoreReader(d) as r:
            assert r.count_events(sid) == 1  # the uncommitted row is invisible, nothing blocks
    finally:
        w.conn.execute("ROLLBACK")
        w.close()


def test_change_token_sees_another_writer(tmp_path):
    d = tmp_path / "s"
    with StoreWriter(d) as w:
        w.create_session("mock")
    r = StoreReader(d)
    t1 = r.change_token()
    with StoreWriter(d) as w:
        w.create_session("mock")
    assert r.change_token() != t1
    r.refresh()
    assert r.session_count() == 2
    r.close()


def test_ulid_text_is_the_crockford_base32_of_its_128_bits():
    from flux.store.ulid import _ALPHABET, new_ulid

    def value_of(text: str) -> int:
        v = 0
        for ch in text:
            v = v * 32 + _ALPHABET.index(ch)
        return v

    a, b = new_ulid(1_700_000_000_000), new_ulid(1_700_000_000_000)
    assert len(a) == 26 and a < b and value_of(b) == value_of(a) + 1  # same ms: monotonic
    assert value_of(a) >> 80 == 1_700_000_000_000 and a.startswith("01HF7YAT00")


def test_grouped_appends_write_the_same_rows_and_registry_as_one_by_one(tmp_path):
    def write(d, grouped):
        with StoreWriter(d, clock=lambda: 1_000) as w:
            sid = w.create_session("mock")
            ctx = w.grouped(max_rows=3) if grouped else contextlib.nullcontext()
            with ctx:
                w.append(sid, Message.text("user", "hi"), ts=1_001)
                tid = w.begin_turn(sid, "hi", "mock", ts=1_002)
                for i in range(7):
                    w.append(sid, Run(event=StepStarted(step=f"s{i}", op="read", input_hash="x")), ts=1_003 + i)
                w.append(sid, Compacted(messages=[Message.text("user", "sum").to_body()]), ts=1_020)
                w.append(sid, Message.text("assistant", "done"), ts=1_021)
                w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid, ts=1_022)
        con = sqlite3.connect(d / "events.db")
        rows = con.execute("SELECT global_seq, stream, stream_seq, kind, ts, turn_id, payload FROM events ORDER BY global_seq").fetchall()
        reg = con.execute("SELECT model, created_at, updated_at, last_seq, msg_count FROM streams").fetchall()
        con.close()
        return rows, reg

    assert write(tmp_path / "grouped", True) == write(tmp_path / "single", False)


@pytest.mark.parametrize("guarded", [True, False])
def test_grouped_flushes_follow_another_writer_of_the_same_stream(tmp_path, guarded):
    """A grouped writer keeps each stream's next stream_seq in memory. Another connection appending
    to the same stream between two of its flushes makes that counter stale: with flux's
    UNIQUE(stream, stream_seq) the flush's INSERT fails, is rolled back and written again from the
    table (no data_version read); without the index (``guarded`` False) data_version says so first.
    Either way the stream stays contiguous and the registry follows the last row."""
    d = tmp_path / "s"
    a = StoreWriter(d, clock=lambda: 1_000)
    assert a._seq_guarded  # the writer's own schema has the index
    a._seq_guarded = guarded
    sid = a.create_session("mock")
    with a.grouped():
        for round_ in range(3):
            a.append_text(sid, "run", '{"kind":"run","data":{"event":"step_started","step":"a","op":"x","input_hash":"h"}}')
            a.append_text(sid, "run", '{"kind":"run","data":{"event":"step_started","step":"b","op":"x","input_hash":"h"}}')
            a.flush()
            with StoreWriter(d, clock=lambda: 2_000) as b:  # another connection: one by one
                b.append(sid, Message.text("user", f"other {round_}"))
                b.append(sid, Message.text("user", "and again"))
    a.close()
    con = sqlite3.connect(d / "events.db")
    seqs = [r[0] for r in con.execute("SELECT stream_seq FROM events WHERE stream = ? ORDER BY global_seq", (sid,))]
    last_seq, msg_count = con.execute("SELECT last_seq, msg_count FROM streams").fetchone()
    con.close()
    assert seqs == list(range(1 + 3 * 4))
    assert (last_seq, msg_count) == (12, 6)


def test_the_seq_guard_is_flux_unique_index(tmp_path, fixture_store):
    import shutil

    shutil.copytree(fixture_store, tmp_path / "flux")  # a store flux itself created has it
    with StoreWriter(tmp_path / "flux") as w:
        assert w._seq_guarded
    d = tmp_path / "bare"
    d.mkdir()
    con = sqlite3.connect(d / "events.db")  # an events table without UNIQUE(stream, stream_seq)
    ddl = schema_ddl_without_unique()
    con.executescript(ddl)
    con.close()
    with StoreWriter(d) as w:
        assert not w._seq_guarded


def schema_ddl_without_unique() -> str:
    from flux.store import schema

    ddl = schema.EVENTS_DDL.replace(",\n                 UNIQUE(stream, stream_seq)", "")
    assert "UNIQUE(stream, stream_seq)" not in ddl
    return ddl


def test_ulid_digits_equal_base32_of_the_value():
    import base64

    from flux.store import ulid

    crockford = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", ulid._ALPHABET.encode())

    def reference(value: int) -> str:  # RFC 4648 base32 of the value left-aligned in 17 bytes, Crockford digits
        return base64.b32encode((value << 6).to_bytes(17, "big"))[:26].translate(crockford).decode()

    for value in (0, 1, (1 << 128) - 1, 0x0123456789ABCDEF0123456789ABCDEF, 1_700_000_000_000 << 80,
                  (7 << 80) | ((1 << 40) - 1), (7 << 80) | (1 << 40)):
        assert ulid._encode(value) == reference(value)


def test_append_many_writes_the_rows_and_registry_append_writes_one_by_one(tmp_path):
    bodies = [Message.text("user", "hi")] + [Run(event=StepStarted(step=f"s{i}", op="read", input_hash="x"))
                                            for i in range(5)]
    bodies += [Compacted(messages=[Message.text("user", "sum").to_body()]), Message.text("assistant", "ok")]

    def write(d, bulk):
        with StoreWriter(d, clock=lambda: 1_000) as w:
            sid = w.create_session("mock")
            w.append(sid, Message.text("user", "before"), ts=1_000)
            if bulk:
                assert w.append_many(sid, bodies, ts=1_001) == len(bodies)
                assert w.append_many(sid, [], ts=1_001) == 0
            else:
                for b in bodies:
                    w.append(sid, b, ts=1_001)
            w.append(sid, Message.text("user", "after"), ts=1_002)
        con = sqlite3.connect(d / "events.db")
        rows = con.execute("SELECT global_seq, stream, stream_seq, kind, ts, turn_id, payload FROM events ORDER BY global_seq").fetchall()
        reg = con.execute("SELECT model, created_at, updated_at, last_seq, msg_count FROM streams").fetchall()
        con.close()
        return rows, reg

    assert write(tmp_path / "bulk", True) == write(tmp_path / "single", False)
    with StoreWriter(tmp_path / "bulk") as w, pytest.raises(ValueError):
        w.append_many("s_1", [Message.text("user", "x")], turn_id=3)  # messages never carry a turn_id


def _run_body_strategy():
    from dataclasses import fields as dc_fields

    from hypothesis import strategies as st

    from flux.store.events import RUN_VARIANTS

    values = st.one_of(st.text(max_size=8), st.integers(-3, 3), st.booleans(), st.none(), st.floats(allow_nan=False, allow_infinity=False),
                       st.lists(st.integers(), max_size=2))

    @st.composite
    def body(draw):
        tag = draw(st.sampled_from(sorted(RUN_VARIANTS) + ["no_such_event"]))
        keys = [f.name.rstrip("_") for f in dc_fields(RUN_VARIANTS[tag])] if tag in RUN_VARIANTS else ["x"]
        d = {"event": tag}
        for k in keys + ["extra"]:
            if draw(st.booleans()):
                d[k] = draw(values)
        return d
    return body()


def test_encode_run_body_is_the_decode_then_encode_path():
    from hypothesis import given, settings

    from flux.store.events import decode_run
    from flux.store.payload_encode import encode_payload, encode_run_body

    @settings(max_examples=300, deadline=None)
    @given(_run_body_strategy())
    def check(d):
        assert encode_run_body(d) == encode_payload(Run(event=decode_run(d)))
    check()
    cell = {"event": "op_recorded", "seq": 3, "step": "step_read_ab", "op": "read", "input_hash": "ab",
            "content": "x", "is_error": False}
    assert encode_run_body(cell) == encode_payload(Run(event=decode_run(cell)))


def test_append_runs_writes_what_append_of_each_decoded_body_writes(tmp_path):
    from flux.store.events import decode_run

    bodies = [{"event": "step_started", "step": "s", "op": "read", "input_hash": "h"},
              {"event": "op_recorded", "seq": 0, "step": "s", "op": "read", "input_hash": "h", "content": "c\ud800"},
              {"event": "statement_completed", "plan": "p", "node": 0, "stmt": "x", "value": None},
              {"event": "thing_resolved", "thing": {"a": 1}, "resolved": [1]}]

    def write(d, bulk):
        with StoreWriter(d, clock=lambda: 1_000) as w:
            sid = w.create_session("mock")
            if bulk:
                w.append_runs(sid, bodies, ts=1_001)
            else:
                for b in bodies:
                    w.append(sid, Run(event=decode_run(b)), ts=1_001)
        con = sqlite3.connect(d / "events.db")
        rows = con.execute("SELECT global_seq, stream, stream_seq, kind, ts, turn_id, payload FROM events ORDER BY global_seq").fetchall()
        reg = con.execute("SELECT model, created_at, updated_at, last_seq, msg_count FROM streams").fetchall()
        con.close()
        return rows, reg

    assert write(tmp_path / "bulk", True) == write(tmp_path / "single", False)


@settings(max_examples=60, deadline=None)
@given(start=st.integers(0, (1 << 80) - 1), steps=st.lists(st.integers(0, 3), min_size=1, max_size=40),
       ms0=st.integers(0, (1 << 48) - 5))
def test_new_ulid_text_is_encode_of_its_value(start, steps, ms0):
    """new_ulid keeps the runs of digits it can from the previous id: its text must still be
    ``_encode`` of exactly the value the reference rule gives (same ms → the random part plus one,
    wrapping at 80 bits; a new ms → fresh random bits)."""
    from flux.store import ulid

    rand = start
    with ulid._lock:
        ulid._last_ms, ulid._last_rand = ms0, start
    near_wrap = (1 << 80) - 3  # exercise the 80-bit wrap and the 10-bit carries too
    for k, step in enumerate(steps):
        ms = ms0 + (step == 3)  # mostly the same millisecond; sometimes the next one
        if ms == ms0 and k == len(steps) // 2:
            with ulid._lock:
                ulid._last_rand = rand = near_wrap
        text = ulid.new_ulid(ms)
        if ms == ms0:
            rand = (rand + 1) & ((1 << 80) - 1)
        else:
            rand = ulid._last_rand  # fresh random bits: read back what was drawn
            ms0 = ms
        assert text == ulid._encode((ms << 80) | rand)


@settings(max_examples=60, deadline=None)
@given(start=st.integers(0, (1 << 80) - 1),
       calls=st.lists(st.tuples(st.booleans(), st.integers(0, 1500), st.integers(0, 3)), min_size=1, max_size=12))
def test_new_ulids_text_is_encode_of_each_value_interleaved_with_new_ulid(start, calls):
    """new_ulids and new_ulid share the cached runs of digits (the millisecond's, the random part's
    top): however the two interleave — across ms changes, 10-bit carries and the 80-bit wrap —
    every id is ``_encode`` of the value the reference rule gives."""
    from flux.store import ulid

    ms0 = 1_700_000_000_000
    with ulid._lock:
        ulid._last_ms, ulid._last_rand = ms0, start
    rand = start
    for k, (bulk, n, step) in enumerate(calls):
        ms = ms0 + (step == 3)
        if k == len(calls) // 2 and ms == ms0:
            with ulid._lock:
                ulid._last_rand = rand = (1 << 80) - 5  # near the wrap
        fresh = ms != ms0
        ids = ulid.new_ulids(ms, n) if bulk else [ulid.new_ulid(ms)]
        count = n if bulk else 1
        if count == 0:
            continue
        if fresh:
            rand = (ulid._last_rand - (count - 1)) & ((1 << 80) - 1)  # the draw, read back
            ms0 = ms
        else:
            rand = (rand + 1) & ((1 << 80) - 1)
        want = [ulid._encode((ms << 80) | ((rand + i) & ((1 << 80) - 1))) for i in range(count)]
        assert ids == want
        rand = (rand + count - 1) & ((1 << 80) - 1)


@settings(max_examples=30, deadline=None)
@given(max_rows=st.integers(1, 4), before=st.integers(0, 4), kinds=st.sampled_from([("plan_attempted", "run"), ("run", "run")]))
def test_append_text_pair_is_two_append_texts(tmp_path_factory, max_rows, before, kinds):
    """The same rows, stamps and COMMIT boundaries, whatever the buffer holds and wherever the
    group's row limit falls (the recorder's plan and step_started of each tool call)."""
    import itertools

    def write(d, pair):
        tick = itertools.count(1_000).__next__
        w = StoreWriter(d, clock=tick)
        sid = w.create_session("mock")
        commits = []
        w.conn.set_trace_callback(lambda sql: commits.append(w.conn.total_changes) if sql == "COMMIT" else None)
        tid = w.begin_turn(sid, "go", "mock")
        with w.grouped(max_rows=max_rows):
            for i in range(before):
                w.append_text(sid, "run", f'{{"kind":"run","data":{{"event":"step_started","step":"b{i}","op":"x","input_hash":"h"}}}}')
            a = ('{"kind":"plan_attempted","data":{"step":1,"outcome":"accepted"}}' if kinds[0] == "plan_attempted" else
                 '{"kind":"run","data":{"event":"step_started","step":"a","op":"x","input_hash":"h"}}')
            b = '{"kind":"run","data":{"event":"step_started","step":"z","op":"x","input_hash":"h"}}'
            t1 = tid if kinds[0] == "plan_attempted" else None
            if pair:
                w.append_text_pair(sid, kinds[0], a, t1, kinds[1], b, None)
            else:
                w.append_text(sid, kinds[0], a, turn_id=t1)
                w.append_text(sid, kinds[1], b)
            w.append_text(sid, "run", '{"kind":"run","data":{"event":"step_started","step":"after","op":"x","input_hash":"h"}}')
        w.close()
        con = sqlite3.connect(d / "events.db")
        rows = con.execute("SELECT stream, stream_seq, kind, ts, turn_id, payload FROM events ORDER BY global_seq").fetchall()
        reg = con.execute("SELECT updated_at, last_seq, msg_count FROM streams").fetchall()
        con.close()
        return rows, reg, commits

    tmp = tmp_path_factory.mktemp("pair")
    assert write(tmp / "pair", True) == write(tmp / "seq", False)
    with StoreWriter(tmp / "bad") as w:
        with pytest.raises(ValueError):
            w.append_text_pair(w.create_session("m"), "run", "{}", 3, "run", "{}", None)  # a run row never has a turn id


# A flush of text rows of one stream (every flush of the recorder) is written by C loops over the
# transposed rows (StoreWriter._write_pending's first branch); anything else by the per-row loop.
_TEXT_OPS = st.lists(st.tuples(
    st.sampled_from(["run", "plan", "msg", "body", "obs", "flush", "other"]),  # what to append
    st.sampled_from(["ok", "é ✓", "\ud83d", "x\udc00y"]),  # payload text flavour (lone surrogates scrubbed)
    st.integers(0, 2)), min_size=1, max_size=14)  # clock step before the append (0: same ms)


@settings(max_examples=60, deadline=None)
@given(ops=_TEXT_OPS, max_rows=st.integers(1, 6))
def test_text_flushes_write_what_the_per_row_loop_writes(tmp_path_factory, ops, max_rows):
    """Same rows (ids included: the random draw is fixed), registry, next stream_seq and COMMIT
    boundaries with the C-loop branch as with every flush taken by the per-row loop: one or two
    streams, runs of the same or different milliseconds, messages (msg_count), bodies, a turn id,
    lone surrogates."""
    import itertools

    from flux.store import writer as store_mod
    from flux.store import ulid

    def write(d, fast):
        draws = itertools.count(12345, 7919)
        with pytest.MonkeyPatch.context() as monkeypatch:
            monkeypatch.setattr(ulid, "_draw", lambda: next(draws) << 20)
            monkeypatch.setattr(ulid, "_last_ms", -1)
            monkeypatch.setattr(store_mod, "_ONE_PASS_TEXT_FLUSH", fast)
            return _write_texts(d, ops, max_rows)

    tmp = tmp_path_factory.mktemp("texts")
    fast, slow = write(tmp / "fast", True), write(tmp / "slow", False)
    assert fast == slow
    assert all("\ud83d" not in str(r) for r in fast[0])  # (scrubbed either way)


def _write_texts(d, ops, max_rows):
    if True:
        now = [1_000]
        w = StoreWriter(d, clock=lambda: now[0])
        a = w.create_session("mock")
        b = w.create_session("mock")
        tid = w.begin_turn(a, "go", "mock")
        commits = []
        w.conn.set_trace_callback(lambda sql: commits.append(w.conn.total_changes) if sql == "COMMIT" else None)
        with w.grouped(max_rows=max_rows):
            for i, (what, text, step) in enumerate(ops):
                now[0] += step
                payload = json.dumps({"kind": "run", "data": {"event": "step_started", "step": f"s{i}{text}",
                                                              "op": "x", "input_hash": "h"}}, ensure_ascii=False)
                if what == "run":
                    w.append_text(a, "run", payload)
                elif what == "plan":
                    w.append_text_pair(a, "plan_attempted", '{"kind":"plan_attempted","data":{"step":%d,"outcome":'
                                       '"accepted","plan_source":"%s"}}' % (i, text), tid, "run", payload, None)
                elif what == "msg":
                    w.append_message_text(a, json.dumps(encode_payload_obj(Message.text("user", text)),
                                                        ensure_ascii=False, separators=(",", ":")))
                elif what == "body":
                    w.append(a, Message.text("assistant", text))
                elif what == "obs":
                    w.append_texts(a, "observation", ['{"kind":"observation","data":{"kind":"k","phase":"turn",'
                                                      '"data":{"t":"%s"}}}' % text] * 3, turn_id=tid)
                elif what == "flush":
                    w.flush()
                else:
                    w.append_text(b, "run", payload)
        seqs = dict(w._next_seq)
        w.close()
        con = sqlite3.connect(d / "events.db")
        rows = con.execute("SELECT * FROM events ORDER BY global_seq").fetchall()
        reg = con.execute("SELECT * FROM streams ORDER BY n").fetchall()
        con.close()
        return rows, reg, seqs, commits


def encode_payload_obj(body):
    return json.loads(encode_payload(body))


def test_a_forked_child_never_mints_the_parents_next_ids():
    """The random draws are read from os.urandom 640 bytes at a time: a child forked with bytes left
    in that pool starts a pool of its own (and a millisecond of its own), so its ids are not the ids
    the parent mints next in the same millisecond."""
    import os

    from flux.store import ulid

    ms = 1_700_000_000_123
    ulid.new_ulids(ms - 1, 1)  # a draw: the pool now holds 630 more bytes
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id in ms, to the parent
        try:
            os.write(w, ulid.new_ulids(ms, 1)[0].encode())
        finally:
            os._exit(0)
    os.close(w)
    child = os.read(r, 64).decode()
    os.close(r)
    os.waitpid(pid, 0)
    mine = ulid.new_ulids(ms, 1)[0]
    assert len(child) == 26 and child != mine and child[:10] == mine[:10]  # same ms, another random part
