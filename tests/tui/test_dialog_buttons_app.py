"""The dialogs' buttons do what their keys do (one table of button → action per dialog): clicked
with a real pilot on real stores — Cancel/No close and write nothing, Run/Yes run
(through the side-effect gate when something would go live)."""

from __future__ import annotations

import pytest

from flux.store.store import StoreWriter
from screen_text import dialog_checked as _checked, settle
from stores import build_chain, build_interrupted, stream_registry

pytestmark = pytest.mark.anyio

SIZE = (120, 40)


@pytest.fixture(autouse=True)
def no_text_area_blink(monkeypatch):
    from textual.widgets import TextArea

    monkeypatch.setattr(TextArea, "_toggle_cursor_blink_visible", lambda self: None)


async def _click(pilot, selector: str) -> None:
    await pilot.click(selector)
    await settle(pilot)


async def test_fork_cancel_closes_and_fork_goes_to_the_gate(make_app, tmp_path, monkeypatch):
    from flux_tui.screens.fork import ForkScreen
    from flux_tui.screens.gate import GateScreen
    from flux_tui.widgets.editors import JsonTextArea

    monkeypatch.chdir(tmp_path)
    store = build_chain(tmp_path / "c")
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_1")
        await settle(pilot)
        await pilot.press("f")
        await _checked(pilot)
        assert isinstance(app.screen, ForkScreen)
        await _click(pilot, "#fork-cancel")
        assert not isinstance(app.screen, ForkScreen) and len(stream_registry(store)) == 1
        await pilot.press("f")
        await _checked(pilot)
        app.screen.query_one("#inject-value", JsonTextArea).load_text('"injected"')
        await _checked(pilot)
        assert not app.screen.query_one("#fork-run").disabled
        await _click(pilot, "#fork-run")  # the tail runs live: the gate first
        assert isinstance(app.screen, GateScreen)
        await _click(pilot, "#gate-no")
        assert isinstance(app.screen, ForkScreen) and len(stream_registry(store)) == 1


async def test_what_if_cancel_closes_and_run_writes(make_app, tmp_path, monkeypatch):
    from flux_tui.screens.diff import DiffScreen
    from flux_tui.screens.whatif import WhatIfScreen
    from flux_tui.widgets.editors import JsonTextArea

    monkeypatch.chdir(tmp_path)
    store = build_chain(tmp_path / "c")
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_1")
        await settle(pilot)
        tv = app.screen.timeline_view
        tv.move_cursor(next(i for i, r in enumerate(tv.rows) if r.kind == "cell"))
        await pilot.press("w")
        await _checked(pilot)
        assert isinstance(app.screen, WhatIfScreen)
        await _click(pilot, "#whatif-cancel")
        assert not isinstance(app.screen, WhatIfScreen) and len(stream_registry(store)) == 1
        await pilot.press("w")
        await _checked(pilot)
        app.screen.query_one("#whatif-value", JsonTextArea).load_text('"a different value"')
        await _checked(pilot)
        await _click(pilot, "#whatif-run")
        assert isinstance(app.screen, DiffScreen) and len(stream_registry(store)) == 2


async def test_delete_no_keeps_and_yes_deletes(make_app, tmp_path):
    from flux_tui.screens.delete import DeleteScreen

    store = build_chain(tmp_path / "c")
    with StoreWriter(store) as w:
        fork = w.create_session("mock", context={"agent_id": "fork:s_1@0", "correlation_id": "s_1"})
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.table
        table.move_cursor(next(i for i, it in enumerate(table.rows) if it.id == fork))
        await pilot.press("D")
        await settle(pilot)
        assert isinstance(app.screen, DeleteScreen)
        await _click(pilot, "#delete-no")
        assert not isinstance(app.screen, DeleteScreen) and len(stream_registry(store)) == 2
        await pilot.press("D")
        await settle(pilot)
        await _click(pilot, "#delete-yes")
        assert not isinstance(app.screen, DeleteScreen) and len(stream_registry(store)) == 1


async def test_resurrect_no_closes_and_writes_nothing(make_app, tmp_path):
    from flux_tui.screens.resurrect import ResurrectScreen

    store = build_interrupted(tmp_path / "i")
    before = stream_registry(store)
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_2")  # build_interrupted: s_2's turn was cut off mid-flow
        await settle(pilot)
        await pilot.press("R")
        await settle(pilot)
        assert isinstance(app.screen, ResurrectScreen)
        await _click(pilot, "#resurrect-no")
        assert not isinstance(app.screen, ResurrectScreen) and stream_registry(store) == before
