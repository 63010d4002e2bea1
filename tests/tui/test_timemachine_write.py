"""The time machine's write side in the app: the lineage tree, the side-effect gate, the fork,
resurrect and what-if dialogs — driven by a real pilot on real stores, with SVG snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from flux.store import StoreWriter
from flux_tui.screens.diff import DiffScreen
from flux_tui.screens.lineage import LineageScreen
from flux_tui.screens.session import SessionScreen
from flux_tui.screens.sessions import SessionsScreen
from screen_text import screen_text, settle, widget_text
from stores import NOW_MS, build_gallery, stream_registry
from tests.helpers import cell, tree_digest, write_turn

pytestmark = pytest.mark.anyio

SIZE = (120, 40)
PLAN = 'flow\n  a = read({"path":"A"})\n  b = read({"path":"B"})\n'


def _resumable(cells: list, plan: str = PLAN) -> list:
    """A resumable run of ``plan``: each statement's cell, then its statement_completed row."""
    from flux.lang import parse
    from flux.lang.hashes import flow_key, stmt_hash16
    from flux.store import Run, StatementCompleted

    d = parse(plan)
    key = flow_key(d.name, d.body)
    out = []
    for i, (node, c) in enumerate(zip(d.body, cells)):
        out += [c, Run(event=StatementCompleted(plan=key, node=i, stmt=stmt_hash16(node)))]
    return out


def _family(path: Path) -> Path:
    """s_1 root; s_2 fork of s_1 (one world change at statement 1); s_3 sub-agent of s_1;
    s_4 fork of s_2 (identical to it)."""
    with StoreWriter(path) as w:
        s1 = w.create_session("mock")
        write_turn(w, s1, "go", plan=PLAN, cells=_resumable([cell("read", {"path": "A"}, "a"), cell("read", {"path": "B"}, "b")]))
        s2 = w.create_session("mock", context={"agent_id": f"fork:{s1}@1", "correlation_id": s1})
        write_turn(w, s2, "<fork>", plan=PLAN, cells=_resumable([cell("read", {"path": "A"}, "a"), cell("read", {"path": "B"}, "B!")]))
        s3 = w.create_session("mock", context={"agent_id": "subagent:explorer", "correlation_id": s1})
        write_turn(w, s3, "explore", cells=[cell("grep", {"p": "x"}, "hit")])
        s4 = w.create_session("mock", context={"agent_id": f"fork:{s2}@0", "correlation_id": s2})
        write_turn(w, s4, "<fork>", plan=PLAN, cells=_resumable([cell("read", {"path": "A"}, "a"), cell("read", {"path": "B"}, "B!")]))
    return path


# -- lineage tree --------------------------------------------------------------------------------


async def test_lineage_tree_shows_the_whole_family_and_how_each_child_differs(make_app, tmp_path):
    store = _family(tmp_path / "fam")
    before = tree_digest(store)
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_4")
        await settle(pilot)
        await pilot.press("l")
        await settle(pilot)
        assert isinstance(app.screen, LineageScreen)
        text = screen_text(app)
        assert "s_4 · a family of 4 sessions · source s_1" in text
        lines = [line for line in text.splitlines() if "s_" in line]
        tree = [next(part for part in ("s_1  source", "├─ ⋔ s_2", "│  └─ ⋔ s_4", "└─ ↳ s_3") if part in line)
                for line in lines if any(part in line for part in ("s_1  source", "├─ ⋔ s_2", "│  └─ ⋔ s_4", "└─ ↳ s_3"))]
        assert tree == ["s_1  source", "├─ ⋔ s_2", "│  └─ ⋔ s_4", "└─ ↳ s_3"]
        s2 = next(line for line in lines if "⋔ s_2" in line)
        assert "fork @ statement 1" in s2 and "= 1 · ~ 0 · ≠ 1 · diverges @ 1" in s2
        assert "identical · = 2" in next(line for line in lines if "⋔ s_4" in line)
        assert "fork @ statement 0 of s_2 · the same run" in text  # the focused node's detail
        assert app.screen.tree.current.node.id == "s_4"
        # d: the diff of the highlighted node against its parent
        await pilot.press("k")  # s_2
        await settle(pilot)
        assert "s_2 — fork @ statement 1 of s_1 · 1 same, 0 plan, 1 world · first divergence at statement 1" in screen_text(app)
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen) and (app.screen.a, app.screen.b) == ("s_1", "s_2")
        assert app.screen.rows_view.cursor == 1  # the first divergence is focused
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, SessionScreen)
        # Enter opens a node; u opens its parent
        await pilot.press("l")
        await settle(pilot)
        await pilot.press("G")  # s_3, the sub-agent: no diff against its parent
        await settle(pilot)
        assert app.screen.tree.current.node.id == "s_3"
        assert "d diff against" in screen_text(app)  # diffable on request, though not summarised
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SessionScreen) and app.screen.session_id == "s_3"
        await pilot.press("l")
        await settle(pilot)
        await pilot.press("u")
        await settle(pilot)
        assert isinstance(app.screen, SessionScreen) and app.screen.session_id == "s_1"
    assert tree_digest(store) == before  # the lineage never writes


