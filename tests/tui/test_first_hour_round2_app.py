"""A new user's first hour, round 2 — the app's items: each test is built from its reproduction."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from flux_tui.screens.session import SessionScreen
from flux_tui.screens.sessions import SessionsScreen
from screen_text import screen_text, settle
from stores import NOW_MS, build_gallery

pytestmark = pytest.mark.anyio

SIZE = (120, 40)


def flat(text: str) -> str:
    return " ".join(text.split())


def _app(store, **kw):
    from flux_tui.app import FluxApp

    kw.setdefault("display_name", "store")
    return FluxApp(store, now_ms=NOW_MS, poll_interval=None, **kw)


# -- the locked-store message names the store once, whatever the directory is called ---------------


async def test_a_store_named_locked_reads_locked_by_a_writer(tmp_path, monkeypatch):
    """Reproduction: ``--store locked`` (relative) on a store a writer holds: the notice read
    ``…/events.db is …/locked by a writer`` — the word "locked" was replaced by the display name."""
    monkeypatch.chdir(tmp_path)
    d = Path("locked")
    d.mkdir()
    con = sqlite3.connect(d / "events.db", isolation_level=None)
    con.execute("CREATE TABLE events (global_seq INTEGER PRIMARY KEY, stream TEXT, stream_seq INTEGER, id TEXT, "
                "kind TEXT, schema_version INTEGER, ts INTEGER, payload TEXT, turn_id INTEGER)")
    con.execute("BEGIN EXCLUSIVE")
    con.execute("INSERT INTO events VALUES (1,'s_1',0,'a','message',1,1,'{}',NULL)")
    try:
        app = _app(d, display_name="~/work/locked")
        async with app.run_test(size=SIZE) as pilot:
            for _ in range(60):
                await pilot.pause(0.1)
                if app.open_error is not None:
                    break
            await settle(pilot)
            text = flat(screen_text(app))
    finally:
        con.execute("ROLLBACK")
        con.close()
    assert "Cannot open this store" in text
    assert "~/work/locked/events.db is locked by a writer — wait for it to finish" in text
    assert text.count("~/work/locked") == 2  # the header and the reason, never the word "locked"


def test_mask_path_replaces_whole_paths_only(tmp_path):
    from flux_tui.app import FluxApp

    store = tmp_path / "locked"
    app = FluxApp(store, display_name="demo", poll_interval=None)
    assert app.mask_path(f"{store}/events.db is locked by a writer") == "demo/events.db is locked by a writer"
    assert app.mask_path(f"cannot open {store}: gone") == "cannot open demo: gone"
    assert app.mask_path(f"{store}-old/events.db") == f"{store}-old/events.db"  # another directory


# -- a write refreshes everything on screen --------------------------------------------------------


async def test_resurrect_after_replay_refreshes_the_badge_the_report_and_the_marks(demo):
    """Reproduction: open s_8, ``r``, then ``R`` ``y`` ``y``: the header still said ``REPLAY ✓
    reproduced``, the Replay tab still said the turn is interrupted and the new cell was ``○
    unconsumed``. After the write the replay is run again on what the store now holds."""
    from flux_tui.screens.resurrect import ResurrectScreen

    app = _app(demo, session="s_8")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        assert "REPLAY ✓ reproduced" in screen_text(app)
        await pilot.press("R")
        await settle(pilot)
        assert isinstance(app.screen, ResurrectScreen)
        await pilot.press("y")  # the resurrect panel → the gate (publish runs live)
        await settle(pilot)
        await pilot.press("y")
        for _ in range(50):
            await settle(pilot)
            if isinstance(app.screen, ResurrectScreen) and app.screen.report is not None:
                break
        assert app.screen.report is not None, screen_text(app)
        await pilot.press("escape")
        await settle(pilot)
        for _ in range(20):  # the store poll that the resurrect asked for, then the replay again
            await settle(pilot)
            if "REPLAY ✓ faithful" in screen_text(app):
                break
        screen = app.screen
        assert isinstance(screen, SessionScreen)
        text = screen_text(app)
        assert "REPLAY ✓ faithful" in text and "reproduced" not in text and "⚠ interrupted" not in text
        report = screen.query_one("#replay").plain_text
        assert "3/3 recorded cell(s) served" in report and "interrupted" not in report
        assert "○   └ #2 publish" not in text and "✓   └ #2 publish" in text


# -- the footer shows what fits; R explains itself ---------------------------------------------------


@pytest.mark.parametrize("width,shown,absent", [
    (200, ["f Fork", "w What-if", "/ Search", ": Jump", "y Copy", "z Zoom", "r Replay", "f1 Help", "q Quit"], []),
    (120, ["f Fork", "r Replay", "d Diff", "f1 Help", "q Quit"], ["z Zoom"]),
    (80, ["esc Back", "r Replay", "d Diff", "f1 Help", "q Quit"], ["f Fork", "z Zoom"]),
])
async def test_the_footer_shows_the_time_machine_keys_when_they_fit(tmp_path, width, shown, absent):
    """Reproduction: ``f``, ``w``, ``/``, ``:``, ``y``, ``z`` never appeared in the footer, even at
    200 columns with 100 free; at 80 the essential keys keep their place."""
    app = _app(build_gallery(tmp_path / "g"), session="s_1")
    async with app.run_test(size=(width, 30)) as pilot:
        await settle(pilot)
        footer = screen_text(app).splitlines()[-1]
        for key in shown:
            assert key in footer, (key, footer)
        for key in absent:
            assert key not in footer, (key, footer)


async def test_R_on_a_session_that_is_not_interrupted_says_why(tmp_path):
    """Reproduction: ``R`` on a session with no interrupted turn did nothing, silently."""
    from flux_tui.screens.resurrect import ResurrectScreen

    app = _app(build_gallery(tmp_path / "g"), session="s_1")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        assert "R Resurrect" not in screen_text(app).splitlines()[-1]
        await pilot.press("R")
        await settle(pilot)
        assert not isinstance(app.screen, ResurrectScreen)
        assert any("s_1 has no interrupted turn" in n.message for n in app._notifications)


# -- --demo keeps the last visit's store, says what it does, fails in one line ---------------------


def _run_demo(monkeypatch, cache: Path, *args: str):
    from click.testing import CliRunner

    from flux_tui import app as app_mod

    opened = {}
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setattr(app_mod.FluxApp, "run", lambda self: opened.setdefault("store", self.store_dir))
    result = CliRunner().invoke(app_mod.main, ["--demo", *args])
    return result, opened.get("store")


def test_demo_reuses_the_store_of_the_last_visit_unless_fresh(monkeypatch, tmp_path):
    """Reproduction: every ``flux-tui --demo`` rebuilt the store, silently throwing away the forks,
    what-ifs and resurrects of the previous visit (and showed a blank terminal while building)."""
    result, store = _run_demo(monkeypatch, tmp_path)
    assert result.exit_code == 0, result.output
    assert "building the demo store" in result.stderr and "demo store ready" in result.stderr
    with sqlite3.connect(store / "events.db") as con:  # a visit's write: a session of its own
        con.execute("UPDATE streams SET model = 'forked-by-me' WHERE n = 1")
    con.close()
    result, again = _run_demo(monkeypatch, tmp_path)
    assert result.exit_code == 0 and again == store
    assert "opening the demo store of your last visit" in result.stderr and "--fresh" in result.stderr
    with sqlite3.connect(store / "events.db") as con:
        assert con.execute("SELECT model FROM streams WHERE n = 1").fetchone()[0] == "forked-by-me"
    con.close()
    result, fresh = _run_demo(monkeypatch, tmp_path, "--fresh")
    assert result.exit_code == 0 and "rebuilding the demo store" in result.stderr
    with sqlite3.connect(fresh / "events.db") as con:
        assert con.execute("SELECT model FROM streams WHERE n = 1").fetchone()[0] != "forked-by-me"
    con.close()


def test_demo_with_a_cache_home_that_is_a_file_is_one_error_line(monkeypatch, tmp_path):
    """Reproduction: ``XDG_CACHE_HOME`` pointing at a file gave a NotADirectoryError traceback."""
    cache = tmp_path / "cache-file"
    cache.write_text("not a directory")
    result, store = _run_demo(monkeypatch, cache)
    assert result.exit_code == 1 and store is None
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "cannot create the demo store" in lines[0] and "XDG_CACHE_HOME" in lines[0]
    assert "Traceback" not in result.output


def test_fresh_without_demo_is_a_usage_error():
    from click.testing import CliRunner

    from flux_tui.app import main

    result = CliRunner().invoke(main, ["--fresh"])
    assert result.exit_code == 1 and "--fresh rebuilds the demo store" in result.output


# -- the header and the list use the width they have -------------------------------------------------


LONG_NAME = "~/.cache/flux-tui/demo"


async def test_at_80_columns_the_header_keeps_the_app_name_and_the_diff_verdict(demo_master):
    """Reproduction: at 80 columns the header was cut on the left (``…ux-tui``) and the diff's header
    lost its verdict."""
    from flux_tui.screens.diff import DiffScreen

    app = _app(demo_master, display_name=LONG_NAME, session="s_6")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        head = screen_text(app).splitlines()[0]
        assert head.startswith(" flux-tui  store …/demo  ›  s_6"), head
        await pilot.press("d", "enter")
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen)
        head = screen_text(app).splitlines()[0]
        assert head.startswith(" flux-tui") and "diff s_6 ↔ s_1" in head and head.rstrip().endswith("differ"), head


async def test_at_120_columns_the_replay_badge_and_the_last_outcome_are_whole(demo_master):
    """Reproduction: at 120 the replay badge read ``REPL…`` and the ``last`` column ``resurrect…``."""
    app = _app(demo_master, display_name=LONG_NAME)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "resurrected" in text and "resurrect…" not in text
        await pilot.press("enter")  # s_11, the newest: resurrected
        await settle(pilot)
        await pilot.press("r")
        await settle(pilot)
        head = screen_text(app).splitlines()[0]
        assert "REPLAY ✓" in head and "REPL…" not in head and head.startswith(" flux-tui"), head


async def test_at_80x24_the_sessions_list_keeps_the_outcome_and_drops_updated(demo_master):
    """Reproduction: at 80×24 the list dropped the outcome column and kept ``updated`` — docs/app.md
    says msgs, turns and updated go first."""
    app = _app(demo_master, display_name=LONG_NAME)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        header = screen_text(app).splitlines()[1].split()
        assert header[:3] == ["id", "model", "last"] and "updated" not in header and "msgs" not in header
        assert "sort updated ▼" in screen_text(app).splitlines()[0]


# -- dialogs and panels read as words, in colour or not ---------------------------------------------


async def test_clicking_a_column_header_sorts_by_it_and_again_reverses(tmp_path):
    """Reproduction: clicking a column header did not sort."""
    app = _app(build_gallery(tmp_path / "g"))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        table = app.screen.table
        header = screen_text(app).splitlines()[1]
        x = header.index("model")
        await pilot.click("#sessions", offset=(x + 1, 0))
        await settle(pilot)
        assert table.sort_name == "model" and "sort model ▲" in screen_text(app).splitlines()[0]
        models = [it.row.model for it in table.rows]
        assert models == sorted(models, key=str.casefold)
        await pilot.click("#sessions", offset=(x + 1, 0))
        await settle(pilot)
        assert table.sort_reverse and "sort model ▼" in screen_text(app).splitlines()[0]
        await pilot.click("#sessions", offset=(screen_text(app).splitlines()[1].index("lineage") + 1, 0))
        await settle(pilot)
        assert table.sort_name == "model"
        assert any("cannot be sorted by lineage" in n.message for n in app._notifications)


async def test_what_if_choices_are_visible_without_colour(demo_master, monkeypatch):
    """Reproduction: under NO_COLOR the radio buttons all drew ``▐●▌`` — the choice was invisible."""
    from flux_tui.screens.whatif import WhatIfScreen

    monkeypatch.setenv("NO_COLOR", "1")
    app = _app(demo_master, session="s_1")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        assert isinstance(app.screen, WhatIfScreen)
        text = screen_text(app)
        assert "▐●▌ this cell returned" in text and "▐○▌ the policy were" in text
        assert "▐●▌ halt" in text and "▐○▌ go live" in text


def test_an_offline_model_is_not_labelled_network():
    """Reproduction: a re-plan with the offline ``mock`` model was shown as ``model mock (network)``."""
    from flux.timemachine.gate import LivePreview
    from flux_tui.screens.gate import live_summary

    def preview(model):
        return LivePreview("fork", "s_1", False, (), model, 0, 0, 0, 0, None, (), "fork s_1", {})

    assert live_summary(preview("mock")).plain == "runs live: model mock (offline)"
    assert "model mock (offline)" in preview("mock").tail_line()
    assert live_summary(preview("anthropic:claude-sonnet-4-5")).plain.endswith("(network)")


def test_the_structural_diff_is_one_line_per_change():
    """Reproduction: the payload view printed deepdiff's sentences, a multi-line value broken across
    lines (``changed from "1 failed`` / ``line2" to …``)."""
    import json

    from flux.timemachine.diff import payload_diff_values
    from flux_tui.screens.diff_detail import render_changes

    pd = payload_diff_values(json.dumps({"input": {"command": "pytest -q"}, "content": "1 failed\nok", "x": [1, 2]}),
                             json.dumps({"input": {"command": "pytest"}, "content": "2 passed\nok", "x": [1], "y": 1}))
    assert render_changes(pd).plain.splitlines() == [
        '~ input.command  changed  "pytest -q" → "pytest"',
        '~ content  changed  "1 failed\\nok" → "2 passed\\nok"',
        "+ y  added  1",
        "- x[1]  removed  2",
    ]


async def test_the_fork_dialog_help_keeps_its_table_readable_at_80(demo_master):
    """Reproduction: the fork dialog's F1 table squeezed "what it does" into a sliver — thirty rows
    of the editor's own cursor keys widened the action column."""
    from flux_tui.screens.help import HelpScreen

    app = _app(demo_master, session="s_1")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("f")
        await settle(pilot)
        await pilot.press("f1")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = screen_text(app)
        assert "Close the dialog: nothing is written" in text  # one line, not one word per line
        from rich.console import Console

        console = Console(width=74, record=True, file=open("/dev/null", "w"))
        console.print(app.screen._body)
        body = console.export_text()
        assert "Cursor word left" not in body and "Edit text" in body


