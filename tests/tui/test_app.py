"""Pilot tests: drive the app with keys and assert on its state and on what is on screen."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input

from flux.store import StoreWriter
from flux_tui.commands import screen_commands
from flux_tui.messages import RowsLoaded, SessionLoaded
from flux_tui.screens.help import HelpScreen
from flux_tui.screens.lineage import LineageScreen
from flux_tui.screens.session import SessionScreen
from flux_tui.screens.sessions import SessionsScreen
from flux_tui.widgets.bottom_tabs import BottomTabs
from screen_text import screen_text, settle
from stores import (
    add_session, build_empty, build_errors, build_gallery, build_interrupted, build_open_unflagged, copy_fixture,
)

pytestmark = pytest.mark.anyio

SIZE = (120, 40)
PLAN_TEXT = "adaptive_batch_ae51354e0a259cd3c68b_action_1 = append("
CELL_TEXT = "appended 21 bytes to flux-mock.txt"


@pytest.fixture
def fixture_store(tmp_path: Path) -> Path:
    return copy_fixture(tmp_path / "coding-agent-note")


def flat(text: str) -> str:
    return " ".join(text.split())


async def open_first(pilot) -> SessionScreen:
    await pilot.press("enter")
    await settle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, SessionScreen)
    return screen


# -- sessions screen ------------------------------------------------------------------------------


async def test_fixture_lists_s1(make_app, fixture_store):
    app = make_app(fixture_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        assert [it.id for it in screen.table.rows] == ["s_1"]
        text = screen_text(app)
        assert "s_1" in text and "mock" in text
        assert "1 session" in text and "0 interrupted" in text
        assert "store store" in text  # the display name, never a temp path
        item = screen.table.current
        assert item.summary is not None and item.summary.turns == 1 and item.summary.last_outcome == "ok"


async def test_registry_rows_posted_before_summaries(make_app, fixture_store):
    messages = []
    app = make_app(fixture_store)
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
    rows = [m for m in messages if isinstance(m, RowsLoaded)]
    assert rows and [r.id for r in rows[0].rows] == ["s_1"]


async def test_enter_opens_the_session_with_plan_and_cell(make_app, fixture_store):
    app = make_app(fixture_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_first(pilot)
        assert screen.session_id == "s_1"
        text = screen_text(app)
        assert PLAN_TEXT in text
        assert CELL_TEXT in text
        assert "Plan & cells · turn 1" in text


async def test_jk_step_between_statement_and_cell(make_app, fixture_store):
    app = make_app(fixture_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await open_first(pilot)
        tv = screen.timeline_view
        assert tv.has_focus
        assert tv.current.kind == "statement"
        inspector = screen.query_one("#inspector").plain_text
        assert "statement 0" in inspector and "completed" in inspector
        await pilot.press("j")
        await settle(pilot)
        assert tv.current.kind == "cell" and tv.current.cell.op == "append"
        inspector = screen.query_one("#inspector").plain_text
        assert CELL_TEXT in inspector
        assert "7b7d06ae306ee31ae768f1e70ebbc4e4e92750881536d135cbec17de7d4f2dff" in inspector.replace("\n", "").replace(" ", "")
        assert '"path": "flux-mock.txt"' in inspector  # the input view as pretty JSON
        await pilot.press("j")  # the last stop: stays
        await settle(pilot)
        assert tv.current.kind == "cell"
        await pilot.press("k")
        await settle(pilot)
        assert tv.current.kind == "statement"
        await pilot.press("down")
        await settle(pilot)
        assert tv.current.kind == "cell"
        await pilot.press("up")
        await settle(pilot)
        assert tv.current.kind == "statement"


async def test_escape_goes_back(make_app, fixture_store):
    app = make_app(fixture_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_first(pilot)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, SessionsScreen)


async def test_filter_narrows_by_model_id_and_conversation(make_app, tmp_path):
    app = make_app(build_gallery(tmp_path / "g"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert screen.table.row_count == 5
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*"haiku")
        await settle(pilot)
        assert [it.id for it in screen.table.rows] == ["s_4"]
        assert "filter “haiku”: 1 shown" in screen_text(app)
        inp = screen.query_one("#filter", Input)
        inp.value = ""
        await pilot.press(*"changelog")  # only in s_2's conversation
        await pilot.pause(0.4)
        await settle(pilot)
        assert [it.id for it in screen.table.rows] == ["s_2"]
        await pilot.press("enter")  # back to the list, filter kept
        assert screen.table.has_focus and screen.table.row_count == 1
        await pilot.press("escape")
        await settle(pilot)
        assert screen.table.row_count == 5


async def test_typing_q_in_the_filter_does_not_quit(make_app, fixture_store):
    app = make_app(fixture_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", "q")
        await settle(pilot)
        assert app.is_running
        assert app.screen.query_one("#filter", Input).value == "q"


async def test_sort_cycles_and_reverses(make_app, tmp_path):
    app = make_app(build_gallery(tmp_path / "g"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        t = app.screen.table
        assert t.sort_name == "updated"
        assert [it.id for it in t.rows][0] == "s_5"
        await pilot.press("s")
        assert t.sort_name == "id"
        assert [it.id for it in t.rows] == ["s_5", "s_4", "s_3", "s_2", "s_1"]
        await pilot.press("r")
        assert [it.id for it in t.rows] == ["s_1", "s_2", "s_3", "s_4", "s_5"]
        assert "sort id ▲" in screen_text(app)
        for _ in range(4):
            await pilot.press("s")
        assert t.sort_name == "cost"
        await settle(pilot)
        assert t.rows[0].id == "s_1"  # the most expensive; unknown price sorts below known ones


async def test_list_shows_cost_unknown_and_lineage(make_app, tmp_path):
    app = make_app(build_gallery(tmp_path / "g"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        lines = {line.split()[0]: line for line in screen_text(app).splitlines()[2:8] if line.strip()}
        assert " ? " in lines["s_2"] and "$0 " not in lines["s_2"]
        assert "⋔ fork ← s_1@2" in lines["s_3"]
        assert "↳ sub-agent ← s_1" in lines["s_4"]
        assert "⚠ interrupted" in lines["s_5"]
        assert "5 sessions · ⚠ 1 interrupted" in screen_text(app)


# -- interrupted turns ------------------------------------------------------------------------------


async def test_interrupted_session_is_flagged_and_explained(make_app, tmp_path):
    app = make_app(build_interrupted(tmp_path / "i"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        text = screen_text(app)
        assert "⚠ interrupted" in text
        assert screen.table.current.id == "s_2"
        session = await open_first(pilot)
        assert session.check.interrupted is not None
        text = screen_text(app)
        assert "⚠ interrupted at statement 1 — R resurrects turn 1" in text.replace("\n│ ", " ").replace("  ", " ") or \
            "⚠ interrupted at statement 1 — R resurrects turn 1" in session.query_one("#turn-info").plain_text.replace("\n", " ")
        # statement 0 completed (ledger), statement 1 dispatched, statement 2 never ran
        marks = [r.statement.status for r in session.timeline_view.rows if r.kind == "statement"]
        assert marks == ["completed", "dispatched", "not run"]


async def test_the_store_wide_interrupted_count_does_not_wait_for_the_shared_connection(make_app, tmp_path):
    """The sessions screen's interrupted pass reads on a connection of its own, so a session opened
    while it runs does not wait for it: here it finishes while the app's shared one is held."""
    import asyncio

    app = make_app(build_interrupted(tmp_path / "i"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert app.reader.mode in ("ro", "immutable")
        screen._interrupted_ids = None
        with app.reader._lock:  # the shared connection busy, as while a big session is being read
            screen._count_interrupted(screen._generation)
            for _ in range(500):
                if screen._interrupted_ids is not None:
                    break
                await asyncio.sleep(0.01)
        assert screen._interrupted_ids == {"s_2"}


async def test_unflagged_open_turn_shows_the_reason(make_app, tmp_path):
    app = make_app(build_open_unflagged(tmp_path / "o"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "open turn" in screen_text(app)
        assert "⚠ interrupted" not in screen_text(app)
        session = await open_first(pilot)
        info = " ".join(session.query_one("#turn-info").plain_text.split())
        assert "crashed before any plan was accepted" in info


# -- errors, inspector, tabs ------------------------------------------------------------------------


async def test_next_and_previous_error(make_app, tmp_path):
    app = make_app(build_errors(tmp_path / "e"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session = await open_first(pilot)
        tv = session.timeline_view
        assert tv.current.kind == "statement" and tv.current.statement.node == 0
        await pilot.press("n")
        await settle(pilot)
        first = tv.current
        assert (first.kind, first.statement.node) == ("statement", 2)  # the halted statement
        await pilot.press("n")
        await settle(pilot)
        assert tv.current.kind == "cell" and tv.current.cell.rec.denied
        inspector = session.query_one("#inspector").plain_text
        assert "● denied" in inspector and "○ is_error" in inspector
        await pilot.press("N")
        await settle(pilot)
        assert tv.current is first


async def test_inspector_shows_redacted_and_truncated_cells(make_app, tmp_path):
    app = make_app(build_errors(tmp_path / "e"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session = await open_first(pilot)
        await pilot.press("j")
        await settle(pilot)
        text = flat(session.query_one("#inspector").plain_text)
        assert "● redacted" in text and "input_hash_redacted" in text
        await pilot.press("j", "j")
        await settle(pilot)
        text = flat(session.query_one("#inspector").plain_text)
        assert "● truncated" in text
        assert '{"path":"logs/api.log","limit":"…' in text  # raw input text, not parsed JSON
        assert "raw text shown" in text


async def test_observations_and_unknown_events_tabs(make_app, tmp_path):
    app = make_app(build_errors(tmp_path / "e"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session = await open_first(pilot)
        tabs = session.query_one("#bottom", BottomTabs)
        assert tabs.active == "tab-conversation"
        conversation = session.query_one("#conversation").plain_text
        assert "tool_use bash" in conversation and "tool_result error" in conversation
        await pilot.press("o")
        await settle(pilot)
        assert tabs.active == "tab-observations"
        assert "flow.halt" in session.query_one("#observations").plain_text
        await pilot.press("o")
        assert tabs.active == "tab-conversation"
        await pilot.press("e")
        await settle(pilot)
        assert tabs.active == "tab-unknown"
        unknown = flat(session.query_one("#unknown").plain_text)
        assert "run/quantum_leap" in unknown and "from a newer flux" in unknown
        assert "Unknown (2)" in screen_text(app)


async def test_the_tab_row_takes_arrows_and_clicks(make_app, tmp_path):
    """The bottom panel's one-widget tab row does what Textual's Tabs did: ←/→ when it has the focus
    (wrapping), a click on a label or on the underline below it, each showing that tab's panel."""
    from flux_tui.widgets.tab_strip import TabStrip

    app = make_app(build_errors(tmp_path / "e"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session = await open_first(pilot)
        tabs = session.query_one("#bottom", BottomTabs)
        strip = tabs.query_one(TabStrip)
        strip.focus()
        await pilot.press("right")
        await settle(pilot)
        assert tabs.active == "tab-observations"
        assert session.query_one("#observations").display and not session.query_one("#conversation").display
        await pilot.press("left", "left")
        await settle(pilot)
        assert tabs.active == "tab-replay"  # wrapped past the first tab; the hidden Loop tab is skipped
        x = strip.region.x + 1 + len(" Conversation  Observations ")  # the "Unknown (2)" label
        await pilot.click(offset=(x, strip.region.y))
        await settle(pilot)
        assert tabs.active == "tab-unknown" and "run/quantum_leap" in flat(session.query_one("#unknown").plain_text)
        await pilot.click(offset=(strip.region.x + 2, strip.region.y + 1))  # the underline under "Conversation"
        await settle(pilot)
        assert tabs.active == "tab-conversation" and session.query_one("#conversation").display


async def test_plan_attempts_that_were_not_accepted_are_listed(make_app, tmp_path):
    app = make_app(build_errors(tmp_path / "e"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_first(pilot)
        assert "attempt step 1 · compile_error: unknown op `deploy`" in screen_text(app)


async def test_turn_usage_and_cost(make_app, tmp_path):
    app = make_app(build_gallery(tmp_path / "g"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("G")  # s_1, the oldest
        session = await open_first(pilot)
        info = " ".join(session.query_one("#turn-info").plain_text.split())
        assert "23k in · 700 out · 70k cache-read" in info
        assert "cost $0.10" in info and "session $0.10" in info


async def test_unknown_price_is_never_zero(make_app, tmp_path):
    app = make_app(build_gallery(tmp_path / "g"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_2")
        await settle(pilot)
        info = " ".join(app.screen.query_one("#turn-info").plain_text.split())
        assert "cost unknown (no price)" in info and "session unknown" in info


async def test_turn_keys_step_turns(make_app, tmp_path):
    store = build_gallery(tmp_path / "g")
    add_session(store)  # s_6
    from flux.store import Message

    w = StoreWriter(store)
    w.append("s_6", Message.text("user", "second question"))
    tid = w.begin_turn("s_6", "second question", "late-model")
    w.close()
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_6")
        await settle(pilot)
        session = app.screen
        assert session.turn.number == 2  # opens on the open turn
        await pilot.press("left_square_bracket")
        await settle(pilot)
        assert session.turn.number == 1
        assert "Plan & cells · turn 1" in screen_text(app)
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert session.turn.number == 2 and session.turn.turn_id == tid


# -- lineage ------------------------------------------------------------------------------------------


async def test_source_key_is_hidden_for_root_sessions(make_app, fixture_store):
    app = make_app(fixture_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await open_first(pilot)
        assert "Source" not in screen_text(app).splitlines()[-1]


def test_keys_that_wait_for_the_rows_are_disabled_while_reading_not_hidden():
    """While a session (or a turn) is being read, the keys that act once it is are shown disabled
    (None), so the footer keeps its keys and only lights them up when the rows arrive; once read,
    a key that cannot act is hidden as before (a session without turns has no errors to step)."""
    screen = SessionScreen("s_1")
    for action in ("next_error", "prev_error", "replay", "diff", "fork", "what_if"):
        assert screen.check_action(action, ()) is None, action
    screen._timeline_pending = False  # e.g. the session turned out to have no turns
    assert screen.check_action("next_error", ()) is False
    screen.load_error = "cannot read"
    assert screen.check_action("replay", ()) is False  # a failed read offers Back / Help / Quit only


# -- help, palette, bindings ----------------------------------------------------------------------


async def test_help_explains_the_focused_panel(make_app, fixture_store):
    app = make_app(fixture_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("f1")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen) and app.screen.topic == "sessions"
        text = screen_text(app)
        assert "Help · Sessions" in text and "sessions.filter" in text
        await pilot.press("escape")
        assert isinstance(app.screen, SessionsScreen)
        await open_first(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert app.screen.topic == "timeline"
        assert "session.next_error" in screen_text(app)
        await pilot.press("escape")
        await pilot.press("3", "f1")  # focus the inspector, then help
        await settle(pilot)
        assert app.screen.topic == "inspector"
        await pilot.press("f1")  # F1 again closes
        assert isinstance(app.screen, SessionScreen)


def _all_binding_classes():
    from flux_tui.app import FluxApp
    from flux_tui.widgets.lineage_tree import LineageTree
    from flux_tui.widgets.sessions_table import SessionsTable
    from flux_tui.widgets.timeline_view import TimelineView
    from flux_tui.widgets.turn_list import TurnList
    from flux_tui.widgets.rendered_view import RenderedView
    from flux_tui.widgets.virtual_list import VirtualList

    return [FluxApp, SessionsScreen, SessionScreen, LineageScreen, HelpScreen, VirtualList, SessionsTable, TimelineView,
            TurnList, LineageTree, RenderedView]


def test_every_binding_has_an_id_and_a_tooltip():
    from textual.binding import Binding

    ids = []
    for cls in _all_binding_classes():
        for b in cls.__dict__.get("BINDINGS", []):
            assert isinstance(b, Binding), f"{cls.__name__}: {b!r} is not a Binding"
            assert b.id, f"{cls.__name__}.{b.action} has no id"
            assert b.tooltip and b.description, f"{cls.__name__}.{b.action} has no tooltip/description"
            ids.append(b.id)
    assert len(ids) == len(set(ids)), "binding ids must be unique"


async def test_palette_offers_every_action_of_the_current_screen(make_app, fixture_store):
    app = make_app(fixture_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = {t for t, *_ in screen_commands(app.screen)}
        assert {"Filter", "Sort", "Reverse", "Lineage", "Help", "Quit", "Open"} <= titles
        await open_first(pilot)
        titles = {t for t, *_ in screen_commands(app.screen)}
        assert {"Back", "Next error", "Prev error", "Next turn", "Prev turn", "Observations", "Lineage"} <= titles
        assert "Source" not in titles  # disabled for a root session
        # and the palette runs them
        await pilot.press("ctrl+p")
        await settle(pilot)
        await pilot.press(*"observations")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SessionScreen)
        assert app.screen.query_one("#bottom", BottomTabs).active == "tab-observations"


# -- store states ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["missing", "no-events-db", "not-sqlite", "foreign-sqlite"])
async def test_unopenable_store_shows_a_notice(make_app, tmp_path, kind):
    store = tmp_path / "store"
    if kind != "missing":
        store.mkdir()
    if kind == "not-sqlite":
        (store / "events.db").write_text("hello, I am a text file\n")
    if kind == "foreign-sqlite":
        import sqlite3

        c = sqlite3.connect(store / "events.db")
        c.execute("CREATE TABLE recipes (name TEXT)")
        c.commit()
        c.close()
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert screen._error
        text = screen_text(app)
        assert "Cannot open this store" in text
        assert "What to do:" in text
        assert "cannot open" in text
        await pilot.press("slash", "s", "l")  # keys that need a list do nothing
        await settle(pilot)
        assert app.is_running and isinstance(app.screen, SessionsScreen)


async def test_empty_store_says_what_to_do(make_app, tmp_path):
    app = make_app(build_empty(tmp_path / "empty"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "This store holds no sessions yet" in text
        assert "flux-tui --demo" in text


async def test_missing_session_shows_a_notice(make_app, fixture_store):
    app = make_app(fixture_store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_99")
        await settle(pilot)
        assert "Cannot read this session" in screen_text(app)
        await pilot.press("escape")
        assert isinstance(app.screen, SessionsScreen)


# -- live refresh ---------------------------------------------------------------------------------


async def test_live_refresh_grows_the_list_and_keeps_the_cursor(make_app, fixture_store):
    app = make_app(fixture_store, poll_interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.table
        assert table.current.id == "s_1"
        sid = add_session(fixture_store)
        assert sid == "s_2"
        for _ in range(50):
            await pilot.pause(0.1)
            if table.row_count == 2:
                break
        await settle(pilot)
        assert [it.id for it in table.rows] == ["s_2", "s_1"]
        assert table.current.id == "s_1"  # the cursor stayed on its session
        assert "2 sessions" in screen_text(app)


async def test_live_refresh_on_the_session_screen_keeps_turn_and_item(make_app, tmp_path):
    store = build_interrupted(tmp_path / "i")
    messages = []
    app = make_app(store)
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
        session = await open_first(pilot)  # s_2, interrupted
        tv = session.timeline_view
        await pilot.press("j", "j")
        await settle(pilot)
        key = tv.current.key
        # the run goes on: statement 1 completes, a cell for statement 2 is recorded
        from flux.lang import parse
        from flux.lang.hashes import flow_key, stmt_hash16
        from flux.store import Run, StatementCompleted
        from stores import RELEASE_FLOW, _step

        draft = parse(RELEASE_FLOW)
        w = StoreWriter(store)
        w.append("s_2", Run(event=StatementCompleted(plan=flow_key(draft.name, draft.body), node=1,
                                                     stmt=stmt_hash16(draft.body[1]), value="v_1")))
        _step(w, "s_2", "bash", '{"command":"git tag v0.4.1"}', "tagged", index=2)
        w.close()
        app.check_store_now()
        await settle(pilot)
        await settle(pilot)
        assert any(isinstance(m, SessionLoaded) and m.reload for m in messages)
        assert len(session.detail.cells) == 3
        assert tv.current.key == key
        assert [r.statement.status for r in tv.rows if r.kind == "statement"] == ["completed", "completed", "dispatched"]


# -- the console script ----------------------------------------------------------------------------


def test_cli_help():
    from click.testing import CliRunner

    from flux_tui.app import main

    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    for opt in ("--store", "--demo", "--prices", "--session"):
        assert opt in result.output


def test_cli_builds_the_demo_and_opens_it(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from flux_tui import app as app_mod

    opened = {}
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(app_mod.FluxApp, "run", lambda self: opened.setdefault("store", self.store_dir))
    result = CliRunner().invoke(app_mod.main, ["--demo"])
    assert result.exit_code == 0, result.output
    assert opened["store"] == tmp_path / "flux-tui" / "demo"
    assert (opened["store"] / "events.db").exists()


def test_cli_store_and_demo_conflict():
    from click.testing import CliRunner

    from flux_tui.app import main

    result = CliRunner().invoke(main, ["--demo", "--store", "/tmp/x"])
    assert result.exit_code != 0 and "--demo builds its own store" in result.output


def test_store_defaults_to_flux_store_dir(monkeypatch, tmp_path):
    from flux_tui.app import FluxApp

    monkeypatch.setenv("FLUX_STORE_DIR", str(tmp_path))
    assert FluxApp().store_dir == tmp_path


@pytest.mark.parametrize("ref, expected", [("s_2", "s_2"), ("last", "s_5")])
async def test_session_deep_link(make_app, tmp_path, ref, expected):
    app = make_app(build_gallery(tmp_path / "g"), session=ref)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, SessionScreen) and app.screen.session_id == expected
        await pilot.press("escape")
        assert isinstance(app.screen, SessionsScreen)


async def test_a_change_elsewhere_does_not_reload_the_open_session(make_app, tmp_path):
    store = build_gallery(tmp_path / "g")
    messages = []
    app = make_app(store)
    async with app.run_test(size=SIZE, message_hook=messages.append) as pilot:
        await settle(pilot)
        app.open_session("s_1")
        await settle(pilot)
        add_session(store)
        app.check_store_now()
        await settle(pilot)
        assert not [m for m in messages if isinstance(m, SessionLoaded) and m.reload]
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen.table.row_count == 6
