"""The Postgres backend: flux's own Postgres event store (``streams`` and ``events``, payloads as TEXT,
byte for byte) in a database a team shares — its schema, the per-stream lock of an append and the
read-only browsing session: docs/store-format.md, "A store a team shares". The driver is psycopg 3,
the optional extra ``flux-tui[postgres]``; the store's local files: :mod:`flux.store.location`."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..errors import StoreError
from .location import postgres_url, redacted_url, url_schema
from .pg_sql import BAD_ROWS, to_postgres
from .reader import StoreReader
from .sqlite_writer import ensure_flow_db
from .writer import StoreWriter

__all__ = ["PostgresReader", "PostgresWriter", "SCHEMA_DDL", "add_commit_check", "driver", "connect"]

SCHEMA_DDL = (
    """CREATE TABLE IF NOT EXISTS streams (
    n              BIGSERIAL PRIMARY KEY,
    model          TEXT   NOT NULL DEFAULT '',
    created_at     BIGINT NOT NULL,
    updated_at     BIGINT NOT NULL,
    last_seq       BIGINT NOT NULL DEFAULT -1,
    msg_count      BIGINT NOT NULL DEFAULT 0,
    account        TEXT,
    agent_id       TEXT,
    agent_version  TEXT,
    correlation_id TEXT
)""",
    "CREATE INDEX IF NOT EXISTS idx_streams_account ON streams(account)",
    """CREATE TABLE IF NOT EXISTS events (
    global_seq     BIGSERIAL PRIMARY KEY,
    stream         TEXT    NOT NULL,
    stream_seq     BIGINT  NOT NULL,
    id             TEXT    NOT NULL,
    kind           TEXT    NOT NULL,
    schema_version INTEGER NOT NULL DEFAULT 1,
    ts             BIGINT  NOT NULL,
    payload        TEXT    NOT NULL,
    turn_id        BIGINT,
    UNIQUE(id),
    UNIQUE(stream, stream_seq)
)""",
    "CREATE INDEX IF NOT EXISTS idx_events_stream_kind ON events(stream, kind, stream_seq)",
    "CREATE INDEX IF NOT EXISTS idx_events_kind ON events(kind)",
    "CREATE INDEX IF NOT EXISTS idx_events_turn ON events(stream, turn_id) WHERE turn_id IS NOT NULL",
)
_CONTEXT_COLUMNS = ("account", "agent_id", "agent_version", "correlation_id")
_EVENT_COLUMNS_NEEDED = {"global_seq", "stream", "stream_seq", "kind", "payload", "ts"}
_ROWS_PER_INSERT = 64
_DDL_LOCK = "flux-events-ddl"

# What runs before a writer commits: each check is given the store's URL, the streams the
# transaction wrote and those of them whose turn it ends; raising refuses the commit (rolled back).
_COMMIT_CHECKS: list[Callable[[str, set, set], None]] = []


def add_commit_check(check: Callable[[str, set, set], None]) -> None:
    """Run ``check(url, streams, ending)`` before every commit of a :class:`PostgresWriter` that
    wrote events (the liveness leases confirm theirs there: :mod:`flux.store.pg_lease`)."""
    if check not in _COMMIT_CHECKS:
        _COMMIT_CHECKS.append(check)


def driver() -> Any:
    """psycopg 3, or the one-line error naming the extra that brings it."""
    try:
        import psycopg
    except ImportError:
        raise StoreError("a postgres:// store needs psycopg 3 — pip install 'flux-tui[postgres]'") from None
    return psycopg


def _libpq_url(url: str) -> str:
    """The URL without the parameters flux owns (``schema``), for libpq."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "schema"]
    return urlunsplit(("postgresql", parts.netloc, parts.path, urlencode(query), ""))


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def connect(url: str, *, read_only: bool, timeout_s: float = 10.0) -> Any:
    """An autocommit connection to the store at ``url`` (its schema first on the search_path)."""
    psycopg = driver()
    options = "-c default_transaction_read_only=on" if read_only else ""
    schema = url_schema(url)
    try:
        conn = psycopg.connect(_libpq_url(url), autocommit=True, connect_timeout=max(1, int(timeout_s)),
                               options=options)
    except psycopg.Error as e:
        raise StoreError(f"cannot connect to the postgres store {redacted_url(url)}: {_first_line(e)} — check the URL "
                         "and that the server runs") from None
    if schema is not None:
        conn.execute(f'SET search_path TO "{schema}"')
    return conn


