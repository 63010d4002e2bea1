"""Helpers for pilot tests: the screen as plain text, and waiting for workers."""

from __future__ import annotations

import pytest
from textual.worker import WorkerCancelled, WorkerFailed


def screen_text(app) -> str:
    """Everything on screen (all layers composited) as plain text lines."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip).rstrip() for strip in strips)


async def settle(pilot, rounds: int = 3) -> None:
    """Let workers finish and their messages be handled.

    A cancelled worker is fine (exclusive workers cancel their predecessors); a worker that raised
    fails the test with its error — the app's workers report expected problems on screen, so an
    exception escaping one is a bug, not a state to wait through.
    """
    app = pilot.app
    for _ in range(rounds):
        await pilot.pause()
        try:
            await app.workers.wait_for_complete()
        except WorkerCancelled:
            pass
        except WorkerFailed as e:
            pytest.fail(f"a worker failed: {e.error!r}", pytrace=False)
        await pilot.pause()


def table_rows(app, selector: str) -> list[str]:
    """The rows a ``DataTable`` on the current screen holds, each its cells' plain text joined by
    `` | ``. A table measures its columns' widths on a later idle than the one that added the rows
    (until then a long cell is drawn cut with an ellipsis), so cell contents are read here, from
    the table, and the screen is read for what the table does not draw."""
    table = app.screen.query_one(selector)
    return [" | ".join(str(getattr(c, "plain", c)) for c in table.get_row_at(i)) for i in range(table.row_count)]


def widget_text(app, selector: str) -> str:
    """The plain text a ``Static`` on the current screen shows, its lines joined by single spaces
    (a dialog's wrapped sentence reads as one line, without the borders around it)."""
    content = app.screen.query_one(selector).content
    return " ".join(str(getattr(content, "plain", content)).split())


async def text_shown(pilot, *needles: str, timeout_s: float = 10.0) -> str:
    """The screen's text once every needle is on it (a DataTable paints new rows on a later
    refresh than the one that added them, later still on a loaded machine); the last text if the
    time runs out, so the caller's assertion names what is missing."""
    import time

    deadline = time.monotonic() + timeout_s
    text = screen_text(pilot.app)
    while not all(n in text for n in needles) and time.monotonic() < deadline:
        await pilot.pause(0.05)
        text = screen_text(pilot.app)
    return text


async def dialog_checked(pilot, timeout: float = 10.0) -> None:
    """Until the write dialog on top has checked what it shows (its debounced plan): a preview or
    a problem, once it is ready."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await settle(pilot)
        s = pilot.app.screen
        if getattr(s, "_ready", True) and (getattr(s, "preview", 1) is not None or getattr(s, "problem", 1) is not None):
            return
        await pilot.pause(0.05)
    raise AssertionError("the dialog never finished checking")
