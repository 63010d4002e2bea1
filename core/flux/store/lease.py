"""Liveness leases: which sessions a live process is recording a turn into right now.

A writer holds its session's lease while a turn runs: an open-file lock on ``leases/s_<n>.lock``
that the kernel drops when the process dies, so an open turn whose lease nobody holds is
interrupted. Checking is read-only. A Postgres store keeps its leases on the server
(:mod:`flux.store.pg_lease`); docs/store-format.md, "Liveness leases", has the rules.
"""

from __future__ import annotations

import os
import re
import stat
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Optional

from ..errors import FluxError, StoreError
from .location import postgres_url
from .pg_lease import LeaseHolder, LeaseLost, PostgresLease, holder_words, postgres_holder, postgres_snapshot, this_host

try:
    import fcntl
except ImportError:  # pragma: no cover - no POSIX locks (Windows): nothing is ever leased
    fcntl = None  # type: ignore[assignment]

__all__ = ["LEASE_DIR", "LeaseHolder", "LeaseLost", "SessionLease", "SessionLeased", "holder_words", "lease_holder",
           "lease_holder_on", "lease_path", "lease_snapshot", "leased_message"]

LEASE_DIR = "leases"

# struct flock on 64-bit Linux: l_type, l_whence (short), l_start, l_len (off_t), l_pid (pid_t), padding
_FLOCK = "hhqqi4x"
_OFD = (fcntl is not None and hasattr(fcntl, "F_OFD_SETLK") and sys.platform.startswith("linux")
        and struct.calcsize("P") == 8)

# Leases this process holds, by (store dir, session): a thread that holds one may take it again
# (a turn's auto-resurrect inside its own turn); another thread conflicts like another process.
_HELD: dict[tuple[str, str], "SessionLease"] = {}
_HELD_LOCK = threading.Lock()


def leased_message(session: str, pid: int, host: str = "") -> str:
    """The one line a writer refused by a held lease shows; ``host`` names the holder's machine
    when it is another one (a Postgres store's writer elsewhere)."""
    who = holder_words(pid, host)
    if host:
        return f"{session}'s turn is being recorded by {who} — wait for it to finish or stop it there, then try again"
    stop = f" (kill {pid})" if pid > 0 else ""
    return f"{session}'s turn is being recorded by {who} — wait for it to finish or stop it{stop}, then try again"


class SessionLeased(FluxError):
    """Another live process (or thread) is recording a turn into the session; ``host`` is set when
    that process runs on another machine."""

    def __init__(self, session: str, pid: int, host: str = ""):
        super().__init__(leased_message(session, pid, host))
        self.session = session
        self.pid = pid
        self.host = host


_SESSION_NAME = re.compile(r"[A-Za-z0-9_-]{1,128}")


def lease_path(store_dir: str | os.PathLike[str], session: str) -> Path:
    """Where ``session``'s lease lives; a name that could leave the directory (a hostile store's
    stream name) is a :class:`StoreError`."""
    return Path(store_dir) / LEASE_DIR / f"{_check_name(session)}.lock"


def _key(store_dir: str | os.PathLike[str], session: str, url: Optional[str]) -> tuple[str, str]:
    return (url if url is not None else os.path.realpath(os.fspath(store_dir))), session


def _check_name(session: object) -> str:
    if not isinstance(session, str) or not _SESSION_NAME.fullmatch(session):
        raise StoreError(f"{session!r} is not a session name a lease can be taken for")
    return session


def _try_lock(fd: int) -> bool:
    """Take the exclusive lock without waiting; False when someone holds it."""
    try:
        if _OFD:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
        else:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except (BlockingIOError, PermissionError):
        return False
    except OSError as e:
        if e.errno in (11, 13):  # EAGAIN / EACCES: held
            return False
        raise
    return True


def _is_locked(fd: int) -> bool:
    """Whether someone holds the lock on ``fd``'s file; ``fd`` may be read-only. Takes nothing (OFD)."""
    if _OFD:
        res = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, struct.pack(_FLOCK, fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0))
        return struct.unpack(_FLOCK, res)[0] != fcntl.F_UNLCK
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)
    return False


def _read_pid(fd: int) -> int:
    try:
        data = os.pread(fd, 32, 0)
    except OSError:
        return 0
    text = data.decode("ascii", "replace").strip()
    return int(text) if text.isdigit() and len(text) < 12 else 0


def _open_read(path: Path) -> Optional[int]:
    """``path`` opened read-only when it is a regular file (never a FIFO's endless open), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
    except OSError:
        os.close(fd)
        return None
    return fd


def lease_holder(store_dir: str | os.PathLike[str], session: str) -> Optional[int]:
    """The pid of the live process recording a turn into ``session`` (0 when its pid is unreadable),
    ``None`` when no one is. Read-only. A lease the calling thread holds itself does not count: to
    the caller, its own turn is not someone else's. On a Postgres store a holder on another machine
    reads 0 (its pid means nothing here); :func:`lease_holder_on` says which machine."""
    holder = lease_holder_on(store_dir, session)
    if holder is None:
        return None
    return holder.pid if holder.is_here() else 0


def lease_holder_on(store_dir: str | os.PathLike[str], session: str) -> Optional[LeaseHolder]:
    """Who is recording a turn into ``session`` — its pid and host — or ``None`` (see :func:`lease_holder`)."""
    if not isinstance(session, str) or not _SESSION_NAME.fullmatch(session):
        return None  # no lease can exist under a name no writer takes one for
    url = postgres_url(store_dir)
    with _HELD_LOCK:
        own = _HELD.get(_key(store_dir, session, url))
        if own is not None and own.thread == threading.get_ident():
            return None
    if url is not None:
        return postgres_holder(url, session)
    if fcntl is None:
        return None
    pid = _file_lease_pid(store_dir, session)
    return None if pid is None else LeaseHolder(pid, this_host())


def lease_snapshot(store_dir: str | os.PathLike[str]) -> frozenset:
    """Which leases of the store are held right now, as a value to compare with a later one (a
    view that shows liveness redraws when a writer starts, ends or dies — no event tells it so).
    Read-only, like :func:`lease_holder`; the caller's own leases count too."""
    url = postgres_url(store_dir)
    if url is not None:
        return postgres_snapshot(url)
    if fcntl is None:
        return frozenset()
    try:
        names = os.listdir(Path(store_dir) / LEASE_DIR)
    except OSError:
        return frozenset()  # no leases directory: nothing held
    held = set()
    for name in names:
        session = name[:-len(".lock")] if name.endswith(".lock") else ""
        if _SESSION_NAME.fullmatch(session):
            pid = _file_lease_pid(store_dir, session)
            if pid is not None:
                held.add((session, pid))
    return frozenset(held)


