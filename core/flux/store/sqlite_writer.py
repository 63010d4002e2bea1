"""The SQLite backend's writer: a flux store directory (``events.db`` and ``flow.db``) written by
flux's rules — WAL, ``synchronous=NORMAL``, a 5 s busy timeout, bootstrap DDL in one
``BEGIN IMMEDIATE``, a new database built beside its place and linked in whole, one
``BEGIN IMMEDIATE`` transaction per append."""

from __future__ import annotations

import os
import re
import sqlite3
import stat
import time
from pathlib import Path
from typing import Callable, Sequence

from ..canonical import scrub_text
from ..errors import StoreError
from . import rawfile, schema
from .sqlite_files import EVENTS_DB, FLOW_DB, check_sqlite_file, translate_error
from .ulid import new_ulid
from .writer import StoreWriter

__all__ = ["SqliteWriter", "set_lock_wait_notice", "ensure_flow_db", "remove_stale_creating"]

_monotonic = time.monotonic

# A writer waits for another process's write lock up to _LOCK_WAIT_S in all, in slices of SQLite's
# busy wait, so that after the first slice it can say it is waiting (set_lock_wait_notice).
_LOCK_SLICE_MS = 250
_LOCK_WAIT_S = 5.0
_lock_wait_notice: Callable[[Path], None] | None = None


def set_lock_wait_notice(fn: Callable[[Path], None] | None) -> None:
    """``fn(path)`` is called when a writer starts waiting for another process's lock on the
    database ``path`` (the CLI says so on stderr, once); ``None`` turns the notice off."""
    global _lock_wait_notice
    _lock_wait_notice = fn


def _begin_immediate(c: "sqlite3.Connection | sqlite3.Cursor", path: Path) -> None:
    """``BEGIN IMMEDIATE``, waiting for another writer's lock as long as flux's 5 s busy timeout —
    saying so (once per wait) when the first slice of the wait was not enough."""
    try:
        c.execute("BEGIN IMMEDIATE")
        return
    except sqlite3.OperationalError as e:
        if "locked" not in str(e) and "busy" not in str(e):
            raise
    deadline = _monotonic() + _LOCK_WAIT_S - _LOCK_SLICE_MS / 1000
    notice = _lock_wait_notice
    if notice is not None:
        notice(path)
    while True:
        try:
            c.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as e:
            if ("locked" not in str(e) and "busy" not in str(e)) or _monotonic() >= deadline:
                raise


def _bootstrap_flow_schema(c: sqlite3.Connection) -> None:
    c.execute("BEGIN IMMEDIATE")
    try:
        for stmt in schema.FLOW_DDL.split(";"):
            if stmt.strip():
                c.execute(stmt)
        c.execute("COMMIT")
    except BaseException:
        c.execute("ROLLBACK")
        raise


def _bootstrap_flow_file(flow_path: Path) -> None:
    """Open ``flow.db`` in WAL mode and create its tables when absent."""
    flow = sqlite3.connect(str(flow_path), isolation_level=None)
    try:
        flow.execute("PRAGMA busy_timeout = 5000")
        flow.execute("PRAGMA journal_mode = WAL")
        _bootstrap_flow_schema(flow)
    finally:
        flow.close()


def _create_atomically(path: Path, bootstrap) -> None:
    """Create the SQLite file ``path`` whole or not at all: its schema is built in a private file
    beside it (WAL mode, checkpointed and closed), which is then hard-linked into place. A writer
    killed meanwhile leaves a stray temp file (the next write open removes it:
    :func:`remove_stale_creating`), never a table-less ``path``; two writers creating the
    same store race on the link, and the loser uses the winner's file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{new_ulid()}.creating")
    try:
        c = sqlite3.connect(str(tmp), isolation_level=None)
        try:
            c.execute("PRAGMA journal_mode = WAL")
            bootstrap(c)
        finally:
            c.close()
        for side in ("-wal", "-shm"):
            Path(str(tmp) + side).unlink(missing_ok=True)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another writer created it first: its file is as good as ours
        except OSError:  # a filesystem without hard links: rename, unless another writer won meanwhile
            if not os.path.lexists(path):
                os.replace(tmp, path)
    finally:
        for side in ("", "-wal", "-shm", "-journal"):
            Path(str(tmp) + side).unlink(missing_ok=True)



# ``_create_atomically``'s temp files (and their SQLite sidecars): ``.events.db.<pid>.<ulid>.creating``
_CREATING = re.compile(r"\.(?:events|flow)\.db\.(\d{1,10})\.[0-9A-HJKMNP-TV-Z]{26}\.creating(?:-wal|-shm|-journal)?")
_CREATING_STALE_S = 600.0  # a bootstrap takes milliseconds: a temp file this old has no live creator


def _pid_alive(pid: int) -> bool:
    """Whether process ``pid`` is running on this machine (a zombie — killed, not yet reaped — is not)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    except OSError:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read(512).rsplit(b")", 1)[-1].split()[:1]
        return state not in ([b"Z"], [b"X"])
    except OSError:
        return True  # no /proc: the signal check is all there is


