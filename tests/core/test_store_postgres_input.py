"""A Postgres store named badly: a URL without a database, a bad ``?schema=``, no psycopg, a server
that is not there, a database of another application — each one ``error:`` line and exit 1, no
traceback and nothing written; and the SQLite-dialect rewrite the read models' queries go through."""

from __future__ import annotations

import builtins
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.errors import StoreError
from flux.store import Message, StoreReader, StoreWriter
from flux.store.location import URL_FILE, postgres_url, redacted_url, store_location
from flux.store.pg_sql import json_path, to_postgres
from flux.store.postgres import connect
from tests.servers import free_port

REPO = Path(__file__).resolve().parents[2]


def _flux(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "flux"), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, cwd=REPO)


def _one_error_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def test_a_server_that_is_not_there_is_one_error_line(tmp_path):
    url = f"postgres://nobody:s3cret@127.0.0.1:{free_port()}/flux"
    line = _one_error_line(_flux("sessions", "--store", url, env={"FLUX_PG_LOCAL_DIR": str(tmp_path)}),
                           "cannot connect to the postgres store", "check the URL")
    assert "s3cret" not in line  # the password never reaches a message


@pytest.mark.parametrize("url, needle", [
    ("postgres://u@127.0.0.1:5432", "names no database"),
    ("postgres://u@127.0.0.1:notaport/db", "not a valid postgres:// URL"),
    ("postgres://u@127.0.0.1/db?schema=bad;drop", "is not a schema name"),
])
def test_a_malformed_url_is_one_error_line(tmp_path, url, needle):
    _one_error_line(_flux("sessions", "--store", url, env={"FLUX_PG_LOCAL_DIR": str(tmp_path)}), needle)
    assert not any(tmp_path.iterdir())  # no local directory made for it


def test_without_psycopg_the_error_names_the_extra(tmp_path, monkeypatch):
    loc = store_location(f"postgres://u@127.0.0.1:{free_port()}/db")
    real_import = builtins.__import__

    def no_psycopg(name, *a, **k):
        if name == "psycopg" or name.startswith("psycopg."):
            raise ImportError("No module named 'psycopg'")
        return real_import(name, *a, **k)

    monkeypatch.delitem(sys.modules, "psycopg", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_psycopg)
    for opener in (StoreReader, StoreWriter):
        with pytest.raises(StoreError, match=r"needs psycopg 3 — pip install 'flux-tui\[postgres\]'"):
            opener(loc)


def test_the_local_directory_keeps_the_url_private(tmp_path, monkeypatch):
    monkeypatch.setenv("FLUX_PG_LOCAL_DIR", str(tmp_path))
    url = "postgres://alice:pw@db.example:6543/team?schema=prod"
    d = store_location(url)
    assert d.parent == tmp_path and "pw" not in d.name and "prod" in d.name
    assert postgres_url(d) == url
    assert stat.S_IMODE((d / URL_FILE).stat().st_mode) == 0o600
    assert store_location(url) == d  # the same URL, the same directory
    assert store_location(url.replace("prod", "dev")) != d
    assert redacted_url(url) == "postgres://alice:***@db.example:6543/team?schema=prod"
    assert postgres_url(tmp_path) is None


def test_an_empty_schema_is_not_a_store_and_browsing_it_creates_nothing(pg_url):
    loc = store_location(pg_url)
    with pytest.raises(StoreError, match="has no flux event store yet"):
        StoreReader(loc)
    conn = connect(pg_url.split("?")[0], read_only=True)
    schemas = [r[0] for r in conn.execute("SELECT schema_name FROM information_schema.schemata").fetchall()]
    conn.close()
    assert pg_url.split("schema=")[1] not in schemas