def _file_lease_pid(store_dir: str | os.PathLike[str], session: str) -> Optional[int]:
    fd = _open_read(lease_path(store_dir, session))
    if fd is None:
        return None
    try:
        if not _is_locked(fd):
            return None
        pid = _read_pid(fd)
        if pid == 0:  # the holder has the lock but has not written its pid yet: give it a moment
            time.sleep(0.01)
            pid = _read_pid(fd)
        return pid
    except OSError:
        return None
    finally:
        os.close(fd)


class SessionLease:
    """A held lease; :meth:`release` (or leaving the ``with`` block) gives it up.

    ``SessionLease.acquire(store_dir, "s_3")`` raises :class:`SessionLeased` when another process
    or thread holds it; the thread that holds it may acquire it again (each acquire is released).
    A store directory's lease is its lock file (``path``, ``fd``); a Postgres store's is ``remote``."""

    def __init__(self, key: tuple[str, str], path: Optional[Path], fd: int, remote: Optional[PostgresLease] = None):
        self.key, self.path, self.fd, self.remote = key, path, fd, remote
        self.thread = threading.get_ident()
        self.depth = 1

    @classmethod
    def acquire(cls, store_dir: str | os.PathLike[str], session: str) -> "SessionLease":
        _check_name(session)
        url = postgres_url(store_dir)
        key = _key(store_dir, session, url)
        with _HELD_LOCK:
            held = _HELD.get(key)
            if held is not None and held.thread == threading.get_ident():
                held.depth += 1
                return held
        if url is not None:
            got = PostgresLease.try_acquire(url, session)
            if isinstance(got, LeaseHolder):
                raise SessionLeased(session, got.pid, "" if got.is_here() else got.host)
            lease = cls(key, None, -1, remote=got)
        elif fcntl is None:  # pragma: no cover
            lease = cls(key, lease_path(store_dir, session), -1)
        else:
            lease = cls._lock(key, lease_path(store_dir, session), session)
        with _HELD_LOCK:
            _HELD[key] = lease
        return lease

    @classmethod
    def _lock(cls, key: tuple[str, str], path: Path, session: str) -> "SessionLease":
        deadline = time.monotonic() + 0.5
        while True:
            try:
                path.parent.mkdir(exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot create {path.parent} for the session lease ({e.strerror or e}) — "
                                 "is the store directory writable?") from None
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0), 0o644)
            except FileNotFoundError:  # another holder's release removed the empty directory just now
                if time.monotonic() < deadline:
                    continue
                raise StoreError(f"cannot create the session lease {path} — is the store directory writable?") from None
            except OSError as e:
                raise StoreError(f"cannot open the session lease {path} ({e.strerror or e}) — "
                                 "remove it if it is not a regular file") from None
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                raise StoreError(f"the session lease {path} is not a regular file — remove it and try again")
            if _try_lock(fd):
                try:
                    same = os.fstat(fd).st_ino == os.stat(path).st_ino
                except FileNotFoundError:
                    same = False
                if same:
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
                    return cls(key, path, fd)
                os.close(fd)  # the holder we waited for removed this file as we locked it: take a fresh one
                continue
            pid = _read_pid(fd)
            os.close(fd)
            # flock only: a reader's instant shared lock looks like a holder — try again briefly
            if _OFD or time.monotonic() >= deadline:
                raise SessionLeased(session, pid)
            time.sleep(0.02)

    def release(self) -> None:
        with _HELD_LOCK:
            self.depth -= 1
            if self.depth > 0:
                return
            if _HELD.get(self.key) is self:
                del _HELD[self.key]
        if self.remote is not None:
            remote, self.remote = self.remote, None
            remote.release()
            return
        if self.fd < 0 or self.path is None:
            return
        try:
            os.unlink(self.path)  # still locked: whoever opened it meanwhile sees the inode change
        except OSError:
            pass
        os.close(self.fd)
        self.fd = -1
        try:
            self.path.parent.rmdir()  # the store is left as it was; fails (kept) while another lease is in it
        except OSError:
            pass

    def __enter__(self) -> "SessionLease":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _forget_remote_after_fork() -> None:
    """A forked child holds none of its parent's Postgres leases (they live on the parent's
    connection): it forgets them, so its own acquire asks the server rather than re-entering."""
    global _HELD_LOCK
    _HELD_LOCK = threading.Lock()
    for key in [k for k, lease in _HELD.items() if lease.remote is not None]:
        del _HELD[key]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_remote_after_fork)
