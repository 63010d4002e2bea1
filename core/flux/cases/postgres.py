"""The PostgreSQL fixture store: bundles in the ``flux_cases.bundles`` table of a database
(``postgres://…``; libpq's keywords and environment apply).

:func:`migrate` (``flux db migrate``) creates the schema and table and is safe to run again; a store
opened before it refuses in one line naming the command. The driver is psycopg 3 (``flux-tui[postgres]``).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..errors import FluxError, import_extra
from .stores import FixtureStore, StoredCase, missing

__all__ = ["PostgresStore", "migrate", "SCHEMA"]

SCHEMA = "flux_cases"
_DDL = (
    f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
    f"CREATE TABLE IF NOT EXISTS {SCHEMA}.bundles ("
    "hash TEXT PRIMARY KEY CHECK (hash ~ '^[0-9a-f]{64}$'), blob BYTEA NOT NULL, stored_bytes BIGINT NOT NULL, "
    "summary JSONB NOT NULL, created_at TIMESTAMPTZ NOT NULL DEFAULT now())",
)


def _driver() -> Any:
    return import_extra("psycopg", "a postgres:// fixture store needs psycopg 3 — pip install 'flux-tui[postgres]'")


def _connect(dsn: str) -> Any:
    psycopg = _driver()
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=10)
    except psycopg.Error as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise FluxError(f"cannot connect to the postgres fixture store: {first} — check the DSN and that the "
                        f"server runs") from None


def _redacted(dsn: str) -> str:
    """The DSN without its password (what messages and ``url`` show)."""
    parts = urlsplit(dsn)
    if parts.password is None:
        return dsn
    netloc = parts.netloc.rsplit("@", 1)
    user = (parts.username or "") + ":***"
    return urlunsplit((parts.scheme, user + "@" + netloc[-1], parts.path, parts.query, parts.fragment))


def migrate(dsn: str) -> None:
    """Create the schema and table (idempotent)."""
    conn = _connect(dsn)
    try:
        with conn.transaction():
            for stmt in _DDL:
                conn.execute(stmt)
    finally:
        conn.close()


class PostgresStore(FixtureStore):
    def __init__(self, dsn: str):
        self.psycopg = _driver()
        self.url = _redacted(dsn)
        self.conn = _connect(dsn)
        row = self.conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.bundles",)).fetchone()
        if row is None or row[0] is None:
            self.conn.close()
            raise FluxError(f"the postgres fixture store {self.url} has no {SCHEMA}.bundles table — run "
                            f"`flux db migrate --fixture-store URL` first")

    def has(self, h: str) -> bool:
        return self.conn.execute(f"SELECT 1 FROM {SCHEMA}.bundles WHERE hash = %s", (h,)).fetchone() is not None

    def _write(self, h: str, blob: bytes, summary: dict) -> None:
        self.conn.execute(f"INSERT INTO {SCHEMA}.bundles (hash, blob, stored_bytes, summary) VALUES (%s, %s, %s, %s) "
                          f"ON CONFLICT (hash) DO NOTHING", (h, blob, len(blob), json.dumps(summary)))

    def read_blob(self, h: str) -> bytes:
        row = self.conn.execute(f"SELECT blob FROM {SCHEMA}.bundles WHERE hash = %s", (h,)).fetchone()
        if row is None:
            raise missing(h, self.url)
        return bytes(row[0])

    def entries(self) -> list[StoredCase]:
        rows = self.conn.execute(f"SELECT hash, stored_bytes, summary FROM {SCHEMA}.bundles").fetchall()
        return [StoredCase(h, int(n), s if isinstance(s, dict) else {}) for h, n, s in rows]

    def _remove(self, h: str) -> bool:
        cur = self.conn.execute(f"DELETE FROM {SCHEMA}.bundles WHERE hash = %s", (h,))
        return cur.rowcount > 0

    def close(self) -> None:
        self.conn.close()
