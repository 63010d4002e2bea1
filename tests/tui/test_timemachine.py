"""Pilot tests for replay (r) and diff (d) in the app, and for big sessions opened one turn at a time."""

from __future__ import annotations

import time

import pytest
from textual.widgets import Input

from flux.timemachine.diff import DiffRow, RunDiff
from benchmarks import app_probes
from flux_tui.commands import screen_commands
from flux_tui.screens import session_load
from flux_tui.screens.diff import DiffPrompt, DiffScreen
from flux_tui.screens.diff_detail import DiffDetailScreen
from flux_tui.screens.session import SessionScreen
from flux_tui.screens.sessions import SessionsScreen
from flux_tui.widgets.diff_view import DiffList
from flux_tui.widgets.bottom_tabs import BottomTabs
from screen_text import screen_text, settle
from stores import (
    build_diff, build_multi_turn, build_open_unflagged, copy_fixture, tamper_cell_content, tamper_plan_input,
)

pytestmark = pytest.mark.anyio

SIZE = (120, 40)


async def open_first(pilot) -> SessionScreen:
    await pilot.press("enter")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, SessionScreen)
    return screen


async def replay(pilot) -> SessionScreen:
    await pilot.press("r")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, SessionScreen)
    return screen


def flat(text: str) -> str:
    return " ".join(text.split())


def notes(app) -> list:
    return list(app._notifications)


def report(screen: SessionScreen) -> str:
    return flat(screen.query_one("#replay").plain_text)


def gutter(screen: SessionScreen, index: int) -> str:
    tv = screen.timeline_view
    return tv.render_row(tv.row_at(index), index, 0, 80, False).plain[:1]


# -- replay -------------------------------------------------------------------------------------


