"""Copying a store's sessions into another store — a directory into a shared Postgres store, or
back — payloads byte for byte, event ids kept, each session under the destination's next free
number. Bulk (``COPY`` into Postgres), a few thousand rows a transaction, resumable; the rules
are in docs/cli.md, "flux store copy".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from ..errors import StoreError
from .reader import StoreReader
from .rows import SessionRow
from .writer import StoreWriter

__all__ = ["CopyReport", "copy_store"]

_BATCH_ROWS = 5_000  # rows a transaction writes, at most …
_BATCH_BYTES = 8 << 20  # … and payload bytes (a batch of big payloads is fewer rows)
_CHUNK = 400  # streams or ids named in one IN (…) list
_COLUMNS = "global_seq, stream_seq, id, kind, ts, payload, turn_id"  # a source row, as _whole checks it
_ROWS = f"SELECT {_COLUMNS} FROM events WHERE stream = ? AND stream_seq >= ? ORDER BY stream_seq"


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


@dataclass(eq=False)
class _Session:
    """One source session on its way: where it goes and how far the destination has it."""

    row: SessionRow  # the source's registry row
    dst: str | None  # its stream in the destination; None until a batch numbers it
    have: int  # the destination's next stream_seq for it
    messages: int = 0  # message rows the destination holds for it
    turns: dict[int, int] = field(default_factory=dict)  # source turn id -> destination turn id
    staged_turns: set[int] = field(default_factory=set)  # source turn ids copied or on their way
    scanned: bool = False  # every source row has been read (the registry facts are the source's from then on)
    last: tuple[int, int] | None = None  # (ts, stream_seq) of the last row staged

    @property
    def src(self) -> str:
        return self.row.id


@dataclass
class _Batch:
    """The rows one transaction writes: ``(session, source global_seq, stream_seq, id, kind, ts, payload, turn_id)``."""

    rows: list[tuple] = field(default_factory=list)
    sessions: dict[_Session, int] = field(default_factory=dict)  # session -> where its stream goes on (its head)
    payload_bytes: int = 0

    def full(self) -> bool:
        return len(self.rows) >= _BATCH_ROWS or self.payload_bytes >= _BATCH_BYTES


def _whole(row: tuple) -> bool:
    """A row as flux writes it: every cell of its type, no NUL in its text (JSON text never holds a
    raw NUL, and Postgres text cannot)."""
    gs, sseq, eid, kind, ts, payload, turn_id = row
    return (type(gs) is int and type(sseq) is int and isinstance(eid, str) and isinstance(kind, str)
            and type(ts) is int and isinstance(payload, str) and (turn_id is None or type(turn_id) is int)
            and "\x00" not in payload and "\x00" not in eid and "\x00" not in kind)


def _chunks(seq: Sequence, n: int = _CHUNK) -> Iterable[Sequence]:
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


def _marks(n: int) -> str:
    return ",".join("?" * n)


def copy_store(reader: StoreReader, writer: StoreWriter, *, sessions: Iterable[str] | None = None,
               on_progress: Callable[[int, int], None] | None = None) -> CopyReport:
    """Copy ``sessions`` (default: all, oldest first) from ``reader``'s store into ``writer``'s.

    ``on_progress(rows_done, rows_total)`` after each transaction. Raises :class:`StoreError` when
    the destination holds a session whose first row is the source's but whose rows differ (the two
    stores diverged: a copy would mix them)."""
    rows = sorted(reader.list_sessions(), key=lambda r: r.n)
    if sessions is not None:
        wanted = set(sessions)
        rows = [r for r in rows if r.id in wanted]
    report = CopyReport()
    counts = _source_counts(reader, [r.id for r in rows])
    total = sum(counts.get(r.id, (0, None))[0] for r in rows)
    plans = _plan(reader, writer, rows, counts, report)
    done = total - sum(counts.get(p.src, (0, None))[0] for p in plans) + sum(p.have for p in plans)
    batch = _Batch()
    for plan in plans:
        for r in reader.scan(_ROWS, (plan.src, plan.have), tolerant=True):  # a cell that is not UTF-8: a row left behind
            whole = _whole(r)
            if whole and r[3] == "turn_started":
                plan.staged_turns.add(r[0])
            if not whole or (r[6] is not None and r[6] not in plan.staged_turns):  # (a turn id must be mapped)
                report.skipped_rows += 1
                done += 1
                continue
            batch.sessions.setdefault(plan, plan.have)
            batch.rows.append((plan, *r))
            batch.payload_bytes += len(r[5])
            plan.last = (r[4], r[1])
            if batch.full():
                done += _flush(writer, batch, report)
                batch = _Batch()
                if on_progress is not None:
                    on_progress(done, total)
        plan.scanned = True
        batch.sessions.setdefault(plan, plan.have)  # (its registry facts are written with the batch)
        if batch.full():
            done += _flush(writer, batch, report)
            batch = _Batch()
            if on_progress is not None:
                on_progress(done, total)
    if batch.sessions:
        done += _flush(writer, batch, report)
    if on_progress is not None:
        on_progress(done, total)
    return report


def _source_counts(reader: StoreReader, ids: list[str]) -> dict[str, tuple[int, object]]:
    """Each source session's row count and highest ``stream_seq``, a chunk of sessions a query."""
    out: dict[str, tuple[int, object]] = {}
    for chunk in _chunks(ids):
        for stream, count, top in reader.query(f"SELECT stream, COUNT(*), MAX(stream_seq) FROM events"
                                               f" WHERE stream IN ({_marks(len(chunk))}) GROUP BY stream", chunk):
            out[stream] = (count, top)
    return out