# -- copying ---------------------------------------------------------------------------------------


async def test_y_copies_the_highlighted_session_id_and_the_inspector_copies_what_it_shows(tmp_path, monkeypatch):
    """Reproduction: no way to copy a session id from the list; ``y`` in the inspector copied the
    cell's input, not what the inspector shows."""
    from flux_tui.app import FluxApp

    copied: list[str] = []
    monkeypatch.setattr(FluxApp, "copy_to_clipboard", lambda self, text: copied.append(text))
    app = _app(build_gallery(tmp_path / "g"))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        first = app.screen.table.current.id
        await pilot.press("y")
        await settle(pilot)
        assert copied == [first]
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SessionScreen)
        await pilot.press("down", "enter")  # a cell, then into the inspector
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        shown = app.screen.query_one("#inspector").plain_text
        assert copied[-1] == shown and "is_error" in shown and "input" in shown and "content" in shown
        assert any("copied the inspector's cell" in n.message for n in app._notifications)


# -- one statement numbering: replay, the turn, resurrect and fork --turn agree ----------------------


async def test_an_adaptive_interrupted_turn_numbers_its_in_flight_statement_as_fork_does(demo_master):
    """Reproduction: on s_8 the in-flight ``publish`` is position 2 (``fork --at 2`` targets it), but
    replay said ``tape ends at statement 0``, the turn ``interrupted after 0 statement(s)`` and
    resurrect ``after statement 0 of 1``."""
    from flux.model.session import TRACE_KINDS, load_session
    from flux.store.store import StoreReader
    from flux.timemachine.fork import fork_points
    from flux_tui.screens.resurrect import ResurrectScreen

    with StoreReader(demo_master) as reader:
        points = fork_points(load_session(reader, "s_8", kinds=TRACE_KINDS), turn=1)
    publish = next(p for p in points if p.op == "publish")
    assert publish.index == 2
    app = _app(demo_master, session="s_8")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        info = flat(app.screen.query_one("#turn-info").plain_text)
        assert "⚠ interrupted at statement 2 — R resurrects turn 1" in info
        app.screen.jump_to("s2")  # the jump, the inspector and the copy toast count the same way
        await settle(pilot)
        assert "publish" in app.screen.timeline_view.current.statement.text
        assert str(app.screen.query_one("#inspector").border_title) == "Inspector · statement 2"
        assert "plan 3 · attempt step 3 · execute · node 0" in flat(app.screen.query_one("#inspector").plain_text)
        await pilot.press("r")
        await settle(pilot)
        assert "tape ends at statement 2 — turn 1 interrupted" in flat(app.screen.query_one("#replay").plain_text)
        await pilot.press("R")
        await settle(pilot)
        assert isinstance(app.screen, ResurrectScreen)
        assert "interrupted at statement 2 of 3 of the turn" in flat(screen_text(app))


