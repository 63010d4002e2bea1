"""Opening a flux ``Storage::dir``: a read-only reader for browsing and a writer that appends by
flux's write rules (spec §1.1).

Read-only means read-only: opening a store to browse creates no file and changes no byte — not
even an mtime. SQLite's ``mode=ro`` is not enough for that: on a WAL database every reader takes a
read mark in the ``-shm`` (bytes and mtime change, and a garbage ``-shm`` gets rewritten), and it
creates missing sidecars. So the reader never attaches to a store's ``-shm``:

* WAL database with no (or an empty) ``-wal``: nothing is pending, open ``immutable=1`` (touches
  nothing); a later writer shows up in :meth:`StoreReader.change_token` and the reader reopens.
* WAL database with a non-empty ``-wal`` (a live writer, or a killed one, with or without its
  ``-shm``, or garbage): read a private snapshot — ``events.db`` and ``-wal`` copied into a temp
  dir (copied again if a writer restarted its WAL meanwhile); SQLite rebuilds the index there and
  ignores a WAL whose header or checksums are garbage. The temp dir is removed by :meth:`close`,
  when ``__init__`` fails, and at the latest when the reader is garbage-collected.
* rollback-journal database: ``mode=ro``. When SQLite answers the first read with "hot journal" (a
  writer killed inside a transaction — e.g. inside the bootstrap, before the store is in WAL mode
  — left a ``-journal`` that a ``mode=ro`` connection may not roll back), the same private
  snapshot of ``events.db`` and its ``-journal``: SQLite rolls the unfinished transaction back in
  the copy, so the reader sees the store as it was before it; the store itself is left for the
  next writer to roll back. A live writer's journal is not hot (it holds its lock): that is still
  "locked by a writer".

Hostile files: ``events.db`` (or a sidecar) that is a FIFO, socket, device or directory is refused
with one line before anything opens it (``open()`` on a FIFO would block for ever). Hostile rows:
a registry row whose columns hold NULL, BLOBs or the wrong types is coerced (or skipped and
counted); an event row whose payload is not UTF-8, not JSON or not an object is skipped and counted
in :attr:`StoreReader.skipped_rows`.
"""

from __future__ import annotations

import itertools
import math
import os
import re
import sqlite3
import stat
import threading
import time
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence
from urllib.parse import quote

from ..canonical import scrub_text
from ..documents import short
from ..errors import SessionNotFound, StoreError, StoreLockedError
from ..records import FrozenRecord
from . import rawfile, schema
from .ulid import new_ulid, new_ulids

if TYPE_CHECKING:
    from .events import EventBody

