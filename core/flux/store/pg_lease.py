"""Liveness leases on a Postgres store: a session-level advisory lock held by the writer's lease
connection, so every machine sees who is recording and the server drops it when the writer dies.

Checking reads ``pg_locks`` and ``pg_stat_activity`` on a read-only connection: it takes no lock.
docs/store-format.md, "Liveness leases on Postgres", has the key, the keepalives and the limits.
"""

from __future__ import annotations

import atexit
import binascii
import os
import re
import threading
from typing import Any, NamedTuple, Optional

from ..errors import StoreError
from .location import redacted_url, url_schema
from .postgres import connect, driver

__all__ = ["LeaseHolder", "PostgresLease", "lease_key", "postgres_holder", "postgres_snapshot", "this_host"]

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


class LeaseHolder(NamedTuple):
    """Who holds a lease: the holder's pid (0: unknown) and host name (``""``: unknown)."""

    pid: int
    host: str

    def is_here(self) -> bool:
        """Whether the holder runs on this machine (so its pid means something here)."""
        return self.host == this_host()


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

    def __init__(self, link: _Link, key: tuple[int, int]):
        self.link, self.key = link, key
        self.conn = link.conn  # the lock lives as long as this connection
        self.pid = os.getpid()  # … which is this process's (a forked child's release gives nothing up)

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
                return cls(link, key)
            return _holder_of(link.run(_HOLDER_SQL, key, retry=False)) or LeaseHolder(0, "")

    def release(self) -> None:
        """Give the lease up now; a connection the server dropped meanwhile has nothing left to give up."""
        link = self.link
        if os.getpid() != self.pid:
            return
        with link.lock:
            link.held.discard(self.key)
            if link.conn is not self.conn or link.conn is None or link.conn.closed:
                return
            try:
                link.run("SELECT pg_advisory_unlock(%s, %s)", self.key, retry=False)
            except StoreError:  # the connection broke (and was dropped, the lock with it)
                pass


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


# The parent's connection objects a forked child inherited: kept referenced, so they are never
# closed from the child (closing one would end the parent's session, and its leases with it) nor
# warned about as unclosed when the child lets them go.
_INHERITED: list[Any] = []

atexit.register(_close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
