"""A new user's first hour, the app's leftovers: each test is built from its reproduction."""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager

import pytest

from screen_text import screen_text, settle
from stores import NOW_MS, build_interrupted

pytestmark = pytest.mark.anyio

SIZE = (120, 40)


def _app(store, **kw):
    from flux_tui.app import FluxApp

    kw.setdefault("display_name", "store")
    return FluxApp(store, now_ms=NOW_MS, poll_interval=None, **kw)


# -- the session screen follows the liveness lease --------------------------------------------------

_HOLD_LEASE = """
import sys
from flux.store.lease import SessionLease
lease = SessionLease.acquire(sys.argv[1], sys.argv[2])
print("held", flush=True)
sys.stdin.read()
"""


@contextmanager
def _live_writer(store, session: str):
    """A real second process holding ``session``'s lease, as a writer recording a turn does."""
    child = subprocess.Popen([sys.executable, "-c", _HOLD_LEASE, str(store), session], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        yield child.pid
    finally:
        child.stdin.close()
        child.wait(timeout=10)


async def _open(store, session: str):
    app = _app(store, session=session)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        text = screen_text(app)
        info = " ".join(app.screen.query_one("#turn-info").plain_text.split())
        await pilot.press("R")
        await settle(pilot)
        pushed = type(app.screen).__name__
        toasts = [n.message for n in app._notifications]
    return text, info, pushed, toasts


async def test_a_session_whose_writer_is_alive_shows_as_recording_not_interrupted(tmp_path):
    """Reproduction: the session screen flagged a turn a live writer was recording as interrupted
    (and offered R on it) — the session list and flux show asked the lease, the screen did not."""
    store = build_interrupted(tmp_path / "st")
    with _live_writer(store, "s_2") as pid:
        text, info, pushed, toasts = await _open(store, "s_2")
    header = text.splitlines()[0]
    assert "● recording" in header and "interrupted" not in header
    assert "  1 ● pending" in text.splitlines()[2]  # the turn list's marker
    assert f"● recording — turn 1 is being recorded by pid {pid} — live, not interrupted" in info
    assert pushed == "SessionScreen"  # R does not open the resurrect panel on a live turn
    assert any("s_2 has no interrupted turn — turn 1 is being recorded by pid" in t for t in toasts)


async def test_the_same_session_with_its_writer_gone_is_interrupted(tmp_path):
    """The other side: once the writer's process is gone its lease is free and the turn reads
    interrupted again — the flag follows the lease, it is not a constant."""
    store = build_interrupted(tmp_path / "st")
    with _live_writer(store, "s_2"):
        pass
    text, info, pushed, _ = await _open(store, "s_2")
    assert "⚠ interrupted" in text.splitlines()[0] and "recording" not in text
    assert "⚠ interrupted at statement 1 — R resurrects turn 1" in info
    assert pushed == "ResurrectScreen"
