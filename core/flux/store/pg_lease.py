"""Liveness leases on a Postgres store: a session-level advisory lock held by the writer's lease
connection, so every machine sees who is recording and the server drops it when the writer dies.

Checking reads ``pg_locks`` and ``pg_stat_activity`` on a read-only connection: it takes no lock.
A writer confirms its lease before a commit to the leased session (at most once a second, and at
the turn's end): a lease the server dropped is taken again, or — when another process holds it now —
that session's writes are refused. docs/store-format.md, "Liveness leases on Postgres", has the rules.
"""

from __future__ import annotations

import atexit
import binascii
import os
import re
import select
import sys
import threading
import time
from typing import Any, NamedTuple, Optional

from ..errors import StoreError
from .location import redacted_url, url_schema
from .postgres import add_commit_check, connect, driver

__all__ = ["LeaseHolder", "LeaseLost", "PostgresLease", "holder_words", "lease_key", "postgres_holder",
           "postgres_snapshot", "this_host"]

_APP_PREFIX = "flux-tui lease"
_NUMBERED = re.compile(r"s_([1-9][0-9]{0,9})")
_APP_NAME = re.compile(r"flux-tui lease pid=(\d{1,10}) host=([A-Za-z0-9._-]{0,40})")
# application_name keeps 63 bytes: the prefix, the pid and this much of the host name
_HOST_CHARS = 63 - len(f"{_APP_PREFIX} pid=4294967295 host=")
# server-side keepalives of the lease connection: a silent peer is given up after ~idle + interval * count s
_KEEPALIVES = {"tcp_keepalives_idle": 20, "tcp_keepalives_interval": 10, "tcp_keepalives_count": 3}

_HOLDER_SQL = (
    "SELECT l.pid, a.application_name FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = %s::oid AND l.objid = %s::oid"
    " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " ORDER BY l.pid LIMIT 1")
# whether the lease connection itself still holds the lock (a round trip: at most once a second)
_OWN_SQL = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = pg_backend_pid()"
    " AND objsubid = 2 AND classid = %s::oid AND objid = %s::oid"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))")
CONFIRM_EVERY_S = 1.0  # a held lease is asked about at most this often (and at the turn's end)


class LeaseHolder(NamedTuple):
    """Who holds a lease: the holder's pid (0: unknown) and host name (``""``: unknown)."""

    pid: int
    host: str

    def is_here(self) -> bool:
        """Whether the holder runs on this machine (so its pid means something here)."""
        return self.host == this_host()

    def words(self) -> str:
        """The holder as a message names it (:func:`holder_words`)."""
        return holder_words(self.pid, "" if self.is_here() else self.host)


def holder_words(pid: int, host: str = "") -> str:
    """How every message names a lease's holder: ``pid P`` on this machine, ``pid P on HOST`` when
    ``host`` (another machine) is given, ``a process on HOST`` / ``another process`` without a pid."""
    if host:
        return f"pid {pid} on {host}" if pid > 0 else f"a process on {host}"
    return f"pid {pid}" if pid > 0 else "another process"


class LeaseLost(StoreError):
    """The server dropped a writer's lease mid-turn and another process holds it now: this
    process writes that session no more (what it committed before stays as it was)."""


def this_host() -> str:
    """This machine's name as a lease connection shows it (letters, digits, ``.-_``, truncated)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", os.uname().nodename if hasattr(os, "uname") else "")[:_HOST_CHARS]


def lease_key(schema: str, session: str) -> tuple[int, int]:
    """The two advisory-lock keys (each in ``[0, 2**31)``) of ``session``'s lease in ``schema``.

    ``k1`` is 30 bits of a CRC-32 of the schema, its next bit telling the two kinds of name apart:
    a numbered session ``s_<n>`` (n below 2**31) has ``k2 = n`` — two of them never share a key —
    and any other name has 31 bits of its CRC-32 (``binascii``: listing sessions loads no hashlib)."""
    space = _key_space(schema)
    m = _NUMBERED.fullmatch(session)
    if m is not None and int(m.group(1)) < 2 ** 31:
        return space, int(m.group(1))
    return space | 0x40000000, binascii.crc32(session.encode("utf-8", "surrogatepass")) & 0x7FFFFFFF


def _key_space(schema: str) -> int:
    """``k1`` of the schema's numbered sessions (``| 2**30``: of its other names)."""
    return binascii.crc32(b"flux-tui lease\0" + schema.encode("utf-8", "surrogatepass")) & 0x3FFFFFFF


def _holder_of(row: Optional[tuple]) -> Optional[LeaseHolder]:
    if row is None:
        return None
    m = _APP_NAME.fullmatch(row[1] or "")
    return LeaseHolder(int(m.group(1)), m.group(2)) if m else LeaseHolder(0, "")