# -- deleting what the time machine made -------------------------------------------------------------


def _registry(store: Path) -> dict[str, int]:
    con = sqlite3.connect(store / "events.db")
    try:
        ids = {f"s_{n}" for (n,) in con.execute("SELECT n FROM streams")}
        return {sid: con.execute("SELECT COUNT(*) FROM events WHERE stream = ?", (sid,)).fetchone()[0] for sid in ids}
    finally:
        con.close()


async def test_D_deletes_a_fork_and_its_derived_sessions_after_a_confirmation(tmp_path):
    """Reproduction: no way to prune the sessions forks and what-ifs create. D names what goes, y
    deletes it in one transaction; n deletes nothing; a recording is refused."""
    from flux.store.store import StoreWriter
    from flux_tui.screens.delete import DeleteScreen

    store = build_gallery(tmp_path / "g")  # s_3 is a fork of s_1
    with StoreWriter(store) as w:  # a fork of the fork: goes with it
        s6 = w.create_session("mock", context={"agent_id": "fork:s_3@0", "correlation_id": "s_3"})
    before = _registry(store)
    app = _app(store)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        table = app.screen.table
        table.move_cursor(next(i for i, it in enumerate(table.rows) if it.id == "s_1"))
        await pilot.press("D")
        await settle(pilot)
        assert not isinstance(app.screen, DeleteScreen)
        assert any("s_1 is a recording" in n.message for n in app._notifications)
        table.move_cursor(next(i for i, it in enumerate(table.rows) if it.id == "s_3"))
        await pilot.press("D")
        await settle(pilot)
        assert isinstance(app.screen, DeleteScreen)
        text = flat(screen_text(app))
        assert "Delete s_3 and 1 more" in text and "s_3 ⋔ fork ← s_1@2" in text and s6 in text
        await pilot.press("n")
        await settle(pilot)
        assert _registry(store) == before  # nothing deleted, the store untouched
        await pilot.press("D")
        await settle(pilot)
        await pilot.press("y")
        for _ in range(10):
            await settle(pilot)
            if not isinstance(app.screen, DeleteScreen):
                break
        assert not isinstance(app.screen, DeleteScreen)
        ids = {it.id for it in app.screen.table.rows}
        assert "s_3" not in ids and s6 not in ids and "s_1" in ids
        assert any(f"deleted s_3, {s6}" in n.message for n in app._notifications)
    after = _registry(store)
    assert set(before) - set(after) == {"s_3", s6}
    assert all(after[k] == before[k] for k in after)  # every other session whole


