"""Opening a flux ``Storage::dir``: a read-only reader for browsing and a writer that appends by
flux's write rules (spec §1.1).

Read-only means read-only: opening a store to browse creates no file and changes no byte.
SQLite's ``mode=ro`` is not enough for that — on a WAL database it creates ``-wal``/``-shm``
sidecars — so the reader picks the least intrusive way that still sees every committed row:

* WAL database with no (or an empty) ``-wal``: nothing is pending, open ``immutable=1`` (touches
  nothing); a later writer shows up in :meth:`StoreReader.change_token` and the reader reopens.
* WAL database with pending frames and a ``-shm``: a writer is (or was) live; ``mode=ro`` reads
  through its WAL index without creating anything.
* pending frames and no ``-shm`` (a crashed writer): read a private snapshot copy in a temp dir.
* rollback-journal database: ``mode=ro``.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Sequence
from urllib.parse import quote

from ..canonical import scrub_text
from ..errors import SessionNotFound, StoreError, StoreLockedError
from . import schema
from .ulid import new_ulid

if TYPE_CHECKING:
    from .events import EventBody

__all__ = [
    "StoredEvent", "SessionRow", "StoreReader", "StoreWriter", "default_store_dir", "session_number",
]

EVENTS_DB = "events.db"
FLOW_DB = "flow.db"
SQLITE_MAGIC = b"SQLite format 3\x00"


def default_store_dir() -> Path:
    """``$FLUX_STORE_DIR`` if set and non-empty, else ``~/.flux`` — where flux looks (§1.8)."""
    env = os.environ.get("FLUX_STORE_DIR", "")
    return Path(env).expanduser() if env else Path.home() / ".flux"


def session_number(session_id: str) -> int | None:
    if session_id.startswith("s_") and session_id[2:].isdigit():
        return int(session_id[2:])
    return None


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One ``events`` row, decoded."""

    global_seq: int
    stream: str
    stream_seq: int
    id: str
    kind: str
    ts: int
    turn_id: int | None
    body: EventBody


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One ``streams`` registry row (the session list's unit)."""

    n: int
    model: str
    created_at: int
    updated_at: int
    last_seq: int
    msg_count: int
    account: str | None = None
    agent_id: str | None = None
    agent_version: str | None = None
    correlation_id: str | None = None

    @property
    def id(self) -> str:
        return f"s_{self.n}"

    @property
    def context(self) -> dict[str, str | None]:
        return {
            "account": self.account,
            "agent_id": self.agent_id,
            "agent_version": self.agent_version,
            "correlation_id": self.correlation_id,
        }


_EVENT_COLUMNS = "global_seq, stream, stream_seq, id, kind, ts, turn_id, payload"


def _check_sqlite_file(path: Path) -> None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(100)
    except PermissionError:
        raise StoreError(f"{path} is not readable — check its permissions") from None
    except IsADirectoryError:
        raise StoreError(f"{path} is a directory, not a SQLite database — point --store at the directory that holds events.db") from None
    if len(head) == 0:
        raise StoreError(f"{path} is empty — not a flux store; point --store at a directory flux wrote, or make one with `flux demo --store DIR`")
    if not head.startswith(SQLITE_MAGIC):
        raise StoreError(f"{path} is not a SQLite database — point --store at a flux store directory (it holds events.db and flow.db)")


def _wal_mode(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(20)
    return len(head) >= 20 and head[18] == 2 and head[19] == 2


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except FileNotFoundError:
        return -1


def _translate(e: sqlite3.Error, path: Path) -> StoreError:
    msg = str(e)
    if "locked" in msg or "busy" in msg:
        return StoreLockedError(f"{path} is locked by a writer — wait for it to finish (or stop it) and try again")
    if "not a database" in msg or "malformed" in msg or "encrypted" in msg:
        return StoreError(f"{path} is corrupt or not a SQLite database ({msg}) — restore it from a copy")
    return StoreError(f"cannot read {path}: {msg}")


class StoreReader:
    """Read-only access to a store directory. Thread-safe: one connection, serialized by a lock.

    Every query method translates SQLite errors into :class:`StoreError` with a one-line reason.
    """

    def __init__(self, store_dir: str | os.PathLike[str], *, busy_timeout_s: float = 2.0):
        self.dir = Path(store_dir).expanduser()
        self.events_path = self.dir / EVENTS_DB
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.RLock()
        self._snapshot_dir: str | None = None
        self._conn: sqlite3.Connection | None = None
        self.skipped_rows = 0  # corrupt payload rows skipped by reads so far
        if not self.dir.exists():
            raise StoreError(f"{self.dir} does not exist — create a store with `flux demo --store {self.dir}` or point --store at an existing one")
        if not self.dir.is_dir():
            raise StoreError(f"{self.dir} is not a directory — --store takes the directory that holds events.db")
        if not self.events_path.exists():
            raise StoreError(f"{self.dir} is not a flux store: it has no events.db — point --store at a store directory, or make one with `flux demo --store DIR`")
        _check_sqlite_file(self.events_path)
        self._open()
        self._validate_schema()
        self._token = self._file_token()

    # -- connection management --------------------------------------------------------------

    def _open(self) -> None:
        path = self.events_path
        wal_path = Path(str(path) + "-wal")
        shm_path = Path(str(path) + "-shm")
        uri_path = quote(str(path.resolve()))
        self.mode = "ro"
        if _wal_mode(path):
            if _size(wal_path) <= 0:
                uri = f"file:{uri_path}?immutable=1"
                self.mode = "immutable"
            elif _size(shm_path) > 0:
                uri = f"file:{uri_path}?mode=ro"
            else:
                uri = self._snapshot_uri(path, wal_path)
                self.mode = "snapshot"
        else:
            uri = f"file:{uri_path}?mode=ro"
        try:
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=self._busy_timeout_s)
            conn.execute("PRAGMA query_only = 1")
        except sqlite3.Error as e:
            raise _translate(e, path) from None
        self._conn = conn

    def _snapshot_uri(self, path: Path, wal_path: Path) -> str:
        self._drop_snapshot()
        tmp = tempfile.mkdtemp(prefix="flux-snapshot-")
        shutil.copy2(path, os.path.join(tmp, EVENTS_DB))
        shutil.copy2(wal_path, os.path.join(tmp, EVENTS_DB + "-wal"))
        self._snapshot_dir = tmp
        return f"file:{quote(os.path.join(tmp, EVENTS_DB))}"

    def _drop_snapshot(self) -> None:
        if self._snapshot_dir:
            shutil.rmtree(self._snapshot_dir, ignore_errors=True)
            self._snapshot_dir = None

    def _validate_schema(self) -> None:
        try:
            tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.Error as e:
            raise _translate(e, self.events_path) from None
        if "events" not in tables:
            what = ", ".join(sorted(tables)) or "no tables"
            raise StoreError(f"{self.events_path} is a SQLite database of another application ({what}) — not a flux event store")
        cols = {r[1] for r in self._conn.execute("PRAGMA table_info(events)")}
        missing = {"global_seq", "stream", "stream_seq", "kind", "payload", "ts"} - cols
        if missing:
            raise StoreError(f"{self.events_path} has an `events` table without flux's columns ({', '.join(sorted(missing))}) — not a flux event store")
        self.has_streams = "streams" in tables
        self.stream_columns = {r[1] for r in self._conn.execute("PRAGMA table_info(streams)")} if self.has_streams else set()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._drop_snapshot()

    def __enter__(self) -> "StoreReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _file_token(self) -> tuple:
        out = []
        for suffix in ("", "-wal"):
            try:
                st = os.stat(str(self.events_path) + suffix)
                out.append((st.st_mtime_ns, st.st_size))
            except FileNotFoundError:
                out.append(None)
        return tuple(out)

    def change_token(self) -> tuple:
        """A cheap value that changes when another process commits to the store.

        Stat of ``events.db`` and its ``-wal`` (no query), plus SQLite's ``data_version`` when the
        connection can see other writers.
        """
        token = self._file_token()
        with self._lock:
            if self._conn is None:
                return token
            if self.mode == "ro":
                try:
                    dv = self._conn.execute("PRAGMA data_version").fetchone()[0]
                except sqlite3.Error:
                    dv = None
                return token + (dv,)
        return token

    def refresh(self) -> bool:
        """Reopen if the store changed under us in a way our connection cannot see. True if changed."""
        token = self._file_token()
        if token == self._token:
            if self.mode != "ro":
                return False
            return True  # data_version comparison is left to the caller through change_token()
        with self._lock:
            self._token = token
            if self.mode in ("immutable", "snapshot"):
                if self._conn is not None:
                    self._conn.close()
                self._open()
        return True

    def _query(self, sql: str, params: Sequence = ()) -> list[tuple]:
        with self._lock:
            if self._conn is None:
                raise StoreError("the store was closed")
            deadline = time.monotonic() + self._busy_timeout_s
            while True:
                try:
                    return self._conn.execute(sql, params).fetchall()
                except sqlite3.OperationalError as e:
                    if ("locked" in str(e) or "busy" in str(e)) and time.monotonic() < deadline:
                        time.sleep(0.05)
                        continue
                    raise _translate(e, self.events_path) from None
                except sqlite3.DatabaseError as e:
                    raise _translate(e, self.events_path) from None

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
        return [SessionRow(*r) for r in self._query(sql, params)]

    def session_count(self) -> int:
        if not self.has_streams:
            return 0
        return self._query("SELECT COUNT(*) FROM streams")[0][0]

    def get_session(self, session_id: str) -> SessionRow:
        n = session_number(session_id)
        rows = []
        if n is not None and self.has_streams:
            rows = self._query(self._session_select() + " WHERE n = ?", (n,))
        if not rows:
            raise SessionNotFound(f"no session {session_id!r} in {self.dir} — list them with `flux sessions --store {self.dir}`")
        return SessionRow(*rows[0])

    def latest_session(self) -> SessionRow:
        """The session with the highest ``n`` (flux's ``last``; not the most recently updated)."""
        rows = self._query(self._session_select() + " ORDER BY n DESC LIMIT 1") if self.has_streams else []
        if not rows:
            raise SessionNotFound(f"{self.dir} has no sessions yet — record one with `flux demo --store {self.dir}`")
        return SessionRow(*rows[0])

    def resolve_session(self, ref: str | None) -> SessionRow:
        """``s_<n>`` or ``last`` (default) to a registry row."""
        if ref is None or ref == "last":
            return self.latest_session()
        return self.get_session(ref)

    def children_of(self, session_id: str) -> list[SessionRow]:
        """Sessions whose ``correlation_id`` names this one: forks, what-ifs and sub-agents (§2.5)."""
        if "correlation_id" not in self.stream_columns:
            return []
        return [SessionRow(*r) for r in self._query(self._session_select() + " WHERE correlation_id = ? ORDER BY n ASC", (session_id,))]

    # -- events ---------------------------------------------------------------------------------

    def _decode_rows(self, rows: Iterable[tuple]) -> list[StoredEvent]:
        from .events import PayloadError, decode_payload  # lazy: listing never decodes events

        out = []
        skipped = 0
        for gs, stream, sseq, eid, kind, ts, turn_id, payload in rows:
            try:
                body = decode_payload(kind, payload)
            except PayloadError:
                skipped += 1
                continue
            out.append(StoredEvent(gs, stream, sseq, eid, kind, ts, turn_id, body))
        if skipped:
            self.skipped_rows += skipped
        return out

    def events(self, stream: str, *, kinds: Sequence[str] | None = None, min_global_seq: int | None = None,
               max_global_seq: int | None = None, lean: bool = False) -> list[StoredEvent]:
        """A stream's events in ``stream_seq`` order, optionally only some kinds or a global window.

        ``lean`` leaves out the ``step_started``/``step_succeeded`` run rows (filtered in SQLite)."""
        sql = f"SELECT {_EVENT_COLUMNS} FROM events WHERE stream = ?"
        params: list = [stream]
        if kinds:
            sql += " AND kind IN (" + ",".join("?" * len(kinds)) + ")"
            params.extend(kinds)
        if min_global_seq is not None:
            sql += " AND global_seq >= ?"
            params.append(min_global_seq)
        if max_global_seq is not None:
            sql += " AND global_seq < ?"
            params.append(max_global_seq)
        if lean:
            sql += " AND (kind != 'run' OR json_extract(payload, '$.data.event') NOT IN ('step_started', 'step_succeeded'))"
        sql += " ORDER BY stream_seq"
        return self._decode_rows(self._query(sql, params))

    def raw_events(self, stream: str) -> list[tuple]:
        """Undecoded rows ``(global_seq, stream_seq, kind, ts, turn_id, payload)``, for fast paths."""
        return self._query("SELECT global_seq, stream_seq, kind, ts, turn_id, payload FROM events WHERE stream = ? ORDER BY stream_seq", (stream,))

    def count_events(self, stream: str | None = None) -> int:
        if stream is None:
            return self._query("SELECT COUNT(*) FROM events")[0][0]
        return self._query("SELECT COUNT(*) FROM events WHERE stream = ?", (stream,))[0][0]

    def turn_events(self, stream: str, turn_id: int, kinds: Sequence[str] | None = None) -> list[StoredEvent]:
        sql = f"SELECT {_EVENT_COLUMNS} FROM events WHERE stream = ? AND turn_id = ?"
        params: list = [stream, turn_id]
        if kinds:
            sql += " AND kind IN (" + ",".join("?" * len(kinds)) + ")"
            params.extend(kinds)
        return self._decode_rows(self._query(sql + " ORDER BY stream_seq", params))

    def query(self, sql: str, params: Sequence = ()) -> list[tuple]:
        """A raw read query (for read models that aggregate in SQL)."""
        return self._query(sql, params)


# ------------------------------------------------------------------------------------------------


class StoreWriter:
    """Creates stores and appends events by flux's write rules (§1.1).

    * WAL, ``synchronous=NORMAL``, 5 s busy timeout; bootstrap DDL in one ``BEGIN IMMEDIATE``.
    * one ``BEGIN IMMEDIATE`` transaction per append (or per :meth:`transaction` block);
    * contiguous 0-based ``stream_seq``, ULID ids, ms timestamps;
    * the registry row of an ``s_<n>`` stream follows every append (``updated_at``, ``last_seq``,
      ``model``, ``msg_count``);
    * ``turn_id`` only on turn-scoped kinds, never on ``message``/``run``/``turn_started``.

    Inside :meth:`grouped` (the agent loop's recorder), appends are buffered in memory and written
    in one transaction by :meth:`flush` — the caller decides when a row must be durable (see
    ``docs/store-format.md``, "Durability by effect"). The next ``stream_seq`` of each stream is
    kept in memory and re-read only when another connection committed in between
    (``PRAGMA data_version``).
    """

    def __init__(self, store_dir: str | os.PathLike[str], *, create: bool = True, clock=None):
        self.dir = Path(store_dir).expanduser()
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._tx_depth = 0
        self._lock = threading.RLock()
        self._next_seq: dict[str, int] = {}  # valid while data_version is unchanged
        self._data_version: int | None = None
        self._pending: list[tuple] = []  # buffered appends (grouped mode)
        self._pending_since = 0.0
        self._group: tuple[int, float] | None = None  # (max rows, max seconds) while grouped
        if not self.dir.exists():
            if not create:
                raise StoreError(f"{self.dir} does not exist")
            self.dir.mkdir(parents=True)
        events_path = self.dir / EVENTS_DB
        if events_path.exists() and events_path.stat().st_size > 0:
            _check_sqlite_file(events_path)
        try:
            self.conn = sqlite3.connect(str(events_path), isolation_level=None, check_same_thread=False, timeout=5.0)
            self.conn.execute("PRAGMA busy_timeout = 5000")
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self._bootstrap()
            self._bootstrap_flow()
        except sqlite3.Error as e:
            raise _translate(e, events_path) from None

    def _bootstrap(self) -> None:
        c = self.conn
        c.execute("BEGIN IMMEDIATE")
        try:
            tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            foreign = tables - {"events", "streams", "sqlite_sequence"}
            if foreign and "events" not in tables:
                raise StoreError(f"{self.dir / EVENTS_DB} is a SQLite database of another application — refusing to write to it")
            # executescript() would COMMIT mid-transaction, so run the DDL statement by statement.
            for stmt in schema.EVENTS_DDL.split(";"):
                if stmt.strip():
                    c.execute(stmt)
            have = {r[1] for r in c.execute("PRAGMA table_info(streams)")}
            for col in schema.CONTEXT_COLUMNS:
                if col not in have:
                    c.execute(f"ALTER TABLE streams ADD COLUMN {col} TEXT")
            c.execute(schema.STREAMS_INDEX_DDL)
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def _bootstrap_flow(self) -> None:
        flow = sqlite3.connect(str(self.dir / FLOW_DB), isolation_level=None)
        try:
            flow.execute("PRAGMA busy_timeout = 5000")
            flow.execute("PRAGMA journal_mode = WAL")
            flow.execute("BEGIN IMMEDIATE")
            for stmt in schema.FLOW_DDL.split(";"):
                if stmt.strip():
                    flow.execute(stmt)
            flow.execute("COMMIT")
        finally:
            flow.close()

    def close(self) -> None:
        with self._lock:
            if self.conn is not None:
                try:
                    self.flush()
                finally:
                    self.conn.close()
                self.conn = None  # type: ignore[assignment]

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
                if self._pending:
                    self.flush()
                self._begin()
            self._tx_depth += 1
            try:
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
                        self.conn.execute("COMMIT")
                    except BaseException:
                        if self.conn.in_transaction:
                            self.conn.execute("ROLLBACK")
                        self._next_seq.clear()
                        raise

    def _begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        dv = self.conn.execute("PRAGMA data_version").fetchone()[0]
        if dv != self._data_version:  # another connection wrote: our stream_seq counters may be stale
            self._next_seq.clear()
            self._data_version = dv

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
        """Write every buffered append in one transaction (a no-op when nothing is pending)."""
        with self._lock:
            if not self._pending:
                return
            pending, self._pending = self._pending, []
            from .events import Compacted, Message, ModelChanged, SessionStarted

            # The registry row ends as the per-row updates would leave it, in one UPDATE per stream.
            reg: dict[str, list] = {}  # stream -> [ts, seq, model, msg base (None: keep), messages added]
            with self.transaction():
                for stream, body, turn_id, ts in pending:
                    ev = self._insert(stream, body, turn_id, ts, None, update_registry=False)
                    r = reg.setdefault(stream, [ts, 0, None, None, 0])
                    r[0], r[1] = ts, ev.stream_seq
                    if isinstance(body, (SessionStarted, ModelChanged)):
                        r[2] = body.model
                    if isinstance(body, Message):
                        r[4] += 1
                    elif isinstance(body, Compacted):
                        r[3], r[4] = len(body.messages), 0
                for stream, (ts, seq, model, base, added) in reg.items():
                    n = session_number(stream)
                    if n is not None:
                        msg = f"msg_count + {added}" if base is None else str(base + added)
                        self.conn.execute(f"UPDATE streams SET updated_at = ?, last_seq = ?, model = COALESCE(?, model),"
                                          f" msg_count = {msg} WHERE n = ?", (ts, seq, model, n))

    def create_session(self, model: str, *, context: dict[str, str | None] | None = None,
                       ts: int | None = None) -> str:
        """Insert the registry row and the ``session_started`` event at ``stream_seq`` 0."""
        from .events import SessionStarted

        ctx = {k: (scrub_text(v) if isinstance(v, str) else v) for k, v in (context or {}).items()}
        model = scrub_text(model)
        ts = self.now() if ts is None else ts
        with self.transaction():
            cur = self.conn.execute(
                "INSERT INTO streams (model, created_at, updated_at, last_seq, msg_count, account, agent_id, agent_version, correlation_id)"
                " VALUES (?, ?, ?, 0, 0, ?, ?, ?, ?)",
                (model, ts, ts, ctx.get("account"), ctx.get("agent_id"), ctx.get("agent_version"), ctx.get("correlation_id")),
            )
            sid = f"s_{cur.lastrowid}"
            self._insert(sid, SessionStarted(model=model), None, ts, None, update_registry=False)
        return sid

    def append(self, stream: str, body: EventBody, *, turn_id: int | None = None, ts: int | None = None,
               event_id: str | None = None) -> StoredEvent:
        """Append one event in its own transaction (or the enclosing :meth:`transaction`)."""
        from .events import UNSCOPED_KINDS, decode_payload

        if turn_id is not None and body.KIND in UNSCOPED_KINDS:
            raise ValueError(f"{body.KIND} events never carry a turn_id")
        ts = self.now() if ts is None else ts
        if self._group is not None and self._tx_depth == 0 and event_id is None:
            return self._buffer(stream, body, turn_id, ts)
        with self.transaction():
            if event_id is not None:
                row = self.conn.execute(f"SELECT {_EVENT_COLUMNS} FROM events WHERE id = ?", (event_id,)).fetchone()
                if row is not None:  # idempotent retry
                    gs, st, sseq, eid, kind, ets, tid, payload = row
                    return StoredEvent(gs, st, sseq, eid, kind, ets, tid, decode_payload(kind, payload))
            return self._insert(stream, body, turn_id, ts, event_id, update_registry=True)

    def _buffer(self, stream: str, body: EventBody, turn_id: int | None, ts: int) -> None:
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.append((stream, body, turn_id, ts))
        max_rows, max_s = self._group  # type: ignore[misc]
        if len(self._pending) >= max_rows or time.monotonic() - self._pending_since >= max_s:
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
        from .events import Compacted, Message, ModelChanged, SessionStarted, encode_payload

        c = self.conn
        seq = self._next_seq.get(stream)
        if seq is None:
            seq = c.execute("SELECT COALESCE(MAX(stream_seq), -1) + 1 FROM events WHERE stream = ?", (stream,)).fetchone()[0]
        eid = event_id or new_ulid(ts)
        # Lone surrogates cannot be stored as UTF-8: the one rule (flux.canonical.scrub_text).
        payload = scrub_text(encode_payload(body))
        cur = c.execute(
            "INSERT INTO events (stream, stream_seq, id, kind, schema_version, ts, payload, turn_id) VALUES (?, ?, ?, ?, 1, ?, ?, ?)",
            (stream, seq, eid, body.KIND, ts, payload, turn_id),
        )
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
        return StoredEvent(cur.lastrowid, stream, seq, eid, body.KIND, ts, turn_id, body)

    def session_exists(self, session_id: str) -> bool:
        n = session_number(session_id)
        return n is not None and self.conn.execute("SELECT 1 FROM streams WHERE n = ?", (n,)).fetchone() is not None
