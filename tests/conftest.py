"""Shared pytest fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import copy_fixture


@pytest.fixture
def fixture_store(tmp_path: Path) -> Path:
    """A writable copy of the real flux fixture (a missing fixture fails the test with what to do)."""
    return copy_fixture(tmp_path / "coding-agent-note")