def _plan(reader: StoreReader, writer: StoreWriter, rows: list[SessionRow], counts: dict[str, tuple[int, object]],
          report: CopyReport) -> list[_Session]:
    """The sessions with rows to copy, in source order, each with what the destination already
    holds of it (sessions copied whole before are reported and dropped here)."""
    first: dict[str, str] = {}  # source session -> the id of its session_started row (when that row is whole)
    for chunk in _chunks([r.id for r in rows]):
        for stream, *row in reader.query(f"SELECT stream, {_COLUMNS} FROM events"
                                         f" WHERE stream IN ({_marks(len(chunk))}) AND stream_seq = 0", chunk):
            if _whole(tuple(row)):
                first[stream] = row[2]
    known: dict[str, str] = {}  # session_started id -> its stream in the destination
    ids = list(first.values())
    for chunk in _chunks(ids):
        for eid, stream in writer.conn.execute(f"SELECT id, stream FROM events WHERE id IN ({_marks(len(chunk))})"
                                               " AND stream_seq = 0", chunk).fetchall():
            known[eid] = stream
    dst_of = {r.id: known[first[r.id]] for r in rows if first.get(r.id) in known}
    tails = _destination_tails(writer, list(dst_of.values()))
    _check_not_diverged(reader, dst_of, tails)
    plans: list[_Session] = []
    for r in rows:
        if r.id not in first:  # no whole session_started row: nothing to know the session by
            report.skipped_rows += counts.get(r.id, (0, None))[0]
            continue
        dst = dst_of.get(r.id)
        have = tails[dst][0] + 1 if dst is not None else 0
        report.sessions[r.id] = dst  # (a new session's number comes with its first batch)
        report.rows_added[r.id] = 0
        top = counts.get(r.id, (0, None))[1]
        if dst is not None and type(top) is int and top < have:
            continue  # copied whole before
        plans.append(_Session(row=r, dst=dst, have=have))
    resumed = [p for p in plans if p.dst is not None]
    for chunk in _chunks(resumed):
        messages = dict(writer.conn.execute(
            f"SELECT stream, COUNT(*) FROM events WHERE kind = 'message' AND stream IN ({_marks(len(chunk))})"
            " GROUP BY stream", [p.dst for p in chunk]).fetchall())
        for p in chunk:
            p.messages = messages.get(p.dst, 0)
            p.turns = _turn_map(reader, writer, p.src, p.dst)
            p.staged_turns = set(p.turns)
    return plans


