"""The app's tests view (``flux-tui --tests DIR``, palette "Tests"): scenarios with their result,
Enter for golden ↔ this run with the cursor on the first divergence. Real Textual pilot, real
scenarios recorded by the runtime (mock model), run offline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flux.agent.client import Client
from flux.testkit import Scenario

from tests.helpers import copy_store
from tests.testkit.conftest import change_tool_input

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def tests_dir(tmp_path: Path, fixture_store: Path) -> Path:
    root = tmp_path / "scenarios"
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("# x\n")
    with Client("mock", workspace=ws, auto_approve=True, env_secrets=False) as c:
        Scenario.record(c, "write a quick note", root / "note").close()
    shutil.copytree(root / "note", root / "broken")
    change_tool_input(root / "broken" / "model.jsonl", 2, path="other.txt")
    copy_store(fixture_store, root / "coding-agent-note")
    return root


async def _wait_done(pilot, screen, n: int) -> None:
    for _ in range(400):
        if len(screen.results) == n:
            return
        await pilot.pause(0.02)
    raise AssertionError("the scenarios did not finish")


def _row(table, key: str) -> list[str]:
    return [c.plain for c in table.get_row(key)]


async def test_tests_view_lists_results_and_opens_golden_vs_run(tests_dir):
    from textual.widgets import DataTable

    from flux_tui.app import FluxApp
    from flux_tui.screens.tests import TestDetailScreen, TestsScreen

    app = FluxApp(tests_dir=tests_dir, poll_interval=None)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, TestsScreen)
        await _wait_done(pilot, screen, 3)
        await pilot.pause()
        table = screen.query_one(DataTable)
        keys = [str(p) for p in screen.order]
        assert [Path(k).name for k in keys] == ["broken", "coding-agent-note", "note"]
        broken, fixture, note = (_row(table, k) for k in keys)
        assert broken[1] == "✓ faithful" and broken[2].startswith("✗ plan changed · ≠ left the world")
        assert broken[3].startswith("left the recorded world: op `append`")
        assert fixture[2] == "replay only (flux 0.26.0)"
        assert note[1:3] == ["✓ faithful", "✓ faithful"]
        head = str(screen.query_one("#tests-head").render())
        assert "3 scenario(s): 2 clean, 1 failed" in head

        await pilot.press("enter")  # the cursor starts on "broken"
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, TestDetailScreen)
        dt = detail.query_one(DataTable)
        first = detail.first
        assert first is not None and dt.cursor_row == first
        mark, golden, run = detail.rows[first]
        assert mark == "≠" and "flux-mock.txt" in golden and "other.txt" in run
        await pilot.press("n")
        assert dt.cursor_row == first + 1
        await pilot.press("escape")
        assert isinstance(app.screen, TestsScreen)

        await pilot.press("down", "enter")  # the flux fixture: replay only, the recording alone
        await pilot.pause()
        detail = app.screen
        assert detail.first is None and all(r[2] == "" for r in detail.rows)
        assert any("cell append" in r[1] for r in detail.rows)
        await pilot.press("escape", "r")
        await _wait_done(pilot, screen, 3)
        await pilot.press("escape")  # the tests view was the app: leaving it quits
        await pilot.pause()
    assert app.return_code in (0, None)


async def test_palette_entry_opens_the_tests_view(tests_dir, monkeypatch, tmp_path):
    from flux_tui.app import FluxApp
    from flux_tui.commands import screen_commands
    from flux_tui.screens.tests import TestsScreen

    monkeypatch.chdir(tests_dir)
    app = FluxApp(tmp_path / "store", poll_interval=None)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        titles = [t for t, *_ in screen_commands(app.screen)]
        assert "Tests" in titles
        await pilot.press("ctrl+t")
        await pilot.pause()
        assert isinstance(app.screen, TestsScreen) and app.screen.directory == Path(".")
        await _wait_done(pilot, app.screen, 3)
        await pilot.press("escape")
        assert not isinstance(app.screen, TestsScreen)
