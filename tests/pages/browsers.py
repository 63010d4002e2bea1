"""Headless Chromium for the browser tests: Debian's ``chromium`` driven by Playwright (no browser
download). In CI a missing browser fails the test with what to install; elsewhere it skips."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("FLUX_CHROMIUM", "/usr/bin/chromium")
#: Flags for a closed network: without the background-networking ones Chromium keeps dialling out.
CHROMIUM_ARGS = ["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def browser_unavailable() -> str | None:
    """Why no browser test can run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        return f"no Chromium at {CHROMIUM} (apt-get install -y chromium, or set FLUX_CHROMIUM)"
    return None


def need_browser() -> None:
    """Fail (in CI) or skip (elsewhere) the calling test when no browser can run."""
    reason = browser_unavailable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the browser tests need a browser in CI: {reason}")
        pytest.skip(reason)


def launch(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
