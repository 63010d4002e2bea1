"""Copying a store's sessions into another store — a directory into a shared Postgres store, or
back — with every payload byte for byte and every event id kept.

A session lands in the destination under the next free session number there (a shared store has
sessions of its own); its stream name follows (``s_<n>``), and so do the columns that name a
session or a turn by number: a ``correlation_id`` naming a copied session, and each row's
``turn_id`` (its turn's ``turn_started`` ``global_seq`` in the destination). Payloads, ids, kinds,
timestamps and the registry's facts are the source's. A copy is resumable: a session is known in
the destination by the id of its ``session_started`` row, so copying again (after an interrupted
copy, or after the source recorded more) adds only the rows the destination lacks — each batch of
rows is one transaction with its registry update, so a killed copy leaves whole rows behind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..errors import StoreError
from .reader import StoreReader
from .rows import SessionRow
from .writer import StoreWriter

__all__ = ["CopyReport", "copy_store"]

_BATCH = 500
_ROWS = "SELECT global_seq, stream_seq, id, kind, ts, payload, turn_id FROM events WHERE stream = ? AND stream_seq >= ? ORDER BY stream_seq"


@dataclass
class CopyReport:
    """What a copy did: per source session, its number in the destination and the rows added."""

    sessions: dict[str, str] = field(default_factory=dict)  # source id -> destination id
    rows_added: dict[str, int] = field(default_factory=dict)  # source id -> rows written this time
    skipped_rows: int = 0  # source rows that were not whole (a hostile store's), left behind

    @property
    def total_rows(self) -> int:
        return sum(self.rows_added.values())

    def to_json(self) -> dict:
        return {"sessions": [{"source": s, "destination": d, "rows_added": self.rows_added.get(s, 0)}
                             for s, d in self.sessions.items()],
                "rows_added": self.total_rows, "skipped_rows": self.skipped_rows}


def _destination_of(writer: StoreWriter, first_id: str) -> str | None:
    """The destination stream whose ``session_started`` row has this id (a session copied before)."""
    row = writer.conn.execute("SELECT stream FROM events WHERE id = ? AND stream_seq = 0", (first_id,)).fetchone()
    return row[0] if row is not None else None


def _turn_map(reader: StoreReader, writer: StoreWriter, src: str, dst: str) -> dict[int, int]:
    """Source turn id -> destination turn id, for the turns already copied (matched by event id)."""
    ids = {eid: gs for gs, eid in reader.query("SELECT global_seq, id FROM events WHERE stream = ? AND kind = 'turn_started'", (src,))}
    out = {}
    for gs, eid in writer.conn.execute("SELECT global_seq, id FROM events WHERE stream = ? AND kind = 'turn_started'", (dst,)).fetchall():
        if eid in ids:
            out[ids[eid]] = gs
    return out


def _whole(row: tuple) -> bool:
    gs, sseq, eid, kind, ts, payload, turn_id = row
    return (type(gs) is int and type(sseq) is int and isinstance(eid, str) and isinstance(kind, str)
            and type(ts) is int and isinstance(payload, str) and (turn_id is None or type(turn_id) is int))


def copy_store(reader: StoreReader, writer: StoreWriter, *, sessions: Iterable[str] | None = None,
               on_progress: Callable[[int, int], None] | None = None) -> CopyReport:
    """Copy ``sessions`` (default: all, oldest first) from ``reader``'s store into ``writer``'s.

    ``on_progress(rows_done, rows_total)`` after each batch. Raises :class:`StoreError` when the
    destination holds a session whose first row is the source's but whose rows differ (the two
    stores diverged: a copy would mix them)."""
    rows = sorted(reader.list_sessions(), key=lambda r: r.n)
    if sessions is not None:
        wanted = set(sessions)
        rows = [r for r in rows if r.id in wanted]
    report = CopyReport()
    total = sum(reader.count_events(r.id) for r in rows)
    done = 0
    for row in rows:
        done = _copy_session(reader, writer, row, report, done, total, on_progress)
    return report


def _copy_session(reader: StoreReader, writer: StoreWriter, row: SessionRow, report: CopyReport, done: int, total: int,
                  on_progress: Callable[[int, int], None] | None) -> int:
    """Copy one session's missing rows; the destination's registry row is made in the same
    transaction as its first rows, so a killed copy never leaves a session without them."""
    src = row.id
    count = reader.count_events(src)
    first = reader.query("SELECT id FROM events WHERE stream = ? AND stream_seq = 0", (src,))
    if not first or not isinstance(first[0][0], str):
        report.skipped_rows += count  # no session_started row: nothing to know the session by
        return done + count
    dst = _destination_of(writer, first[0][0])
    have = 0
    if dst is not None:
        have = writer.conn.execute("SELECT COALESCE(MAX(stream_seq), -1) + 1 FROM events WHERE stream = ?", (dst,)).fetchone()[0]
        theirs = writer.conn.execute("SELECT id FROM events WHERE stream = ? AND stream_seq = ?", (dst, have - 1)).fetchone()
        ours = reader.query("SELECT id FROM events WHERE stream = ? AND stream_seq = ?", (src, have - 1))
        if not ours or theirs is None or ours[0][0] != theirs[0]:
            raise StoreError(f"{src} was copied into the destination as {dst} before, but their rows differ at "
                             f"stream_seq {have - 1} — the stores diverged; copy into another schema or store")
    turns = _turn_map(reader, writer, src, dst) if dst is not None else {}
    corr = report.sessions.get(row.correlation_id, row.correlation_id) if row.correlation_id else None
    added = 0
    done += have
    batch: list[tuple] = []
    rows = iter(reader.scan(_ROWS, (src, have), tolerant=True))  # a cell that is not UTF-8: a row left behind
    while True:
        for r in rows:
            if _whole(r):
                batch.append(r)
            else:
                report.skipped_rows += 1
            if len(batch) >= _BATCH:
                break
        last = len(batch) < _BATCH
        with writer.transaction():
            if dst is None:
                dst = writer.insert_registry_row(row, correlation_id=corr)
            if batch:
                added += _write_batch(writer, dst, batch, turns)
            if last:  # the source's registry facts, once every row is in
                writer.set_registry_facts(dst, model=row.model, updated_at=row.updated_at, last_seq=row.last_seq,
                                          msg_count=row.msg_count)
        done += len(batch)
        batch = []
        if on_progress is not None:
            on_progress(done, total)
        if last:
            break
    report.sessions[src] = dst
    report.rows_added[src] = added
    return done


def _write_batch(writer: StoreWriter, dst: str, batch: list[tuple], turns: dict[int, int]) -> int:
    """One transaction (or the enclosing one): the rows, turn ids mapped as they go, and the
    registry row brought to where the rows end (its message count: the messages copied so far)."""
    with writer.transaction():
        pending: list[tuple] = []  # rows written together; a turn's first row alone (its global_seq is the turn id)
        for gs, sseq, eid, kind, ts, payload, turn_id in batch:
            row = (dst, sseq, eid, kind, ts, payload, None if turn_id is None else turns.get(turn_id, turn_id))
            if kind == "turn_started":
                writer.insert_event_rows(pending)
                pending = []
                turns[gs] = writer.insert_event_row(row)
            else:
                pending.append(row)
        writer.insert_event_rows(pending)
        messages = writer.conn.execute("SELECT COUNT(*) FROM events WHERE stream = ? AND kind = 'message'", (dst,)).fetchone()[0]
        last = batch[-1]
        writer.set_registry_facts(dst, model=None, updated_at=last[4], last_seq=last[1], msg_count=messages)
    return len(batch)
