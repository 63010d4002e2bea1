"""What the SQLite backend's reader and writer share: the file names of a store directory, the
checks that refuse a FIFO, an empty file or another application's database before SQLite opens it,
and the translation of a SQLite error into the one-line :class:`~flux.errors.StoreError`."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from ..errors import StoreError, StoreLockedError
from . import rawfile

__all__ = ["EVENTS_DB", "FLOW_DB", "SQLITE_MAGIC", "regular_file", "read_head", "check_sqlite_file", "wal_mode",
           "sidecar_size", "wal_stamp", "Undecodable", "tolerant_text", "remove_tree", "hot_journal", "store_error",
           "translate_error"]


EVENTS_DB = "events.db"
FLOW_DB = "flow.db"
SQLITE_MAGIC = b"SQLite format 3\x00"


def regular_file(path: Path, *, what: str = "the store's database", option: str = "--store") -> os.stat_result | None:
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


def read_head(path: Path, n: int) -> bytes:
    return rawfile.read_head(path, n)  # never a close that drops this process's SQLite locks


def check_sqlite_file(path: Path, option: str = "--store") -> None:
    """``option``: the command-line option that named the store, for the advice in the error."""
    regular_file(path, option=option)
    try:
        head = read_head(path, 100)
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


def wal_mode(path: Path) -> bool:
    """Whether SQLite would open the file in WAL mode — or might: SQLite goes by the read-version
    byte (19) alone, and a header whose byte 19 is not the rollback value 1 is never opened with
    ``mode=ro`` (that would create ``-wal``/``-shm`` next to it)."""
    head = read_head(path, 20)
    return len(head) < 20 or head[19] != 1


def sidecar_size(p: Path) -> int:
    """Size of a sidecar; -1 when missing; StoreError when it is not a regular file."""
    st = regular_file(p, what="a SQLite sidecar")
    return -1 if st is None else st.st_size


def wal_stamp(p: Path) -> tuple:
    """What changes when a writer appends to or restarts its WAL (size, mtime, salted header)."""
    try:
        st = os.stat(p)
        return (st.st_size, st.st_mtime_ns, read_head(p, 32))
    except OSError:
        return (None,)



class Undecodable(bytes):
    """A TEXT cell whose bytes are not UTF-8 (what the tolerant text factory returns for it)."""


def tolerant_text(data: bytes) -> str | bytes:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return Undecodable(data)



def remove_tree(path: str) -> None:
    import shutil  # lazy: only a snapshot (a store with a live WAL) needs it

    shutil.rmtree(path, ignore_errors=True)


def hot_journal(conn: sqlite3.Connection) -> bool:
    """Whether a ``mode=ro`` connection's database has a hot ``-journal`` it may not roll back (a
    writer killed inside a transaction): SQLite answers the first read with SQLITE_READONLY_ROLLBACK.
    Anything else (a live writer's lock, a corrupt file) is left to the first real query."""
    try:
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError as e:
        return getattr(e, "sqlite_errorcode", None) == SQLITE_READONLY_ROLLBACK
    except sqlite3.DatabaseError:
        return False
    return False


SQLITE_READONLY_ROLLBACK = 776  # SQLITE_READONLY | (3 << 8)


def store_error(e: sqlite3.Error, path: Path) -> StoreError:
    """A SQLite error on ``path`` as the one-line :class:`StoreError` a person can act on."""
    return translate_error(e, path)


def translate_error(e: sqlite3.Error, path: Path) -> StoreError:
    msg = str(e)
    if "locked" in msg or "busy" in msg:
        return StoreLockedError(f"{path} is locked by a writer — wait for it to finish (or stop it) and try again")
    if "not a database" in msg or "malformed" in msg or "encrypted" in msg:
        return StoreError(f"{path} is corrupt or not a SQLite database ({msg}) — restore it from a copy")
    return StoreError(f"cannot read {path}: {msg}")