class _Link:
    """One connection of this process to a store (the lease connection, or the read-only one
    checks use), made when first needed and made again when the server dropped it."""

    def __init__(self, url: str, *, read_only: bool):
        self.url, self.read_only = url, read_only
        self.lock = threading.RLock()
        self.conn: Any = None
        self.schema = ""
        self.held: set[tuple[int, int]] = set()  # the keys this process holds on this connection

    def _open(self) -> Any:
        conn = connect(self.url, read_only=self.read_only)
        try:
            if self.read_only:
                conn.execute("SET application_name = 'flux-tui liveness check'")
            else:
                conn.execute("SELECT set_config('application_name', %s, false)",
                             (f"{_APP_PREFIX} pid={os.getpid()} host={this_host()}",))
                for name, value in _KEEPALIVES.items():
                    conn.execute("SELECT set_config(%s, %s, false)", (name, str(value)))
                if conn.execute("SELECT current_setting('idle_session_timeout', true)").fetchone()[0] is not None:
                    conn.execute("SET idle_session_timeout = 0")  # a held lease may sit idle for a long turn
            self.schema = conn.execute("SELECT current_schema()").fetchone()[0] or url_schema(self.url) or "public"
        except BaseException:
            conn.close()
            raise
        return conn

    def run(self, sql: str, params: tuple, *, retry: bool, every_row: bool = False) -> Any:
        """The first row of ``sql`` (all of them: ``every_row``). A connection the server dropped is let go (and made again,
        ``sql`` run once more on it, when ``retry``); every driver error is a one-line :class:`StoreError`."""
        psycopg = driver()
        with self.lock:
            attempts = 2 if retry else 1
            while True:
                attempts -= 1
                try:
                    if self.conn is None or self.conn.closed:
                        self.conn = self._open()
                    cur = self.conn.execute(sql, params)
                    return cur.fetchall() if every_row else cur.fetchone()
                except psycopg.Error as e:
                    lost = self.conn is None or self.conn.broken or self.conn.closed
                    if lost:
                        self.drop()
                        if attempts > 0:
                            continue
                        raise StoreError(f"cannot reach {redacted_url(self.url)} for a session lease: "
                                         f"{_first_line(e)} — is the server running?") from None
                    raise StoreError(f"session lease on {redacted_url(self.url)}: {_first_line(e)}") from None

    def connected(self) -> "_Link":
        """This link with its connection made (``schema`` known)."""
        if self.conn is None or self.conn.closed:
            self.run("SELECT 1", (), retry=True)
        return self

    def key(self, session: str) -> tuple[int, int]:
        return lease_key(self.connected().schema, session)

    def drop(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # a connection the server already dropped
                pass


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


# This process's connections, by store URL; ``_PID`` is whose they are (a forked child's are not its own).
_LEASE_LINKS: dict[str, _Link] = {}
_CHECK_LINKS: dict[str, _Link] = {}
_LINKS_LOCK = threading.Lock()
_PID = os.getpid()


def _link(links: dict[str, _Link], url: str, *, read_only: bool) -> _Link:
    with _LINKS_LOCK:
        link = links.get(url)
        if link is None:
            link = links[url] = _Link(url, read_only=read_only)
        return link


def postgres_holder(url: str, session: str) -> Optional[LeaseHolder]:
    """Who holds ``session``'s lease in the store at ``url``, ``None`` when no one does. Read-only:
    no lock is taken and no write transaction opened (see the module docstring)."""
    link = _link(_CHECK_LINKS, url, read_only=True)
    with link.lock:
        k1, k2 = link.key(session)
        return _holder_of(link.run(_HOLDER_SQL, (k1, k2), retry=True))


def postgres_snapshot(url: str) -> frozenset[tuple[int, int]]:
    """The keys of every lease held in the store at ``url`` right now (its schema's), to compare
    with a later snapshot: read-only, as :func:`postgres_holder`."""
    link = _link(_CHECK_LINKS, url, read_only=True)
    with link.lock:
        space = _key_space(link.connected().schema)
        rows = link.run("SELECT classid::bigint, objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND granted"
                        " AND objsubid = 2 AND classid IN (%s::oid, %s::oid)"
                        " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                        (space, space | 0x40000000), retry=True, every_row=True)
    return frozenset((int(a), int(b)) for a, b in rows)


class PostgresLease:
    """A held Postgres lease (its session-level advisory lock on this process's lease connection)."""

    def __init__(self, link: _Link, key: tuple[int, int], url: str = "", session: str = ""):
        self.link, self.key, self.url, self.session = link, key, url, session
        self.conn = link.conn  # the lock lives as long as this connection
        self.pid = os.getpid()  # … which is this process's (a forked child's release gives nothing up)
        self.confirmed_at = time.monotonic()
        self.lost: Optional[str] = None  # the refusal, once another process took the lease

    @classmethod
    def try_acquire(cls, url: str, session: str) -> "PostgresLease | LeaseHolder":
        """The lease, or who holds it when someone else does (this process too: the server would
        let one connection take a lock twice, so a key this process holds is refused here)."""
        link = _link(_LEASE_LINKS, url, read_only=False)
        with link.lock:
            key = link.key(session)
            if key in link.held:
                return LeaseHolder(os.getpid(), this_host())
            (got,) = link.run("SELECT pg_try_advisory_lock(%s, %s)", key, retry=True)
            if got:
                link.held.add(key)
                lease = _ACTIVE[(url, session)] = cls(link, key, url, session)
                return lease
            return _holder_of(link.run(_HOLDER_SQL, key, retry=False)) or LeaseHolder(0, "")

    def confirm(self, *, now: bool = False) -> None:
        """Make sure this process still holds the lease before it commits to the session: asked of
        the server at most every :data:`CONFIRM_EVERY_S` (every time when ``now``: the turn's end),
        at once when the lease connection has something to say (the server ended it). A lease the
        server dropped is taken again on a fresh connection, said once on stderr; when another
        process holds it now, :class:`LeaseLost` — then and at every later commit to the session."""
        if self.lost is not None:
            raise LeaseLost(self.lost)
        if not now and time.monotonic() - self.confirmed_at < CONFIRM_EVERY_S and not _has_news(self.conn):
            return
        link = self.link
        with link.lock:
            if self._still_held():
                self.confirmed_at = time.monotonic()
                return
            (got,) = link.run("SELECT pg_try_advisory_lock(%s, %s)", self.key, retry=True)
            if got:
                self.conn, self.confirmed_at = link.conn, time.monotonic()
                link.held.add(self.key)
                print(f"warning: {self.session}'s lease was lost (the server dropped its connection) and re-taken",
                      file=sys.stderr, flush=True)
                return
            holder = _holder_of(link.run(_HOLDER_SQL, self.key, retry=False)) or LeaseHolder(0, "")
            link.held.discard(self.key)
            self.lost = (f"{self.session}'s lease was lost (the server dropped its connection) and {holder.words()} "
                         f"holds it now — this process stopped writing {self.session}; what it committed before is kept")
            raise LeaseLost(self.lost)

    def _still_held(self) -> bool:
        """Whether the lease connection is the one the lock was taken on and the server says it
        holds the lock (one round trip); a connection the server dropped is let go here."""
        link = self.link
        if link.conn is not self.conn or link.conn is None or link.conn.closed:
            return False
        try:
            row = link.run(_OWN_SQL, self.key, retry=False)
        except StoreError:
            if link.conn is self.conn:  # the connection lives: an error of its own, not a lost lease
                raise
            return False  # the connection broke (and was let go)
        return bool(row and row[0])

    def release(self) -> None:
        """Give the lease up now; a connection the server dropped meanwhile has nothing left to give up."""
        link = self.link
        if os.getpid() != self.pid:
            return
        with link.lock:
            if _ACTIVE.get((self.url, self.session)) is self:
                del _ACTIVE[(self.url, self.session)]
            if self.lost is not None:
                return  # another process holds the key now: nothing of ours to give up
            link.held.discard(self.key)
            if link.conn is not self.conn or link.conn is None or link.conn.closed:
                return
            try:
                link.run("SELECT pg_advisory_unlock(%s, %s)", self.key, retry=False)
            except StoreError:  # the connection broke (and was dropped, the lock with it)
                pass


def _has_news(conn: Any) -> bool:
    """Whether an idle lease connection has bytes waiting (the server's goodbye when it ended the
    connection; nothing else arrives unasked): a poll of its socket, no round trip."""
    try:
        return conn is None or conn.closed or bool(select.select([conn.fileno()], [], [], 0)[0])
    except Exception:  # a connection already closed or broken
        return True


# The leases this process holds, by (store URL, session): the commits of a writer to a leased
# session confirm them (:func:`_confirm_before_commit`).
_ACTIVE: dict[tuple[str, str], PostgresLease] = {}


def _confirm_before_commit(url: str, streams: "set[str]", ending: "set[str]") -> None:
    """A Postgres writer's commit to ``streams`` of the store at ``url``: each one this process
    leases is confirmed first (``ending``: the ones whose turn ends in this commit, asked at once)."""
    if not _ACTIVE:
        return
    for stream in streams:
        lease = _ACTIVE.get((url, stream))
        if lease is not None and lease.pid == os.getpid():
            lease.confirm(now=stream in ending)


add_commit_check(_confirm_before_commit)


def _close_all() -> None:
    """At exit: this process's connections end (a forked child leaves its parent's alone)."""
    if os.getpid() != _PID:
        return
    for links in (_LEASE_LINKS, _CHECK_LINKS):
        for link in list(links.values()):
            link.drop()


def _forget_after_fork() -> None:
    """A forked child holds none of its parent's leases and must not speak on its connections:
    it forgets them (never closing them — the parent's sessions stay as they are) and starts anew."""
    global _PID, _LINKS_LOCK
    _PID = os.getpid()
    _LINKS_LOCK = threading.Lock()
    _INHERITED.extend(link.conn for links in (_LEASE_LINKS, _CHECK_LINKS) for link in links.values()
                      if link.conn is not None)
    _LEASE_LINKS.clear()
    _CHECK_LINKS.clear()
    _ACTIVE.clear()


# The parent's connection objects a forked child inherited: kept referenced, so they are never
# closed from the child (closing one would end the parent's session, and its leases with it) nor
# warned about as unclosed when the child lets them go.
_INHERITED: list[Any] = []

atexit.register(_close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
