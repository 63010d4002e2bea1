"""The app's fork dialog runs the same history check as `flux fork`: a parent whose conversation
holds a call nobody answered is refused in the dialog, Fork stays disabled, nothing is written —
and the same store with that call answered checks clean."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from flux.store import Message, StoreWriter
from screen_text import screen_text, settle
from tests.helpers import cell, tree_digest, write_turn

pytestmark = pytest.mark.anyio

SIZE = (120, 40)
PLAN = 'flow\n  a = read({"path":"A"})\n  b = read({"path":"B"})\n'


@pytest.fixture(autouse=True)
def no_text_area_blink(monkeypatch):
    from textual.widgets import TextArea

    monkeypatch.setattr(TextArea, "_toggle_cursor_blink_visible", lambda self: None)


def _store(path: Path, *, answered: bool) -> Path:
    with StoreWriter(path) as w:
        sid = w.create_session("mock")
        write_turn(w, sid, "go", plan=PLAN, cells=[cell("read", {"path": "A"}, "a"), cell("read", {"path": "B"}, "b")])
        w.append(sid, Message.text("user", "write it"))
        w.append(sid, Message(role="assistant", content=[{"type": "tool_use", "id": "toolu_9", "name": "write",
                                                          "input": {"path": "A", "content": "x"}}]))
        if answered:
            w.append(sid, Message(role="user", content=[{"type": "tool_result", "tool_use_id": "toolu_9",
                                                         "content": [{"type": "text", "text": "ok"}]}]))
            w.append(sid, Message.text("assistant", "written"))
    return path


async def _checked(pilot, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await settle(pilot)
        screen = pilot.app.screen
        if getattr(screen, "preview", None) is not None or getattr(screen, "problem", None) is not None:
            return screen
        await pilot.pause(0.05)
    raise AssertionError("the fork dialog never finished checking")


@pytest.mark.parametrize("answered", [False, True])
async def test_fork_dialog_refuses_a_parent_with_an_unanswered_call(make_app, tmp_path, monkeypatch, answered):
    from flux_tui.screens.fork import ForkScreen

    monkeypatch.chdir(tmp_path)
    store = _store(tmp_path / "s", answered=answered)
    digest = tree_digest(store)
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_1")
        await settle(pilot)
        await pilot.press("f")
        dialog = await _checked(pilot)
        assert isinstance(dialog, ForkScreen)
        text = " ".join(screen_text(app).split())
        if answered:
            assert dialog.problem is None and dialog.preview is not None
            assert not dialog.query_one("#fork-run").disabled
        else:
            assert (dialog.problem or "").startswith(
                "session `s_1` cannot be forked: tool_use toolu_9 at index 3 is never answered by a tool_result")
            assert "cannot be forked" in text and dialog.query_one("#fork-run").disabled
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert isinstance(app.screen, ForkScreen)
    assert tree_digest(store) == digest  # checking (and a refused Fork) writes nothing
