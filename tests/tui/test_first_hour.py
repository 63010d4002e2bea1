"""Issue 11 (a new user's first hour), the app side: each test names the item it guards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flux_tui.screens.diff import DiffScreen
from flux_tui.screens.help import HelpScreen
from flux_tui.screens.session import SessionScreen
from flux_tui.screens.sessions import SessionsScreen
from screen_text import screen_text, settle

pytestmark = pytest.mark.anyio

SIZE = (120, 40)
NOW = 1_764_000_000_000




def flat(text: str) -> str:
    return " ".join(text.split())


def interrupted_ids(store: Path) -> list[str]:
    from click.testing import CliRunner

    from flux.cli import main

    out = CliRunner().invoke(main, ["sessions", "--store", str(store), "--json"]).stdout
    return [r["id"] for r in json.loads(out)["sessions"] if r.get("interrupted")]


# -- item 1: NO_COLOR / TERM=dumb never crash ----------------------------------------------------


async def _tour(app, pilot) -> None:
    """Every screen a new user reaches in the first minutes, with the keys that paint new things
    (keys pressed in batches: each settle costs a few frames)."""
    await settle(pilot)
    assert isinstance(app.screen, SessionsScreen)
    await pilot.press("j", "s", "r", "slash", "m", "o", "escape", "g", "enter")
    await settle(pilot)
    assert isinstance(app.screen, SessionScreen)
    await pilot.press("j", "j", "n", "right_square_bracket", "o", "a", "e", "enter", "r")
    await settle(pilot)
    await pilot.press("f1")
    await settle(pilot, 1)
    assert isinstance(app.screen, HelpScreen)
    await pilot.press("escape", "escape", "d")
    await settle(pilot, 1)
    await pilot.press("ctrl+a", "ctrl+k", "s", "underscore", "1", "enter")
    await settle(pilot)
    assert isinstance(app.screen, DiffScreen)
    await pilot.press("n", "enter")
    await settle(pilot, 1)
    await pilot.press("escape", "escape", "l")
    await settle(pilot, 1)
    await pilot.press("escape", "escape", "ctrl+p")
    await settle(pilot, 1)
    assert screen_text(app).strip()
    await pilot.press("escape")


async def test_no_color_and_a_dumb_terminal_do_not_crash(make_app, demo, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    app = make_app(demo)
    assert app.no_color
    async with app.run_test(size=(80, 24)) as pilot:
        await _tour(app, pilot)
    assert app.return_code in (None, 0), app._exception


async def test_no_color_paints_the_lists(make_app, demo, monkeypatch):
    """The crash was a line-API list yielding a segment with style None into the monochrome filter."""
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "s_1" in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SessionScreen) and "Plan & cells" in screen_text(app)
    assert app.return_code in (None, 0), app._exception


def _run_main(monkeypatch, argv, *, crash: bool = False):
    """``flux-tui ARGV`` through its click entry point, the app run headless and quit at once."""
    from click.testing import CliRunner

    from flux_tui import app as app_mod

    real_run = app_mod.FluxApp.run

    async def quit_soon(pilot) -> None:
        await settle(pilot)
        await pilot.press("q")

    def headless_run(self, **kw):
        return real_run(self, headless=True, size=(80, 24), auto_pilot=quit_soon)

    monkeypatch.setattr(app_mod.FluxApp, "run", headless_run)
    if crash:
        def boom(self):
            raise RuntimeError("a render bug")

        monkeypatch.setattr(SessionsScreen, "compose", boom)
    return CliRunner().invoke(app_mod.main, argv, prog_name="flux-tui")


def test_a_crash_exits_non_zero(monkeypatch, demo):
    res = _run_main(monkeypatch, ["--store", str(demo)], crash=True)
    assert res.exit_code != 0


def test_a_healthy_run_exits_0(monkeypatch, demo):
    res = _run_main(monkeypatch, ["--store", str(demo)])
    assert res.exit_code == 0, res.output


# -- item 12: a store that cannot be opened: the notice, then exit 1 ----------------------------


@pytest.mark.parametrize("kind", ["file", "missing"])
def test_unopenable_store_notice_then_exit_1(monkeypatch, tmp_path, kind):
    target = tmp_path / "events.db"
    if kind == "file":
        target.write_text("not a store")
    else:
        target = tmp_path / "no" / "such" / "dir"
    res = _run_main(monkeypatch, ["--store", str(target)])
    assert res.exit_code == 1, res.output
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and ("not a directory" in line or "does not exist" in line), line


async def test_unopenable_store_shows_the_notice(make_app, tmp_path):
    f = tmp_path / "events.db"
    f.write_text("x")
    app = make_app(f)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "Cannot open this store" in screen_text(app)
    from flux_tui.app import exit_code

    assert exit_code(app) == 1


# -- item 2: replaying an interrupted session in the app -----------------------------------------


async def test_replaying_an_interrupted_session_is_reproduced_not_diverged(make_app, demo):
    sid = interrupted_ids(demo)[0]
    app = make_app(demo, session=sid)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SessionScreen)
        await pilot.press("r")
        await settle(pilot)
        text = flat(screen_text(app))
        assert "REPLAY ✓ reproduced · ⏸ tape ends" in text and "REPLAY ✗" not in text and "diverged" not in text
        report = flat(screen.query_one("#replay").plain_text)
        assert "tape ends at statement" in report and "resurrect it with `flux resurrect`" in report
        # The cursor sits on the statement where the tape ends, and the inspector says so.
        assert "⏸ the tape ends here" in flat(screen.query_one("#inspector").plain_text)


# -- item 6: key hints and recorded text are never read as markup --------------------------------

NASTY = ["[n]", "[[]", "[]]", "[/]", "[bold red]x[/]", "\\[x]", "x\\", "[$x]", "[@click=app.quit]", "[link=x]y"]


async def test_palette_shows_every_key_hint_literally(make_app, demo):
    from textual.command import CommandList

    from flux_tui.commands import screen_commands

    app = make_app(demo, session="s_1")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        expected = [help_text for _, help_text, _, _ in screen_commands(app.screen)]
        assert any(h.endswith("  [[]") for h in expected) and any(h.endswith("  [n]") for h in expected)
        await pilot.press("ctrl+p")
        await settle(pilot, 1)
        options = app.screen.query_one(CommandList)
        shown = "\n".join(str(options.get_option_at_index(i).prompt) for i in range(options.option_count))
        for h in expected:
            assert h in shown, h


def test_palette_titles_and_hints_are_literal():
    from hypothesis import given, settings, strategies as st
    from textual.fuzzy import Matcher

    from flux_tui.commands import highlighted, literal

    @settings(max_examples=150, deadline=None)
    @given(st.one_of(st.sampled_from(NASTY), st.text(alphabet="[]/\\$@=ab n", max_size=24)),
           st.text(alphabet="abn[", min_size=1, max_size=3))
    def check(text, query):
        assert literal(text).plain == text
        assert highlighted(Matcher(query), text).plain == text

    check()


async def test_recorded_text_with_brackets_is_shown_as_is(make_app, tmp_path):
    from flux.store import StoreWriter
    from flux.store.events import Message, PlanAttempted

    store = tmp_path / "s"
    w = StoreWriter(store)
    model = "m[bold]x[/]"
    sid = w.create_session(model)
    prompt = "fix [n] and [[] and [/] please"
    w.append(sid, Message.text("user", prompt))
    tid = w.begin_turn(sid, prompt, model)
    w.append(sid, PlanAttempted(step=1, outcome="accepted", phase="execute",
                                plan_source='flow\n  x = read({"path":"[red]a[/]"})\n'), turn_id=tid)
    w.append(sid, Message.text("assistant", "[@click=app.quit]done[/]"))
    w.close()
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert model in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("a")  # the whole conversation
        await settle(pilot)
        text = screen_text(app)
        assert prompt in text and '"[red]a[/]"' in text and "[@click=app.quit]done[/]" in text
        assert app.is_running


# -- item 4: a cell-row diff's payload view shows each side's op, input and content -------------


async def test_cell_row_payloads_side_by_side(make_app, tmp_path):
    from flux.canonical import canonical_json, sha256_hex
    from flux.store.events import OpRecorded, Run
    from flux.store.store import StoreWriter
    from flux_tui.screens.diff_detail import DiffDetailScreen
    from tests.helpers import write_turn

    def cell(inp, content):
        h = sha256_hex(canonical_json(inp))
        return Run(OpRecorded(step=f"step_read_{h[:16]}", op="read", input_hash=h, content=content,
                              input_view=canonical_json(inp)))

    store = tmp_path / "cells"
    with StoreWriter(store) as w:
        a = w.create_session("mock")
        write_turn(w, a, "go", cells=[cell({"path": "README.md"}, "hello")])
        b = w.create_session("mock")
        write_turn(w, b, "go", cells=[cell({"path": "NOTES.md"}, "hello")])
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.push_screen(DiffScreen(a, b))
        await settle(pilot)
        assert 'op `read` {"path":"README.md"}' in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, DiffDetailScreen)
        pa = flat(app.screen.query_one("#payload-a").plain_text)
        pb = flat(app.screen.query_one("#payload-b").plain_text)
        assert '"path": "README.md"' in pa and '"path": "NOTES.md"' in pb
        assert '"content": "hello"' in pa and '"op": "read"' in pb
        assert "~ input.path  changed" in app.screen.query_one("#payload-diff").plain_text


# -- item 7: 80×24 is first-class ----------------------------------------------------------------


def footer_text(app) -> str:
    return flat(screen_text(app).splitlines()[-1])


async def test_80x24_session_screen_keeps_essential_keys_and_a_readable_inspector(make_app, demo):
    app = make_app(demo, session="s_1")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        foot = footer_text(app)
        for key in ("Back", "Replay", "Diff", "Help", "Quit"):
            assert key in foot, foot
        insp = app.screen.query_one("#inspector")
        assert insp.size.width >= 50, insp.size  # stacked above the tabs, not squeezed beside them
        left = app.screen.query_one("#left")
        await pilot.press("less_than_sign")
        await settle(pilot, 1)
        narrower = left.size.width
        assert narrower < 26
        await pilot.press("greater_than_sign", "greater_than_sign")
        await settle(pilot, 1)
        assert left.size.width > narrower
        for _ in range(6):
            await pilot.press("less_than_sign")
        await settle(pilot, 1)
        assert not left.display  # hidden; [ / ] still step turns


async def test_z_maximises_the_focused_panel_and_esc_restores(make_app, demo):
    app = make_app(demo, session="s_1")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("3", "z")
        await settle(pilot, 1)
        insp = app.screen.query_one("#inspector")
        assert insp.size.width >= 76 and insp.size.height >= 18
        assert not app.screen.query_one("#timeline").display
        await pilot.press("escape")
        await settle(pilot, 1)
        assert app.screen.query_one("#timeline").display and isinstance(app.screen, SessionScreen)


async def test_80x24_sessions_list_and_diff_header(make_app, demo):
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "claude-sonnet-4-5" in text and "⋔ fork ← s_1@3" in text
        assert "turn▼" not in text and "Help" in footer_text(app) and "Quit" in footer_text(app)
        app.push_screen(DiffScreen("s_6", "s_1"))
        await settle(pilot)
        assert "diff s_6 ↔ s_1" in screen_text(app).splitlines()[0]


def test_sort_arrows_never_squeeze_a_label():
    from flux_tui.widgets.sessions_table import COLUMNS, SessionsTable

    t = SessionsTable(now_ms=lambda: 0)
    for col in COLUMNS:
        t.sort_name = col.key
        for width in (80, 120, 200):
            header = t.render_header(width).plain
            assert f"{col.label} ▼" in header or f"{col.label} ▲" in header or col.key not in [
                c.key for c, _ in t.columns(width)], (col.key, width, header)


# -- item 8: W wraps / unwraps, ←/→ scroll, … marks a cut ----------------------------------------


async def test_wrap_toggle_horizontal_scroll_and_ellipsis(make_app, tmp_path):
    from flux.store import StoreWriter
    from tests.helpers import write_turn
    from flux.canonical import canonical_json, sha256_hex
    from flux.store.events import OpRecorded, Run

    long_value = "x" * 150 + "END"
    inp = {"path": "a.txt", "content": long_value}
    h = sha256_hex(canonical_json(inp))
    store = tmp_path / "long"
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        write_turn(w, sid, "go", cells=[Run(OpRecorded(step=f"s_{h[:16]}", op="write", input_hash=h,
                                                       input_view=canonical_json(inp), content="ok"))])
    app = make_app(store, session=sid)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        insp = app.screen.query_one("#inspector")
        assert "x" * 40 + "END" in insp.plain_text.replace("\n", "")  # folded, nothing cut silently
        await pilot.press("3", "z", "W")  # the inspector maximised, so its input JSON is on screen
        await settle(pilot, 1)
        assert not insp.wrap
        visible = flat(screen_text(app))
        assert "END" not in visible and "…" in visible
        for _ in range(25):
            await pilot.press("right")
        await settle(pilot, 1)
        assert insp.scroll_x > 0 and "END" in screen_text(app)
        await pilot.press("W")
        await settle(pilot, 1)
        assert insp.wrap and insp.scroll_x == 0


# -- item 9: / search with n/N, : jump ----------------------------------------------------------


async def test_search_steps_matches_and_esc_ends_it(make_app, demo):
    app = make_app(demo, session="s_1")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        await pilot.press("slash")
        await settle(pilot, 1)
        await pilot.press(*"tokenizer.py", "enter")
        await settle(pilot, 1)
        query, matches, pos = screen._search
        assert query == "tokenizer.py" and len(matches) >= 2 and pos == 0
        assert "/tokenizer.py 1/" in screen_text(app)
        first = screen.timeline_view.cursor
        await pilot.press("n")
        await settle(pilot, 1)
        assert screen._search[2] == 1
        await pilot.press("N")
        await settle(pilot, 1)
        assert screen._search[2] == 0 and screen.timeline_view.cursor == first
        await pilot.press("escape")
        await settle(pilot, 1)
        assert screen._search is None and isinstance(app.screen, SessionScreen)


async def test_colon_jumps_to_turn_statement_and_cell(make_app, demo):
    app = make_app(demo, session="s_1")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        last_cell = len(screen.detail.cells) - 1
        for text, check in [
            ("2", lambda: screen.turn.number == 2),
            ("t1", lambda: screen.turn.number == 1),
            ("s1", lambda: screen.timeline_view.current is [r for r in screen.timeline_view.rows
                                                              if r.kind == "statement"][1]),
            (f"c{last_cell}", lambda: screen.timeline_view.current.cell.index == last_cell),
        ]:
            await pilot.press("colon")
            await settle(pilot, 1)
            await pilot.press(*text, "enter")
            await settle(pilot)
            assert check(), text
        await pilot.press("colon")
        await settle(pilot, 1)
        await pilot.press(*"c999", "enter")
        await settle(pilot, 1)
        assert any("no cell #999" in n.message for n in app._notifications)


# -- item 10: y copies the item under the cursor ------------------------------------------------


async def test_y_copies_cell_content_input_and_hash(make_app, demo):
    app = make_app(demo, session="s_1")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        await pilot.press("j")  # the first cell
        await settle(pilot, 1)
        cell = screen.timeline_view.current.cell
        assert cell is not None
        await pilot.press("y")
        assert app.clipboard == cell.rec.content
        assert any("copied cell #" in n.message for n in app._notifications)
        await pilot.press("Y")
        assert app.clipboard == cell.rec.input_hash
        await pilot.press("3", "y")  # the inspector: what it shows
        assert app.clipboard == screen.query_one("#inspector").plain_text
        assert "\ninput\n" in app.clipboard and "\ncontent\n" in app.clipboard
        await pilot.press("2", "k", "y")
        assert app.clipboard.startswith(screen.timeline_view.current.statement.text.split("(")[0].split()[-1][:4]) \
            or app.clipboard == screen.timeline_view.current.display


# -- item 11: n/N inside the payload view -------------------------------------------------------


async def test_payload_view_steps_differences_without_leaving(make_app, demo):
    from flux_tui.screens.diff_detail import DiffDetailScreen

    app = make_app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.push_screen(DiffScreen("s_6", "s_1"))
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot, 1)
        detail = app.screen
        assert isinstance(detail, DiffDetailScreen)
        first = detail.row.index
        await pilot.press("n")
        await settle(pilot, 1)
        assert app.screen is detail and detail.row.index != first and detail.row.kind != "same"
        await pilot.press("N")
        await settle(pilot, 1)
        assert detail.row.index == first
        await pilot.press("n", "escape")
        await settle(pilot, 1)
        assert isinstance(app.screen, DiffScreen) and app.screen.rows_view.cursor == detail.row.index


# -- item 5: a bad prices file is a notice in the app, with the CLI's words ----------------------


async def test_bad_prices_file_is_a_notice_with_the_cli_words(make_app, demo, tmp_path):
    from click.testing import CliRunner

    from flux.cli import main

    bad = tmp_path / "prices.json"
    bad.write_text("{bad")
    cli = CliRunner().invoke(main, ["sessions", "--store", str(demo), "--prices", str(bad)])
    assert cli.exit_code == 1
    words = cli.stderr.strip()
    app = make_app(demo, prices_file=bad)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        notes = [n.message for n in app._notifications]
        assert any(n.startswith(words) and "using the built-in prices" in n for n in notes), (words, notes)
        assert "s_1" in screen_text(app)  # and the app carries on


# -- item 13: words that point at things that exist -----------------------------------------------


def test_help_and_readme_say_where_things_are():
    from flux_tui.help import HELP

    root = Path(__file__).parents[2]
    assert "on the right" not in HELP["timeline"][1]
    readme = (root / "README.md").read_text()
    assert "temp directory" not in readme and "~/.cache/flux-tui/demo" in readme
    assert "--until" in (root / "docs" / "cli.md").read_text() and "creation" in (root / "docs" / "cli.md").read_text()


async def test_conversation_tab_name_matches_its_key_and_keeps_replay_in_view(make_app, demo):
    from flux_tui.widgets.bottom_tabs import BottomTabs

    app = make_app(demo, session="s_1")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot, 1)
        tabs = app.screen.query_one("#bottom", BottomTabs)
        assert str(tabs.get_tab("tab-conversation").label) == "Conversation"
        line = next(ln for ln in screen_text(app).splitlines() if "Conversation" in ln)
        assert "Replay" in line  # the scope no longer pushes the Replay tab out of view
        assert "the whole conversation · a: this turn only" in screen_text(app)


# -- item 14: CLI and app say the same thing the same way ----------------------------------------


async def test_cost_usage_and_outcome_read_the_same_in_cli_and_app(make_app, demo):
    from click.testing import CliRunner

    from flux.cli import main

    out = CliRunner().invoke(main, ["show", "s_9", "--store", str(demo)]).stdout
    assert "cost $0" in out and "$0.0000" not in out and "usage none reported" in out
    app = make_app(demo, session="s_9")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        info = flat(app.screen.query_one("#turn-info").plain_text)
        assert "usage none reported" in info and "cost $0" in info
    s5 = CliRunner().invoke(main, ["show", "s_5", "--store", str(demo)]).stdout
    assert "turn 1 · ok ·" in s5  # a flow run's "completed" reads "ok", as in the app's list


def test_wording_is_one_function():
    from flux.model.wording import cost_text, outcome_text, usage_text
    from flux.store.usage import Usage
    from flux_tui.fmt import fmt_cost, fmt_usage

    for c in (None, 0.0, 0.00123, 0.5, 12.345, 1234.5):
        assert fmt_cost(c) == cost_text(c)
    u = Usage(input_tokens=1200, output_tokens=80)
    assert fmt_usage(u) == usage_text(u) == "1.2k in · 80 out"
    assert usage_text(Usage()) == "none reported"
    assert outcome_text("completed") == outcome_text("ok") == "ok"


# -- item 15: keys that do nothing say why ------------------------------------------------------


async def test_keys_that_cannot_act_say_why(make_app, demo):
    app = make_app(demo, session="s_1")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot, 1)
        assert any("is a root session" in n.message for n in app._notifications)
        # s_1 turn 1 has exactly one error cell: a second n says there is no other one
        await pilot.press("n")
        await settle(pilot, 1)
        await pilot.press("n")
        await settle(pilot, 1)
        assert any("no other error in this turn" in n.message for n in app._notifications)


async def test_a_session_that_failed_offers_only_back_help_quit(make_app, demo):
    app = make_app(demo, session="s_99")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        foot = footer_text(app)
        assert "Back" in foot and "Help" in foot and "Quit" in foot
        for word in ("Turn", "Observations", "Lineage", "Replay", "Diff"):
            assert word not in foot, foot


def test_keymap_with_an_unknown_id_names_the_valid_ones(tmp_path):
    from click.testing import CliRunner

    from flux_tui.app import main as tui_main

    km = tmp_path / "km.json"
    km.write_text('{"session.nope": "x"}')
    res = CliRunner().invoke(tui_main, ["--keymap", str(km)], prog_name="flux-tui")
    assert res.exit_code == 1
    line = res.stderr.strip()
    assert line.startswith("error: ") and "session.nope" in line and "session.next_error" in line


# -- item 16: cosmetics --------------------------------------------------------------------------


async def test_top_bar_halves_never_run_together(make_app, demo):
    app = make_app(demo)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.push_screen(DiffScreen("s_9", "s_1"))
        await settle(pilot)
        top = screen_text(app).splitlines()[0]
        assert "diff s_9 ↔ s_1 " in top, top  # the location whole, then a gap before the counts


def test_turn_list_shows_a_plan_count_even_when_zero():
    from rich.text import Text  # noqa: F401

    from flux.model.session import Turn
    from flux_tui.widgets.turn_list import TurnList

    turn = Turn(number=1, turn_id=1, stream_seq=1, user_input="hi", model="m", started_at_ms=0)
    text = TurnList().render_row(turn, 0, 0, 40, False).plain
    assert " 0p " in text


async def test_a_long_store_name_never_hides_the_session_id(make_app, demo):
    app = make_app(demo, session="s_1", name="~/.cache/flux-tui/demo/with/a/long/path")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        top = screen_text(app).splitlines()[0]
        assert "›  s_1" in top and top.lstrip().startswith("flux-tui  store …/path"), top  # the path shortened
