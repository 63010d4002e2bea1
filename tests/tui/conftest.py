"""Fixtures for the app's pilot and snapshot tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from stores import NOW_MS  # noqa: E402


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch):
    """The input cursor blink races screenshots (harlequin / pixi-browse)."""
    from textual.widgets import Input

    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)


@pytest.fixture(autouse=True)
def _no_flux_env(monkeypatch):
    monkeypatch.delenv("FLUX_PRICES", raising=False)
    monkeypatch.delenv("FLUX_STORE_DIR", raising=False)


@pytest.fixture
def make_app():
    """FluxApp with a frozen now, a fixed display name and (by default) no background polling."""
    from flux_tui.app import FluxApp

    def make(store, *, poll_interval=None, name="store", **kw):
        return FluxApp(store, now_ms=NOW_MS, display_name=name, poll_interval=poll_interval, **kw)

    return make


@pytest.fixture
def anyio_backend():
    return "asyncio"
