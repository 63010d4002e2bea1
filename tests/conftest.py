"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import FIXTURE, copy_store


@pytest.fixture
def fixture_store(tmp_path: Path) -> Path:
    if not FIXTURE.exists():
        pytest.skip(f"the real flux fixture is not at {FIXTURE}")
    return copy_store(FIXTURE, tmp_path / "coding-agent-note")
