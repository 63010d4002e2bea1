"""Appending to a flux store, whatever holds it: flux's write rules (contiguous ``stream_seq``, ULID
ids, the registry row that follows every append, group commit) over the few statements a backend
runs (:class:`StoreWriter`'s hooks; the SQLite backend is :mod:`flux.store.sqlite_writer`, the
Postgres one :mod:`flux.store.postgres`)."""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ClassVar, Iterator, Sequence

from ..canonical import scrub_text
from ..errors import SessionNotFound, StoreError
from . import schema
from .backends import ChosenByLocation
from .rows import EVENT_COLUMNS, SessionRow, StoredEvent, session_number
from .ulid import new_ulid, new_ulids

if TYPE_CHECKING:
    from .events import EventBody

__all__ = ["StoreWriter"]

# A buffered append (``StoreWriter._pending``) is ``(stream, kind, payload, turn_id, ts)``: ``payload``
# is the row's text when the caller built it (``append_text``, ``append_message_text``,
# ``append_texts``, ``append_runs``) — no object per row — or the event body, encoded at the flush.

# The registry row after a batch of appends: msg_count moved by the messages appended, or set (a
# compaction in the batch) — bound as a parameter, one statement text each.
_REGISTRY_ADD = ("UPDATE streams SET updated_at = ?, last_seq = ?, model = COALESCE(?, model), msg_count = msg_count + ?"
                 " WHERE n = ?")
_REGISTRY_SET = "UPDATE streams SET updated_at = ?, last_seq = ?, model = COALESCE(?, model), msg_count = ? WHERE n = ?"

# The kinds whose rows move the registry beyond updated_at/last_seq (msg_count, model).
_REGISTRY_KINDS = frozenset({"message", "session_started", "model_changed", "compacted"})
_UNSCOPED_KINDS = schema.UNSCOPED_KINDS
_monotonic = time.monotonic