__all__ = [
    "StoredEvent", "SessionRow", "StoreReader", "StoreWriter", "default_store_dir", "session_number", "store_error",
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


class StoredEvent(FrozenRecord):
    """One ``events`` row, decoded."""

    __slots__ = ("global_seq", "stream", "stream_seq", "id", "kind", "ts", "turn_id", "body")
    global_seq: int
    stream: str
    stream_seq: int
    id: str
    kind: str
    ts: int
    turn_id: int | None
    body: EventBody

    def __init__(self, global_seq: int, stream: str, stream_seq: int, id: str, kind: str, ts: int,  # noqa: A002
                 turn_id: int | None, body: EventBody) -> None:
        _set = object.__setattr__
        _set(self, "global_seq", global_seq)
        _set(self, "stream", stream)
        _set(self, "stream_seq", stream_seq)
        _set(self, "id", id)
        _set(self, "kind", kind)
        _set(self, "ts", ts)
        _set(self, "turn_id", turn_id)
        _set(self, "body", body)


class SessionRow(FrozenRecord):
    """One ``streams`` registry row (the session list's unit)."""

    __slots__ = ("n", "model", "created_at", "updated_at", "last_seq", "msg_count", "account", "agent_id", "agent_version",
                 "correlation_id")
    n: int
    model: str
    created_at: int
    updated_at: int
    last_seq: int
    msg_count: int
    account: str | None
    agent_id: str | None
    agent_version: str | None
    correlation_id: str | None

    def __init__(self, n: int, model: str, created_at: int, updated_at: int, last_seq: int, msg_count: int,
                 account: str | None = None, agent_id: str | None = None, agent_version: str | None = None,
                 correlation_id: str | None = None) -> None:
        _set = object.__setattr__
        _set(self, "n", n)
        _set(self, "model", model)
        _set(self, "created_at", created_at)
        _set(self, "updated_at", updated_at)
        _set(self, "last_seq", last_seq)
        _set(self, "msg_count", msg_count)
        _set(self, "account", account)
        _set(self, "agent_id", agent_id)
        _set(self, "agent_version", agent_version)
        _set(self, "correlation_id", correlation_id)

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


def _regular_file(path: Path, *, what: str = "the store's database", option: str = "--store") -> os.stat_result | None:
    """``stat`` of a regular file (symlinks followed); None if missing; StoreError for anything else.

    Checked before anything opens the path: ``open()`` on a FIFO blocks until a writer appears."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StoreError(f"{path} cannot be examined ({e.strerror or e}) — {what} must be a regular file") from None
    if stat.S_ISDIR(st.st_mode):
        raise StoreError(f"{path} is a directory, not a SQLite database — point {option} at the directory that holds events.db")
    if not stat.S_ISREG(st.st_mode):
        kind = "FIFO" if stat.S_ISFIFO(st.st_mode) else "socket" if stat.S_ISSOCK(st.st_mode) else "device or special file"
        raise StoreError(f"{path} is a {kind}, not a regular file — {what} must be a regular file; remove or replace it")
    return st


def _read_head(path: Path, n: int) -> bytes:
    return rawfile.read_head(path, n)  # never a close that drops this process's SQLite locks


def _check_sqlite_file(path: Path, option: str = "--store") -> None:
    """``option``: the command-line option that named the store, for the advice in the error."""
    _regular_file(path, option=option)
    try:
        head = _read_head(path, 100)
    except PermissionError:
        raise StoreError(f"{path} is not readable — check its permissions") from None
    except IsADirectoryError:
        raise StoreError(f"{path} is a directory, not a SQLite database — point {option} at the directory that holds events.db") from None
    except OSError as e:
        raise StoreError(f"{path} cannot be read ({e.strerror or e})") from None
    if len(head) == 0:
        raise StoreError(f"{path} is empty — not a flux store; point {option} at a directory flux wrote, or make one with `flux demo --store DIR`")
    if not head.startswith(SQLITE_MAGIC):
        raise StoreError(f"{path} is not a SQLite database — point {option} at a flux store directory (it holds events.db and flow.db)")


def _wal_mode(path: Path) -> bool:
    """Whether SQLite would open the file in WAL mode — or might: SQLite goes by the read-version
    byte (19) alone, and a header whose byte 19 is not the rollback value 1 is never opened with
    ``mode=ro`` (that would create ``-wal``/``-shm`` next to it)."""
    head = _read_head(path, 20)
    return len(head) < 20 or head[19] != 1


def _size(p: Path) -> int:
    """Size of a sidecar; -1 when missing; StoreError when it is not a regular file."""
    st = _regular_file(p, what="a SQLite sidecar")
    return -1 if st is None else st.st_size


def _wal_stamp(p: Path) -> tuple:
    """What changes when a writer appends to or restarts its WAL (size, mtime, salted header)."""
    try:
        st = os.stat(p)
        return (st.st_size, st.st_mtime_ns, _read_head(p, 32))
    except OSError:
        return (None,)


def stored_event(gs: int, stream: str, sseq: int, eid: object, kind: str, ts: object, turn_id: object,
                 body: "EventBody") -> StoredEvent:
    """A decoded ``events`` row, its loose columns coerced as every read coerces them."""
    return StoredEvent(gs, stream, sseq, _as_text(eid) or "", kind, _as_int(ts), turn_id if type(turn_id) is int else None, body)


def valid_event_row(gs: object, stream: object, sseq: object, kind: object, payload: object) -> bool:
    """Whether a row has the values decoding needs (else it is skipped and counted): a text
    payload and kind, integer sequence numbers, a text stream."""
    return isinstance(payload, str) and isinstance(kind, str) and type(sseq) is int and type(gs) is int \
        and isinstance(stream, str)


class NotUTF8(StoreError):
    """:meth:`StoreReader.scan` met a TEXT cell that is not UTF-8: scan again with ``tolerant=True``."""


class _Undecodable(bytes):
    """A TEXT cell whose bytes are not UTF-8 (what the tolerant text factory returns for it)."""


def _tolerant_text(data: bytes) -> str | bytes:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _Undecodable(data)


def _as_int(v: object, default: int = 0) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and math.isfinite(v):
        return int(v)
    return default


def _as_text(v: object, default: str | None = "") -> str | None:
    if isinstance(v, str):
        return v
    if v is None:
        return default
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def _session_row(r: tuple) -> SessionRow | None:
    """A registry row with every column coerced to its type (NULLs, BLOBs, wrong types); None
    when even the session number is unusable."""
    n = r[0]
    if not isinstance(n, int) or isinstance(n, bool):
        return None
    return SessionRow(n, _as_text(r[1]) or "", _as_int(r[2]), _as_int(r[3]), _as_int(r[4]), _as_int(r[5]),
                      *(_as_text(v, None) for v in r[6:10]))


def _remove_tree(path: str) -> None:
    import shutil  # lazy: only a snapshot (a store with a live WAL) needs it

    shutil.rmtree(path, ignore_errors=True)


def _hot_journal(conn: sqlite3.Connection) -> bool:
    """Whether a ``mode=ro`` connection's database has a hot ``-journal`` it may not roll back (a
    writer killed inside a transaction): SQLite answers the first read with SQLITE_READONLY_ROLLBACK.
    Anything else (a live writer's lock, a corrupt file) is left to the first real query."""
    try:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError as e:
        return getattr(e, "sqlite_errorcode", None) == _SQLITE_READONLY_ROLLBACK
    except sqlite3.DatabaseError:
        return False
    return False


_SQLITE_READONLY_ROLLBACK = 776  # SQLITE_READONLY | (3 << 8)


def store_error(e: sqlite3.Error, path: Path) -> StoreError:
    """A SQLite error on ``path`` as the one-line :class:`StoreError` a person can act on."""
    return _translate(e, path)


def _translate(e: sqlite3.Error, path: Path) -> StoreError:
    msg = str(e)
    if "locked" in msg or "busy" in msg:
        return StoreLockedError(f"{path} is locked by a writer — wait for it to finish (or stop it) and try again")
    if "not a database" in msg or "malformed" in msg or "encrypted" in msg:
        return StoreError(f"{path} is corrupt or not a SQLite database ({msg}) — restore it from a copy")
    return StoreError(f"cannot read {path}: {msg}")


_JSON_EXTRACT = re.compile(r"json_extract\(payload, ('[^']*')\)")


def guard_json_extract(sql: str) -> str:
    """``sql`` with each ``json_extract(payload, '<path>')`` made NULL on a malformed payload."""
    return _JSON_EXTRACT.sub(r"(CASE WHEN json_valid(payload) THEN json_extract(payload, \1) END)", sql)


class StoreReader:
    """Read-only access to a store directory. Thread-safe: one connection, serialized by a lock.

    Every query method translates SQLite errors into :class:`StoreError` with a one-line reason.
    """

    def __init__(self, store_dir: str | os.PathLike[str], *, busy_timeout_s: float = 2.0, option: str = "--store"):
        """``option``: the command-line option that named ``store_dir`` (``--store-b`` for the other
        side of a diff), so an error's advice names the one to fix."""
        self.dir = Path(store_dir).expanduser()
        self.events_path = self.dir / EVENTS_DB
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.RLock()
        self._snapshot_dir: str | None = None
        self._snapshot_finalizer: weakref.finalize | None = None
        self._conn: sqlite3.Connection | None = None
        self._held = None  # rawfile's registration of a connection on the store's own file
        self.skipped_rows = 0  # corrupt payload rows skipped by reads so far
        if not self.dir.exists():
            raise StoreError(f"{self.dir} does not exist — create a store with `flux demo --store {self.dir}` or point {option} at an existing one")
        if not self.dir.is_dir():
            raise StoreError(f"{self.dir} is not a directory — {option} takes the directory that holds events.db")
        if not os.path.lexists(self.events_path):
            raise StoreError(f"{self.dir} is not a flux store: it has no events.db — point {option} at a store directory, or make one with `flux demo --store DIR`")
        try:
            _check_sqlite_file(self.events_path, option)
            self._open()
            self._validate_schema()
            self._token = self._file_token()
        except BaseException:
            self.close()  # no connection and no snapshot dir outlive a failed open
            raise

    # -- connection management --------------------------------------------------------------

    def _open(self) -> None:
        path = self.events_path
        wal_path = Path(str(path) + "-wal")
        shm_path = Path(str(path) + "-shm")
        uri_path = quote(str(path.resolve()))
        self.mode = "ro"
        _regular_file(path)
        try:
            wal_mode = _wal_mode(path)
        except OSError as e:
            raise StoreError(f"{path} cannot be read ({e.strerror or e})") from None
        # A rollback-journal header with a non-empty -wal beside it is read like a WAL store: SQLite
        # opens any non-empty -wal it finds (and would write read marks into its -shm).
        for _attempt in range(20):
            if wal_mode or _size(wal_path) > 0:
                # The -shm is never opened (see the module docstring); it is only refused if it is a
                # FIFO or the like, since SQLite would try to map it in the snapshot's place otherwise.
                _size(shm_path)
                if _size(wal_path) <= 0:
                    uri = f"file:{uri_path}?immutable=1"
                    self.mode = "immutable"
                else:
                    snap = self._snapshot_uri(path, wal_path)
                    if snap is None:  # the -wal vanished mid-copy (its writer closed): look again
                        continue
                    uri = snap
                    self.mode = "snapshot"
            else:
                uri = f"file:{uri_path}?mode=ro"
            break
        else:
            raise StoreError(f"cannot snapshot {path} for reading: its -wal keeps vanishing mid-copy — "
                             "writers are opening and closing it; try again")
        try:
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=self._busy_timeout_s)
            conn.execute("PRAGMA query_only = 1")
            if self.mode == "ro" and _hot_journal(conn):
                conn.close()
                snap = None
                for _attempt in range(20):
                    snap = self._snapshot_uri(path, Path(str(path) + "-journal"))
                    if snap is not None:
                        break
                    if not os.path.exists(str(path) + "-journal"):  # rolled back by a writer meanwhile
                        break
                uri = snap or f"file:{uri_path}?mode=ro"
                self.mode = "snapshot" if snap else "ro"
                conn = sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=self._busy_timeout_s)
                conn.execute("PRAGMA query_only = 1")
        except sqlite3.Error as e:
            raise _translate(e, path) from None
        self._conn = conn
        self._held = rawfile.hold(path) if self.mode in ("ro", "immutable") else None

    def _snapshot_uri(self, path: Path, sidecar: Path) -> str | None:
        """Copy ``events.db`` and its sidecar (``-wal``, or a hot ``-journal``) into a private temp
        dir; a writer that changed the sidecar while the database was being copied (a checkpoint, a
        restarted WAL, a journal written on) makes the pair inconsistent, so the copy is repeated
        until the sidecar is the same before and after. ``None`` when the sidecar vanished before it
        was copied (its writer checkpointed and closed): the caller looks at the store again."""
        import tempfile  # lazy: a reader of a quiet store never snapshots

        self._drop_snapshot()
        tmp = tempfile.mkdtemp(prefix="flux-snapshot-")
        self._snapshot_dir = tmp
        self._snapshot_finalizer = weakref.finalize(self, _remove_tree, tmp)
        try:
            for _attempt in range(5):
                stamp = _wal_stamp(sidecar)
                try:
                    rawfile.copy_file(sidecar, os.path.join(tmp, EVENTS_DB + sidecar.name[len(path.name):]))
                except FileNotFoundError:
                    self._drop_snapshot()
                    return None
                rawfile.copy_file(path, os.path.join(tmp, EVENTS_DB))
                if _wal_stamp(sidecar) == stamp:
                    break
        except OSError as e:
            self._drop_snapshot()
            raise StoreError(f"cannot snapshot {path} for reading ({e.strerror or e}) — is the disk (or $TMPDIR) full?") from None
        return f"file:{quote(os.path.join(tmp, EVENTS_DB))}"

    def _drop_snapshot(self) -> None:
        if self._snapshot_dir:
            fin = getattr(self, "_snapshot_finalizer", None)
            if fin is not None:
                fin()  # removes the dir once; detached afterwards
                self._snapshot_finalizer = None
            else:
                _remove_tree(self._snapshot_dir)
            self._snapshot_dir = None

    def _validate_schema(self) -> None:
        tables = {r[0] for r in self._query("SELECT name FROM sqlite_master WHERE type='table'") if isinstance(r[0], str)}
        if not tables:
            raise StoreError(f"{self.events_path} has no tables yet — a writer is creating the store (or was killed "
                             "while creating it: the next `flux run` finishes it)")
        if "events" not in tables:
            what = ", ".join(sorted(tables))[:200]
            raise StoreError(f"{self.events_path} is a SQLite database of another application ({what}) — not a flux event store")
        cols = {r[1] for r in self._query("PRAGMA table_info(events)")}
        missing = {"global_seq", "stream", "stream_seq", "kind", "payload", "ts"} - cols
        if missing:
            raise StoreError(f"{self.events_path} has an `events` table without flux's columns ({', '.join(sorted(missing))}) — not a flux event store")
        self.has_streams = "streams" in tables
        self.stream_columns = {r[1] for r in self._query("PRAGMA table_info(streams)")} if self.has_streams else set()

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
                rawfile.release(self._held)
                self._held = None
            self._drop_snapshot()

    def __enter__(self) -> "StoreReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _file_token(self) -> tuple:
        out = []
        for suffix in ("", "-wal", "-journal"):
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
                    self._conn = None
                    rawfile.release(self._held)
                    self._held = None
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
                    if "decode to UTF-8" in str(e):
                        return self._query_tolerant(sql, params)
                    raise _translate(e, self.events_path) from None
                except sqlite3.DatabaseError as e:
                    raise _translate(e, self.events_path) from None
                except UnicodeDecodeError:
                    return self._query_tolerant(sql, params)
                except (RecursionError, MemoryError, OverflowError, ValueError) as e:
                    raise StoreError(f"cannot read {self.events_path}: {type(e).__name__} on a hostile row — restore the store from a copy") from None

    def scan(self, sql: str, params: Sequence = (), *, tolerant: bool = False, batch: int = 4096) -> Iterator[tuple]:
        """The rows of a read query streamed in batches, so a caller that folds them as they come
        holds one batch, not the whole result. The reader is locked until the iterator is done
        (or closed). A TEXT cell that is not UTF-8 raises :class:`NotUTF8` unless ``tolerant``
        (then it comes back as bytes, as :meth:`query` returns it): the caller scans again
        tolerantly from the start — rows already seen are not replayed."""
        for rows in self.scan_batches(sql, params, tolerant=tolerant, batch=batch):
            yield from rows

    def scan_batches(self, sql: str, params: Sequence = (), *, tolerant: bool = False,
                     batch: int = 4096) -> Iterator[list[tuple]]:
        """:meth:`scan`, a batch (a list of up to ``batch`` rows) at a time: a hot loop over the
        rows iterates each list itself instead of resuming a generator per row."""
        with self._lock:
            if self._conn is None:
                raise StoreError("the store was closed")
            if tolerant:
                self._conn.text_factory = _tolerant_text
            try:
                deadline = time.monotonic() + self._busy_timeout_s
                while True:
                    try:
                        cur = self._conn.execute(sql, params)
                        break
                    except sqlite3.OperationalError as e:
                        if ("locked" in str(e) or "busy" in str(e)) and time.monotonic() < deadline:
                            time.sleep(0.05)
                            continue
                        raise
                while True:
                    rows = cur.fetchmany(batch)
                    if not rows:
                        return
                    yield rows
            except sqlite3.OperationalError as e:
                if "decode to UTF-8" in str(e) and not tolerant:
                    raise NotUTF8(f"{self.events_path} has a TEXT cell that is not UTF-8") from None
                raise _translate(e, self.events_path) from None
            except sqlite3.DatabaseError as e:
                raise _translate(e, self.events_path) from None
            except UnicodeDecodeError:
                if tolerant:
                    raise StoreError(f"cannot read {self.events_path}: a TEXT cell is not UTF-8") from None
                raise NotUTF8(f"{self.events_path} has a TEXT cell that is not UTF-8") from None
            except (RecursionError, MemoryError, OverflowError, ValueError) as e:
                raise StoreError(f"cannot read {self.events_path}: {type(e).__name__} on a hostile row — restore the store from a copy") from None
            finally:
                if tolerant:
                    self._conn.text_factory = str

    def _query_tolerant(self, sql: str, params: Sequence) -> list[tuple]:
        """The query again with a text factory that returns non-UTF-8 TEXT cells as
        :class:`_Undecodable` bytes instead of failing the whole result (only paid when needed)."""
        self._conn.text_factory = _tolerant_text
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as e:
            raise _translate(e, self.events_path) from None
        except (RecursionError, MemoryError, OverflowError, ValueError) as e:
            raise StoreError(f"cannot read {self.events_path}: {type(e).__name__} on a hostile row — restore the store from a copy") from None
        finally:
            self._conn.text_factory = str

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
            row = _session_row(r)
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
            raise SessionNotFound(f"no session {short(session_id)} in {self.dir} — list them with `flux sessions --store {self.dir}`")
        return found[0]

    def latest_session(self) -> SessionRow:
        """The session with the highest ``n`` (flux's ``last``; not the most recently updated)."""
        rows = self._query(self._session_select() + " WHERE typeof(n) = 'integer' ORDER BY n DESC LIMIT 1") if self.has_streams else []
        found = self._session_rows(rows)
        if not found:
            raise SessionNotFound(f"{self.dir} has no sessions yet — record one with `flux demo --store {self.dir}`")
        return found[0]

    def resolve_session(self, ref: str | None) -> SessionRow:
        """``s_<n>`` or ``last`` (default) to a registry row."""
        if ref is None or ref == "last":
            return self.latest_session()
        return self.get_session(ref)

    def children_of(self, session_id: str) -> list[SessionRow]:
        """Sessions whose ``correlation_id`` names this one: forks, what-ifs and sub-agents (§2.5)."""
        if "correlation_id" not in self.stream_columns:
            return []
        return self._session_rows(self._query(self._session_select() + " WHERE correlation_id = ? ORDER BY n ASC", (session_id,)))

    # -- events ---------------------------------------------------------------------------------

    def _decode_rows(self, rows: Iterable[tuple]) -> list[StoredEvent]:
        from .events import PayloadError, decode_payload  # lazy: listing never decodes events

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
        if min_stream_seq is not None:
            sql += " AND stream_seq >= ?"
            params.append(min_stream_seq)
        if max_stream_seq is not None:
            sql += " AND stream_seq < ?"
            params.append(max_stream_seq)
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
        sql = f"SELECT {_EVENT_COLUMNS} FROM events WHERE stream = ? AND turn_id = ?"
        params: list = [stream, turn_id]
        if kinds:
            sql += " AND kind IN (" + ",".join("?" * len(kinds)) + ")"
            params.extend(kinds)
        return self._decode_rows(self._query(sql + " ORDER BY stream_seq", params))

    def query(self, sql: str, params: Sequence = ()) -> list[tuple]:
        """A raw read query (for read models that aggregate in SQL)."""
        return self._query(sql, params)

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


