"""Measuring points for ``benchmarks/bench_browse.py`` and the app tests: each coroutine drives the
app through a pilot and returns once the result is painted.

They avoid ``pilot.pause()`` / ``pilot.press()`` on purpose: those wait until the *process* is idle
(CPU time stops advancing), and the sessions screen keeps summarizing the rest of a big store in a
background thread, so an idle-wait measures the background scan, not the paint. Here "painted"
means: the state is on the widgets and the screen has been composited once more.
"""

from __future__ import annotations

import asyncio

from textual import events

from flux_tui.screens.session import SessionScreen
from flux_tui.screens.sessions import SessionsScreen

__all__ = ["wait_sessions_painted", "open_session", "wait_turn_read", "cursor_step", "wait_until", "paint"]


async def wait_until(pilot, predicate, timeout: float = 120.0, step: float = 0.002) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError("the app did not reach the expected state in time")
        await asyncio.sleep(step)


async def _drain(app, rounds: int = 50) -> None:
    """Let queued messages (e.g. a Highlighted after a cursor move) be handled."""
    for _ in range(rounds):
        await asyncio.sleep(0)
        screen = app.screen
        busy = screen._message_queue.qsize() or any(w._message_queue.qsize() for w in screen.query("*"))
        if not busy:
            return


async def paint(app) -> None:
    """Composite the current screen now (what the refresh timer would do next)."""
    await _drain(app)
    app.screen._on_timer_update()
    await asyncio.sleep(0)


async def wait_sessions_painted(app, pilot) -> None:
    """App start → the sessions list shows registry rows (or the notice for an unusable store)."""
    def ready() -> bool:
        screen = app.screen
        if not isinstance(screen, SessionsScreen):
            return False
        return screen.table.row_count > 0 or screen._error is not None or (screen._loaded and not screen._items)

    await wait_until(pilot, ready)
    await paint(app)


async def open_session(app, pilot, session_id: str) -> None:
    """Open ``session_id`` → its turn timeline is painted."""
    app.open_session(session_id)

    def ready() -> bool:
        screen = app.screen
        return isinstance(screen, SessionScreen) and (screen.timeline is not None or screen.load_error is not None)

    await wait_until(pilot, ready)
    await paint(app)


async def wait_turn_read(app, pilot) -> None:
    """After :func:`open_session` of a big session (its turn's first rows painted): the rest of the
    turn is read and painted."""
    screen = app.screen

    def ready() -> bool:
        d = screen.turn_detail
        return screen.load_error is not None or (d is not None and not d.truncated)

    await wait_until(pilot, ready)
    await paint(app)


async def cursor_step(app, pilot, key: str = "j") -> None:
    """One key on the focused list: key event → cursor moved → panels updated → screen painted."""
    widget = app.screen.focused
    before = getattr(widget, "cursor", None)
    event = events.Key(key, key if len(key) == 1 else None)
    event.set_sender(app)
    app._driver.send_message(event)
    try:
        await wait_until(pilot, lambda: getattr(widget, "cursor", None) != before, timeout=0.5, step=0)
    except TimeoutError:
        pass  # at the end of the list: nothing moves
    await paint(app)