def test_delete_sessions_is_all_or_nothing(tmp_path):
    from flux.errors import SessionNotFound
    from flux.store.store import StoreWriter

    store = build_gallery(tmp_path / "g")
    before = _registry(store)
    with StoreWriter(store) as w:
        with pytest.raises(SessionNotFound, match="nothing was deleted"):
            w.delete_sessions(["s_3", "s_99"])
    assert _registry(store) == before
    with StoreWriter(store) as w:
        assert w.delete_sessions(["s_3"]) == {"s_3": before["s_3"]}
        new = w.create_session("mock")
    assert new == "s_6"  # the deleted number is never handed out again (s_5 was the last)


# -- search: the whole session, and across sessions ---------------------------------------------------


async def test_search_finds_a_cell_of_another_turn_and_the_filter_finds_a_recorded_call(tmp_path):
    """Reproduction: search covered the turn shown only, and there was no search across sessions
    for an op or a cell's content."""
    from stores import build_multi_turn

    store = build_multi_turn(tmp_path / "m")
    app = _app(store, session="s_1")
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        screen = app.screen
        assert screen.turn.number == 1
        screen.run_search("content of file 3")
        await settle(pilot)
        assert screen.turn.number == 3
        assert screen.timeline_view.current.cell is not None and "file 3" in screen.timeline_view.current.cell.rec.content
    gallery = build_gallery(tmp_path / "g")
    app = _app(gallery)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"src/tokenizer.py:14", "enter")
        for _ in range(10):
            await settle(pilot)
            if not app.screen._query_running:
                break
        shown = {it.id for it in app.screen.table.rows}
        assert shown == {"s_1"}, shown  # only a cell's content says it; no message does


# -- snapshots of the new and changed screens ----------------------------------------------------------


def _snap_keys(*keys: str, select: str | None = None):
    async def run_before(pilot) -> None:
        await settle(pilot)
        if select is not None:
            table = pilot.app.screen.table
            table.move_cursor(next(i for i, it in enumerate(table.rows) if it.id == select))
            await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run_before


class TestSnapshots:
    def test_delete_dialog(self, snap_compare, tmp_path):
        app = _app(build_gallery(tmp_path / "g"))
        assert snap_compare(app, terminal_size=SIZE, run_before=_snap_keys("D", select="s_3"))

    def test_sessions_80x24_keeps_the_outcome(self, snap_compare, tmp_path):
        app = _app(build_gallery(tmp_path / "g"), display_name="~/.cache/flux-tui/demo")
        assert snap_compare(app, terminal_size=(80, 24), run_before=_snap_keys())

    def test_session_header_and_footer_200(self, snap_compare, tmp_path):
        app = _app(build_gallery(tmp_path / "g"), display_name="~/.cache/flux-tui/demo", session="s_5")
        assert snap_compare(app, terminal_size=(200, 30), run_before=_snap_keys("r"))