def test_a_database_of_another_application_is_refused(pg_url):
    conn = connect(pg_url.split("?")[0], read_only=False)
    schema = pg_url.split("schema=")[1]
    conn.execute(f'CREATE SCHEMA "{schema}"')
    conn.execute(f'CREATE TABLE "{schema}".events (id SERIAL, what TEXT)')
    conn.close()
    loc = store_location(pg_url)
    with pytest.raises(StoreError, match="without flux's columns"):
        StoreReader(loc)
    with pytest.raises(StoreError, match="another application"):
        StoreWriter(loc)
    conn = connect(pg_url, read_only=True)
    tables = sorted(r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                                               (schema,)).fetchall())
    conn.close()
    assert tables == ["events"]  # nothing was added to it


def test_a_payload_that_is_not_json_is_one_skipped_row_not_a_failed_listing(pg_url):
    """A hostile writer's row: the json_extract aggregates fall back to the rows that are JSON."""
    from flux.model.listing import list_sessions

    loc = store_location(pg_url)
    with StoreWriter(loc) as w:
        sid = w.create_session("m")
        tid = w.begin_turn(sid, "hi", "m")
    conn = connect(pg_url, read_only=False)
    conn.execute("INSERT INTO events (stream, stream_seq, id, kind, ts, payload, turn_id) VALUES (%s, 2, 'X', 'call_usage', 5, "
                 "'{not json', %s)", (sid, tid))
    conn.close()
    with StoreReader(loc) as r:
        [summary] = list_sessions(r)
        assert summary.turns == 1
        kinds = [e.kind for e in r.events(sid)]
        assert kinds == ["session_started", "turn_started"] and r.skipped_rows == 1


# -- the dialect rewrite ----------------------------------------------------------------------------


def test_placeholders_and_percent_signs_outside_and_inside_literals():
    assert to_postgres("SELECT 1 FROM events WHERE stream = ? AND payload LIKE '%x?%'") == \
        "SELECT 1 FROM events WHERE stream = %s AND payload ILIKE '%%x?%%'"


def test_sqlite_constructs_are_rewritten():
    pg = to_postgres("SELECT COUNT(*) FROM events WHERE stream = ? AND +kind = 'run' AND +global_seq < ? "
                     "AND json_extract(payload, '$.data.event') IS NOT 'step_started' ORDER BY +stream_seq")
    assert "+" not in pg and "IS DISTINCT FROM 'step_started'" in pg
    assert "(__j.v #>> '{\"data\",\"event\"}')" in pg and "CROSS JOIN LATERAL (SELECT events.payload::jsonb" in pg
    assert "strpos(lower(payload), %s)" in to_postgres("SELECT 1 WHERE instr(lower(payload), ?) > 0")
    assert "::float8" in to_postgres("SELECT SUM(json_extract(payload, '$.data.usage.input_tokens')) FROM events")
    assert to_postgres("SELECT n FROM streams WHERE typeof(n) = 'integer'") == "SELECT n FROM streams WHERE TRUE"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8), min_size=1, max_size=4))
def test_json_paths_quote_any_key(keys):
    """Any key of a ``$.a.b`` path (quotes, braces, backslashes, commas) is one element of the
    Postgres text-array path literal, and the literal stays one SQL string."""
    keys = [k for k in keys if "." not in k and "[" not in k and "'" not in k]
    if not keys:
        return
    lit = json_path("$." + ".".join(keys))
    assert lit.startswith("'{") and lit.endswith("}'") and lit.count("'") - 2 == 2 * lit[1:-1].count("''")
    assert to_postgres(f"SELECT json_extract(payload, '$.{'.'.join(keys)}') FROM events").count("__j.v #>") == 1


def test_a_writer_whose_connection_died_fails_in_one_line(pg_url):
    """The server ends the writer's session (a restart, an admin): the next append is a StoreError
    naming the store, not a driver traceback; what was committed before stays."""
    loc = store_location(pg_url)
    w = StoreWriter(loc)
    sid = w.create_session("m")
    admin = connect(pg_url.split("?")[0], read_only=False)
    pid = w.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    admin.close()
    with pytest.raises(StoreError, match="cannot write to postgresql://"):
        w.append(sid, Message.text("user", "lost"))
    with StoreReader(loc) as r:
        assert r.count_events(sid) == 1
