"""Issue 9 part 4: the highlighter colours every construct (a plan using all of them, checked span
by span and as an SVG snapshot), and part 3: the session screen's "Loop" tab shows the agent-loop
program a turn ran."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.anyio
from rich.text import Text

from flux.lang.parser import parse
from flux_tui.highlight import STYLES, highlight_flux

ALL = (Path(__file__).parents[1] / "lang" / "data" / "all_constructs.flux").read_text(encoding="utf-8")


def _styles_at(t: Text, needle: str, nth: int = 0) -> set:
    start = -1
    for _ in range(nth + 1):
        start = t.plain.index(needle, start + 1)
    out = set()
    for span in t.spans:
        if span.start <= start < span.end:
            out.add(span.style)
    return out


@pytest.mark.parametrize("needle,style", [
    ("# every construct", "comment"), ("goal", "keyword"), ("flow every", "keyword"),
    ("@effect", "effect"), ("notes: String =", "bind"), ('"NOTES.md"', "string"),
    ("path: \"NOTES", "label"), ("memo cfg", "keyword"), ("cfg = load", "bind"),
    ("load_config(", "op"), ("true,", "literal"), ("3})", "number"), ("len(", "builtin"),
    ("$notes) > 0", "symbol"), ("fmt(", "builtin"), ("{ticket.id}", "interp"),
    ("parse($limit", "builtin"), ("as: \"f64\"", "option"), ("expr(", "builtin"),
    ("thing person", "keyword"), ("person name", "thing"), ("custom \"widget\"", "thing"),
    ("key \"w-1\"", "thing"), ("peek cfg", "builtin"), ('"""two', "string"),
    ("@json", "effect"), ("'none'", "string"), ("when $size", "keyword"), ("else", "keyword"),
    ("observe \"size\"", "op"), ("do observe", "keyword"), ("unless", "keyword"),
    ("each item", "keyword"), ("in ticket", "keyword"), ("flat found", "keyword"),
    ("found\n", "bind"), ("repeat 3", "keyword"), ("until: done", "option"),
    ("loop for", "keyword"), ("for 1m", "keyword"), ("1m, every", "number"),
    ("every: 5s", "option"), ("5s, until", "number"), ("seq ->", "keyword"), ("pipe ->", "keyword"),
    ("ctx pack", "keyword"), ("purpose", "keyword"), ("budget 24000", "keyword"),
    ("include notes", "keyword"), ("exclude raw", "keyword"), ("+= card", "punct"),
    ("match ticket", "keyword"), ("case \"bug\"", "keyword"), ("default", "keyword"),
    ("route classify", "keyword"), ("fallback ->", "keyword"), ("branch\n", "keyword"),
    ("parallel", "keyword"), ("branch left", "keyword"), ("race 5s", "keyword"),
    ("timeout 30s", "keyword"), ("budget 5000", "keyword"), ("with_tools", "keyword"),
    ("retry 3", "keyword"), ("backoff:", "option"), ("delay:", "option"), ("500ms", "number"),
    ("try\n", "keyword"), ("catch err", "keyword"), ("scope conn", "keyword"),
    ("finally", "keyword"), ("saga", "keyword"), ("step\n", "keyword"), ("undo", "keyword"),
    ("confirm", "keyword"), ("risk: high", "option"), ("throttle", "keyword"),
    ("max: 5", "option"), ("per: 1m", "option"), ("debounce", "keyword"), ("wait: 300ms", "option"),
    ("assert", "keyword"), ("verify", "keyword"), ("contains", "keyword"), ("once", "keyword"),
    ("checkpoint", "keyword"), ("await reply", "keyword"), ("when: ready", "option"),
    ("return [", "keyword"), ("-> winner", "punct"), ("winner", "bind"), ("&&", "punct"),
    ("left\n", "bind"), ("err\n", "bind"), ("item in", "bind"), ("pack\n", "bind"),
    ("summary\n", "bind"), ("$limit", "symbol"),
])
def test_every_construct_is_coloured(needle, style):
    t = highlight_flux(ALL)
    assert t.plain == ALL
    assert STYLES[style] in _styles_at(t, needle), needle


def test_older_spellings_and_module_declarations_are_coloured():
    t = highlight_flux('agent_loop support\n  $intent = detect_intent()\nagent guide\n  loop "support"\n'
                       'flow f\n  retry 3 backoff exponential delay 500ms\n    confirm "m" risk high\n')
    assert STYLES["keyword"] in _styles_at(t, "agent_loop")
    assert STYLES["keyword"] in _styles_at(t, "agent guide")
    assert STYLES["option"] in _styles_at(t, "backoff exponential")
    assert STYLES["option"] in _styles_at(t, "risk high")


def test_the_all_constructs_plan_is_real_flux_lang():
    parse(ALL)  # the snapshot shows a plan the parser accepts


def _highlight_app():
    from textual.app import App, ComposeResult
    from textual.widgets import Static

    class HighlightApp(App):
        def compose(self) -> ComposeResult:
            yield Static(highlight_flux(ALL))

    return HighlightApp()


def test_highlight_snapshot(snap_compare):
    assert snap_compare(_highlight_app(), terminal_size=(100, 130))


# ------------------------------------------------------------ the session screen's "Loop" tab

async def test_the_loop_tab_shows_the_agent_loop_a_turn_ran(make_app, tmp_path):
    from flux_tui.widgets.bottom_tabs import BottomTabs

    from flux_tui.screens.session import SessionScreen
    from screen_text import screen_text, settle
    from tests.lang.loop_store import build_loop_store

    store, _ = build_loop_store(tmp_path / "loops")
    app = make_app(store)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SessionScreen)
        tabs = screen.query_one("#bottom", BottomTabs)
        assert tabs.get_tab("tab-loop").display  # the turn records a loop binding
        await pilot.press("p")
        await settle(pilot)
        assert tabs.active == "tab-loop"
        text = screen_text(app)
        assert "agent loop agent-loop" in text
        assert "repeat 25" in text and "until $done" in text
        await pilot.press("p")
        await settle(pilot)
        assert tabs.active == "tab-conversation"


async def test_no_loop_tab_without_a_binding(make_app, tmp_path):
    from flux_tui.widgets.bottom_tabs import BottomTabs

    from screen_text import settle
    from stores import copy_fixture

    app = make_app(copy_fixture(tmp_path / "fixture"))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        tabs = app.screen.query_one("#bottom", BottomTabs)
        assert not tabs.get_tab("tab-loop").display
        await pilot.press("p")
        await settle(pilot)
        assert tabs.active == "tab-conversation"


def test_loop_tab_snapshot(snap_compare, tmp_path):
    from flux_tui.app import FluxApp
    from screen_text import settle
    from stores import NOW_MS
    from tests.lang.loop_store import build_loop_store

    store, _ = build_loop_store(tmp_path / "loops")
    app = FluxApp(store, now_ms=NOW_MS, display_name="loops", poll_interval=None)

    async def run_before(pilot) -> None:
        await settle(pilot)
        for key in ("enter", "p"):
            await pilot.press(key)
            await settle(pilot)

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)