def _scalar_first_json_loader(psycopg: Any) -> type:
    """A ``jsonb`` result loader that reads an integer or ``null`` without the JSON decoder (the
    read models' ``json_extract`` cells are mostly token counts: a listing reads hundreds), and
    anything else with it — the values :func:`json.loads` gives, faster."""
    base = psycopg.types.json.JsonbLoader

    class ScalarFirstJsonbLoader(base):  # type: ignore[misc, valid-type]
        def load(self, data: Any) -> Any:
            text = data if isinstance(data, bytes) else bytes(data)
            if text.isdigit() or (text[:1] == b"-" and text[1:].isdigit()):
                return int(text)
            if text == b"null":
                return None
            return json.loads(text)

    return ScalarFirstJsonbLoader


class ConflictingWrite(StoreError):
    """A write another writer's row conflicts with (a ``UNIQUE`` constraint)."""


class _Connection:
    """The connection a :class:`PostgresWriter` shows its callers (``writer.conn``): ``execute``
    takes SQLite's dialect and ``?`` placeholders, as the SQLite writer's connection does; every
    driver error is a one-line :class:`StoreError` naming the store."""

    def __init__(self, conn: Any, label: str):
        self.raw = conn
        self.label = label
        self._psycopg = driver()

    def run(self, sql: str, params: Sequence = ()) -> Any:
        """A statement in Postgres's own dialect (``%s`` placeholders)."""
        try:
            return self.raw.execute(sql, tuple(params))
        except self._psycopg.errors.IntegrityError as e:
            raise ConflictingWrite(f"cannot write to {self.label}: {_first_line(e)}") from None
        except self._psycopg.Error as e:
            raise StoreError(f"cannot write to {self.label}: {_first_line(e)}") from None

    def execute(self, sql: str, params: Sequence = ()) -> Any:
        return self.run(to_postgres(sql), params)

    def copy_in(self, sql: str, rows: Sequence[tuple]) -> None:
        """``COPY … FROM STDIN`` of these rows in psycopg's text format, sent by a writer thread
        while the next rows are formatted."""
        try:
            with self.raw.cursor() as cur, cur.copy(sql, writer=self._psycopg.copy.QueuedLibpqWriter(cur)) as copy:
                for row in rows:
                    copy.write_row(row)
        except self._psycopg.errors.IntegrityError as e:
            raise ConflictingWrite(f"cannot write to {self.label}: {_first_line(e)}") from None
        except self._psycopg.Error as e:
            raise StoreError(f"cannot write to {self.label}: {_first_line(e)}") from None

    def cursor(self) -> "_Connection":
        return self

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != self._psycopg.pq.TransactionStatus.IDLE

    def close(self) -> None:
        self.raw.close()