def remove_stale_creating(store_dir: Path) -> list[str]:
    """Remove the temp files of store bootstraps whose process died before linking them in (a first
    ``flux run`` killed with ``kill -9``): a name ``_create_atomically`` gives, whose pid is not a
    live process, or which is older than any bootstrap takes. Returns the names removed. Only a
    write open calls this; a read open changes nothing."""
    removed: list[str] = []
    try:
        entries = list(os.scandir(store_dir))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        m = _CREATING.fullmatch(entry.name)
        if m is None:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode):
            continue  # not a file a bootstrap made: leave it alone
        pid = int(m.group(1))
        if pid == os.getpid() or (_pid_alive(pid) and now - st.st_mtime < _CREATING_STALE_S):
            continue  # its creator may still link it in
        try:
            os.unlink(entry.path)
            removed.append(entry.name)
        except OSError:
            pass
    return removed


def ensure_flow_db(store_dir: Path) -> None:
    """The flow store ``<store_dir>/flow.db``: made whole when missing, its tables created when
    absent (a SQLite file of its own, whichever backend holds the events)."""
    flow_path = store_dir / FLOW_DB
    if os.path.lexists(flow_path) and (not flow_path.is_file() or flow_path.stat().st_size > 0):
        check_sqlite_file(flow_path)
    try:
        if not os.path.lexists(flow_path):
            _create_atomically(flow_path, _bootstrap_flow_schema)
        _bootstrap_flow_file(flow_path)
    except sqlite3.Error as e:
        raise translate_error(e, flow_path) from None
    except UnicodeDecodeError:  # SQLite's error text about a damaged file, itself not UTF-8
        raise StoreError(f"{flow_path} is corrupt or not a SQLite database — restore it from a copy") from None


