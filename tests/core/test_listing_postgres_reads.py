"""``flux sessions`` on a Postgres store reads a page in a fixed number of round trips to the server
(the registry page, the fact queries sent together, the models of turns without calls, one for an
open newest turn, the lease check aside) however many
sessions the store holds, prints what the SQLite listing prints for the same sessions, and decodes
the ``jsonb`` cells it reads exactly as psycopg's own loader does (fuzzed against it)."""

from __future__ import annotations

import json
from contextlib import contextmanager

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.model.listing import list_sessions
from flux.store import CallUsage, Message, StoreReader, StoreWriter, TurnEnded, Usage
from flux.store.postgres import connect
from flux.store.store import store_location


class Clock:
    def __init__(self, start: int = 1_700_000_000_000):
        self.t = start

    def __call__(self) -> int:
        self.t += 7
        return self.t


def _record(location, sessions: int) -> None:
    """Sessions of two turns each (one call-less turn with its own usage), the newest one's last turn left open."""
    with StoreWriter(location, clock=Clock()) as w:
        for s in range(sessions):
            sid = w.create_session("anthropic:claude-sonnet-4-5")
            for t in range(2):
                w.append(sid, Message.text("user", f"q{s}.{t}"))
                tid = w.begin_turn(sid, f"q{s}.{t}", "anthropic:claude-sonnet-4-5")
                if s == sessions - 1 and t == 1:
                    break  # the newest session's last turn never ended
                if t == 0:
                    w.append(sid, CallUsage(model="anthropic:claude-sonnet-4-5",
                                            usage=Usage(input_tokens=100 + s, output_tokens=7)), turn_id=tid)
                w.append(sid, TurnEnded(outcome="ok", iterations=1, answer="a", usage=Usage(input_tokens=50, output_tokens=s)),
                         turn_id=tid)


@contextmanager
def _round_trips(monkeypatch):
    """Counts the round trips psycopg makes: a statement outside a pipeline, or a whole pipeline."""
    counts = {"trips": 0, "depth": 0}
    execute, pipeline = psycopg.Connection.execute, psycopg.Connection.pipeline

    def counted_execute(self, *a, **k):
        if counts["depth"] == 0:
            counts["trips"] += 1
        return execute(self, *a, **k)

    @contextmanager
    def counted_pipeline(self, *a, **k):
        counts["trips"] += 1
        counts["depth"] += 1
        try:
            with pipeline(self, *a, **k) as p:
                yield p
        finally:
            counts["depth"] -= 1

    monkeypatch.setattr(psycopg.Connection, "execute", counted_execute)
    monkeypatch.setattr(psycopg.Connection, "pipeline", counted_pipeline)
    try:
        yield counts
    finally:
        monkeypatch.setattr(psycopg.Connection, "execute", execute)
        monkeypatch.setattr(psycopg.Connection, "pipeline", pipeline)


@pytest.mark.parametrize("sessions", [40, 90])
def test_a_page_is_read_in_four_round_trips_whatever_the_store_holds(pg_url, tmp_path, monkeypatch, sessions):
    loc = store_location(pg_url)
    _record(loc, sessions)
    _record(tmp_path / "sqlite", sessions)
    from flux.model import listing

    monkeypatch.setattr(listing, "lease_holder", lambda *_: None)  # (the lease check's own reads are the lease's)
    with StoreReader(loc) as r:
        with _round_trips(monkeypatch) as counts:
            page = list_sessions(r, limit=30)
        # the registry page; turns, spend and outcomes together; the call-less turns' models; the open turn
        assert counts["trips"] == 4, counts
        with _round_trips(monkeypatch) as counts:
            older = list_sessions(r, limit=30, until_ms=page[1].row.created_at)  # no open turn among these
        assert counts["trips"] == 3, counts
        whole = list_sessions(r, limit=None)
    with StoreReader(tmp_path / "sqlite") as r:
        assert [s.to_json() for s in list_sessions(r, limit=30)] == [s.to_json() for s in page]
        assert [s.to_json() for s in list_sessions(r, limit=30, until_ms=page[1].row.created_at)] == \
            [s.to_json() for s in older]
        assert [s.to_json() for s in list_sessions(r, limit=None)] == [s.to_json() for s in whole]
    assert page[0].last_outcome == "pending" and page[0].interrupt.open_turn == 2  # (the open-turn check ran)
    assert page[1].usage.input_tokens == (100 + sessions - 2) + 50  # a called turn's calls + a call-less turn's own
    assert len(whole) == sessions


_text = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=8)  # (jsonb holds no \u0000)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(10 ** 30), 10 ** 30) | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_json)
def test_jsonb_cells_read_as_psycopgs_own_loader_reads_them(pg_url, value):
    text = json.dumps(value)
    loc = store_location(pg_url)
    with StoreWriter(loc) as w:  # (a store to open; the cell is a literal)
        w.create_session("m")
    plain = connect(pg_url, read_only=True)
    try:
        want = plain.execute("SELECT %s::jsonb, (%s::jsonb) -> 0", (text, text)).fetchone()
    finally:
        plain.close()
    with StoreReader(loc) as r:
        [got] = r.query("SELECT ?::jsonb, (?::jsonb) -> 0", (text, text))
    assert got == want and [type(v) for v in got] == [type(v) for v in want]