async def test_r_replays_the_fixture_faithfully(make_app, tmp_path):
    app = make_app(copy_fixture(tmp_path / "fx"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_first(pilot)
        assert gutter(screen, 1) == " "  # no marks before a replay
        await replay(pilot)
        m = screen.replay
        assert m is not None and m.faithful
        assert (m.report.cells_consumed, m.report.cells_total) == (1, 1)
        assert "REPLAY ✓ faithful" in flat(screen_text(app))
        text = report(screen)
        assert "1/1 recorded cell(s) served" in text
        assert "✓ h:0aac945488efbfd1" in text
        assert screen.query_one("#bottom", BottomTabs).active == "tab-replay"
        tv = screen.timeline_view
        assert tv.current.kind == "statement"  # no divergence: the cursor stayed
        assert [gutter(screen, i) for i in range(tv.row_count)] == ["p", "✓", "✓"]  # heading, statement, cell
        assert "replay ✓ ran, every op served from tape" in flat(screen.query_one("#inspector").plain_text)
        # Esc clears the marks first, then goes back
        await pilot.press("escape")
        await settle(pilot)
        assert screen.replay is None and gutter(screen, 2) == " "
        assert "REPLAY" not in screen_text(app)
        await pilot.press("escape")
        assert isinstance(app.screen, SessionsScreen)


async def test_a_changed_cell_content_is_still_served(make_app, tmp_path):
    """Replay serves the tape (it never re-runs the op): content changed in the SQLite stays faithful."""
    app = make_app(tamper_cell_content(copy_fixture(tmp_path / "fx")))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_first(pilot)
        await replay(pilot)
        assert screen.replay.faithful
        assert "1/1 recorded cell(s) served" in report(screen)
        assert "appended 99 bytes" in screen_text(app)


async def test_a_changed_plan_input_diverges_and_the_cursor_goes_there(make_app, tmp_path):
    app = make_app(tamper_plan_input(copy_fixture(tmp_path / "fx")))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_first(pilot)
        await pilot.press("j")  # on the cell: the replay must move the cursor back to the statement
        await settle(pilot)
        assert screen.timeline_view.current.kind == "cell"
        await replay(pilot)
        m = screen.replay
        assert not m.faithful and m.report.diverged
        assert "REPLAY ✗ diverged" in flat(screen_text(app))
        text = report(screen)
        assert "0/1 recorded cell(s) served" in text
        assert "has no matching unconsumed recorded cell" in text
        tv = screen.timeline_view
        assert tv.current.kind == "statement" and tv.has_focus
        assert gutter(screen, tv.cursor) == "✗"
        assert gutter(screen, tv.cursor + 1) == "○"  # the recorded cell was never asked for
        assert "diverged" in screen.query_one("#inspector").plain_text
        # another r runs it again
        await replay(pilot)
        assert screen.replay is not None and screen.replay.report.diverged


async def test_a_session_without_cells_cannot_replay(make_app, tmp_path):
    app = make_app(build_open_unflagged(tmp_path / "open"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_first(pilot)
        await replay(pilot)
        assert screen.replay is None and screen.replay_running is None
        [note] = notes(app)
        assert note.title == "Cannot replay" and "is not replayable: no run trace recorded" in note.message
        assert "Traceback" not in screen_text(app)


async def test_replay_and_diff_are_in_the_palette_and_help(make_app, tmp_path):
    app = make_app(copy_fixture(tmp_path / "fx"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = [t for t, *_ in screen_commands(app.screen)]
        assert "Diff" in titles
        screen = await open_first(pilot)
        cmds = {t: h for t, h, *_ in screen_commands(screen)}
        assert "Replay" in cmds and "[r]" in cmds["Replay"] and "cassette" in cmds["Replay"]
        assert "Diff" in cmds and "[d]" in cmds["Diff"]
        await pilot.press("f1")
        await settle(pilot)
        from rich.console import Console

        console = Console(width=120, record=True, file=open("/dev/null", "w"))
        console.print(app.screen._body)
        help_text = console.export_text()
        assert "session.replay" in help_text and "session.diff" in help_text
        assert "✓ served / ✗ diverged / ○ unconsumed" in " ".join(help_text.split())


async def test_replay_from_the_palette(make_app, tmp_path):
    app = make_app(copy_fixture(tmp_path / "fx"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_first(pilot)
        await pilot.press("ctrl+p")
        await settle(pilot)
        for ch in "replay":
            await pilot.press(ch)
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is screen and screen.replay is not None and screen.replay.faithful


# -- diff ---------------------------------------------------------------------------------------


async def test_d_diffs_against_the_fork_source_with_the_first_divergence_focused(make_app, tmp_path):
    app = make_app(build_diff(tmp_path / "diff"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_first(pilot)  # s_2 (newest), a fork of s_1
        assert screen.session_id == "s_2"
        await pilot.press("d")
        await settle(pilot)
        prompt = app.screen
        assert isinstance(prompt, DiffPrompt)
        assert prompt.query_one("#diff-other", Input).value == "s_1"  # the fork source
        await pilot.press("enter")
        await settle(pilot)
        ds = app.screen
        assert isinstance(ds, DiffScreen) and (ds.a, ds.b) == ("s_2", "s_1")
        rv = ds.rows_view
        assert rv.row_count == 4
        assert rv.cursor == 1 and rv.current.kind == "output" and rv.has_focus  # the first divergence
        text = flat(screen_text(app))
        assert "diff s_2 ↔ s_1" in text
        assert "1 same · 2 plan · 1 world" in text
        assert 'tests = bash({"command":"pytest -q"})' in text
        assert "same statement, different world" in text
        markers = [rv.render_row(rv.row_at(i), i, 0, 100, False).plain[:1] for i in range(rv.row_count)]
        assert markers == ["=", "≠", "~", "~"]  # A (s_2) has the extra statement: ~ with ∅ on B's side
        await pilot.press("n")
        assert rv.cursor == 2
        await pilot.press("n")
        assert rv.cursor == 3
        await pilot.press("n")  # wraps
        assert rv.cursor == 1
        await pilot.press("N")
        assert rv.cursor == 3
        await pilot.press("N", "N")
        assert rv.cursor == 1
        await pilot.press("f1")
        await settle(pilot)
        assert app.screen.topic == "diff" and "diff.next" in screen_text(app) and "Help · Diff" in screen_text(app)
        await pilot.press("escape")
        assert app.screen is ds
        await pilot.press("enter")
        await settle(pilot)
        detail = app.screen
        assert isinstance(detail, DiffDetailScreen)
        await pilot.press("f1")
        await settle(pilot)
        assert app.screen.topic == "diff-detail" and "diff_detail.back" in screen_text(app)
        await pilot.press("escape")
        assert app.screen is detail
        text = screen_text(app)
        assert '"failed": [' in text and '"test_tokenize_empty"' in text  # B's payload, pretty JSON
        assert '"passed": 40' in text and '"passed": 39' in text
        assert "What changed · structural" in text
        await pilot.press("escape")
        assert app.screen is ds
        await pilot.press("escape")
        assert app.screen is screen
        # the next d proposes the fork source again; the last diffed is remembered for others
        assert app.last_diffed == "s_1"


async def test_d_on_the_sessions_screen_and_a_bad_id(make_app, tmp_path):
    app = make_app(build_diff(tmp_path / "diff"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("j")  # s_1: no fork source, nothing diffed yet → empty default
        await settle(pilot)
        assert app.screen.table.current.id == "s_1"
        await pilot.press("d")
        await settle(pilot)
        prompt = app.screen
        assert isinstance(prompt, DiffPrompt) and prompt.session_id == "s_1"
        inp = prompt.query_one("#diff-other", Input)
        assert inp.value == ""
        for ch in "s_99":
            await pilot.press(ch)
        await pilot.press("enter")
        await settle(pilot)
        assert app.screen is prompt  # refused, the prompt stays
        assert prompt.error is not None and "no session “s_99” in this store" in screen_text(app)
        inp.value = "last"
        await pilot.press("enter")
        await settle(pilot)
        ds = app.screen
        assert isinstance(ds, DiffScreen) and (ds.a, ds.b) == ("s_1", "s_2")
        assert ds.rows_view.cursor == ds.diff.first_divergence == 1
        await pilot.press("s")  # swap sides
        await settle(pilot)
        assert (ds.a, ds.b) == ("s_2", "s_1")
        await pilot.press("escape")
        assert isinstance(app.screen, SessionsScreen)
        await pilot.press("d")
        await settle(pilot)
        assert app.screen.query_one("#diff-other", Input).value == "s_2"  # the last one diffed
        await pilot.press("escape")
        assert isinstance(app.screen, SessionsScreen)


async def test_a_session_diffed_against_itself_is_identical(make_app, tmp_path):
    app = make_app(copy_fixture(tmp_path / "fx"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        await pilot.press("1", "enter")  # a bare number is s_<n>
        await settle(pilot)
        ds = app.screen
        assert isinstance(ds, DiffScreen) and ds.diff.identical
        assert "identical" in screen_text(app)
        await pilot.press("n")
        await settle(pilot)
        assert any("no difference" in n.message for n in notes(app))


def _big_diff(n: int) -> RunDiff:
    rows = []
    for i in range(n):
        if i % 1000 == 999:
            rows.append(DiffRow("output", i, stmt=f"h{i % 50:015d}", op="read", a=f"line {i}", b=f"line {i}!", index=i))
        elif i % 1000 == 500:
            rows.append(DiffRow("plan", i, a_stmt=f"h{i % 50:015d}", b_stmt=None, index=i))
        else:
            rows.append(DiffRow("same", i, stmt=f"h{i % 50:015d}", index=i))
    texts = {f"h{k:015d}": f'x_{k} = read({{"path":"file_{k}.txt"}})' for k in range(50)}
    return RunDiff(a="s_1", b="s_2", rows=rows, texts=texts)


async def test_a_10k_row_diff_scrolls_without_stalling(make_app, tmp_path):
    app = make_app(copy_fixture(tmp_path / "fx"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        diff = _big_diff(10_000)
        t = time.perf_counter()
        app.push_screen(DiffScreen("s_1", "s_2", diff=diff))
        await app_probes.wait_until(pilot, lambda: isinstance(app.screen, DiffScreen) and bool(app.screen.query(DiffList))
                                     and app.screen.rows_view.row_count > 0)
        await app_probes.paint(app)
        assert time.perf_counter() - t < 5.0  # a stall guard only; speed is benchmarked, not asserted
        ds = app.screen
        rv = ds.rows_view
        assert rv.row_count == 10_000 and rv.cursor == 500  # the first divergence
        steps = []
        for key in ["j", "j", "pagedown", "pagedown", "n", "n", "G", "pageup", "k", "N", "g"]:
            t = time.perf_counter()
            if key in ("n", "N"):
                await pilot.press(key)
                await app_probes.paint(app)
            else:
                await app_probes.cursor_step(app, pilot, key)
            steps.append(time.perf_counter() - t)
        assert max(steps) < 5.0, steps  # a stall guard: a step that touched all 10,000 rows would take far longer
        await pilot.press("G")
        assert rv.cursor == 9_999 and rv.scroll_offset.y > 9_000


# -- one turn at a time -------------------------------------------------------------------------


async def test_a_big_session_opens_on_its_newest_turn_and_loads_others_on_demand(make_app, tmp_path, monkeypatch):
    monkeypatch.setattr(session_load, "PARTIAL_OVER", 0)  # every session counts as big
    app = make_app(build_multi_turn(tmp_path / "multi"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_first(pilot)
        assert screen.detail.partial
        assert screen.turn.number == 3 and screen.turns_list.current.number == 3
        text = screen_text(app)
        assert "file_3.txt" in text and "content of file 3" in text
        assert "question 3" in screen.query_one("#conversation").plain_text
        await pilot.press("1")  # focus the turn list
        await pilot.press("k")
        await settle(pilot)
        assert screen.turn.number == 2 and screen.timeline is not None
        assert "content of file 2" in screen_text(app)
        assert screen.timeline_view.current.kind == "statement"
        screen.timeline_view.move_cursor(2)  # on turn 2's first cell
        kept = screen.timeline_view.current.key
        await pilot.press("left_square_bracket")
        await settle(pilot)
        assert screen.turn.number == 1 and "content of file 1" in screen_text(app)
        # tape indices stay session-wide in a one-turn window
        cells = [r.cell.index for r in screen.timeline_view.rows if r.kind == "cell"]
        assert cells == [0, 1]
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert screen.turn.number == 2 and screen.timeline_view.current.key == kept  # the cursor was kept
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert screen.turn.number == 3
        assert [r.cell.index for r in screen.timeline_view.rows if r.kind == "cell"] == [4, 5]
        # replay reads the whole session, not the window
        await replay(pilot)
        assert screen.replay is not None
        assert screen.replay.report.cells_total == 6