# ------------------------------------------------------------------------------------------------


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


class StoreWriter:
    """Creates stores and appends events by flux's write rules (§1.1).

    * WAL, ``synchronous=NORMAL``, 5 s busy timeout; bootstrap DDL in one ``BEGIN IMMEDIATE``; a
      new ``events.db`` / ``flow.db`` is built beside its place and linked in whole.
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
        self._numbers: dict[str, int | None] = {}  # stream -> its registry row (session_number), as seen
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
                _check_sqlite_file(path)
        self.conn = None  # type: ignore[assignment]
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
            raise _translate(e, events_path) from None
        except BaseException:
            self._close_quietly()
            raise
        try:
            self._bootstrap_flow()
        except sqlite3.Error as e:
            self._close_quietly()
            raise _translate(e, flow_path) from None
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
            raise _translate(e, events_path) from None

    def check_health(self) -> None:
        """``PRAGMA quick_check`` of ``events.db``: a :class:`StoreError` naming the first problem when
        a page is damaged (an insert would fail on it half-way through a verb)."""
        path = self.dir / EVENTS_DB
        try:
            problems = [r[0] for r in self.conn.execute("PRAGMA quick_check(1)").fetchall()]
        except sqlite3.Error as e:
            raise _translate(e, path) from None
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

    def _bootstrap_flow(self) -> None:
        flow = sqlite3.connect(str(self.dir / FLOW_DB), isolation_level=None)
        try:
            flow.execute("PRAGMA busy_timeout = 5000")
            flow.execute("PRAGMA journal_mode = WAL")
            _bootstrap_flow_schema(flow)
        finally:
            flow.close()

    def close(self) -> None:
        with self._lock:
            if self.conn is not None:
                try:
                    self.flush()
                finally:
                    self._close_cursor()
                    self.conn.close()
                    rawfile.release(self._held)
                    self._held = None
                self.conn = None  # type: ignore[assignment]
                self._cur = None  # type: ignore[assignment]

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
                        raise SessionNotFound(f"no session {sid!r} in {self.dir} — nothing was deleted")
                for sid, n in numbers.items():
                    deleted[sid] = self.conn.execute("DELETE FROM events WHERE stream = ?", (sid,)).rowcount
                    self.conn.execute("DELETE FROM streams WHERE n = ?", (n,))
                    self._next_seq.pop(sid, None)
                    self._numbers.pop(sid, None)
        except sqlite3.Error as e:
            raise _translate(e, self.dir / EVENTS_DB) from None
        return deleted

    def _begin(self) -> None:
        _begin_immediate(self.conn, self._events_path)
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
                    _begin_immediate(cur, self._events_path)
                else:
                    self._begin()
                try:
                    self._write_pending()
                    cur.execute("COMMIT")
                    return
                except sqlite3.IntegrityError:
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

    _INSERT = ("INSERT INTO events (stream, stream_seq, id, kind, schema_version, ts, payload, turn_id)"
               " VALUES (?, ?, ?, ?, 1, ?, ?, ?)")

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
                _insert_event_rows(cur, flat)
                num = self._numbers.get(stream, -1)
                if num == -1:
                    num = self._numbers[stream] = session_number(stream)
                if num is not None:  # text rows move msg_count by their messages, never the model
                    cur.execute(_REGISTRY_ADD, (flat[-3], last, None, flat[3::7].count("message"), num))
                return
        stamps = [row[4] for row in pending]
        rows: list = []  # the rows' values, flat (7 per row: _insert_event_rows)
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
            ev = _events()  # imported on first use (a reader-only process never loads the encoders)
            rows += (stream, seq, eid, kind, ts, scrub_text(ev.encode_payload(payload)), turn_id)
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
        _insert_event_rows(cur, rows)
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
        return self.conn.execute("SELECT COALESCE(MAX(stream_seq), -1) + 1 FROM events WHERE stream = ?", (stream,)).fetchone()[0]

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
        if turn_id is not None and body.KIND in schema.UNSCOPED_KINDS:
            raise ValueError(f"{body.KIND} events never carry a turn_id")
        ts = self.now() if ts is None else ts
        if self._group is not None and self._tx_depth == 0 and event_id is None:
            return self._buffer(stream, body.KIND, body, turn_id, ts)
        from .events import decode_payload

        with self.transaction():
            if event_id is not None:
                row = self.conn.execute(f"SELECT {_EVENT_COLUMNS} FROM events WHERE id = ?", (event_id,)).fetchone()
                if row is not None:  # idempotent retry
                    gs, st, sseq, eid, kind, ets, tid, payload = row
                    return StoredEvent(gs, st, sseq, eid, kind, ets, tid, decode_payload(kind, payload))
            return self._insert(stream, body, turn_id, ts, event_id, update_registry=True)

    def append_many(self, stream: str, bodies: Sequence[EventBody], *, turn_id: int | None = None,
                    ts: int | None = None) -> int:
        """Append ``bodies`` to one stream in one transaction (or the enclosing one) with one
        multi-row INSERT and one registry update: the rows ``append`` would write one by one
        (same payloads, consecutive ``stream_seq``, ids minted in order). Returns how many."""
        from .events import UNSCOPED_KINDS

        if turn_id is not None and any(b.KIND in UNSCOPED_KINDS for b in bodies):
            raise ValueError("an unscoped event kind never carries a turn_id")
        return self._append_bulk(stream, [(b.KIND, b) for b in bodies], turn_id, ts)

    def append_runs(self, stream: str, bodies: Sequence[dict], *, turn_id: int | None = None,
                    ts: int | None = None) -> int:
        """:meth:`append_many` for ``run`` bodies as the interpreter emits them (dicts): the rows
        ``append(stream, Run(decode_run(body)))`` would write, encoded without the round trip."""
        from .events import encode_run_body

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
        from .events import Compacted, Message, ModelChanged, SessionStarted, encode_payload

        c = self.conn
        seq = self._next_seq.get(stream)
        if seq is None:
            seq = self._max_seq(stream)
        eid = event_id or new_ulid(ts)
        # Lone surrogates cannot be stored as UTF-8: the one rule (flux.canonical.scrub_text).
        payload = scrub_text(encode_payload(body))
        cur = c.execute(self._INSERT, (stream, seq, eid, body.KIND, ts, payload, turn_id))
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

    # -- bulk run rows (fork's prefix, resurrect's and what-if's re-executed runs) ----------------

    _RUN_ROWS_PER_INSERT = 256

    def append_run_texts(self, stream: str, payloads: Sequence[str], *, ts: int | None = None) -> int:
        """Append ``run`` events whose payload texts are already encoded (``encode_run_body``), in
        one transaction (or the enclosing one): exactly the rows :meth:`append_runs` writes —
        consecutive ``stream_seq``, ids minted in order, one ``ts``, scrubbed payloads, no
        ``turn_id``, the same registry update — but 256 rows per ``INSERT … VALUES`` with the
        stream, ``ts`` and first ``stream_seq`` bound once, and the ids minted in one go
        (:func:`~flux.store.ulid.new_ulids`). One statement per row costs as much again in the
        driver's bind-and-step loop as SQLite spends storing the row. Returns how many."""
        from .ulid import new_ulids

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
            step = self._RUN_ROWS_PER_INSERT
            for k in range(0, n, step):
                m = min(step, n - k)
                batch = payloads[k:k + m]
                args: list = [stream, ts, seq + k] + [None] * (2 * m)
                args[3::2] = ids[k:k + m]  # (id, payload) per row, placed by slice: no call per row
                # Lone surrogates cannot be stored as UTF-8 (scrub_text); an all-ASCII batch holds none
                args[4::2] = batch if "".join(batch).isascii() else list(map(scrub_text, batch))
                c.execute(_run_rows_insert(m), args)
            num = session_number(stream)
            if num is not None:  # what _write_pending's per-stream update does for run rows
                c.execute("UPDATE streams SET updated_at = ?, last_seq = ?, model = COALESCE(?, model),"
                          " msg_count = msg_count + 0 WHERE n = ?", (ts, seq + n - 1, None, num))
        return n


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _events():
    """flux.store.events, imported once (an import statement in a per-flush path costs more than
    the flush's own bookkeeping)."""
    global _EVENTS
    if _EVENTS is None:
        from . import events

        _EVENTS = events
    return _EVENTS


_EVENTS = None
# Whether a one-stream text flush takes _write_pending's one-pass branch; the differential test
# (tests/core/test_store.py) switches it off to get the per-row loop's rows for the same buffer.
_ONE_PASS_TEXT_FLUSH = True
_chain = itertools.chain.from_iterable


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
