"""Raw reads of a store's SQLite files (a header check, a snapshot's copy) that never release the
POSIX locks SQLite holds on them: a file with a connection of ours is read through one descriptor
kept open until its last connection is released (why: docs/store-format.md, "Raw reads keep
SQLite's locks")."""

from __future__ import annotations

import os
import threading
from pathlib import Path

__all__ = ["hold", "release", "holds", "read_head", "copy_file"]

_Key = tuple[int, int]  # (st_dev, st_ino): the file, whatever name it is opened under

_lock = threading.Lock()
_held: dict[_Key, int] = {}  # connections this process holds on the file
_kept: dict[_Key, int] = {}  # the descriptor raw reads use while the file is held

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)  # O_NONBLOCK: a FIFO in the file's place never blocks


def hold(path: str | os.PathLike[str]) -> _Key | None:
    """Register one connection on ``path`` (call right after opening it); the key for
    :func:`release`. None when the file cannot be examined (nothing to protect)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (st.st_dev, st.st_ino)
    with _lock:
        _held[key] = _held.get(key, 0) + 1
    return key


def release(key: _Key | None) -> None:
    """Unregister one connection (call right after closing it); the kept descriptor is closed with
    the file's last connection, when no lock of ours is left to lose."""
    if key is None:
        return
    with _lock:
        n = _held.get(key, 0) - 1
        if n > 0:
            _held[key] = n
            return
        _held.pop(key, None)
        fd = _kept.pop(key, None)
    if fd is not None:
        os.close(fd)


def _kept_fd(path: str | os.PathLike[str]) -> int | None:
    """The kept descriptor of ``path`` when this process holds a connection on it, else None."""
    st = os.stat(path)
    key = (st.st_dev, st.st_ino)
    with _lock:
        if key not in _held:
            return None
        fd = _kept.get(key)
        if fd is None:
            fd = _kept[key] = os.open(path, _FLAGS)
        return fd


def read_head(path: str | os.PathLike[str], n: int) -> bytes:
    """The first ``n`` bytes of ``path``."""
    fd = _kept_fd(path)
    if fd is not None:
        return os.pread(fd, n, 0)
    fd = os.open(path, _FLAGS)
    try:
        return os.read(fd, n)
    finally:
        os.close(fd)


def copy_file(path: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Copy ``path`` to ``dst`` (created or truncated)."""
    fd = _kept_fd(path)
    own = fd is None
    if own:
        fd = os.open(path, _FLAGS)
    try:
        with open(dst, "wb") as out:
            offset = 0
            while True:
                chunk = os.pread(fd, 1 << 20, offset)
                if not chunk:
                    break
                out.write(chunk)
                offset += len(chunk)
    finally:
        if own:
            os.close(fd)


def holds(path: str | os.PathLike[str]) -> bool:
    """Whether this process has a registered connection on ``path``."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    with _lock:
        return (st.st_dev, st.st_ino) in _held


def _reset_after_fork() -> None:
    """A forked child holds none of its parent's connections' locks (POSIX locks are not
    inherited): it starts with no registrations — the inherited kept descriptors stay open, since
    closing them now drops nothing and costs nothing to keep."""
    global _lock
    _lock = threading.Lock()
    _held.clear()
    _kept.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)
