"""Fixtures for the agent runtime tests: a workspace, a store directory, a client factory."""

from __future__ import annotations

from pathlib import Path

import pytest

from flux.agent.client import Client
from flux.agent.loop import RetryPolicy


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    d.mkdir()
    (d / "README.md").write_text("# demo project\n")
    (d / "src").mkdir()
    (d / "src" / "app.py").write_text("def main():\n    return 1\n")
    return d


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def make_client(ws: Path, store: Path):
    made = []

    def make(provider="mock", **kw) -> Client:
        kw.setdefault("workspace", ws)
        kw.setdefault("store", store)
        kw.setdefault("env_secrets", False)
        kw.setdefault("retry", RetryPolicy(attempts=3, base_delay_s=0.0))
        c = Client(provider, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()
