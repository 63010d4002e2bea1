"""The SQLite backend's reader: browsing a store directory's ``events.db`` without changing a byte
(not even an mtime) whatever state a live or killed writer left its WAL or journal in; hostile files
are refused with one line and hostile rows coerced or skipped and counted. How each state is opened:
docs/store-format.md, "What we guarantee"."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Iterator, Sequence
from urllib.parse import quote

from ..errors import StoreError
from . import rawfile
from .reader import StoreReader
from .rows import NotUTF8
from .sqlite_files import (
    EVENTS_DB, check_sqlite_file, hot_journal, regular_file, remove_tree, sidecar_size, tolerant_text, translate_error,
    wal_mode, wal_stamp,
)

__all__ = ["SqliteReader"]


_TORN_READ_TRIES = 20  # fresh opens one read may take while writers keep checkpointing


class SqliteReader(StoreReader):
    """Read-only access to a store directory. Thread-safe: one connection, serialized by a lock.

    Every query method translates SQLite errors into :class:`StoreError` with a one-line reason.
    """

    def __init__(self, store_dir: str | os.PathLike[str], *, busy_timeout_s: float = 2.0, option: str = "--store"):
        """``option``: the command-line option that named ``store_dir`` (``--store-b`` for the other
        side of a diff), so an error's advice names the one to fix."""
        self.dir = Path(store_dir).expanduser()
        self.label = str(self.dir)
        self.events_path = self.dir / EVENTS_DB
        self._busy_timeout_s = busy_timeout_s
        self._lock = threading.RLock()
        self._snapshot_dir: str | None = None
        self._snapshot_finalizer: weakref.finalize | None = None
        self._conn: sqlite3.Connection | None = None
        self._held = None  # rawfile's registration of a connection on the store's own file
        self._scans = 0  # scan_batches generators reading the connection now
        self.skipped_rows = 0  # corrupt payload rows skipped by reads so far
        if not self.dir.exists():
            raise StoreError(f"{self.dir} does not exist — create a store with `flux demo --store {self.dir}` or point {option} at an existing one")
        if not self.dir.is_dir():
            raise StoreError(f"{self.dir} is not a directory — {option} takes the directory that holds events.db")
        if not os.path.lexists(self.events_path):
            raise StoreError(f"{self.dir} is not a flux store: it has no events.db — point {option} at a store directory, or make one with `flux demo --store DIR`")
        try:
            check_sqlite_file(self.events_path, option)
            self._open()
            self._validate_schema()
            self._token = self._file_token()
        except BaseException:
            self.close()  # no connection and no snapshot dir outlive a failed open
            raise

    # -- connection management --------------------------------------------------------------

    def _open(self) -> None:
        opened_token = self._file_token()  # before the open: a change during it counts as a change
        path = self.events_path
        wal_path = Path(str(path) + "-wal")
        shm_path = Path(str(path) + "-shm")
        uri_path = quote(str(path.resolve()))
        self.mode = "ro"
        regular_file(path)
        try:
            in_wal_mode = wal_mode(path)
        except OSError as e:
            raise StoreError(f"{path} cannot be read ({e.strerror or e})") from None
        # A rollback-journal header with a non-empty -wal beside it is read like a WAL store: SQLite
        # opens any non-empty -wal it finds (and would write read marks into its -shm).
        for _attempt in range(20):
            if in_wal_mode or sidecar_size(wal_path) > 0:
                # The -shm is never opened (docs/store-format.md); it is only refused if it is a
                # FIFO or the like, since SQLite would try to map it in the snapshot's place otherwise.
                sidecar_size(shm_path)
                if sidecar_size(wal_path) <= 0:
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
            if self.mode == "ro" and hot_journal(conn):
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
            raise translate_error(e, path) from None
        self._conn = conn
        self._held = rawfile.hold(path) if self.mode in ("ro", "immutable") else None
        self._opened_token = opened_token

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
        self._snapshot_finalizer = weakref.finalize(self, remove_tree, tmp)
        try:
            for _attempt in range(5):
                stamp = wal_stamp(sidecar)
                try:
                    rawfile.copy_file(sidecar, os.path.join(tmp, EVENTS_DB + sidecar.name[len(path.name):]))
                except FileNotFoundError:
                    self._drop_snapshot()
                    return None
                rawfile.copy_file(path, os.path.join(tmp, EVENTS_DB))
                if wal_stamp(sidecar) == stamp:
                    break
            else:  # every copy was torn by a writer: never read a torn pair, look at the store again
                self._drop_snapshot()
                return None
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
                remove_tree(self._snapshot_dir)
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
            self._close_connection()
            self._drop_snapshot()

    def _close_connection(self) -> None:
        """Close the connection (if open) and release rawfile's hold on the file it read."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
            rawfile.release(self._held)
            self._held = None

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
                self._close_connection()
                self._open()
        return True

    def _query(self, sql: str, params: Sequence = ()) -> list[tuple]:
        """The rows of one query. An ``immutable`` connection trusts that ``events.db`` does not
        change; a writer that opened, appended and checkpointed meanwhile breaks that trust (pages
        of two versions: a wrong answer or "malformed"), so such a read is redone on a fresh open."""
        with self._lock:
            if self._conn is None:
                raise StoreError("the store was closed")
            if self.mode != "immutable" or self._scans:  # a live scan keeps the connection it reads
                return self._query_once(sql, params)
            for _attempt in range(_TORN_READ_TRIES):
                if self._file_token() != self._opened_token:
                    self._reopen()
                    continue
                try:
                    rows = self._query_once(sql, params)
                except StoreError:
                    if self._file_token() == self._opened_token:
                        raise
                    continue
                if self._file_token() == self._opened_token:
                    return rows
            raise StoreError(f"cannot read {self.events_path}: writers kept changing it during the read — try again")

    def _reopen(self) -> None:
        self._close_connection()
        self._open()

    def _query_once(self, sql: str, params: Sequence) -> list[tuple]:
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
                raise translate_error(e, self.events_path) from None
            except sqlite3.DatabaseError as e:
                raise translate_error(e, self.events_path) from None
            except UnicodeDecodeError:
                return self._query_tolerant(sql, params)
            except (RecursionError, MemoryError, OverflowError, ValueError) as e:
                raise StoreError(f"cannot read {self.events_path}: {type(e).__name__} on a hostile row — restore the store from a copy") from None


    def scan_batches(self, sql: str, params: Sequence = (), *, tolerant: bool = False,
                     batch: int = 4096) -> Iterator[list[tuple]]:
        """:meth:`scan`, a batch (a list of up to ``batch`` rows) at a time: a hot loop over the
        rows iterates each list itself instead of resuming a generator per row."""
        with self._lock:
            if self._conn is None:
                raise StoreError("the store was closed")
            if tolerant:
                self._conn.text_factory = tolerant_text
            self._scans += 1
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
                raise translate_error(e, self.events_path) from None
            except sqlite3.DatabaseError as e:
                raise translate_error(e, self.events_path) from None
            except UnicodeDecodeError:
                if tolerant:
                    raise StoreError(f"cannot read {self.events_path}: a TEXT cell is not UTF-8") from None
                raise NotUTF8(f"{self.events_path} has a TEXT cell that is not UTF-8") from None
            except (RecursionError, MemoryError, OverflowError, ValueError) as e:
                raise StoreError(f"cannot read {self.events_path}: {type(e).__name__} on a hostile row — restore the store from a copy") from None
            finally:
                self._scans -= 1
                if tolerant:
                    self._conn.text_factory = str

    def _query_tolerant(self, sql: str, params: Sequence) -> list[tuple]:
        """The query again with a text factory that returns non-UTF-8 TEXT cells as
        :class:`Undecodable` bytes instead of failing the whole result (only paid when needed)."""
        self._conn.text_factory = tolerant_text
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as e:
            raise translate_error(e, self.events_path) from None
        except (RecursionError, MemoryError, OverflowError, ValueError) as e:
            raise StoreError(f"cannot read {self.events_path}: {type(e).__name__} on a hostile row — restore the store from a copy") from None
        finally:
            self._conn.text_factory = str



StoreReader.register_backend(lambda path: True, SqliteReader)