class SqliteWriter(StoreWriter):
    """A store directory's writer (see :class:`~flux.store.writer.StoreWriter` for the rules).

    The in-memory ``stream_seq`` counters are checked without a statement of their own when the
    table has flux's ``UNIQUE(stream, stream_seq)``; without it, ``PRAGMA data_version`` is read at
    the start of every transaction."""

    _db_errors = (sqlite3.Error,)
    _integrity_errors = (sqlite3.IntegrityError,)

    def __init__(self, store_dir: str | os.PathLike[str], *, create: bool = True, clock=None):
        self._init_state(store_dir, clock)
        self._data_version: int | None = None  # the next stream_seq counters are valid while it is unchanged
        if not self.dir.exists():
            if not create:
                raise StoreError(f"{self.dir} does not exist")
            self.dir.mkdir(parents=True)
        events_path = self._events_path = self.dir / EVENTS_DB
        flow_path = self.dir / FLOW_DB
        remove_stale_creating(self.dir)
        # Both files are checked before either is opened: a bad flow.db must not be found only
        # after events.db was opened read-write (which recovers a crashed writer's WAL into it).
        for path in (events_path, flow_path):
            if os.path.lexists(path) and (not path.is_file() or path.stat().st_size > 0):
                check_sqlite_file(path)
        self._held = None  # rawfile's registration of the connection on events.db
        try:
            if not os.path.lexists(events_path):
                _create_atomically(events_path, self._bootstrap)
            if not os.path.lexists(flow_path):
                _create_atomically(flow_path, _bootstrap_flow_schema)
            self.conn = sqlite3.connect(str(events_path), isolation_level=None, check_same_thread=False, timeout=5.0)
            self._held = rawfile.hold(events_path)
            self.conn.execute("PRAGMA busy_timeout = 5000")
            self.conn.execute("PRAGMA journal_mode = WAL")
            self.conn.execute("PRAGMA synchronous = NORMAL")
            self.conn.execute(f"PRAGMA busy_timeout = {_LOCK_SLICE_MS}")  # waits for a writer: _begin_immediate
            self._bootstrap(self.conn)
        except sqlite3.Error as e:
            self._close_quietly()
            raise translate_error(e, events_path) from None
        except BaseException:
            self._close_quietly()
            raise
        try:
            _bootstrap_flow_file(flow_path)
        except sqlite3.Error as e:
            self._close_quietly()
            raise translate_error(e, flow_path) from None
        except UnicodeDecodeError:  # SQLite's error text about a damaged file, itself not UTF-8
            self._close_quietly()
            raise StoreError(f"{flow_path} is corrupt or not a SQLite database — restore it from a copy") from None
        except BaseException:
            self._close_quietly()
            raise
        try:
            self._seq_guarded = self._has_seq_guard()
            self._cur = self.conn.cursor()  # the flush's statements (one cursor, not one per execute)
        except sqlite3.Error as e:
            self._close_quietly()
            raise translate_error(e, events_path) from None

    def check_health(self) -> None:
        """``PRAGMA quick_check`` of ``events.db``: a :class:`StoreError` naming the first problem when
        a page is damaged (an insert would fail on it half-way through a verb)."""
        path = self.dir / EVENTS_DB
        try:
            problems = [r[0] for r in self.conn.execute("PRAGMA quick_check(1)").fetchall()]
        except sqlite3.Error as e:
            raise translate_error(e, path) from None
        if problems != ["ok"]:
            self._close_without_checkpoint()
            raise StoreError(f"{path} is corrupt ({scrub_text(str(problems[0]))[:200]}) — restore it from a copy")

    def _close_without_checkpoint(self) -> None:
        """Close a writer that found the store damaged without folding a crashed writer's WAL into
        the damaged file: the last connection to close checkpoints, so a read-only one that has
        mapped the WAL index is held open across the close (a read-only connection never
        checkpoints). With an empty WAL there is nothing to fold, and the plain close tidies up."""
        wal = self.dir / (EVENTS_DB + "-wal")
        try:
            pending = wal.stat().st_size > 0
        except OSError:
            pending = False
        if not pending:
            self._close_quietly()
            return
        guard = None
        try:
            guard = sqlite3.connect(f"file:{self.dir / EVENTS_DB}?mode=ro", uri=True)
            guard_held = rawfile.hold(self.dir / EVENTS_DB)
            guard.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.Error:
            pass
        try:
            self._close_quietly()
        finally:
            if guard is not None:
                guard.close()
                rawfile.release(guard_held)

    def _close_quietly(self) -> None:
        """A failed open closes what it opened, now — not when the object is collected."""
        self._close_cursor()
        conn, self.conn = self.conn, None  # type: ignore[assignment]
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                pass
        rawfile.release(self._held)
        self._held = None

    def _close_connection(self) -> None:
        self._close_cursor()
        self.conn.close()
        rawfile.release(self._held)
        self._held = None

    def _close_cursor(self) -> None:
        """Reset the flush's cursor before its connection closes: a statement that failed mid-step
        (a damaged page) stays prepared while a traceback's frame holds the cursor, and SQLite keeps
        a closed connection's files open until its last statement is finalized."""
        cur, self._cur = getattr(self, "_cur", None), None  # type: ignore[assignment]
        if cur is not None:
            try:
                cur.close()
            except sqlite3.Error:
                pass

    def _bootstrap(self, c: sqlite3.Connection) -> None:
        _begin_immediate(c, self._events_path)
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

    def _has_seq_guard(self) -> bool:
        """Whether ``events`` has a full UNIQUE index on exactly (stream, stream_seq) — flux's
        ``UNIQUE(stream, stream_seq)``: then a stale in-memory ``stream_seq`` cannot be written, it
        fails the INSERT (see :meth:`flush`)."""
        c = self.conn
        for _seq, name, unique, _origin, partial in c.execute("PRAGMA index_list(events)").fetchall():
            if unique and not partial:
                cols = [r[2] for r in c.execute(f"PRAGMA index_info({_quote_ident(name)})").fetchall()]
                if cols == ["stream", "stream_seq"]:
                    return True
        return False

    def _begin(self) -> None:
        _begin_immediate(self.conn, self._events_path)
        dv = self.conn.execute("PRAGMA data_version").fetchone()[0]
        if dv != self._data_version:  # another connection wrote: our stream_seq counters may be stale
            self._next_seq.clear()
            self._data_version = dv

    def _begin_flush(self) -> None:
        _begin_immediate(self._cur, self._events_path)

    def _store_error(self, e: BaseException) -> StoreError:
        return translate_error(e, self._events_path)  # type: ignore[arg-type]

    def _insert_rows(self, flat: list) -> None:
        _insert_event_rows(self._cur, flat)

    def _reserve_keys(self, table: str, count: int) -> list[int]:
        """AUTOINCREMENT's next keys: past both the table's highest key and its high-water mark in
        ``sqlite_sequence`` (the write lock is held, so no other writer takes them meanwhile)."""
        key = "n" if table == "streams" else "global_seq"
        top = self.conn.execute(f"SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = ?), 0),"
                                f" COALESCE((SELECT MAX({key}) FROM {table}), 0))", (table,)).fetchone()[0]
        return list(range(top + 1, top + 1 + count))

    def _insert_stream_row(self, model: str, ts: int, ctx: dict) -> int:
        cur = self.conn.execute(
            "INSERT INTO streams (model, created_at, updated_at, last_seq, msg_count, account, agent_id, agent_version, correlation_id)"
            " VALUES (?, ?, ?, 0, 0, ?, ?, ?, ?)",
            (model, ts, ts, ctx.get("account"), ctx.get("agent_id"), ctx.get("agent_version"), ctx.get("correlation_id")),
        )
        return cur.lastrowid

    _INSERT = ("INSERT INTO events (stream, stream_seq, id, kind, schema_version, ts, payload, turn_id)"
               " VALUES (?, ?, ?, ?, 1, ?, ?, ?)")

    def _insert_event(self, row: tuple) -> int:
        return self.conn.execute(self._INSERT, row).lastrowid

    def _insert_run_rows(self, stream: str, ts: int, seq: int, ids: Sequence[str], payloads: Sequence[str]) -> None:
        """256 rows per ``INSERT … VALUES`` with the stream, ``ts`` and first ``stream_seq`` bound once."""
        n = len(payloads)
        step = self._RUN_ROWS_PER_INSERT
        for k in range(0, n, step):
            m = min(step, n - k)
            args: list = [stream, ts, seq + k] + [None] * (2 * m)
            args[3::2] = ids[k:k + m]  # (id, payload) per row, placed by slice: no call per row
            args[4::2] = payloads[k:k + m]
            self.conn.execute(_run_rows_insert(m), args)


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'





