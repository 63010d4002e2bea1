"""The bulk run-row writer behind fork, resurrect and what-if (``StoreWriter.append_run_texts``,
``ulid.new_ulids``) writes exactly the rows the one-statement-per-row path wrote: differential
tests against ``append_runs`` / ``new_ulid``, and a fork of the same source written both ways
compared row for row (ids and timestamps normalised)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from flux.agent.client import Client
from flux.store import Message, StoreReader, StoreWriter
from flux.store import ulid
from flux.model.session import TRACE_KINDS, load_session
from flux.store.payload_encode import encode_run_body
from flux.timemachine import engine, fork as fork_mod, fork_session
from flux.timemachine.replay_input import read_replay_input


def _fixed_random(monkeypatch, start: int) -> None:
    monkeypatch.setattr(ulid, "_draw", lambda: start)


@pytest.mark.parametrize("start,n", [(5, 1), (5, 600), ((1 << 20) - 3, 7), ((1 << 20) * 3 - 300, 1200),
                                     ((1 << 79) - 1, 3), (0, 0), ("wrap", 4)])
def test_new_ulids_are_the_ids_successive_new_ulid_calls_mint(monkeypatch, start: int, n: int) -> None:
    """Same ids (fresh millisecond: one draw, then +1; same millisecond: carry on from the last id),
    and the same state left behind, across a carry into the head digits and the 80-bit wrap."""
    for same_ms in (False, True):
        _fixed_random(monkeypatch, start if start != "wrap" else 0)
        ms = 1_700_000_000_000
        if start == "wrap":  # the last id of the millisecond was two below 2**80: the third wraps to 0
            ulid._last_ms, ulid._last_rand = ms, (1 << 80) - 3
        elif same_ms:
            ulid.new_ulid(ms)  # the next ids continue this one
        state = (ulid._last_ms, ulid._last_rand)
        one_by_one = [ulid.new_ulid(ms) for _ in range(n)]
        after = (ulid._last_ms, ulid._last_rand)
        ulid._last_ms, ulid._last_rand = state
        assert ulid.new_ulids(ms, n) == one_by_one
        assert (ulid._last_ms, ulid._last_rand) == after or n == 0


def test_encode_run_bodies_writes_what_encode_run_body_writes() -> None:
    """The generated per-variant writers against the reference, on bodies of every variant with
    fields missing, of wrong types, None, floats, lone surrogates, control characters, text that
    looks like an exponent, and unknown tags and keys."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from flux.store.events import RUN_VARIANTS
    from flux.store.payload_encode import encode_run_bodies
    from tests.core.test_store import _run_body_strategy

    texts = st.one_of(st.text(max_size=6), st.sampled_from(["1e+5", "a\u0000b", "\ud800", "é\n\t\"", "\x7f"]))
    values = st.one_of(texts, st.integers(-3, 3), st.booleans(), st.none(), st.floats(allow_nan=False),
                       st.lists(st.integers(), max_size=2), st.integers(2 ** 63, 2 ** 70))

    @st.composite
    def full(draw):  # every field of a variant present, mostly of its type: the writers' path
        from dataclasses import fields

        tag = draw(st.sampled_from(sorted(RUN_VARIANTS)))
        clean = draw(st.booleans())  # every field present and typed: the writer writes it
        d = {"event": tag}
        for f in fields(RUN_VARIANTS[tag]):
            if f.name.startswith("_"):
                continue
            t = f.type if isinstance(f.type, str) else ""
            typed = {"str": texts, "int": st.integers(-2, 2 ** 64), "bool": st.booleans(),
                     "str | None": st.one_of(st.none(), texts)}.get(t, values)
            if clean or draw(st.integers(0, 9)):
                d[f.name.rstrip("_")] = draw(typed if clean or draw(st.booleans()) else st.one_of(typed, values))
        return d

    @settings(max_examples=400, deadline=None)
    @given(st.lists(st.one_of(full(), _run_body_strategy()), max_size=6))
    def check(bodies):
        assert encode_run_bodies(bodies) == [encode_run_body(b) for b in bodies]
    check()
    # the interpreter's own bodies, every flag both ways
    for flag in (False, True):
        rows = [{"event": "statement_completed", "plan": "h:1", "node": 3, "stmt": "ab", "value": v, "skipped": flag}
                for v in (None, "v_1")]
        rows.append({"event": "op_recorded", "seq": 2, "step": "s", "op": "read", "input_hash": "h", "input_view": "{}",
                     "input_view_truncated": flag, "content": "c", "is_error": flag, "denied": not flag,
                     "redacted": flag, "truncated": flag})
        assert encode_run_bodies(rows) == [encode_run_body(b) for b in rows]