def _destination_tails(writer: StoreWriter, streams: list[str]) -> dict[str, tuple[int, str]]:
    """Each destination stream's last row: ``(stream_seq, id)``."""
    out: dict[str, tuple[int, str]] = {}
    for chunk in _chunks(streams):
        for stream, seq, eid in writer.conn.execute(
                "SELECT e.stream, e.stream_seq, e.id FROM events e JOIN (SELECT stream, MAX(stream_seq) AS top"
                f" FROM events WHERE stream IN ({_marks(len(chunk))}) GROUP BY stream) t"
                " ON e.stream = t.stream AND e.stream_seq = t.top", chunk).fetchall():
            out[stream] = (seq, eid)
    return out


def _check_not_diverged(reader: StoreReader, dst_of: dict[str, str], tails: dict[str, tuple[int, str]]) -> None:
    """The destination's last row of each session copied before is the source's row at that place."""
    pairs = [(src, tails[dst][0]) for src, dst in dst_of.items()]
    ours: dict[tuple[str, int], object] = {}
    for chunk in _chunks(pairs, 200):
        where = " OR ".join(["(stream = ? AND stream_seq = ?)"] * len(chunk))
        for stream, seq, eid in reader.query(f"SELECT stream, stream_seq, id FROM events WHERE {where}",
                                             [v for pair in chunk for v in pair]):
            ours[(stream, seq)] = eid
    for src, seq in pairs:
        dst = dst_of[src]
        if ours.get((src, seq)) != tails[dst][1]:
            raise StoreError(f"{src} was copied into the destination as {dst} before, but their rows differ at "
                             f"stream_seq {seq} — the stores diverged; copy into another schema or store")


def _turn_map(reader: StoreReader, writer: StoreWriter, src: str, dst: str) -> dict[int, int]:
    """Source turn id -> destination turn id, for the turns already copied (matched by event id)."""
    ids = {eid: gs for gs, eid in reader.query("SELECT global_seq, id FROM events WHERE stream = ? AND kind = 'turn_started'", (src,))}
    out = {}
    for gs, eid in writer.conn.execute("SELECT global_seq, id FROM events WHERE stream = ? AND kind = 'turn_started'", (dst,)).fetchall():
        if eid in ids:
            out[ids[eid]] = gs
    return out


def _flush(writer: StoreWriter, batch: _Batch, report: CopyReport) -> int:
    """Write one batch in one transaction (see the module docstring); the rows it wrote."""
    with writer.transaction():
        fresh = {p: None for p in batch.sessions if p.dst is None}
        for p, n in zip(list(fresh), writer.reserve_keys("streams", len(fresh))):
            p.dst = report.sessions[p.src] = f"s_{n}"
        heads = writer.stream_heads([p.dst for p in batch.sessions])
        for p, head in batch.sessions.items():
            if heads.get(p.dst, 0) != head:
                raise StoreError(f"{p.dst} in {writer.label} goes on at stream_seq {heads.get(p.dst, 0)}, not {head} — "
                                 "another writer appended to it meanwhile; run the copy again")
        events = []
        for (p, src_gs, sseq, eid, kind, ts, payload, turn_id), gs in zip(batch.rows,
                                                                          writer.reserve_keys("events", len(batch.rows))):
            if kind == "turn_started":
                p.turns[src_gs] = gs
            events.append((gs, p.dst, sseq, eid, kind, ts, payload, None if turn_id is None else p.turns[turn_id]))
            if kind == "message":
                p.messages += 1
            p.have = sseq + 1
            report.rows_added[p.src] += 1
        new_rows, facts = [], []
        for p in batch.sessions:
            r = p.row
            if p.scanned:  # every row is in: the source's registry facts
                fact = (r.updated_at, r.last_seq, r.msg_count)
            elif p.last is not None:
                fact = (p.last[0], p.last[1], p.messages)
            else:
                continue
            if p in fresh:
                corr = (report.sessions.get(r.correlation_id) or r.correlation_id) if r.correlation_id else None
                new_rows.append((int(p.dst[2:]), r.model, r.created_at, *fact, r.account, r.agent_id, r.agent_version, corr))
            else:
                facts.append((p.dst, r.model if p.scanned else None, *fact))
        writer.insert_copied(new_rows, events)
        for dst, model, updated_at, last_seq, msg_count in facts:
            writer.set_registry_facts(dst, model=model, updated_at=updated_at, last_seq=last_seq, msg_count=msg_count)
    return len(batch.rows)