async def test_lineage_differences_are_cached(make_app, tmp_path, monkeypatch):
    import flux.timemachine.family as family

    calls = []
    real = family.child_difference

    def counting(reader, parent, child):
        calls.append((parent, child))
        return real(reader, parent, child)

    monkeypatch.setattr(family, "child_difference", counting)
    app = make_app(_family(tmp_path / "fam"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_1")
        await settle(pilot)
        await pilot.press("l")
        await settle(pilot)
        assert sorted(calls) == [("s_1", "s_2"), ("s_2", "s_4")]  # forks only, never the sub-agent
        await pilot.press("escape", "l")
        await settle(pilot)
        assert len(calls) == 2
        assert "diverges @ 1" in screen_text(app)


async def test_lineage_of_a_root_and_of_an_orphan(make_app, tmp_path):
    with StoreWriter(tmp_path / "o") as w:
        w.create_session("mock")
        w.create_session("mock", context={"agent_id": "fork:s_99@3", "correlation_id": "s_99"})
        w.create_session("mock", context={"agent_id": "fork:s_5@0", "correlation_id": "s_5"})
        w.create_session("mock", context={"agent_id": "fork:s_3@0", "correlation_id": "s_3"})
        w.create_session("mock", context={"agent_id": "fork:s_4@0", "correlation_id": "s_4"})
    app = make_app(tmp_path / "o")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_1")
        await settle(pilot)
        await pilot.press("l")
        await settle(pilot)
        assert "s_1 is a root session with no forks, what-ifs or sub-agents" in screen_text(app)
        await pilot.press("u", "d")  # no parent: nothing happens
        await settle(pilot)
        assert isinstance(app.screen, LineageScreen)
        await pilot.press("escape", "escape")
        app.open_session("s_2")
        await settle(pilot)
        await pilot.press("l")
        await settle(pilot)
        assert "s_2's source s_99 is not in this store" in screen_text(app)
        await pilot.press("escape", "escape")
        app.open_session("s_4")  # s_3 → s_5 → s_4 → s_3: a cycle, cut and said
        await settle(pilot)
        await pilot.press("l")
        await settle(pilot)
        assert "form a cycle" in screen_text(app)


async def test_lineage_from_the_sessions_list_at_80x24(make_app, tmp_path):
    app = make_app(build_gallery(tmp_path / "g"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("G", "l")  # s_1
        await settle(pilot)
        text = screen_text(app)
        assert "├─ ⋔ s_3  fork @ statement 2" in text and "└─ ↳ s_4  sub-agent (reviewer)" in text
        assert "=0 ~3 ≠0 @0" in text  # the compact difference
        await pilot.press("escape")
        assert isinstance(app.screen, SessionsScreen)


# -- fork ------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def no_text_area_blink(monkeypatch):
    """The editors' cursor blink races screenshots, like the Input's (conftest)."""
    from textual.widgets import TextArea

    monkeypatch.setattr(TextArea, "_toggle_cursor_blink_visible", lambda self: None)


async def checked(pilot, timeout: float = 10.0) -> None:
    """Wait until the fork dialog has checked what it shows (the debounced engine check)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await settle(pilot)
        screen = pilot.app.screen
        if getattr(screen, "position", "") is not None and (screen.preview is not None or screen.problem is not None):
            return
        await pilot.pause(0.05)
    raise AssertionError("the fork dialog never finished checking")


async def _open_fork(app, pilot, session: str = "s_1"):
    from flux_tui.screens.fork import ForkScreen

    app.open_session(session)
    await settle(pilot)
    await pilot.press("f")
    await settle(pilot)
    await checked(pilot)
    assert isinstance(app.screen, ForkScreen)
    return app.screen


async def test_fork_inject_offline_opens_the_child_one_key_from_its_diff(make_app, tmp_path, monkeypatch):
    from flux_tui.screens.child_session import ChildSessionScreen
    from flux_tui.screens.fork import ForkScreen
    from flux_tui.widgets.editors import JsonTextArea

    monkeypatch.chdir(tmp_path)
    store = _family(tmp_path / "fam")
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        dialog = await _open_fork(app, pilot)
        text = screen_text(app)
        assert "Fork s_1 at statement 0" in text and "a = read({\"path\":\"A\"})" in text
        assert "recorded   a" in text and '"a"' in text and "JSON ✓" in text  # prefilled with the recorded value
        assert "offline: no model call, no side effect" in text
        assert "tail    2 statement(s): 1 dispatch(es) served from tape" in text
        assert str(dialog.query_one("#fork-run").label) == "Fork"
        # invalid JSON: said at once, the fork is disabled
        editor = dialog.query_one("#inject-value", JsonTextArea)
        editor.load_text('{"broken": ')
        await settle(pilot)
        assert "JSON ✗" in screen_text(app) and "not JSON" in screen_text(app)
        assert dialog.query_one("#fork-run").disabled
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert isinstance(app.screen, ForkScreen) and len(stream_registry(store)) == 4  # nothing written
        editor.load_text('"A, injected"')
        await settle(pilot)
        await checked(pilot)
        assert not dialog.query_one("#fork-run").disabled
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert isinstance(app.screen, ChildSessionScreen) and app.screen.session_id == "s_5"
        assert stream_registry(store)[-1] == (5, "fork:s_1@0", "s_1")
        toasts = [n.message for n in app._notifications]
        assert "forked s_5 ← s_1@0 · d diffs against the source" in toasts
        await pilot.press("d")  # one key: the diff against the source
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen) and (app.screen.a, app.screen.b) == ("s_1", "s_5")
        diff = app.screen.diff
        assert [r.kind for r in diff.rows] == ["plan", "same"]  # the injected bind, then the tail from tape


async def test_fork_edit_is_validated_as_you_type(make_app, tmp_path, monkeypatch):
    from flux_tui.widgets.editors import FluxTextArea

    monkeypatch.chdir(tmp_path)
    store = _family(tmp_path / "fam")
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press()  # noqa
        dialog = await _open_fork(app, pilot)
        await pilot.press("f2")  # edit plan
        await settle(pilot)
        editor = dialog.query_one("#edit-plan", FluxTextArea)
        assert editor.has_focus and editor.text.startswith("flow\n  a = read(")

        async def typed(text: str) -> str:
            editor.load_text(text)
            await settle(pilot)
            await checked(pilot)
            return screen_text(app)

        out = await typed("flow\n  a = read({\"path\":\"A\"}\n")
        assert "does not parse" in out and dialog.query_one("#fork-run").disabled
        out = await typed('flow\n  a = frobnicate({"x":1})\n')
        assert "fails analysis: unknown op `frobnicate`" in out and dialog.query_one("#fork-run").disabled
        out = await typed('flow\n  a = read({"path":"A"})\n  c = read({"path": $zzz})\n')
        assert "symbol `zzz` is not bound" in out and dialog.query_one("#fork-run").disabled
        out = await typed('flow\n  a = read({"path":"A"})\n  b = read({"path":"B"})\n')
        assert "✓ parses and passes analysis" in out and "offline: no model call, no side effect" in out
        assert not dialog.query_one("#fork-run").disabled
    assert len(stream_registry(store)) == 4  # validating never writes


async def test_fork_replan_with_a_model_without_a_key_is_refused_in_the_dialog(make_app, tmp_path, monkeypatch):
    """Re-plan with `openai:…` and no key: one line while checking, Fork disabled — not an error
    after the gate — and nothing written."""
    from textual.widgets import Input

    from flux_tui.screens.fork import ForkScreen

    monkeypatch.chdir(tmp_path)
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    store = _family(tmp_path / "fam")
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        dialog = await _open_fork(app, pilot)
        await pilot.press("f2", "f2")  # re-plan
        await settle(pilot)
        assert dialog.mode == "replan"
        dialog.query_one("#replan-model", Input).value = "openai:gpt-4.1-mini"
        await settle(pilot)
        await checked(pilot)
        assert (dialog.problem or "").startswith("missing key: set OPENAI_API_KEY")
        assert "✗ missing key: set OPENAI_API_KEY" in screen_text(app) and dialog.query_one("#fork-run").disabled
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert isinstance(app.screen, ForkScreen)
    assert len(stream_registry(store)) == 4


async def test_fork_that_goes_live_passes_the_gate(make_app, tmp_path, monkeypatch):
    from flux_tui.screens.child_session import ChildSessionScreen
    from flux_tui.screens.fork import ForkScreen
    from flux_tui.screens.gate import GateScreen
    from flux_tui.widgets.editors import FluxTextArea

    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.chdir(ws)
    store = _family(tmp_path / "fam")
    before = tree_digest(store)
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        dialog = await _open_fork(app, pilot)
        await pilot.press("f2")
        dialog.query_one("#edit-plan", FluxTextArea).load_text(
            'flow\n  a = read({"path":"A"})\n  note = write({"path":"note.txt","content":"forked"})\n')
        await settle(pilot)
        await checked(pilot)
        text = screen_text(app)
        assert "runs live: write (write)" in text and f"workspace {ws}" in text
        assert "you confirm at the gate first" in text
        assert str(dialog.query_one("#fork-run").label) == "Fork and run live…"
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert isinstance(app.screen, GateScreen)
        gate = screen_text(app)
        assert "Going live" in gate and "This will dispatch, for real:" in gate
        assert "write" in gate and "note.txt" in gate and str(ws) in gate
        await pilot.press("n")  # cancel: nothing ran, nothing was written
        await settle(pilot)
        assert isinstance(app.screen, ForkScreen)
        assert tree_digest(store) == before and not (ws / "note.txt").exists()
        await pilot.press("ctrl+r")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, ChildSessionScreen)
        assert (ws / "note.txt").read_text() == "forked"
        assert stream_registry(store)[-1] == (5, "fork:s_1@0", "s_1")


# -- resurrect -------------------------------------------------------------------------------------

KILLED = 'flow\n  a = read({"path":"A"})\n  b = read({"path":"B"})\n  c = write({"path":"out.txt","content":"done"})\n'


def _killed(path: Path, *, c_recorded: bool) -> Path:
    """s_1: statement 0 completed, statement 1's cell recorded, then the process died (no
    turn_ended) — with or without statement 2's cell (the write) on tape."""
    from flux.store import Message, PlanAttempted

    cells = [cell("read", {"path": "A"}, "a"), cell("read", {"path": "B"}, "b")]
    with StoreWriter(path) as w:
        sid = w.create_session("mock")
        w.append(sid, Message.text("user", "<flow run>"))
        tid = w.begin_turn(sid, "<flow run>", "mock")
        w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=KILLED), turn_id=tid)
        for ev in _resumable(cells, KILLED)[:3]:  # a, its ledger row, b (killed before b's ledger row)
            w.append(sid, ev)
        if c_recorded:
            w.append(sid, cell("write", {"path": "out.txt", "content": "done"}, "wrote 4 bytes"))
    return path


def _turn_ended(store: Path) -> int:
    import sqlite3

    con = sqlite3.connect(store / "events.db")
    try:
        return con.execute("SELECT COUNT(*) FROM events WHERE kind = 'turn_ended'").fetchone()[0]
    finally:
        con.close()


async def test_resurrect_offline_then_the_report_and_markers(make_app, tmp_path, monkeypatch):
    from flux_tui.screens.resurrect import ResurrectScreen

    monkeypatch.chdir(tmp_path)
    store = _killed(tmp_path / "k", c_recorded=True)
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_1")
        await settle(pilot)
        assert "⚠ interrupted" in screen_text(app).splitlines()[0]
        await pilot.press("R")
        await settle(pilot)
        assert isinstance(app.screen, ResurrectScreen)
        text = screen_text(app)
        assert "Resurrect s_1 · turn 1" in text and "interrupted at statement 1 of 3 of the turn" in text
        flat = widget_text(app, "#resurrect-body")
        assert ("Resurrect finishes it from the turn's own plan, with no model call: 1 statement fast-forwarded, "
                "2 cells served from tape — nothing runs live, no side effect.") in flat
        assert "run live" not in flat
        assert _turn_ended(store) == 0  # nothing written before y
        await pilot.press("y")
        await settle(pilot)
        text = screen_text(app)
        assert "Resurrected s_1 · turn 1" in text and "resurrected · session s_1 · turn 1" in text
        assert ("1 statement fast-forwarded, 2 ops served from the cassette — nothing ran live; no model call."
                in widget_text(app, "#resurrect-body"))
        assert _turn_ended(store) == 1 and not (tmp_path / "out.txt").exists()  # the write came from tape
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, SessionScreen)
        assert "⚠ interrupted" not in screen_text(app).splitlines()[0]  # the markers updated in place
        assert app.screen.check.interrupted is None