def _bodies(n: int, odd_every: int = 1) -> list[dict]:
    """``n`` statements' rows; every ``odd_every``-th cell holds a non-ASCII view with a lone surrogate
    (the others are ASCII: a 256-row batch of them is stored without a scrub)."""
    out: list[dict] = []
    for i in range(n):
        h = f"{i:064x}"
        view = '{"path":"é\ud800"}' if i % odd_every == 0 else '{"path":"plain"}'
        out.append({"event": "step_started", "step": f"step_read_{h[:16]}", "op": "read", "input_hash": h})
        out.append({"event": "op_recorded", "seq": i, "step": f"step_read_{h[:16]}", "op": "read", "input_hash": h,
                    "input_view": view, "content": f"line {i}\n", "is_error": False})
        out.append({"event": "step_succeeded", "step": f"step_read_{h[:16]}", "output": f"v_{i}"})
        out.append({"event": "statement_completed", "plan": "h:0", "node": i, "stmt": h[:16], "value": None})
    return out


def _dump(d: Path) -> tuple[list, list]:
    con = sqlite3.connect(d / "events.db")
    try:
        rows = con.execute("SELECT global_seq, stream, stream_seq, id, kind, schema_version, ts, turn_id, payload,"
                           " typeof(stream_seq) FROM events ORDER BY global_seq").fetchall()
        reg = con.execute("SELECT * FROM streams ORDER BY n").fetchall()
    finally:
        con.close()
    return rows, reg


@pytest.mark.parametrize("n,odd_every", [(1, 1), (64, 1), (150, 1), (150, 100), (150, 10 ** 6)])
def test_append_run_texts_writes_the_rows_append_runs_writes(monkeypatch, tmp_path: Path, n: int, odd_every: int) -> None:
    """4 rows a statement: 4, 256 (one full insert), 600 rows; every batch, one or none holding a
    lone surrogate."""
    bodies = _bodies(n, odd_every)

    def write(d: Path, bulk: bool) -> tuple[list, list]:
        _fixed_random(monkeypatch, 12345)
        ulid._last_ms = -1
        with StoreWriter(d, clock=lambda: 1_000) as w:
            sid = w.create_session("mock")
            with w.grouped():
                w.append(sid, Message.text("user", "buffered"), ts=999)
                if bulk:  # the buffered row lands first, in the same transaction
                    assert w.append_run_texts(sid, [encode_run_body(b) for b in bodies], ts=1_001) == len(bodies)
                    assert w.append_run_texts(sid, [], ts=1_001) == 0
                else:
                    w.append_runs(sid, bodies, ts=1_001)
            w.append(sid, Message.text("user", "after"), ts=1_002)
        return _dump(d)

    assert write(tmp_path / "bulk", True) == write(tmp_path / "rows", False)


def test_append_run_texts_rolls_back_with_its_transaction(tmp_path: Path) -> None:
    with StoreWriter(tmp_path / "s", clock=lambda: 1_000) as w:
        sid = w.create_session("mock")
        with pytest.raises(RuntimeError):
            with w.transaction():
                w.append_run_texts(sid, [encode_run_body(b) for b in _bodies(100)])
                raise RuntimeError("boom")
        w.append_run_texts(sid, [encode_run_body(b) for b in _bodies(1)])
    rows, reg = _dump(tmp_path / "s")
    assert [r[2] for r in rows] == [0, 1, 2, 3, 4] and reg[0][4] == 4  # stream_seq contiguous, last_seq


# ---- a fork's child, written by the legacy row-by-row path and by the bulk path -----------------------


def _legacy_flush(writer, sid, bodies, redactor=None, cap=None) -> None:
    writer.append_runs(sid, [engine.run_row(ev, redactor, cap) for ev in bodies])


def _child(store: Path, sid: str) -> tuple[list, tuple]:
    """The child's rows with ids, timestamps and global positions normalised: (stream_seq, kind,
    schema_version, turn row's stream_seq, payload) per row, and its registry row minus times."""
    con = sqlite3.connect(store / "events.db")
    try:
        rows = con.execute("SELECT global_seq, stream_seq, id, kind, schema_version, ts, turn_id, payload FROM events"
                           " WHERE stream = ? ORDER BY stream_seq", (sid,)).fetchall()
        reg = con.execute("SELECT model, last_seq, msg_count, account, agent_id, agent_version, correlation_id"
                          " FROM streams WHERE n = ?", (int(sid[2:]),)).fetchone()
    finally:
        con.close()
    by_gs = {r[0]: r[1] for r in rows}
    ids = [r[2] for r in rows]
    assert len(set(ids)) == len(ids) and all(len(i) == 26 for i in ids)
    assert [r[1] for r in rows] == list(range(len(rows)))
    return [(r[1], r[3], r[4], by_gs.get(r[6]) if r[6] is not None else None, r[7]) for r in rows], reg


