"""Reading a flux store, whatever holds it: the queries every backend answers the same way (the
session registry, a stream's events, a turn's rows) over the few primitives a backend provides
(:class:`StoreReader`)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, ClassVar, Iterable, Iterator, Sequence

from ..documents import short
from ..errors import SessionNotFound, StoreError
from . import schema
from .backends import ChosenByLocation
from .rows import EVENT_COLUMNS, SessionRow, StoredEvent, session_number, session_row_from, stored_event, valid_event_row

__all__ = ["StoreReader", "guard_json_extract"]

_JSON_EXTRACT = re.compile(r"json_extract\(payload, ('[^']*')\)")


def guard_json_extract(sql: str) -> str:
    """``sql`` with each ``json_extract(payload, '<path>')`` made NULL on a malformed payload."""
    return _JSON_EXTRACT.sub(r"(CASE WHEN json_valid(payload) THEN json_extract(payload, \1) END)", sql)


class StoreReader(ChosenByLocation):
    """Read-only access to a flux store. Thread-safe. Every query method raises
    :class:`~flux.errors.StoreError` with a one-line reason on a failure of the backend.

    ``StoreReader(location, *, busy_timeout_s=2.0, option="--store")`` opens the backend that holds
    ``location`` — a store directory (:class:`~flux.store.sqlite_reader.SqliteReader`) or the local
    directory of a Postgres store (:class:`~flux.store.postgres.PostgresReader`); ``option`` names
    the command-line option that named the store, so an error's advice names the one to fix.

    A backend provides :meth:`_query` and :meth:`scan_batches` (SQLite's dialect, ``?``
    placeholders: a backend speaking another dialect translates), :meth:`change_token`,
    :meth:`refresh` and :meth:`close`, and sets ``has_streams``, ``stream_columns``, ``dir`` and ``label``.
    """

    _backends: ClassVar[list[tuple[Callable[[Path], bool], type]]] = []  # see ChosenByLocation

    dir: Path  # the local directory of the store (the store itself, or a remote store's files)
    label: str  # how messages name the store
    has_streams: bool
    stream_columns: set[str]
    skipped_rows: int
    mode: str

    def _query(self, sql: str, params: Sequence = ()) -> list[tuple]:
        raise NotImplementedError

    def scan_batches(self, sql: str, params: Sequence = (), *, tolerant: bool = False,
                     batch: int = 4096) -> Iterator[list[tuple]]:
        """:meth:`scan`, a batch (a list of up to ``batch`` rows) at a time: a hot loop over the
        rows iterates each list itself instead of resuming a generator per row."""
        raise NotImplementedError

    def change_token(self) -> tuple:
        """A cheap value that changes when another process commits to the store."""
        raise NotImplementedError

    def refresh(self) -> bool:
        """Reopen if the store changed under us in a way our connection cannot see. True if changed."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> "StoreReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _latest_session_sql(self) -> str:
        """The registry row with the highest integer ``n`` (a backend whose ``n`` is always an integer drops the type test)."""
        return self._session_select() + " WHERE typeof(n) = 'integer' ORDER BY n DESC LIMIT 1"

    def scan(self, sql: str, params: Sequence = (), *, tolerant: bool = False, batch: int = 4096) -> Iterator[tuple]:
        """The rows of a read query streamed in batches, so a caller that folds them as they come
        holds one batch, not the whole result. The reader is locked until the iterator is done
        (or closed). A TEXT cell that is not UTF-8 raises :class:`NotUTF8` unless ``tolerant``
        (then it comes back as bytes, as :meth:`query` returns it): the caller scans again
        tolerantly from the start — rows already seen are not replayed."""
        for rows in self.scan_batches(sql, params, tolerant=tolerant, batch=batch):
            yield from rows

    # -- sessions -------------------------------------------------------------------------------

    def _session_select(self) -> str:
        ctx = [c if c in self.stream_columns else f"NULL AS {c}" for c in schema.CONTEXT_COLUMNS]
        return "SELECT n, model, created_at, updated_at, last_seq, msg_count, " + ", ".join(ctx) + " FROM streams"

    def list_sessions(self, limit: int | None = None) -> list[SessionRow]:
        """The registry, ``updated_at DESC, n DESC`` as ``flux sessions`` lists it."""
        if not self.has_streams:
            return []
        sql = self._session_select() + " ORDER BY updated_at DESC, n DESC"
        params: tuple = ()
        if limit is not None:
            sql += " LIMIT ?"
            params = (limit,)
        return self._session_rows(self._query(sql, params))

    def _session_rows(self, rows: Iterable[tuple]) -> list[SessionRow]:
        out = []
        for r in rows:
            row = session_row_from(r)
            if row is None:
                self.skipped_rows += 1
            else:
                out.append(row)
        return out

    def session_count(self) -> int:
        if not self.has_streams:
            return 0
        return self._query("SELECT COUNT(*) FROM streams")[0][0]

    def get_session(self, session_id: str) -> SessionRow:
        n = session_number(session_id)
        rows = []
        if n is not None and self.has_streams:
            rows = self._query(self._session_select() + " WHERE n = ?", (n,))
        found = self._session_rows(rows)
        if not found:
            raise SessionNotFound(f"no session {short(session_id)} in {self.label} — list them with `flux sessions --store {self.label}`")
        return found[0]

    def latest_session(self) -> SessionRow:
        """The session with the highest ``n`` (flux's ``last``; not the most recently updated)."""
        rows = self._query(self._latest_session_sql()) if self.has_streams else []
        found = self._session_rows(rows)
        if not found:
            raise SessionNotFound(f"{self.label} has no sessions yet — record one with `flux demo --store {self.label}`")
        return found[0]

    def resolve_session(self, ref: str | None) -> SessionRow:
        """``s_<n>`` or ``last`` (default) to a registry row."""
        if ref is None or ref == "last":
            return self.latest_session()
        return self.get_session(ref)

    def children_of(self, session_id: str) -> list[SessionRow]:
        """Sessions whose ``correlation_id`` names this one: forks, what-ifs and sub-agents."""
        if "correlation_id" not in self.stream_columns:
            return []
        return self._session_rows(self._query(self._session_select() + " WHERE correlation_id = ? ORDER BY n ASC", (session_id,)))

    # -- events ---------------------------------------------------------------------------------

    def _decode_rows(self, rows: Iterable[tuple]) -> list[StoredEvent]:
        from .payload_decode import PayloadError, decode_payload  # lazy: listing never decodes events

        out = []
        skipped = 0
        for gs, stream, sseq, eid, kind, ts, turn_id, payload in rows:
            if not valid_event_row(gs, stream, sseq, kind, payload):
                skipped += 1  # NULL, BLOB, non-UTF-8 text or a wrong type where the row needs its value
                continue
            try:
                body = decode_payload(kind, payload)
            except PayloadError:
                skipped += 1
                continue
            out.append(stored_event(gs, stream, sseq, eid, kind, ts, turn_id, body))
        if skipped:
            self.skipped_rows += skipped
        return out

    def events(self, stream: str, *, kinds: Sequence[str] | None = None, min_global_seq: int | None = None,
               max_global_seq: int | None = None, lean: bool = False, sparse: bool = False,
               min_stream_seq: int | None = None, max_stream_seq: int | None = None) -> list[StoredEvent]:
        """A stream's events in ``stream_seq`` order, optionally only some kinds or a global window.

        ``lean`` leaves out the ``step_started``/``step_succeeded`` run rows (filtered in SQLite).
        ``sparse``: the ``kinds`` are a small share of the stream (its messages and turn headers):
        search them in the ``(stream, kind)`` index and sort the few found, rather than let SQLite
        walk the whole stream in order (70 ms instead of 0.1 ms on a 100,000-event session).
        ``min_stream_seq``/``max_stream_seq`` bound the window by position in the stream, ``[min, max)``
        — an index range, where a ``global_seq`` window is checked row by row along the stream."""
        sql = f"SELECT {EVENT_COLUMNS} FROM events WHERE stream = ?"
        params: list = [stream]
        if kinds:
            sql += " AND kind IN (" + ",".join("?" * len(kinds)) + ")"
            params.extend(kinds)
        for bound, clause in ((min_global_seq, " AND global_seq >= ?"), (max_global_seq, " AND global_seq < ?"),
                              (min_stream_seq, " AND stream_seq >= ?"), (max_stream_seq, " AND stream_seq < ?")):
            if bound is not None:
                sql += clause
                params.append(bound)
        if lean:
            sql += " AND (kind != 'run' OR json_extract(payload, '$.data.event') IS NOT 'step_started'" \
                   " AND json_extract(payload, '$.data.event') IS NOT 'step_succeeded')"
        sql += " ORDER BY +stream_seq" if sparse and kinds else " ORDER BY stream_seq"
        return self._decode_rows(self.query_json(sql, params))

    def raw_events(self, stream: str) -> list[tuple]:
        """Undecoded rows ``(global_seq, stream_seq, kind, ts, turn_id, payload)``, for fast paths."""
        return self._query("SELECT global_seq, stream_seq, kind, ts, turn_id, payload FROM events WHERE stream = ? ORDER BY stream_seq", (stream,))

    def count_events(self, stream: str | None = None) -> int:
        if stream is None:
            return self._query("SELECT COUNT(*) FROM events")[0][0]
        return self._query("SELECT COUNT(*) FROM events WHERE stream = ?", (stream,))[0][0]

    def turn_events(self, stream: str, turn_id: int, kinds: Sequence[str] | None = None) -> list[StoredEvent]:
        sql = f"SELECT {EVENT_COLUMNS} FROM events WHERE stream = ? AND turn_id = ?"
        params: list = [stream, turn_id]
        if kinds:
            sql += " AND kind IN (" + ",".join("?" * len(kinds)) + ")"
            params.extend(kinds)
        return self._decode_rows(self._query(sql + " ORDER BY stream_seq", params))

    def query(self, sql: str, params: Sequence = ()) -> list[tuple]:
        """A raw read query (for read models that aggregate in SQL)."""
        return self._query(sql, params)

    def query_many(self, queries: Sequence[tuple[str, Sequence]]) -> list[list[tuple]]:
        """Several read queries ``(sql, params)`` at once, each one's rows (a backend across a
        network sends them together: one round trip). An error is the first failing query's, as
        :meth:`query` raises it."""
        return [self._query(sql, params) for sql, params in queries]

    def query_json(self, sql: str, params: Sequence = ()) -> list[tuple]:
        """A read query that uses ``json_extract(payload, …)``. SQLite fails the whole query when
        one row's payload is malformed JSON; then it runs again with every such call guarded by
        ``json_valid`` (a malformed payload extracts NULL), so one corrupt row is one row the
        decoder skips and counts, never a failed read. The guard costs nothing on a healthy store."""
        try:
            return self._query(sql, params)
        except StoreError as e:
            if "malformed JSON" not in str(e):
                raise
        return self._query(guard_json_extract(sql), params)