async def test_resurrect_that_runs_an_op_again_passes_the_gate(make_app, tmp_path, monkeypatch):
    from flux_tui.screens.gate import GateScreen
    from flux_tui.screens.resurrect import ResurrectScreen

    monkeypatch.chdir(tmp_path)
    store = _killed(tmp_path / "k", c_recorded=False)
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_1")
        await settle(pilot)
        await pilot.press("R")
        await settle(pilot)
        text = screen_text(app)
        assert ("with no model call: 1 statement fast-forwarded, 1 cell served from tape, and 1 op run live because the "
                "recording holds no result for them: write (write; not reached before the kill).") in widget_text(app, "#resurrect-body")
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, GateScreen) and "out.txt" in screen_text(app)
        await pilot.press("n")
        await settle(pilot)
        assert isinstance(app.screen, ResurrectScreen) and _turn_ended(store) == 0
        assert not (tmp_path / "out.txt").exists()
        await pilot.press("y", "y")
        await settle(pilot)
        assert ("and 1 run live (write) — the recording held no result for them; no model call."
                in widget_text(app, "#resurrect-body"))
        assert (tmp_path / "out.txt").read_text() == "done" and _turn_ended(store) == 1


async def test_resurrect_key_only_on_an_interrupted_session(make_app, tmp_path):
    app = make_app(_family(tmp_path / "fam"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_1")
        await settle(pilot)
        assert "Resurrect" not in screen_text(app).splitlines()[-1]
        await pilot.press("R")
        await settle(pilot)
        assert isinstance(app.screen, SessionScreen)


# -- keys: ids, tooltips, F1, the palette -------------------------------------------------------------


def test_every_write_side_binding_has_an_id_and_a_tooltip():
    from textual.binding import Binding

    from flux_tui.screens.child_session import ChildSessionScreen
    from flux_tui.screens.fork import ForkScreen
    from flux_tui.screens.gate import GateScreen
    from flux_tui.widgets.lineage_tree import LineageTree
    from flux_tui.screens.resurrect import ResurrectScreen

    ids = []
    for cls in (ForkScreen, GateScreen, ResurrectScreen, LineageScreen, LineageTree, ChildSessionScreen):
        for b in cls.__dict__.get("BINDINGS", []):
            assert isinstance(b, Binding) and b.id and b.tooltip and b.description, f"{cls.__name__}.{b}"
            ids.append(b.id)
    session_ids = {b.id for b in SessionScreen.BINDINGS}
    assert {"session.fork", "session.resurrect"} <= session_ids
    assert len(ids) == len(set(ids)) and not set(ids) & session_ids


def _help_text(help_screen) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, file=open("/dev/null", "w"))
    console.print(help_screen._body)
    return console.export_text()


async def test_write_keys_show_in_help_and_the_palette(make_app, tmp_path, monkeypatch):
    from flux_tui.commands import screen_commands
    from flux_tui.screens.help import HelpScreen

    monkeypatch.chdir(tmp_path)
    app = make_app(_killed(tmp_path / "k", c_recorded=True))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_1")
        await settle(pilot)
        titles = {t for t, *_ in screen_commands(app.screen)}
        assert {"Fork", "Resurrect"} <= titles
        await pilot.press("f1")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        text = _help_text(app.screen)
        assert "session.fork" in text and "session.resurrect" in text
        await pilot.press("escape", "f")
        await settle(pilot)
        await checked(pilot)
        titles = {t for t, *_ in screen_commands(app.screen)}
        assert {"Fork", "Next mode", "Cancel"} <= titles
        await pilot.press("f1")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen) and app.screen.topic == "fork"
        text = _help_text(app.screen)
        assert "fork.run" in text and "fork.next_mode" in text and "side-effect gate" in text