def _legacy_read(reader, ref, *, full_cells=False):
    """The read as fork did it before: each cell fully decoded (``OpRecorded``, re-recorded through
    ``to_body()``), no recorded bodies."""
    inp = read_replay_input(reader, ref, full_cells=full_cells)
    inp.cells = [c.rec for c in load_session(reader, inp.id, kinds=TRACE_KINDS).cells]
    inp.cell_bodies = None
    return inp


def _legacy_call_of(draft):
    """call_of as it was: every call of the plan collected, the first one taken."""
    from flux.lang import ast as A

    body = draft.body
    if len(body) == 1 and isinstance(body[0], A.Bind) and isinstance(body[0].value, A.Call):
        call = body[0].value
        if len(call.args) == 1 and isinstance(call.args[0], A.Lit):
            return call.op, call.args[0].value
    calls = engine.calls_in(body)
    return (calls[0].op, None) if calls else (None, None)


_EVENTS = StoreReader.events


def _stream_order_events(self, stream, **kw):
    """The conversation read as it was: along the stream in order, not through the kind index."""
    kw.pop("sparse", None)
    return _EVENTS(self, stream, **kw)


def _fork_both_ways(monkeypatch, store: Path, tmp_path: Path, source: str, at: int, **kw) -> None:
    """The child written by this code and by the previous paths: the row-by-row writer, the full
    cell decode, the formatter's general arms (no `name = op(<literal>)` arm), call_of collecting
    every call, the conversation read along the stream."""
    from flux.lang import formatter

    children = []
    for legacy in (True, False):
        with monkeypatch.context() as m:
            if legacy:
                m.setattr(fork_mod, "flush_events", _legacy_flush)
                m.setattr(fork_mod, "read_replay_input", _legacy_read)
                m.setattr(formatter, "_bind_call_line", lambda *a: None)
                m.setattr(fork_mod, "call_of", _legacy_call_of)
                m.setattr(StoreReader, "events", _stream_order_events)
            ws = tmp_path / f"ws-{legacy}"
            ws.mkdir()
            c = Client("mock", store=store, workspace=ws, env_secrets=False)
            try:
                res = fork_session(c, source, at, **kw)
            finally:
                c.close()
            children.append(_child(store, res.session))
    (old_rows, old_reg), (new_rows, new_reg) = children
    assert new_rows == old_rows and new_reg == old_reg
    assert len(new_rows) > 3


def test_fork_child_rows_equal_the_legacy_writer_on_the_fixture(monkeypatch, fixture_store: Path,
                                                                 tmp_path: Path) -> None:
    """The fixture's one adaptive position: the child is the fork turn and its tail."""
    _fork_both_ways(monkeypatch, fixture_store, tmp_path, "s_1", 0, inject="injected")


def test_fork_child_rows_equal_the_legacy_writer_on_the_demo(monkeypatch, demo: Path, tmp_path: Path) -> None:
    _fork_both_ways(monkeypatch, demo, tmp_path, "s_1", 2, inject="F. injected failure")


def _bench():
    import sys

    bench = str(Path(__file__).resolve().parents[2] / "benchmarks")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    import bench_timemachine

    return bench_timemachine


def test_fork_child_rows_equal_the_legacy_writer_on_a_long_ledgered_session(monkeypatch, tmp_path: Path) -> None:
    """300 statements: 1,200 prefix rows, several full 256-row inserts and a partial one."""
    store = tmp_path / "store"
    with StoreWriter(store) as w:
        sid = _bench().write_ledgered(w, 1, 300)
    _fork_both_ways(monkeypatch, store, tmp_path, sid, 299, inject="injected")


def test_fork_child_rows_equal_the_legacy_writer_on_an_adaptive_session(monkeypatch, tmp_path: Path) -> None:
    """80 one-statement host plans without a ledger: the prefix is 79 executions of cell rows."""
    store = tmp_path / "store"
    with StoreWriter(store) as w:
        sid = _bench().write_adaptive(w, 80)
    _fork_both_ways(monkeypatch, store, tmp_path, sid, 79, inject="injected")