class PostgresReader(StoreReader):
    """Read-only access to a Postgres store (autocommit, ``default_transaction_read_only``: no write, no lock)."""

    def __init__(self, store_dir: Any, *, busy_timeout_s: float = 2.0, option: str = "--store"):
        self.dir = Path(store_dir).expanduser()
        url = postgres_url(self.dir)
        if url is None:
            raise StoreError(f"{self.dir} is not the local directory of a postgres store (no postgres.url)")
        self.url = url
        self.label = redacted_url(url)
        self.mode = "postgres"
        self.skipped_rows = 0
        self._lock = threading.RLock()
        self._bad_rows: tuple[int, frozenset[int]] | None = None  # (max global_seq scanned, rows not JSON)
        self._psycopg = driver()
        self._conn = connect(url, read_only=True, timeout_s=max(busy_timeout_s, 5.0))
        self._conn.adapters.register_loader("jsonb", _scalar_first_json_loader(self._psycopg))
        try:
            self._validate_schema(option)
            self._token = self.change_token()
        except BaseException:
            self.close()
            raise

    def _validate_schema(self, option: str) -> None:
        cols: dict[str, set[str]] = {}
        for table, column in self._query(  # (pg_catalog: information_schema's views cost ~10x on an open)
                "SELECT c.relname, a.attname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
                " WHERE c.relnamespace = to_regnamespace(current_schema()) AND c.relname IN ('events', 'streams')"
                " AND c.relkind IN ('r', 'p') AND a.attnum > 0 AND NOT a.attisdropped"):
            cols.setdefault(table, set()).add(column)
        if "events" not in cols:
            raise StoreError(f"{self.label} has no flux event store yet (no events table in schema "
                             f"{self._schema()}) — record into it with `flux demo --store URL`, or point {option} "
                             "at another schema with ?schema=NAME")
        missing = _EVENT_COLUMNS_NEEDED - cols["events"]
        if missing:
            raise StoreError(f"{self.label} has an `events` table without flux's columns ({', '.join(sorted(missing))})"
                             " — not a flux event store")
        self.has_streams = "streams" in cols
        self.stream_columns = cols.get("streams", set())

    def _schema(self) -> str:
        return url_schema(self.url) or "public"

    def _latest_session_sql(self) -> str:
        return self._session_select() + " ORDER BY n DESC LIMIT 1"  # n is a BIGINT: always an integer

    def close(self) -> None:
        with self._lock:
            conn, self._conn = getattr(self, "_conn", None), None
            if conn is not None:
                conn.close()

    def change_token(self) -> tuple:
        """The newest ``global_seq``, the registry's size and newest ``updated_at`` (index reads)."""
        rows = self._query("SELECT (SELECT MAX(global_seq) FROM events), (SELECT COUNT(*) FROM streams),"
                           " (SELECT MAX(updated_at) FROM streams)" if self.has_streams else
                           "SELECT (SELECT MAX(global_seq) FROM events), 0, 0")
        return tuple(rows[0])

    def refresh(self) -> bool:
        token = self.change_token()
        changed, self._token = token != self._token, token
        return changed

    def _sql(self, sql: str) -> str:
        pg = to_postgres(sql)
        if BAD_ROWS in pg:
            pg = pg.replace(BAD_ROWS, "ARRAY[" + ",".join(map(str, sorted(self._rows_not_json()))) + "]::bigint[]")
        return pg

    def _rows_not_json(self) -> frozenset[int]:
        """The rows whose payload is not JSON (a hostile writer's; flux's and ours never are), found
        once per new row range by parsing each payload here: only paid when a query met one."""
        top = self._conn.execute("SELECT COALESCE(MAX(global_seq), 0) FROM events").fetchone()[0]
        start, bad = self._bad_rows or (0, frozenset())
        found = set(bad)
        cur = self._conn.execute("SELECT global_seq, payload FROM events WHERE global_seq > %s AND global_seq <= %s",
                                 (start, top))
        while True:
            batch = cur.fetchmany(4096)
            if not batch:
                break
            for gs, payload in batch:
                try:
                    json.loads(payload)
                except (ValueError, RecursionError):
                    found.add(gs)
        self._bad_rows = (top, frozenset(found))
        return self._bad_rows[1]

    def _error(self, e: BaseException) -> StoreError:
        msg = _first_line(e)
        if isinstance(e, self._psycopg.errors.InvalidTextRepresentation) and "json" in msg:
            return StoreError(f"cannot read {self.label}: malformed JSON in a payload ({msg})")
        if isinstance(e, self._psycopg.OperationalError):
            return StoreError(f"cannot read {self.label}: {msg} — is the server running?")
        return StoreError(f"cannot read {self.label}: {msg}")

    def _pragma(self, sql: str) -> list[tuple] | None:
        """SQLite's ``PRAGMA table_info(events)`` / ``index_list(events)``, asked of a Postgres
        store: its columns (an integer type reads ``INTEGER``), and no index that stands in for a
        rowid key (Postgres has no rowid: the BIGINT key is always an integer)."""
        head = sql.strip().lower()
        if head.startswith("pragma index_list"):
            return []
        if not head.startswith("pragma table_info("):
            return None
        table = head[len("pragma table_info("):].rstrip(")").strip("'\" ")
        rows = self._conn.execute(
            "SELECT c.ordinal_position - 1, c.column_name, c.data_type, c.is_nullable = 'NO', c.column_default,"
            " COALESCE((SELECT k.ordinal_position FROM information_schema.key_column_usage k"
            "  JOIN information_schema.table_constraints t ON t.constraint_name = k.constraint_name"
            "   AND t.table_schema = k.table_schema"
            "  WHERE t.constraint_type = 'PRIMARY KEY' AND k.table_schema = c.table_schema"
            "   AND k.table_name = c.table_name AND k.column_name = c.column_name), 0)"
            " FROM information_schema.columns c WHERE c.table_schema = current_schema() AND c.table_name = %s"
            " ORDER BY c.ordinal_position", (table,)).fetchall()
        kinds = {"bigint": "INTEGER", "integer": "INTEGER", "smallint": "INTEGER", "text": "TEXT"}
        return [(cid, name, kinds.get(ty, ty.upper()), int(nn), dflt, pk) for cid, name, ty, nn, dflt, pk in rows]

    def _query(self, sql: str, params: Sequence = ()) -> list[tuple]:
        with self._lock:
            if self._conn is None:
                raise StoreError("the store was closed")
            try:
                pragma = self._pragma(sql) if sql.lstrip()[:6].upper() == "PRAGMA" else None
                if pragma is not None:
                    return pragma
                return self._conn.execute(self._sql(sql), tuple(params)).fetchall()
            except self._psycopg.Error as e:
                raise self._error(e) from None

    def query_many(self, queries: Sequence[tuple[str, Sequence]]) -> list[list[tuple]]:
        """The queries sent in one pipeline (one round trip to the server); when one fails, they
        run again one by one, so the error is the one :meth:`query` raises."""
        with self._lock:
            if self._conn is None:
                raise StoreError("the store was closed")
            try:
                sqls = [self._sql(sql) for sql, _params in queries]  # (before the pipeline: it may read)
                with self._conn.pipeline() as pipe:
                    cursors = [self._conn.execute(sql, tuple(params)) for sql, (_sql, params) in zip(sqls, queries)]
                    pipe.sync()
                    return [cur.fetchall() for cur in cursors]
            except self._psycopg.Error:
                pass
        return [self._query(sql, params) for sql, params in queries]

    def scan_batches(self, sql: str, params: Sequence = (), *, tolerant: bool = False,
                     batch: int = 4096) -> Iterator[list[tuple]]:
        """The rows of a read query, ``batch`` at a time (Postgres text is always UTF-8, so
        ``tolerant`` changes nothing)."""
        with self._lock:
            if self._conn is None:
                raise StoreError("the store was closed")
            try:
                cur = self._conn.execute(self._sql(sql), tuple(params))
                while True:
                    rows = cur.fetchmany(batch)
                    if not rows:
                        return
                    yield rows
            except self._psycopg.Error as e:
                raise self._error(e) from None


