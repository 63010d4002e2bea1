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
    from flux_tui.screens.scenario_detail import TestDetailScreen
    from flux_tui.screens.tests import TestsScreen

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
        assert broken[3].startswith("left the recorded world: op `append")  # the list cuts it with …; the detail has it whole
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
        await pilot.press("escape")  # the tests view is the app (--tests): Esc does not quit it
        await pilot.pause()
        assert app.is_running and app.screen is screen
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code in (0, None) and not app.is_running


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


@pytest.fixture
def snapshot_dir(tests_dir: Path) -> Path:
    """tests_dir plus "stale-snap": the note scenario whose plan.flux.snap is out of date (its check
    is clean, so the trajectory rows are all equal and the failure is the snapshot alone)."""
    shutil.copytree(tests_dir / "note", tests_dir / "stale-snap")
    snap = tests_dir / "stale-snap" / "plan.flux.snap"
    snap.write_text(snap.read_text().replace("flux-mock.txt", "old-name.txt"))
    return tests_dir


async def test_a_snapshot_mismatch_shows_the_diff_and_n_finds_it(snapshot_dir):
    from textual.widgets import DataTable

    from flux_tui.app import FluxApp
    from flux_tui.screens.scenario_detail import TestDetailScreen
    from flux_tui.screens.tests import TestsScreen

    app = FluxApp(tests_dir=snapshot_dir, poll_interval=None)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await _wait_done(pilot, screen, 4)
        key = str(snapshot_dir / "stale-snap")
        assert screen.results[key].first_divergence.startswith("note: plan snapshot mismatch — plan.flux.snap line ")
        table = screen.query_one(DataTable)
        table.move_cursor(row=table.get_row_index(key))
        await pilot.press("enter")
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, TestDetailScreen)
        marks = [m for m, _, _ in detail.rows]
        heading = next(i for i, r in enumerate(detail.rows) if r == ("#", "── plan snapshot ──", ""))
        assert all(m == "=" for m in marks[:heading]), "the trajectory itself is clean"
        assert detail.first is not None and detail.first > heading
        assert detail.query_one(DataTable).cursor_row == detail.first
        changed = [r for r in detail.rows[heading:] if r[0] in "-+"]
        assert any("old-name.txt" in r[1] for r in changed if r[0] == "-")
        assert any("flux-mock.txt" in r[2] for r in changed if r[0] == "+")
        await pilot.press("n")
        assert detail.query_one(DataTable).cursor_row > detail.first
        await pilot.press("escape")
        assert isinstance(app.screen, TestsScreen)


async def test_accept_rewrites_the_golden_after_confirmation_and_rerun_one(snapshot_dir):
    from textual.widgets import DataTable

    from flux_tui.app import FluxApp
    from flux_tui.screens.ask import AskScreen

    snap = snapshot_dir / "stale-snap" / "plan.flux.snap"
    stale = snap.read_text()
    app = FluxApp(tests_dir=snapshot_dir, poll_interval=None)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await _wait_done(pilot, screen, 4)
        table = screen.query_one(DataTable)
        broken_key, key = str(snapshot_dir / "broken"), str(snapshot_dir / "stale-snap")

        table.move_cursor(row=table.get_row_index(broken_key))  # a check failure: nothing to accept
        await pilot.press("u")
        await pilot.pause()
        assert not isinstance(app.screen, AskScreen)
        assert any("nothing to accept for broken" in n.message for n in app._notifications)

        table.move_cursor(row=table.get_row_index(key))
        await pilot.press("u")
        await pilot.pause()
        assert isinstance(app.screen, AskScreen)
        await pilot.press("escape")  # cancelled: nothing rewritten
        await pilot.pause()
        assert snap.read_text() == stale
        await pilot.press("u")
        await pilot.pause()
        await pilot.press("y", "enter")
        for _ in range(400):
            if key in screen.results:
                break
            await pilot.pause(0.02)
        assert screen.results[key].ok and snap.read_text() != stale
        assert "flux-mock.txt" in snap.read_text()
        assert _row(table, key)[1] == "✓ faithful"

        # t runs the highlighted scenario alone again: break it on disk, only its row turns red
        snap.write_text(stale)
        before = dict(screen.results)
        await pilot.press("t")
        for _ in range(400):
            if key in screen.results:
                break
            await pilot.pause(0.02)
        assert not screen.results[key].ok
        assert all(screen.results[k] is before[k] for k in before if k != key)


async def test_filter_help_and_header(snapshot_dir):
    from textual.widgets import DataTable

    from flux_tui.app import FluxApp
    from flux_tui.screens.help import HelpScreen
    from flux_tui.widgets.topbar import TopBar

    app = FluxApp(tests_dir=snapshot_dir, poll_interval=None)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await _wait_done(pilot, screen, 4)
        await pilot.pause()
        bar = screen.query_one(TopBar).text
        assert "flux-tui" in bar and "tests" in bar and "2 clean · 2 failed" in bar
        await pilot.press("slash", "s", "t", "a")
        await pilot.pause()
        table = screen.query_one(DataTable)
        assert table.row_count == 1 and _row(table, str(snapshot_dir / "stale-snap"))[0] == "stale-snap"
        assert "filter “sta”: 1 shown" in screen.query_one(TopBar).text
        await pilot.press("enter", "escape")  # Esc clears the filter first
        await pilot.pause()
        assert table.row_count == 4 and screen.filter_text == ""
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert str(app.screen.query_one("#help-box").border_title) == "Help · Tests"
        await pilot.press("escape")
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("f1")
        await pilot.pause()
        assert str(app.screen.query_one("#help-box").border_title) == "Help · Test result"