# -- snapshots -----------------------------------------------------------------------------------


def _snap_app(store: Path, name: str):
    from flux_tui.app import FluxApp

    return FluxApp(store, now_ms=NOW_MS, display_name=name, poll_interval=None)


def _run(*steps):
    async def run_before(pilot) -> None:
        await settle(pilot)
        for step in steps:
            if callable(step):
                step(pilot.app)
            elif step.startswith("open:"):
                pilot.app.open_session(step[5:])
            elif step == "checked":
                await checked(pilot)
            elif step == "reloaded":
                # the session under the report re-read the store (its ⚠ and R key gone): the footer
                # below the modal is then the same on every run
                for _ in range(100):
                    under = pilot.app.screen_stack[-2]
                    if getattr(under, "check", None) is not None and under.check.interrupted is None:
                        break
                    await pilot.pause(0.05)
                under.refresh_bindings()
                await settle(pilot)
                await pilot.pause(0.2)
            else:
                await pilot.press(step)
            await settle(pilot)

    return run_before


def _edit_plan(text: str):
    def step(app) -> None:
        from flux_tui.widgets.editors import FluxTextArea

        app.screen.query_one("#edit-plan", FluxTextArea).load_text(text)

    return step


class TestSnapshots:
    def test_lineage_tree(self, snap_compare, tmp_path):
        app = _snap_app(_family(tmp_path / "fam"), "fam")
        assert snap_compare(app, terminal_size=SIZE, run_before=_run("open:s_2", "l"))

    def test_fork_dialog(self, snap_compare, tmp_path, fixed_workspace):
        app = _snap_app(_family(tmp_path / "fam"), "fam")
        assert snap_compare(app, terminal_size=SIZE, run_before=_run("open:s_1", "f", "checked"))

    def test_fork_edit_invalid(self, snap_compare, tmp_path, fixed_workspace):
        app = _snap_app(_family(tmp_path / "fam"), "fam")
        bad = _edit_plan('flow\n  a = read({"path":"A"})\n  b = frobnicate({"path":"B"})\n')
        assert snap_compare(app, terminal_size=SIZE, run_before=_run("open:s_1", "f", "checked", "f2", bad, "checked"))

    def test_gate(self, snap_compare, tmp_path, fixed_workspace):
        app = _snap_app(_family(tmp_path / "fam"), "fam")
        live = _edit_plan('flow\n  a = read({"path":"A"})\n  note = write({"path":"note.txt","content":"forked"})\n'
                          '  out = bash({"command":"pytest -q"})\n')
        assert snap_compare(app, terminal_size=SIZE,
                            run_before=_run("open:s_1", "f", "checked", "f2", live, "checked", "ctrl+r"))

    def test_resurrect_plan(self, snap_compare, tmp_path, fixed_workspace):
        app = _snap_app(_killed(tmp_path / "k", c_recorded=False), "killed")
        assert snap_compare(app, terminal_size=SIZE, run_before=_run("open:s_1", "R"))

    def test_resurrect_report(self, snap_compare, tmp_path, fixed_workspace):
        app = _snap_app(_killed(tmp_path / "k", c_recorded=True), "killed")
        assert snap_compare(app, terminal_size=SIZE, run_before=_run("open:s_1", "R", "y", "reloaded"))

    def test_fork_dialog_80x24(self, snap_compare, tmp_path, fixed_workspace):
        app = _snap_app(_family(tmp_path / "fam"), "fam")
        assert snap_compare(app, terminal_size=(80, 24), run_before=_run("open:s_1", "f", "checked", "f2", "checked"))
