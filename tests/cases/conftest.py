"""Fixtures of the saved-case tests: recorded scenarios to save cases from, and the four fixture
stores the conformance suite runs against (the PostgreSQL and S3 servers are real, started once
per session by tests/servers.py; one that cannot start fails its tests with the reason)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main

from tests.servers import PostgresServer, S3Server, ServerUnavailable

INPUT = "write a note about the readme"


def script(path: Path, replies: list[dict]) -> Path:
    path.write_text(json.dumps(replies), encoding="utf-8")
    return path


def default_replies() -> list[dict]:
    return [
        {"tool_calls": [{"name": "read", "input": {"path": "README.md"}, "id": "call_read"}],
         "usage": {"input_tokens": 100, "output_tokens": 10}},
        {"tool_calls": [{"name": "append", "input": {"path": "note.txt", "content": "readme says hi\n"},
                         "id": "call_append"}], "usage": {"input_tokens": 150, "output_tokens": 12}},
        {"text": "Wrote note.txt.", "usage": {"input_tokens": 200, "output_tokens": 5}},
    ]


def record_scenario(root: Path, name: str = "sc", replies: list[dict] | None = None, input_text: str = INPUT) -> Path:
    """``flux record`` through the scripted provider: a real scenario (events.db + model.jsonl)."""
    ws = root / f"{name}-seed"
    ws.mkdir(parents=True, exist_ok=True)
    (ws / "README.md").write_text("# demo\nhi\n")
    sc = root / name
    s = script(root / f"{name}-script.json", replies or default_replies())
    res = CliRunner().invoke(main, ["record", name, input_text, "--dir", str(root), "-m", f"scripted:{s}", "--workspace", str(ws),
                                    "--yes"], env={"FLUX_GOLDEN": None})
    assert res.exit_code == 0, res.output
    return sc


@pytest.fixture(scope="session")
def recorded_master(tmp_path_factory) -> Path:
    return record_scenario(tmp_path_factory.mktemp("cases-recorded"))


@pytest.fixture
def recorded(recorded_master: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(recorded_master, tmp_path / "sc"))


@pytest.fixture(scope="session")
def postgres_server():
    try:
        server = PostgresServer().start()
    except ServerUnavailable as e:
        yield e
        return
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_server():
    try:
        server = S3Server().start()
    except ServerUnavailable as e:
        yield e
        return
    try:
        yield server
    finally:
        server.stop()


def _need(server):
    if isinstance(server, ServerUnavailable):
        pytest.fail(f"the test server could not start: {server}")
    return server


@pytest.fixture
def postgres_dsn(postgres_server) -> str:
    """A fresh, migrated database on the session's real PostgreSQL server."""
    from flux.cases.postgres import migrate

    dsn = _need(postgres_server).fresh_database("t_" + uuid.uuid4().hex[:12])
    migrate(dsn)
    return dsn


@pytest.fixture
def s3_url(s3_server) -> str:
    """A fresh bucket on the session's real S3-compatible server."""
    srv = _need(s3_server)
    bucket = "cases-" + uuid.uuid4().hex[:12]
    srv.make_bucket(bucket)
    return f"s3://{bucket}/team/cases?region=us-east-1&endpoint_url={srv.endpoint_url}"


@pytest.fixture(params=["memory", "file", "postgres", "s3"])
def store_url(request, tmp_path: Path) -> str:
    if request.param == "memory":
        return "memory:"
    if request.param == "file":
        return (tmp_path / "cases").as_uri()
    if request.param == "postgres":
        return request.getfixturevalue("postgres_dsn")
    return request.getfixturevalue("s3_url")
