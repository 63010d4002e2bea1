"""``load_session(turn=N, max_rows=K)``: what the app paints before the rest of a big turn is read —
the turn's first rows, with the turn list, usage and tape positions exactly those of a full read."""

from __future__ import annotations

from flux.model.session import load_session
from flux.store import CallUsage, StoreReader, StoreWriter, Usage
from tests.helpers import cell, write_turn


def _store(tmp_path):
    d = tmp_path / "s"
    with StoreWriter(d, clock=lambda: 1_700_000_000_000) as w:
        sid = w.create_session("mock", ts=1_700_000_000_000)
        write_turn(w, sid, "first", plan='flow\n  a = read({"path":"a"})\n', cells=[cell("read", {"path": "a"}, "x")] * 3,
                   usage=Usage(input_tokens=5))
        tid = write_turn(w, sid, "second", plan='flow\n  a = read({"path":"a"})\n',
                         cells=[cell("read", {"path": "a"}, f"row {i}") for i in range(60)], end=None, ts=1_700_000_001_000)
        w.append(sid, CallUsage(model="mock", usage=Usage(input_tokens=7)), turn_id=tid)
    return d, sid


def test_the_first_rows_of_a_turn_are_a_prefix_of_the_whole_turn(tmp_path):
    store, sid = _store(tmp_path)
    with StoreReader(store) as r:
        whole = load_session(r, sid, turn=2)
        first = load_session(r, sid, turn=2, max_rows=20)
        assert first.truncated and not whole.truncated
        assert first.window[0] == whole.window[0] and first.window[1] < (whole.window[1] or 10**9)
        # the turn list, usage and calls come from the headers: exact before the rest is read
        assert [(t.number, t.turn_id, t.ended, t.calls, t.call_usage) for t in first.turns] == \
               [(t.number, t.turn_id, t.ended, t.calls, t.call_usage) for t in whole.turns]
        got = [(c.index, c.global_seq, c.rec.content) for c in first.turn_cells(first.turns[1])]
        want = [(c.index, c.global_seq, c.rec.content) for c in whole.turn_cells(whole.turns[1])]
        assert 0 < len(got) < len(want) and got == want[:len(got)]
        assert got[0][0] == 3  # tape positions count the first turn's cells
        assert all(e.global_seq < first.window[1] for e in first.turn_events(first.turns[1]) if e.kind == "run")
        # a window larger than the turn reads all of it
        assert not load_session(r, sid, turn=2, max_rows=10_000).truncated