class PostgresWriter(StoreWriter):
    """Appends to a Postgres store by flux's write rules, each transaction under its stream's advisory lock."""

    _integrity_errors = (ConflictingWrite,)

    def __init__(self, store_dir: Any, *, create: bool = True, clock=None):
        self._init_state(store_dir, clock)
        url = postgres_url(self.dir)
        if url is None:
            raise StoreError(f"{self.dir} is not the local directory of a postgres store (no postgres.url)")
        self.url = url
        self.label = redacted_url(url)
        self._written: set[str] = set()  # the streams the open transaction wrote events to
        self._ending: set[str] = set()  # … and those of them whose turn_ended it holds
        psycopg = driver()
        self._db_errors = (psycopg.Error,)  # type: ignore[misc]
        self._psycopg = psycopg
        raw = connect(url, read_only=False)
        self.conn = _Connection(raw, self.label)  # type: ignore[assignment]
        self._cur = self.conn
        try:
            self._bootstrap(create)
            ensure_flow_db(self.dir)  # the flow store stays local (see flux.store.location)
        except psycopg.Error as e:
            raw.close()
            raise self._store_error(e) from None
        except BaseException:
            raw.close()
            raise

    def _bootstrap(self, create: bool) -> None:
        c = self.conn.raw
        schema = url_schema(self.url)
        have = {r[0] for r in c.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = "
                                        "current_schema() AND table_name IN ('events', 'streams')").fetchall()}
        if have == {"events", "streams"}:
            return
        if not create:
            raise StoreError(f"{self.label} has no flux event store yet — record into it first")
        with c.transaction():
            c.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (_DDL_LOCK,))
            if schema is not None:
                c.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            if "events" in have:
                cols = {r[0] for r in c.execute("SELECT column_name FROM information_schema.columns WHERE "
                                                "table_schema = current_schema() AND table_name = 'events'")}
                if not _EVENT_COLUMNS_NEEDED <= cols:
                    raise StoreError(f"{self.label} has an `events` table of another application — refusing to write to it")
            for stmt in SCHEMA_DDL:
                c.execute(stmt)
            for col in _CONTEXT_COLUMNS:
                c.execute(f"ALTER TABLE streams ADD COLUMN IF NOT EXISTS {col} TEXT")

    def check_health(self) -> None:
        self.conn.run("SELECT 1").fetchone()

    def _store_error(self, e: BaseException) -> StoreError:
        if isinstance(e, StoreError):
            return e
        return StoreError(f"cannot write to {self.label}: {_first_line(e)}")

    def _begin(self) -> None:
        self.conn.run("BEGIN")
        self._next_seq.clear()  # another process may have appended since: re-read under the stream's lock
        self._written.clear()
        self._ending.clear()

    def _before_commit(self) -> None:
        written, ending = self._written, self._ending
        if written and _COMMIT_CHECKS:
            for check in _COMMIT_CHECKS:
                check(self.url, written, ending)
        written.clear()
        ending.clear()

    def _wrote(self, streams: Sequence[str], kinds: Sequence[str]) -> None:
        self._written.update(streams)
        if "turn_ended" in kinds:
            self._ending.update(s for s, k in zip(streams, kinds) if k == "turn_ended")

    def _max_seq(self, stream: str) -> int:
        c = self.conn
        c.run("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (stream,))
        return c.run("SELECT COALESCE(MAX(stream_seq), -1) + 1 FROM events WHERE stream = %s",
                           (stream,)).fetchone()[0]

    def _insert_rows(self, flat: list) -> None:
        self._wrote(flat[0::7], flat[3::7])
        n = len(flat) // 7
        for k in range(0, n, _ROWS_PER_INSERT):
            m = min(_ROWS_PER_INSERT, n - k)
            self.conn.run("INSERT INTO events (stream, stream_seq, id, kind, schema_version, ts, payload, turn_id) VALUES "
                        + ",".join(["(%s, %s, %s, %s, 1, %s, %s, %s)"] * m), flat[7 * k:7 * (k + m)])

    def _insert_stream_row(self, model: str, ts: int, ctx: dict) -> int:
        return self.conn.run(
            "INSERT INTO streams (model, created_at, updated_at, last_seq, msg_count, account, agent_id, agent_version,"
            " correlation_id) VALUES (%s, %s, %s, 0, 0, %s, %s, %s, %s) RETURNING n",
            (model, ts, ts, ctx.get("account"), ctx.get("agent_id"), ctx.get("agent_version"), ctx.get("correlation_id")),
        ).fetchone()[0]

    def _insert_event(self, row: tuple) -> int:
        self._wrote(row[0:1], row[3:4])
        return self.conn.run(
            "INSERT INTO events (stream, stream_seq, id, kind, schema_version, ts, payload, turn_id)"
            " VALUES (%s, %s, %s, %s, 1, %s, %s, %s) RETURNING global_seq", row).fetchone()[0]

    def _reserve_keys(self, table: str, count: int) -> list[int]:
        """The next values of the table's ``BIGSERIAL`` sequence (``nextval`` is never rolled back:
        a key reserved by a copy that died is a gap, as a rolled-back append's is)."""
        key = "n" if table == "streams" else "global_seq"
        rows = self.conn.run("SELECT nextval(pg_get_serial_sequence(%s, %s)) FROM generate_series(1, %s)",
                             (table, key, count)).fetchall()
        return sorted(r[0] for r in rows)

    def _lock_streams(self, streams: Sequence[str]) -> None:
        """Every stream's append lock, in the order given (sorted: two multi-stream lockers never deadlock)."""
        if streams:
            self.conn.run("SELECT pg_advisory_xact_lock(hashtextextended(s, 0)) FROM unnest(%s::text[])"
                          " WITH ORDINALITY AS t(s, i) ORDER BY i", (list(streams),)).fetchall()

    def _insert_copied_streams(self, rows: Sequence[tuple]) -> None:
        self.conn.copy_in("COPY streams (n, model, created_at, updated_at, last_seq, msg_count, account, agent_id,"
                          " agent_version, correlation_id) FROM STDIN", rows)

    def _insert_copied_events(self, rows: Sequence[tuple]) -> None:
        self._wrote([r[1] for r in rows], [r[4] for r in rows])
        self.conn.copy_in("COPY events (global_seq, stream, stream_seq, id, kind, ts, payload, turn_id) FROM STDIN", rows)

    def _insert_run_rows(self, stream: str, ts: int, seq: int, ids: Sequence[str], payloads: Sequence[str]) -> None:
        flat: list = []
        for i, (eid, payload) in enumerate(zip(ids, payloads)):
            flat += (stream, seq + i, eid, "run", ts, payload, None)
        self._insert_rows(flat)


def _holds_postgres(path: Path) -> bool:
    return postgres_url(path) is not None


StoreReader.register_backend(_holds_postgres, PostgresReader, first=True)
StoreWriter.register_backend(_holds_postgres, PostgresWriter, first=True)
