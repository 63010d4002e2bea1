"""Shared pytest fixtures."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from tests.helpers import copy_fixture
from tests.servers import PostgresServer, ServerUnavailable


@pytest.fixture
def fixture_store(tmp_path: Path) -> Path:
    """A writable copy of the real flux fixture (a missing fixture fails the test with what to do)."""
    return copy_fixture(tmp_path / "coding-agent-note")


@pytest.fixture(autouse=True)
def _no_shared_store_from_the_environment(monkeypatch):
    """A ``$FLUX_STORE_URL`` in the developer's shell never points a test at their team's store."""
    monkeypatch.delenv("FLUX_STORE_URL", raising=False)


@pytest.fixture(autouse=True)
def _golden_mode_stays_in_its_test():
    """``flux test --update`` / ``flux record --update`` invoked in-process (CliRunner) set
    ``FLUX_GOLDEN=update`` for the whole process; without this a later test would re-baseline
    instead of failing — every test ends with the variable as it began."""
    before = os.environ.get("FLUX_GOLDEN")
    yield
    if before is None:
        os.environ.pop("FLUX_GOLDEN", None)
    else:
        os.environ["FLUX_GOLDEN"] = before


DEMO_NOW = 1_764_000_000_000  # the demo store's fixed "now" in tests


@pytest.fixture(scope="module")
def demo_master(tmp_path_factory) -> Path:
    """The demo store, built once per module; tests that write use :func:`demo`, a copy."""
    from flux.demo import build_demo_store

    return build_demo_store(tmp_path_factory.mktemp("demo") / "store", now_ms=DEMO_NOW)


@pytest.fixture
def demo(demo_master: Path, tmp_path: Path) -> Path:
    """A writable copy of the demo store."""
    import shutil

    return Path(shutil.copytree(demo_master, tmp_path / "demo"))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace directory (tests/agent has its own, seeded one)."""
    d = tmp_path / "ws"
    d.mkdir()
    return d


@pytest.fixture(scope="session")
def pg_server():
    """One throwaway PostgreSQL cluster for the session's store tests; a server that cannot start
    is handed over as the error, and :func:`pg_url` fails the test with it (never a skip)."""
    try:
        server = PostgresServer().start()
    except ServerUnavailable as e:
        yield e
        return
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server, tmp_path: Path, monkeypatch) -> str:
    """The URL of a fresh, empty Postgres store (a schema of its own on the session's server); the
    local directories of Postgres stores live under this test's tmp_path."""
    if isinstance(pg_server, ServerUnavailable):
        pytest.fail(f"the PostgreSQL test server could not start: {pg_server}")
    monkeypatch.setenv("FLUX_PG_LOCAL_DIR", str(tmp_path / "pg-local"))
    return f"{pg_server.dsn}?schema=t_{uuid.uuid4().hex[:16]}"