@pytest.mark.parametrize("n,at", [(300, 299), (300, 150), (7, 1)])
def test_fork_child_prefix_rows_are_the_sources_rows_rewritten_where_a_fork_must(tmp_path: Path, n: int,
                                                                                  at: int) -> None:
    """A fixed expectation, independent of every encoder and formatter on the write path: the child of a
    fork at ``at`` of an ``n``-statement ledgered session holds, after its turn header, the prefix plan
    (S's plan text cut after statement ``at - 1``, exactly), then S's first ``4 * at`` run rows byte for
    byte except the two fields a fork rewrites — ``statement_completed.plan`` (the truncated plan's flow
    key) and each cell's ``seq`` (F's own count) — then the injected tail's plan."""
    import json
    import re

    from flux.lang.hashes import fingerprint, flow_key
    from flux.lang.parser import parse

    store = tmp_path / "store"
    with StoreWriter(store) as w:
        sid = _bench().write_ledgered(w, 1, n)
    ws = tmp_path / "ws"
    ws.mkdir()
    c = Client("mock", store=store, workspace=ws, env_secrets=False)
    try:
        fid = fork_session(c, sid, at, inject="injected").session
    finally:
        c.close()
    con = sqlite3.connect(store / "events.db")
    try:
        def rows(stream):
            return con.execute("SELECT kind, payload FROM events WHERE stream = ? ORDER BY stream_seq",
                               (stream,)).fetchall()
        src, child = rows(sid), rows(fid)
    finally:
        con.close()
    source_text = json.loads(next(p for k, p in src if k == "plan_attempted"))["data"]["plan_source"]
    lines = source_text.splitlines(keepends=True)
    assert lines[0] == "flow\n" and len(lines) == n + 1
    prefix_text = "".join(lines[:at + 1])
    draft = parse(source_text)
    old_key, new_key = flow_key(draft.name, draft.body), flow_key(None, draft.body[:at])
    assert [k for k, _ in child[:4]] == ["session_started", "compacted", "turn_started", "plan_attempted"]
    attempt = json.loads(child[3][1])["data"]
    assert attempt == {"step": 1, "outcome": "accepted", "fingerprint": fingerprint(parse(prefix_text)),
                       "plan_source": prefix_text}
    src_runs = [p for k, p in src if k == "run"][:4 * at]
    expected = []
    for i, p in enumerate(src_runs):
        p = p.replace(f'"plan":"{old_key}"', f'"plan":"{new_key}"')
        if '"event":"op_recorded"' in p:
            p, k = re.subn(r'"seq":\d+,', f'"seq":{i // 4},', p, count=1)
            assert k == 1
        expected.append(("run", p))
    assert child[4:4 + 4 * at] == expected
    tail = json.loads(child[4 + 4 * at][1])["data"]
    assert tail["plan_source"] == f'flow\n  s0_{at} = "injected"\n' + "".join(lines[at + 2:])


# ---- the recorded cell bodies fork re-records, on corrupted stores -----------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.core.test_replay_fastpath import _mutate, replay_base  # noqa: E402,F401  (a fixture)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_recorded_cell_bodies_encode_as_the_decoded_cells_on_corrupted_rows(replay_base, tmp_path_factory, data):
    """``read_replay_input(full_cells=True).cell_bodies[i]`` with F's ``seq`` encodes to the text the
    fully decoded cell's ``to_body()`` did — the row fork writes — and the tape is the full decode's."""
    import shutil

    from flux.cassette.replay import TapeCell

    store = tmp_path_factory.mktemp("v") / "store"
    shutil.copytree(replay_base, store)
    _mutate(store, data)
    with StoreReader(store) as fast, StoreReader(store) as full:
        inp = read_replay_input(fast, "s_1", full_cells=True)
        decoded = [c.rec for c in load_session(full, "s_1", kinds=TRACE_KINDS).cells]
        assert fast.skipped_rows == full.skipped_rows
    assert inp.cell_bodies is not None and len(inp.cell_bodies) == len(inp.cells) == len(decoded)
    assert inp.cells == [TapeCell.of(c) for c in decoded]
    seq = data.draw(st.integers(0, 2 ** 40), label="seq")
    for body, cell in zip(inp.cell_bodies, decoded):
        old = cell.to_body()
        old["seq"] = seq
        new = dict(body)
        new["seq"] = seq
        assert encode_run_body(new) == encode_run_body(old)


@pytest.mark.parametrize("extra", [None, {"event": "step_failed", "step": "s", "error": "token sk-test-0123456789abcdefghij\ud800 é" * 40},
                                   {"event": "plan_halted", "plan": "h:1", "node": 0, "error": "x" * 5000},
                                   {"event": ["unhashable"]}, {"event": "step_failed", "error": 3}])
def test_stored_rows_are_run_row_of_every_body(extra) -> None:
    """flush_events' rows: run_row of every body (errors scrubbed, redacted, capped), whether or not
    any body is one it rewrites — the bodies themselves when none is."""
    from flux.cassette.redactor import Redactor

    red = Redactor()
    bodies = [{"event": "step_started", "step": f"s{i}", "op": "read", "input_hash": "h"} for i in range(5)]
    if extra is not None:
        bodies.insert(3, extra)
    got = engine._stored_rows(bodies, red, 1000)
    assert list(got) == [engine.run_row(ev, red, 1000) for ev in bodies]
    if extra is None or extra.get("error") == 3 or isinstance(extra["event"], list):
        assert all(a is b for a, b in zip(got, bodies))
    else:
        assert got[3] != extra and len(got[3]["error"].encode()) <= 1000
