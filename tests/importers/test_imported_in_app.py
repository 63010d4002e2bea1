"""An imported run browsed in the app: the sessions list shows it with its model, the session
screen shows its plans and the cells of the foreign agent's tool calls, and its sub-agent child."""

from __future__ import annotations

import pytest

from flux.importers import import_file
from flux_tui.app import FluxApp
from flux_tui.screens.session import SessionScreen
from flux_tui.screens.sessions import SessionsScreen
from tests.importers.foreign_logs import claude_code_session

pytestmark = pytest.mark.anyio

NOW_MS = 1_781_000_000_000


@pytest.fixture
def anyio_backend():
    return "asyncio"


def _text(app) -> str:
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip).rstrip() for strip in strips)


async def _settle(pilot) -> None:
    for _ in range(3):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


@pytest.fixture
def imported(tmp_path):
    store = tmp_path / "store"
    return store, import_file(claude_code_session(tmp_path / "logs"), store)


async def test_the_app_browses_an_imported_claude_code_run(imported):
    store, res = imported
    app = FluxApp(store, now_ms=NOW_MS, display_name="store", poll_interval=None)
    async with app.run_test(size=(140, 45)) as pilot:
        await _settle(pilot)
        assert isinstance(app.screen, SessionsScreen)
        ids = [it.id for it in app.screen.table.rows]
        assert res.session in ids and res.created[1] in ids
        text = _text(app)
        assert "claude-sonnet-4-5-20250929" in text
        while app.screen.table.current.id != res.session:
            await pilot.press("down")
            await _settle(pilot)
        await pilot.press("enter")
        await _settle(pilot)
        assert isinstance(app.screen, SessionScreen) and app.screen.session_id == res.session
        text = " ".join(_text(app).split())
        assert "Bash(" in text and "Edit(" in text
        tv = app.screen.timeline_view
        seen = []
        for _ in range(12):
            if tv.current is not None and tv.current.kind == "cell":
                seen.append(tv.current.cell.op)
            await pilot.press("j")
            await _settle(pilot)
        assert {"Bash", "Task", "Edit"} <= set(seen)
