"""Issue 11 (a new user's first hour), the app side: each test names the item it guards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flux.demo import build_demo_store
from flux_tui.screens.diff import DiffScreen
from flux_tui.screens.help import HelpScreen
from flux_tui.screens.session import SessionScreen
from flux_tui.screens.sessions import SessionsScreen
from screen_text import screen_text, settle

pytestmark = pytest.mark.anyio

SIZE = (120, 40)
NOW = 1_764_000_000_000


@pytest.fixture(scope="module")
def demo_master(tmp_path_factory) -> Path:
    return build_demo_store(tmp_path_factory.mktemp("demo") / "store", now_ms=NOW)


@pytest.fixture
def demo(demo_master, tmp_path) -> Path:
    import shutil

    return Path(shutil.copytree(demo_master, tmp_path / "demo"))


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
    from flux_tui.screens.diff import DiffDetailScreen
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
        assert "root['input']['path']" in app.screen.query_one("#payload-diff").plain_text