_EVENT_ROWS_PER_INSERT = 64
_EVENT_INSERTS: dict[int, str] = {}


def _insert_event_rows(conn: sqlite3.Connection | sqlite3.Cursor, flat: list) -> None:
    """Insert event rows given flat, 7 values a row (stream, stream_seq, id, kind, ts, payload,
    turn_id; schema_version is 1), up to 64 rows per ``INSERT … VALUES (…), (…)``: the rows an
    ``executemany`` of the one-row INSERT writes, in the same order, at about two thirds of its
    cost — per row, the driver's bind-reset-step loop cost as much as SQLite storing it. (The
    bench's write floor inserts the same way: benchmarks/bench_peers.py.)"""
    n = len(flat) // 7
    step = _EVENT_ROWS_PER_INSERT
    if 0 < n <= step:  # one statement (every per-op commit of the recorder)
        sql = _EVENT_INSERTS.get(n)
        if sql is None:
            sql = _EVENT_INSERTS[n] = ("INSERT INTO events (stream, stream_seq, id, kind, schema_version, ts, payload,"
                                       " turn_id) VALUES " + ",".join(["(?, ?, ?, ?, 1, ?, ?, ?)"] * n))
        conn.execute(sql, flat)
        return
    for k in range(0, n, step):
        m = min(step, n - k)
        sql = _EVENT_INSERTS.get(m)
        if sql is None:
            sql = _EVENT_INSERTS[m] = ("INSERT INTO events (stream, stream_seq, id, kind, schema_version, ts, payload,"
                                       " turn_id) VALUES " + ",".join(["(?, ?, ?, ?, 1, ?, ?, ?)"] * m))
        conn.execute(sql, flat if m == n else flat[7 * k:7 * (k + m)])


_RUN_INSERTS: dict[int, str] = {}


def _run_rows_insert(m: int) -> str:
    """``INSERT`` of ``m`` run rows: ``?1`` stream, ``?2`` ts, ``?3`` the first stream_seq, then an
    (id, payload) pair per row."""
    sql = _RUN_INSERTS.get(m)
    if sql is None:
        rows = ",".join(f"(?1, ?3 + {j}, ?{4 + 2 * j}, 'run', 1, ?2, ?{5 + 2 * j}, NULL)" for j in range(m))
        sql = _RUN_INSERTS[m] = ("INSERT INTO events (stream, stream_seq, id, kind, schema_version, ts, payload,"
                                 " turn_id) VALUES " + rows)
    return sql


StoreWriter.register_backend(lambda path: True, SqliteWriter)