class StoreWriter(ChosenByLocation):
    """Creates stores and appends events by flux's write rules, whatever backend holds the store.

    ``StoreWriter(location, *, create=True, clock=None)`` opens the backend that holds ``location``
    (see :class:`~flux.store.reader.StoreReader`). Every backend writes:

    * one transaction per append (or per :meth:`transaction` block), appends to one stream
      serialised across processes (SQLite's ``BEGIN IMMEDIATE``; Postgres's per-stream advisory lock);
    * contiguous 0-based ``stream_seq``, ULID ids, ms timestamps;
    * the registry row of an ``s_<n>`` stream follows every append (``updated_at``, ``last_seq``,
      ``model``, ``msg_count``);
    * ``turn_id`` only on turn-scoped kinds, never on ``message``/``run``/``turn_started``.

    Inside :meth:`grouped` (the agent loop's recorder), appends are buffered in memory and written
    in one transaction by :meth:`flush` — the caller decides when a row must be durable (see
    ``docs/store-format.md``, "Durability by effect"). The next ``stream_seq`` of each stream is
    kept in memory and re-read when another connection may have committed in between.

    A backend provides the connection (``conn``: ``execute(sql, params)`` with ``?`` placeholders,
    ``in_transaction``), :meth:`_begin`, :meth:`_begin_flush`, :meth:`_insert_rows`,
    :meth:`_insert_stream_row`, :meth:`_insert_event`, :meth:`_insert_run_rows`, the error classes
    and :meth:`_store_error`.
    """

    _backends: ClassVar[list[tuple[Callable[[Path], bool], type]]] = []  # see ChosenByLocation
    # The backend's exception classes: any database error, and a constraint violation.
    _db_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    _integrity_errors: ClassVar[tuple[type[BaseException], ...]] = ()
    _seq_guarded = False  # a stale stream_seq counter fails the INSERT (flush retries once)
    _RUN_ROWS_PER_INSERT = 256

    def _init_state(self, store_dir: "str | os.PathLike[str]", clock) -> None:
        """The backend-independent state every backend's ``__init__`` starts with."""
        self.dir = Path(store_dir).expanduser()
        self.label = str(self.dir)
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._tx_depth = 0
        self._lock = threading.RLock()
        self._next_seq: dict[str, int] = {}  # valid while no other connection committed
        self._pending: list[tuple] = []  # buffered appends (grouped mode)
        self._pending_since = 0.0
        self._group: tuple[int, float] | None = None  # (max rows, max seconds) while grouped
        self._numbers: dict[str, int | None] = {}  # stream -> its registry row (session_number), as seen
        self.conn = None  # type: ignore[assignment]
        self._cur = None

    # -- what a backend provides -------------------------------------------------------------------

    def _begin(self) -> None:
        """Open the write transaction and forget the ``stream_seq`` counters another writer may have made stale."""
        raise NotImplementedError

    def _begin_flush(self) -> None:
        """Open the transaction of a :meth:`flush` (a backend whose stale counter fails the INSERT skips the check)."""
        self._begin()

    def _before_commit(self) -> None:
        """Right before the open transaction commits: a backend's last word (raising rolls it back)."""

    def _insert_rows(self, flat: list) -> None:
        """Insert event rows given flat, 7 values a row (stream, stream_seq, id, kind, ts, payload, turn_id)."""
        raise NotImplementedError

    def _insert_stream_row(self, model: str, ts: int, ctx: dict) -> int:
        """Insert a registry row (``last_seq`` 0, no messages); its ``n``."""
        raise NotImplementedError

    def _insert_event(self, row: tuple) -> int:
        """Insert one event row ``(stream, stream_seq, id, kind, ts, payload, turn_id)``; its ``global_seq``."""
        raise NotImplementedError

    def _insert_run_rows(self, stream: str, ts: int, seq: int, ids: Sequence[str], payloads: Sequence[str]) -> None:
        """Insert ``run`` rows (no turn_id) at ``seq``, ``seq + 1``, … with these ids and payload texts."""
        raise NotImplementedError

    def _store_error(self, e: BaseException) -> StoreError:
        """A database error as the one-line :class:`StoreError` a person can act on."""
        raise NotImplementedError

    # -- shared ------------------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self.conn is not None:
                try:
                    self.flush()
                finally:
                    self._close_connection()
                self.conn = None  # type: ignore[assignment]
                self._cur = None  # type: ignore[assignment]

    def _close_connection(self) -> None:
        """Close ``conn`` at :meth:`close`, after the last flush (a backend releases what it holds beside it)."""
        self.conn.close()

    def __enter__(self) -> "StoreWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def now(self) -> int:
        return self._clock()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group several appends into one ``BEGIN IMMEDIATE`` transaction (all or nothing)."""
        with self._lock:
            if self._tx_depth == 0:
                self._begin()
            self._tx_depth += 1
            try:
                if self._pending:
                    self._write_pending()  # buffered rows come first, in the same transaction
                yield
            except BaseException:
                self._tx_depth -= 1
                if self._tx_depth == 0:
                    self.conn.execute("ROLLBACK")
                    self._next_seq.clear()  # the rows it inserted are gone
                raise
            else:
                self._tx_depth -= 1
                if self._tx_depth == 0:
                    try:
                        self._before_commit()
                        self.conn.execute("COMMIT")
                    except BaseException:
                        if self.conn.in_transaction:
                            self.conn.execute("ROLLBACK")
                        self._next_seq.clear()
                        raise

    def delete_sessions(self, session_ids: Sequence[str]) -> dict[str, int]:
        """Remove whole sessions — each one's registry row and every event of its stream — in one
        transaction: all of them or, on any error, none. Returns each id's deleted event count. An id
        the registry does not hold raises :class:`SessionNotFound` before anything is deleted. A
        deleted session's number is never handed out again (the registry's AUTOINCREMENT keeps its
        high-water mark), so no later session can take its id."""
        ids = list(dict.fromkeys(session_ids))
        numbers = {sid: session_number(sid) for sid in ids}
        deleted: dict[str, int] = {}
        try:
            with self.transaction():
                for sid, n in numbers.items():
                    if n is None or self.conn.execute("SELECT 1 FROM streams WHERE n = ?", (n,)).fetchone() is None:
                        raise SessionNotFound(f"no session {sid!r} in {self.label} — nothing was deleted")
                for sid, n in numbers.items():
                    deleted[sid] = self.conn.execute("DELETE FROM events WHERE stream = ?", (sid,)).rowcount
                    self.conn.execute("DELETE FROM streams WHERE n = ?", (n,))
                    self._next_seq.pop(sid, None)
                    self._numbers.pop(sid, None)
        except self._db_errors as e:
            raise self._store_error(e) from None
        return deleted

    @contextmanager
    def grouped(self, *, max_rows: int = 512, max_ms: float = 50.0) -> Iterator[None]:
        """Buffer appends (group commit): they reach the database at :meth:`flush`, when ``max_rows``
        are pending, when the oldest pending row is ``max_ms`` old at the next append, and when the
        block ends. A buffered row is lost if the process dies before then — only for rows that are
        safe to lose (a re-runnable op's); the caller flushes before anything that must be durable."""
        with self._lock:
            outer = self._group
            self._group = (max_rows, max_ms / 1000.0)
            try:
                yield
            finally:
                self._group = outer
                if outer is None:
                    self.flush()

    def flush(self) -> None:
        """Write every buffered append in one transaction (a no-op when nothing is pending).

        :meth:`transaction` with an empty body, spelled out: an effectful op's commit runs this
        once per op. The in-memory ``stream_seq`` counters are checked without a statement of
        their own when the table has flux's ``UNIQUE(stream, stream_seq)`` (:meth:`_has_seq_guard`):
        another connection can only have *added* rows to a stream since our last transaction, so a
        stale counter is one already taken — the INSERT fails with a constraint error, nothing of
        this transaction is kept (rolled back), and it is written again once, from the table's
        ``MAX(stream_seq)``. Without that index, ``PRAGMA data_version`` is read first, as
        :meth:`transaction` does."""
        with self._lock:
            pending = self._pending
            if not pending:
                return
            if self._tx_depth:  # inside an open transaction: its commit writes them
                self._write_pending()
                return
            conn, cur = self.conn, self._cur
            guarded = self._seq_guarded
            for retry in (False, True):
                if guarded:
                    self._begin_flush()
                else:
                    self._begin()
                try:
                    self._write_pending()
                    self._before_commit()
                    cur.execute("COMMIT")
                    return
                except self._integrity_errors:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    self._next_seq.clear()  # re-read from the table
                    if retry or not guarded:
                        raise
                    self._pending = pending  # the same rows again (new ids), at the table's next seqs
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    self._next_seq.clear()  # the rows it inserted are gone
                    raise

    def _write_pending(self) -> None:
        """Insert the buffered appends (inside the open transaction), then bring each registry row
        to where the per-row updates would leave it, in one UPDATE per stream."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        next_seq = self._next_seq
        n = len(pending)
        stream, ts0 = pending[0][0], pending[0][4]
        if _ONE_PASS_TEXT_FLUSH:
            # One stream, text rows only (every flush of the recorder): the rows flat in one pass,
            # their ids minted once it is known they all are (then placed by slice) — what the loop
            # below writes. (A row of another stream or a body: that loop, from the start.)
            base = next_seq.get(stream)
            if base is None:
                base = self._max_seq(stream)
            flat: list = []
            seq = base
            one_ms = True
            for row_stream, kind, payload, turn_id, ts in pending:
                if row_stream != stream or type(payload) is not str:
                    break
                if ts != ts0:
                    one_ms = False
                # Lone surrogates cannot be stored as UTF-8 (the one rule: scrub_text)
                flat += (stream, seq, None, kind, ts, payload if payload.isascii() else scrub_text(payload), turn_id)
                seq += 1
            else:
                flat[2::7] = new_ulids(ts0, n) if one_ms else _ids_by_run(flat[4::7])
                last = seq - 1
                next_seq[stream] = seq  # forgotten by flush()/transaction() if this transaction rolls back
                cur = self._cur
                self._insert_rows(flat)
                num = self._numbers.get(stream, -1)
                if num == -1:
                    num = self._numbers[stream] = session_number(stream)
                if num is not None:  # text rows move msg_count by their messages, never the model
                    cur.execute(_REGISTRY_ADD, (flat[-3], last, None, flat[3::7].count("message"), num))
                return
        stamps = [row[4] for row in pending]
        rows: list = []  # the rows' values, flat (7 per row: _insert_rows)
        reg: dict[str, list] = {}  # stream -> [ts, seq, model, msg base (None: keep), messages added]
        # The ids, minted in order: one new_ulids() per run of rows with the same ms (the same ids
        # new_ulid() per row mints, and the same state left behind).
        ids = _ids_by_run(stamps)
        r: list | None = None  # the registry entry of r_stream; its ts and seq are kept in last_ts, seq
        r_stream = None
        seq = last_ts = 0
        for (stream, kind, payload, turn_id, ts), eid in zip(pending, ids):
            if stream is not r_stream:
                if r is not None:
                    r[0], r[1] = last_ts, seq
                r = reg.get(stream)
                if r is None:
                    base = next_seq.get(stream)
                    r = reg[stream] = [ts, (self._max_seq(stream) if base is None else base) - 1, None, None, 0]
                seq = r[1]
                r_stream = stream
            seq += 1
            last_ts = ts
            # Lone surrogates cannot be stored as UTF-8: the one rule (flux.canonical.scrub_text).
            if type(payload) is str:  # a text row: never a registry kind but a message (append_text refuses them)
                rows += (stream, seq, eid, kind, ts, payload if payload.isascii() else scrub_text(payload), turn_id)
                if kind == "message":
                    r[4] += 1  # type: ignore[index]
                continue
            ev, encode = _events()  # imported on first use (a reader-only process never loads the encoders)
            rows += (stream, seq, eid, kind, ts, scrub_text(encode(payload)), turn_id)
            if kind in _REGISTRY_KINDS:
                if isinstance(payload, ev.Message):
                    r[4] += 1  # type: ignore[index]
                elif isinstance(payload, (ev.SessionStarted, ev.ModelChanged)):
                    r[2] = payload.model  # type: ignore[index]
                elif isinstance(payload, ev.Compacted):
                    r[3], r[4] = len(payload.messages), 0  # type: ignore[index]
        if r is not None:
            r[0], r[1] = last_ts, seq
        for stream, entry in reg.items():
            next_seq[stream] = entry[1] + 1  # forgotten by flush()/transaction() if this transaction rolls back
        cur = self._cur
        self._insert_rows(rows)
        numbers = self._numbers
        for stream, (ts, seq, model, base, added) in reg.items():
            n = numbers.get(stream, -1)
            if n == -1:
                n = numbers[stream] = session_number(stream)
            if n is None:
                continue
            if base is None:
                cur.execute(_REGISTRY_ADD, (ts, seq, model, added, n))
            else:
                cur.execute(_REGISTRY_SET, (ts, seq, model, base + added, n))

    def _max_seq(self, stream: str) -> int:
        """The next ``stream_seq`` of ``stream`` read from the table, inside the open transaction."""
        return self.conn.execute("SELECT COALESCE(MAX(stream_seq), -1) + 1 FROM events WHERE stream = ?", (stream,)).fetchone()[0]

    def create_session(self, model: str, *, context: dict[str, str | None] | None = None,
                       ts: int | None = None) -> str:
        """Insert the registry row and the ``session_started`` event at ``stream_seq`` 0."""
        from .events import SessionStarted

        ctx = {k: (scrub_text(v) if isinstance(v, str) else v) for k, v in (context or {}).items()}
        model = scrub_text(model)
        ts = self.now() if ts is None else ts
        with self.transaction():
            sid = f"s_{self._insert_stream_row(model, ts, ctx)}"
            self._insert(sid, SessionStarted(model=model), None, ts, None, update_registry=False)
        return sid

    def append(self, stream: str, body: EventBody, *, turn_id: int | None = None, ts: int | None = None,
               event_id: str | None = None) -> StoredEvent:
        """Append one event in its own transaction (or the enclosing :meth:`transaction`)."""
        if turn_id is not None and body.KIND in schema.UNSCOPED_KINDS:
            raise ValueError(f"{body.KIND} events never carry a turn_id")
        ts = self.now() if ts is None else ts
        if self._group is not None and self._tx_depth == 0 and event_id is None:
            return self._buffer(stream, body.KIND, body, turn_id, ts)
        from .payload_decode import decode_payload

        with self.transaction():
            if event_id is not None:
                row = self.conn.execute(f"SELECT {EVENT_COLUMNS} FROM events WHERE id = ?", (event_id,)).fetchone()
                if row is not None:  # idempotent retry
                    gs, st, sseq, eid, kind, ets, tid, payload = row
                    return StoredEvent(gs, st, sseq, eid, kind, ets, tid, decode_payload(kind, payload))
            return self._insert(stream, body, turn_id, ts, event_id, update_registry=True)

    def append_many(self, stream: str, bodies: Sequence[EventBody], *, turn_id: int | None = None,
                    ts: int | None = None) -> int:
        """Append ``bodies`` to one stream in one transaction (or the enclosing one) with one
        multi-row INSERT and one registry update: the rows ``append`` would write one by one
        (same payloads, consecutive ``stream_seq``, ids minted in order). Returns how many."""
        if turn_id is not None and any(b.KIND in schema.UNSCOPED_KINDS for b in bodies):
            raise ValueError("an unscoped event kind never carries a turn_id")
        return self._append_bulk(stream, [(b.KIND, b) for b in bodies], turn_id, ts)

    def append_runs(self, stream: str, bodies: Sequence[dict], *, turn_id: int | None = None,
                    ts: int | None = None) -> int:
        """:meth:`append_many` for ``run`` bodies as the interpreter emits them (dicts): the rows
        ``append(stream, Run(decode_run(body)))`` would write, encoded without the round trip."""
        from .payload_encode import encode_run_body

        return self._append_bulk(stream, [("run", encode_run_body(b)) for b in bodies], turn_id, ts)

    def append_text(self, stream: str, kind: str, payload: str, *, turn_id: int | None = None,
                    ts: int | None = None) -> None:
        """:meth:`append` of a body whose payload text the caller has built — it must be exactly
        ``encode_payload(body)`` (the recorder's hot rows, property-tested equal). Only for kinds
        that leave the registry's model and message count alone."""
        if kind in _REGISTRY_KINDS or (turn_id is not None and kind in _UNSCOPED_KINDS):
            raise ValueError(f"append_text cannot write a {kind} row" + (" with a turn_id" if turn_id is not None else ""))
        if ts is None:
            ts = self._clock()
        group = self._group
        if group is not None and not self._tx_depth:  # _buffer, inline (the recorder's rows of each op call)
            pending = self._pending
            if not pending:
                self._pending_since = _monotonic()
            pending.append((stream, kind, payload, turn_id, ts))
            if len(pending) >= group[0] or _monotonic() - self._pending_since >= group[1]:
                self.flush()
            return
        with self.transaction():
            self._pending.append((stream, kind, payload, turn_id, ts))
            self._write_pending()

    def append_text_pair(self, stream: str, kind: str, payload: str, turn_id: int | None, kind2: str, payload2: str,
                         turn_id2: int | None) -> None:
        """``append_text(stream, kind, payload, turn_id=turn_id)`` then the same of the second row —
        the same rows, stamps (the clock read once per row, in order), buffering and flushes — in one
        call (the recorder's plan and ``step_started``, and its cell and ``step_succeeded``, of each
        tool call)."""
        group = self._group
        if group is None or self._tx_depth or kind in _REGISTRY_KINDS or kind2 in _REGISTRY_KINDS or \
                (turn_id is not None and kind in _UNSCOPED_KINDS) or (turn_id2 is not None and kind2 in _UNSCOPED_KINDS):
            self.append_text(stream, kind, payload, turn_id=turn_id)
            self.append_text(stream, kind2, payload2, turn_id=turn_id2)
            return
        pending = self._pending
        if not pending:
            self._pending_since = _monotonic()
        pending.append((stream, kind, payload, turn_id, self._clock()))
        if len(pending) >= group[0] or _monotonic() - self._pending_since >= group[1]:
            self.flush()  # (as append_text would; the second row then starts the next batch)
            self.append_text(stream, kind2, payload2, turn_id=turn_id2)
            return
        pending.append((stream, kind2, payload2, turn_id2, self._clock()))
        if len(pending) >= group[0] or _monotonic() - self._pending_since >= group[1]:
            self.flush()

    def append_message_text(self, stream: str, payload: str, *, ts: int | None = None) -> None:
        """:meth:`append` of a ``Message`` whose payload text the caller has built — it must be
        exactly ``encode_payload(body)`` (the recorder's closing messages, property-tested equal):
        the same row, and the registry's ``msg_count`` counts it."""
        if ts is None:
            ts = self._clock()
        if self._group is not None and self._tx_depth == 0:
            self._buffer(stream, "message", payload, None, ts)
            return
        with self.transaction():
            self._pending.append((stream, "message", payload, None, ts))
            self._write_pending()

    def append_texts(self, stream: str, kind: str, payloads: Sequence[str], *, turn_id: int | None = None,
                     ts: int | None = None) -> int:
        """:meth:`append_many` of pre-built payload texts of one kind (see :meth:`append_text`):
        everything buffered, then these rows, in one transaction. Returns how many."""
        if kind in _REGISTRY_KINDS or (turn_id is not None and kind in schema.UNSCOPED_KINDS):
            raise ValueError(f"append_texts cannot write {kind} rows" + (" with a turn_id" if turn_id is not None else ""))
        if not payloads:
            return 0
        ts = self.now() if ts is None else ts
        return self._append_rows([(stream, kind, p, turn_id, ts) for p in payloads])

    def _append_bulk(self, stream: str, items: Sequence[tuple], turn_id: int | None, ts: int | None) -> int:
        """Everything buffered, then ``items`` — ``(kind, payload text or body)`` each — in one
        transaction (or the enclosing one)."""
        if not items:
            return 0
        ts = self.now() if ts is None else ts
        return self._append_rows([(stream, kind, payload, turn_id, ts) for kind, payload in items])

    def _append_rows(self, rows: list[tuple]) -> int:
        """Everything buffered, then ``rows`` (buffered-row tuples: stream, kind, payload text or
        body, turn_id, ts), in one transaction (or the enclosing one). Returns how many."""
        with self.transaction():  # writes what was buffered before, then these rows
            self._pending.extend(rows)
            self._write_pending()
        return len(rows)

    def _buffer(self, stream: str, kind: str, payload: "str | EventBody", turn_id: int | None, ts: int) -> None:
        if not self._pending:
            self._pending_since = _monotonic()
        self._pending.append((stream, kind, payload, turn_id, ts))
        max_rows, max_s = self._group  # type: ignore[misc]
        if len(self._pending) >= max_rows or _monotonic() - self._pending_since >= max_s:
            self.flush()
        return None

    def begin_turn(self, stream: str, user_input: str, model: str, *, ts: int | None = None,
                   loop_binding: dict | None = None) -> int:
        """Append ``turn_started`` durably (even when grouped); its ``global_seq`` is the turn id later rows carry."""
        from .events import TurnStarted

        body = TurnStarted(user_input=user_input, model=model, loop_binding=loop_binding)
        ts = self.now() if ts is None else ts
        with self.transaction():  # flushes what is buffered first, then writes the turn row
            ev = self._insert(stream, body, None, ts, None, update_registry=True)
        return ev.global_seq

    def _insert(self, stream: str, body: EventBody, turn_id: int | None, ts: int, event_id: str | None,
                *, update_registry: bool) -> StoredEvent:
        from .events import Compacted, Message, ModelChanged, SessionStarted
        from .payload_encode import encode_payload

        c = self.conn
        seq = self._next_seq.get(stream)
        if seq is None:
            seq = self._max_seq(stream)
        eid = event_id or new_ulid(ts)
        # Lone surrogates cannot be stored as UTF-8: the one rule (flux.canonical.scrub_text).
        payload = scrub_text(encode_payload(body))
        global_seq = self._insert_event((stream, seq, eid, body.KIND, ts, payload, turn_id))
        self._next_seq[stream] = seq + 1
        if update_registry and session_number(stream) is not None:
            model = body.model if isinstance(body, (SessionStarted, ModelChanged)) else None
            if isinstance(body, Message):
                msg_sql = "msg_count + 1"
            elif isinstance(body, Compacted):
                msg_sql = str(len(body.messages))
            else:
                msg_sql = "msg_count"
            c.execute(
                f"UPDATE streams SET updated_at = ?, last_seq = ?, model = COALESCE(?, model), msg_count = {msg_sql} WHERE n = ?",
                (ts, seq, model, session_number(stream)),
            )
        return StoredEvent(global_seq, stream, seq, eid, body.KIND, ts, turn_id, body)

    def session_exists(self, session_id: str) -> bool:
        n = session_number(session_id)
        return n is not None and self.conn.execute("SELECT 1 FROM streams WHERE n = ?", (n,)).fetchone() is not None

    # -- bulk run rows (fork's prefix, resurrect's and what-if's re-executed runs) ----------------

    def append_run_texts(self, stream: str, payloads: Sequence[str], *, ts: int | None = None) -> int:
        """Append ``run`` events whose payload texts are already encoded (``encode_run_body``), in
        one transaction (or the enclosing one): exactly the rows :meth:`append_runs` writes —
        consecutive ``stream_seq``, ids minted in order, one ``ts``, scrubbed payloads, no
        ``turn_id``, the same registry update — but 256 rows per ``INSERT … VALUES`` with the
        stream, ``ts`` and first ``stream_seq`` bound once, and the ids minted in one go
        (:func:`~flux.store.ulid.new_ulids`). One statement per row costs as much again in the
        driver's bind-and-step loop as SQLite spends storing the row. Returns how many."""

        n = len(payloads)
        if not n:
            return 0
        ts = self.now() if ts is None else ts
        with self.transaction():  # writes what was buffered before, then these rows
            c = self.conn
            seq = self._next_seq.get(stream)
            if seq is None:
                seq = self._max_seq(stream)
            self._next_seq[stream] = seq + n  # forgotten by transaction() if it rolls back
            ids = new_ulids(ts, n)
            # Lone surrogates cannot be stored as UTF-8 (scrub_text); an all-ASCII batch holds none
            texts = payloads if "".join(payloads).isascii() else list(map(scrub_text, payloads))
            self._insert_run_rows(stream, ts, seq, ids, texts)
            num = session_number(stream)
            if num is not None:  # what _write_pending's per-stream update does for run rows
                c.execute("UPDATE streams SET updated_at = ?, last_seq = ?, model = COALESCE(?, model),"
                          " msg_count = msg_count + 0 WHERE n = ?", (ts, seq + n - 1, None, num))
        return n


    # -- rows copied whole from another store (flux store copy) ----------------------------------

    def reserve_keys(self, table: str, count: int) -> list[int]:
        """``count`` fresh keys of ``table``'s counter (``streams`` → ``n``, ``events`` →
        ``global_seq``), increasing, never handed out again: the keys rows copied in are inserted
        under, known before they are written (a turn's id is its ``turn_started`` key). Inside
        :meth:`transaction`."""
        if table not in ("streams", "events"):
            raise ValueError(f"no counter for table {table!r}")
        return self._reserve_keys(table, count) if count > 0 else []

    def stream_heads(self, streams: Sequence[str]) -> dict[str, int]:
        """The next ``stream_seq`` of each of ``streams`` that has rows (absent: 0), read under the
        streams' append lock, held to the end of the transaction. Inside :meth:`transaction`."""
        wanted = sorted(set(streams))
        self._lock_streams(wanted)
        heads: dict[str, int] = {}
        for k in range(0, len(wanted), 400):
            chunk = wanted[k:k + 400]
            for stream, top in self.conn.execute(
                    f"SELECT stream, MAX(stream_seq) FROM events WHERE stream IN ({','.join('?' * len(chunk))})"
                    " GROUP BY stream", chunk).fetchall():
                heads[stream] = top + 1
        return heads

    def insert_copied(self, sessions: Sequence[tuple], events: Sequence[tuple]) -> None:
        """Insert registry rows ``(n, model, created_at, updated_at, last_seq, msg_count, account,
        agent_id, agent_version, correlation_id)`` and event rows ``(global_seq, stream, stream_seq,
        id, kind, ts, payload, turn_id)`` exactly as given — keys from :meth:`reserve_keys`, payload
        bytes untouched — by the backend's bulk path. The ``UNIQUE`` constraints stay the backstop:
        a row another writer took the place of fails the whole transaction. Inside :meth:`transaction`."""
        for stream in {row[1] for row in events}:
            self._next_seq.pop(stream, None)  # this writer's counter for the stream is re-read when next needed
        if sessions:
            self._insert_copied_streams(sessions)
        if events:
            self._insert_copied_events(events)

    def set_registry_facts(self, stream: str, *, model: str | None, updated_at: int, last_seq: int,
                           msg_count: int) -> None:
        """Set a session's registry row (``model`` None: kept). Inside :meth:`transaction`."""
        n = session_number(stream)
        if n is not None:
            self.conn.execute("UPDATE streams SET model = COALESCE(?, model), updated_at = ?, last_seq = ?, msg_count = ?"
                              " WHERE n = ?", (model, updated_at, last_seq, msg_count, n))

    def _reserve_keys(self, table: str, count: int) -> list[int]:
        """The backend's counter for :meth:`reserve_keys`."""
        raise NotImplementedError

    def _lock_streams(self, streams: Sequence[str]) -> None:
        """Take the append lock of each stream (sorted) for the open transaction; a backend whose
        transaction already excludes every other writer (SQLite) has nothing to take."""

    def _insert_copied_streams(self, rows: Sequence[tuple]) -> None:
        self.conn.executemany("INSERT INTO streams (n, model, created_at, updated_at, last_seq, msg_count, account,"
                              " agent_id, agent_version, correlation_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)

    def _insert_copied_events(self, rows: Sequence[tuple]) -> None:
        self.conn.executemany("INSERT INTO events (global_seq, stream, stream_seq, id, kind, schema_version, ts, payload,"
                              " turn_id) VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?)", rows)


def _events():
    """flux.store.events and its payload encoder, imported once (an import statement in a per-flush
    path costs more than the flush's own bookkeeping)."""
    global _EVENTS
    if _EVENTS is None:
        from . import events
        from .payload_encode import encode_payload

        _EVENTS = (events, encode_payload)
    return _EVENTS


_EVENTS = None
# Whether a one-stream text flush takes _write_pending's one-pass branch; the differential test
# (tests/core/test_store.py) switches it off to get the per-row loop's rows for the same buffer.
_ONE_PASS_TEXT_FLUSH = True


def _ids_by_run(stamps: Sequence[int]) -> list[str]:
    """The ids of rows stamped ``stamps``, minted in order: one new_ulids() per run of rows with the
    same ms (the same ids new_ulid() per row mints, and the same state left behind)."""
    ids: list[str] = []
    run_ts, run_n = stamps[0], 0
    for ts in stamps:
        if ts != run_ts:
            ids += new_ulids(run_ts, run_n)
            run_ts, run_n = ts, 0
        run_n += 1
    ids += new_ulids(run_ts, run_n)
    return ids
