"""The time machine's keys in the app, part 2 — driven by a real pilot on real stores, with SVG
snapshots: what-if from the plan cursor (``w``: the dialog, its live validation, the gate for
off-tape live, the result as a diff against the source); the demo's toolbox runs live actions on the
demo, and an op the toolbox does not implement is refused before the gate; resurrected turns in the
lineage tree; the sessions list grouped by source (``t``) and ``R`` on an interrupted row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flux_tui.screens.diff import DiffScreen
from flux_tui.screens.session import SessionScreen
from screen_text import dialog_checked as checked, screen_text, settle, widget_text
from stores import NOW_MS, build_chain, stream_registry
from tests.helpers import tree_digest

pytestmark = pytest.mark.anyio

SIZE = (120, 40)


@pytest.fixture(autouse=True)
def no_text_area_blink(monkeypatch):
    from textual.widgets import TextArea

    monkeypatch.setattr(TextArea, "_toggle_cursor_blink_visible", lambda self: None)


async def _open(app, pilot, *, cell_row: int):
    """Open s_1, put the cursor on the ``cell_row``-th cell row, press w."""
    from flux_tui.screens.whatif import WhatIfScreen

    app.open_session("s_1")
    await settle(pilot)
    tv = app.screen.timeline_view
    cells = [i for i, r in enumerate(tv.rows) if r.kind == "cell"]
    tv.move_cursor(cells[cell_row])
    await pilot.press("w")
    await settle(pilot)
    await checked(pilot)
    assert isinstance(app.screen, WhatIfScreen)
    return app.screen


def _value(app, text: str) -> None:
    from flux_tui.widgets.editors import JsonTextArea

    app.screen.query_one("#whatif-value", JsonTextArea).load_text(text)


async def test_what_if_this_cell_opens_the_diff_with_the_first_divergence_focused(make_app, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = build_chain(tmp_path / "c")
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        dialog = await _open(app, pilot, cell_row=1)  # b's cell: "bee"
        text = screen_text(app)
        assert "What if… s_1 · cell #1 read" in text and "recorded   bee" in text
        assert '"bee"' in text and "JSON ✓" in text and "same as recorded" in text  # prefilled
        assert "offline: no model call, no side effect" in text
        _value(app, '{"broken": ')
        await checked(pilot)
        assert "JSON ✗" in screen_text(app) and dialog.query_one("#whatif-run").disabled
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert app.screen is dialog and len(stream_registry(store)) == 1  # nothing written
        _value(app, '"a different bee"')
        await checked(pilot)
        assert "substitute row 1 := 'a different bee'" in screen_text(app)
        assert not dialog.query_one("#whatif-run").disabled
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen) and (app.screen.a, app.screen.b) == ("s_1", "s_2")
        assert [r.kind for r in app.screen.diff.rows] == ["same", "output"]
        assert app.screen.rows_view.cursor == 1  # the first divergence is focused
        top = screen_text(app).splitlines()[0]
        assert "WHAT-IF ✓ hermetic" in top and "1 world" in top
        assert stream_registry(store)[-1] == (2, "what_if:s_1@latest", "s_1")  # where flux what-if puts it
        toasts = [n.message for n in app._notifications]
        assert any(t.startswith("what-if s_2 ← s_1 · hermetic · first divergence at row 1") for t in toasts)
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, SessionScreen)
        await pilot.press("l")  # the what-if is in the family
        await settle(pilot)
        assert "? s_2  what-if @ turn latest" in screen_text(app) or "? s_2  what-if latest" in screen_text(app) \
            or "? s_2" in screen_text(app)


async def test_what_if_every_call_halts_off_tape_or_goes_live_through_the_gate(make_app, tmp_path, monkeypatch):
    from flux_tui.screens.gate import GateScreen
    from flux_tui.screens.whatif import WhatIfScreen

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "C").write_text("sea")
    monkeypatch.chdir(ws)
    store = build_chain(tmp_path / "c")
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        dialog = await _open(app, pilot, cell_row=0)  # a's cell: "B"
        await pilot.press("f2")  # every read call returned …
        await checked(pilot)
        assert dialog.kind == "op"
        await pilot.press("f2", "f2")  # policy, then back to this cell
        await checked(pilot)
        assert dialog.kind == "cell"
        _value(app, '"C"')
        await checked(pilot)
        text = screen_text(app)
        assert "may be off tape → the run halts there" in text and "offline: no model call" in text
        # halt (default): offline, written at once, the badge says it halted
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen)
        assert "halted off tape" in screen_text(app).splitlines()[0]
        toasts = [n.message for n in app._notifications]
        assert any("halted off tape" in t and "F3 off tape: live" in t for t in toasts), toasts
        assert not any("--off-tape" in t for t in toasts), toasts  # the CLI's flag means nothing here
        assert not any("sea" in (r.b or "") for r in app.screen.diff.rows)
        await pilot.press("escape")
        await settle(pilot)
        # go live: the gate first; n writes nothing; y reads C for real
        dialog = await _open(app, pilot, cell_row=0)
        _value(app, '"C"')
        await pilot.press("f3")
        await checked(pilot)
        text = screen_text(app)
        assert "runs live: read (none)" in text and "you confirm at the gate first" in text
        n = len(stream_registry(store))
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert isinstance(app.screen, GateScreen)
        await pilot.press("n")
        await settle(pilot)
        assert isinstance(app.screen, WhatIfScreen) and len(stream_registry(store)) == n
        await pilot.press("ctrl+r")
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen)
        assert "went live (1 op(s))" in screen_text(app).splitlines()[0]
        assert any(r.b == "sea" for r in app.screen.diff.rows)  # the live read, recorded on the what-if


async def test_what_if_the_policy_were_different(make_app, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = build_chain(tmp_path / "c")
    (tmp_path / "deny.json").write_text(json.dumps({"deny": ["read"], "default": "allow"}))
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        dialog = await _open(app, pilot, cell_row=0)
        await pilot.press("f2", "f2")
        await checked(pilot)
        assert dialog.kind == "policy"
        from textual.widgets import Input

        inp = dialog.query_one("#whatif-policy", Input)
        inp.value = str(tmp_path / "nope.toml")
        await checked(pilot)
        assert "cannot read the policy file" in screen_text(app) and dialog.query_one("#whatif-run").disabled
        inp.value = str(tmp_path / "deny.json")
        await checked(pilot)
        flat = " ".join(screen_text(app).split())
        assert "policy ✓" in flat and "re-authorizes" in flat
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert isinstance(app.screen, DiffScreen)
        assert "denied by policy" in screen_text(app).splitlines()[0]


async def test_what_if_on_a_statement_that_dispatched_nothing_asks_only_about_the_policy(make_app, tmp_path):
    from flux_tui.screens.whatif import WhatIfScreen, WhatIfTarget

    app = make_app(build_chain(tmp_path / "c"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_1")
        await settle(pilot)
        app.push_screen(WhatIfScreen(WhatIfTarget("s_1", 1, "statement 0 (dispatched nothing)", None, None, None)))
        await settle(pilot)
        await checked(pilot)
        s = app.screen
        assert s.kind == "policy" and s.query_one("#kind-cell").disabled and s.query_one("#kind-op").disabled
        await pilot.press("f2")
        assert s.kind == "policy"


async def _replan_on(app, pilot, model: str) -> None:
    """F5: re-plan with a live model turn; type ``model``."""
    from textual.widgets import Input

    await pilot.press("f5")
    await settle(pilot)
    app.screen.query_one("#whatif-model", Input).value = model
    await checked(pilot)


async def test_what_if_replan_with_a_model_without_a_key_is_refused_before_anything_is_written(
        make_app, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    store = build_chain(tmp_path / "c")
    before = tree_digest(store)
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        dialog = await _open(app, pilot, cell_row=0)
        await _replan_on(app, pilot, "anthropic:test-model")
        assert dialog.replan and dialog.problem.startswith("missing key: set ANTHROPIC_API_KEY")
        text = screen_text(app)
        assert "✗ missing key: set ANTHROPIC_API_KEY" in text and dialog.query_one("#whatif-run").disabled
        await pilot.press("ctrl+r")
        await settle(pilot)
        assert app.screen is dialog
        await _replan_on(app, pilot, "")  # F5 again turns it off; on again with no model at all
        assert not dialog.replan
        await _replan_on(app, pilot, "")
        assert dialog.problem == "type the model that re-plans the turn (provider:model, e.g. mock)"
        assert "model ✗" in screen_text(app)
    assert tree_digest(store) == before


async def test_what_if_replan_of_this_turn_calls_the_model_through_the_gate(make_app, tmp_path, monkeypatch):
    """F4 (this turn only) + F5 (re-plan) = `flux what-if S --turn 1 -m MODEL --instructions TEXT`:
    the model call passes the gate (n: no request, nothing written), then one live turn against a
    real Anthropic-wire server on 127.0.0.1 — shown the turn's task and the instructions typed."""
    pytest.importorskip("anthropic")
    from textual.widgets import TextArea

    from flux_tui.screens.gate import GateScreen
    from flux_tui.screens.whatif import WhatIfScreen
    from tests.agent.fake_servers import Answer, FakeAnthropic

    key = "sk-test-0123456789abcdefghijklmnop"
    monkeypatch.chdir(tmp_path)
    store = build_chain(tmp_path / "c")
    with FakeAnthropic(api_key=key) as srv:
        srv.script(Answer(text="Re-planned: nothing to read."))
        monkeypatch.setenv("ANTHROPIC_API_KEY", key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        app = make_app(store)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            dialog = await _open(app, pilot, cell_row=0)
            await pilot.press("f4")
            await checked(pilot)
            assert dialog.scope == "turn" and "turn 1 re-runs from its recording" in screen_text(app)
            await _replan_on(app, pilot, "anthropic:test-model")
            dialog.query_one("#whatif-instructions", TextArea).load_text("Answer in one short sentence.")
            await checked(pilot)
            text = screen_text(app)
            assert "a live model turn re-plans turn 1 against the frozen world" in text
            assert "re-plan turn 1 with anthropic:test-model" in text and "a live model call" in text
            spec = dialog.spec()
            assert (spec.turn, spec.model, spec.instructions) == (1, "anthropic:test-model",
                                                                   "Answer in one short sentence.")
            await pilot.press("ctrl+r")
            await settle(pilot)
            assert isinstance(app.screen, GateScreen)
            assert "model   network   anthropic:test-model" in " ".join(screen_text(app).split("\n"))
            await pilot.press("n")
            await settle(pilot)
            assert isinstance(app.screen, WhatIfScreen) and len(stream_registry(store)) == 1 and not srv.requests
            await pilot.press("ctrl+r")
            await settle(pilot)
            await pilot.press("y")
            for _ in range(100):
                await settle(pilot)
                if isinstance(app.screen, DiffScreen):
                    break
                await pilot.pause(0.1)
            assert isinstance(app.screen, DiffScreen)
            assert "WHAT-IF · 1 model call(s)" in screen_text(app).splitlines()[0]
        sent = [r.body for r in srv.requests]
    assert len(sent) == 1
    assert "Answer in one short sentence." in json.dumps(sent[0]["system"])
    assert [m["role"] for m in sent[0]["messages"]] == ["user"]
    assert json.dumps(sent[0]["messages"][0]["content"]).count('"go"') == 1
    assert stream_registry(store)[-1] == (2, "what_if:s_1@1", "s_1")


# -- the toolbox a store was recorded with --------------------------------------------------------


async def test_resurrecting_the_demo_live_runs_its_own_ops(make_app, demo, monkeypatch, tmp_path):
    """s_9 is killed mid-`publish`: the demo toolbox (toolbox.json) implements it — the app runs it
    for real into the demo's local index, in the demo's own workspace, after the gate."""
    from flux_tui.screens.gate import GateScreen
    from flux_tui.screens.resurrect import ResurrectScreen

    monkeypatch.chdir(tmp_path)
    ws = demo / "workspace"
    app = make_app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_9")
        await settle(pilot)
        await pilot.press("R")
        await settle(pilot)
        assert isinstance(app.screen, ResurrectScreen)
        text = screen_text(app)
        assert "publish (write; in flight when the process died)" in widget_text(app, "#resurrect-body") and str(ws) in text
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, GateScreen) and "publish" in screen_text(app)
        await pilot.press("y")
        await settle(pilot)
        text = screen_text(app)
        assert "resurrected · session s_9 · turn 1" in text
        assert "and 2 run live (publish, append) — the recording held no result for them" in widget_text(app, "#resurrect-body")
    assert (ws / "index" / "pypi" / "tokenizer-0.4.0.tar.gz").is_file()
    assert (ws / "CHANGELOG.md").read_text().endswith("- published to pypi\n")


async def test_an_op_the_toolbox_lacks_is_refused_before_the_gate(make_app, demo, monkeypatch, tmp_path):
    from flux_tui.screens.resurrect import ResurrectScreen

    monkeypatch.chdir(tmp_path)
    (demo / "toolbox.json").unlink()  # now the app would run the built-in coding ops: no `publish`
    before = tree_digest(demo)
    app = make_app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_9")
        await settle(pilot)
        await pilot.press("R")
        await settle(pilot)
        assert isinstance(app.screen, ResurrectScreen)
        error = app.screen.error or ""
        assert "would dispatch `publish` live, and this toolbox has no implementation of it" in error
        assert "✗ resurrect s_9 · turn 1 would dispatch `publish` live" in screen_text(app)
        assert app.screen.query_one("#resurrect-yes").disabled
        await pilot.press("y")
        await settle(pilot)
        assert isinstance(app.screen, ResurrectScreen)
    assert tree_digest(demo) == before


# -- lineage: resurrected turns; the sessions list: grouped, R --------------------------------------


async def test_resurrected_turns_are_nodes_of_the_lineage_tree(make_app, demo, monkeypatch, tmp_path):
    from flux_tui.screens.lineage import LineageScreen

    monkeypatch.chdir(tmp_path)
    app = make_app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_11")
        await settle(pilot)
        await pilot.press("l")
        await settle(pilot)
        assert isinstance(app.screen, LineageScreen)
        text = screen_text(app)
        assert "1 resurrected turn (↻)" in text and "└─ ↻ turn 1 of s_11  resurrected" in text
        await pilot.press("j")  # the turn row
        await settle(pilot)
        assert app.screen.tree.current.turn is not None
        assert "turn 1 of s_11 — killed mid-run, then finished by resurrect" in screen_text(app)
        assert "Enter open s_11 at turn 1" in screen_text(app)
        await pilot.press("d")  # not a session: nothing to diff
        await settle(pilot)
        assert isinstance(app.screen, LineageScreen)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, SessionScreen) and app.screen.session_id == "s_11"
        assert app.screen.turn.number == 1


async def test_sessions_list_groups_children_under_their_source(make_app, demo, tmp_path, monkeypatch):
    from flux_tui.screens.sessions import SessionsScreen

    monkeypatch.chdir(tmp_path)
    app = make_app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SessionsScreen) and not screen.table.grouped
        flat = [it.id for it in screen.table.rows]
        assert "t Group" in screen_text(app).splitlines()[-1]
        await pilot.press("t")
        await settle(pilot)
        ids = [it.id for it in screen.table.rows]
        assert sorted(ids) == sorted(flat)
        i = ids.index("s_1")
        assert ids[i + 1:i + 4] == ["s_2", "s_6", "s_10"]  # its sub-agent, fork and what-if, in the order made
        text = screen_text(app)
        assert "11 sessions · grouped by source" in text.splitlines()[0]
        assert "├ s_2" in text and "├ s_6" in text and "└ s_10" in text
        await pilot.press("slash", *"s_1")  # a filter keeps the grouping of what it shows
        await settle(pilot)
        await pilot.press("escape", "t")
        await settle(pilot)
        assert [it.id for it in screen.table.rows] == flat and "grouped" not in screen_text(app).splitlines()[0]


async def test_R_on_an_interrupted_row_of_the_sessions_list(make_app, demo, tmp_path, monkeypatch):
    from flux_tui.screens.resurrect import ResurrectScreen
    from flux_tui.screens.sessions import SessionsScreen

    monkeypatch.chdir(tmp_path)
    app = make_app(demo)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        table = screen.table
        table.move_cursor(next(i for i, it in enumerate(table.rows) if it.id == "s_7"))
        await settle(pilot)
        assert "Resurrect" not in screen_text(app).splitlines()[-1]
        await pilot.press("R")
        await settle(pilot)
        assert isinstance(app.screen, SessionsScreen)
        assert any("s_7 has no interrupted turn" in n.message for n in app._notifications)
        table.move_cursor(next(i for i, it in enumerate(table.rows) if it.id == "s_9"))
        await settle(pilot)
        assert "R Resurrect" in screen_text(app).splitlines()[-1]
        await pilot.press("R")
        await settle(pilot)
        assert isinstance(app.screen, ResurrectScreen) and "Resurrect s_9 · turn 1" in screen_text(app)


# -- snapshots -----------------------------------------------------------------------------------


def _snap(store: Path, *steps):
    from flux_tui.app import FluxApp

    app = FluxApp(store, now_ms=NOW_MS, display_name="chain", poll_interval=None)

    async def run_before(pilot) -> None:
        await settle(pilot)
        for step in steps:
            if callable(step):
                step(pilot.app)
            elif step == "checked":
                await checked(pilot)
            else:
                await pilot.press(step)
            await settle(pilot)

    return app, run_before


def _open_step(app) -> None:
    app.open_session("s_1")


def _cursor_on_first_cell(app) -> None:
    tv = app.screen.timeline_view
    tv.move_cursor(next(i for i, r in enumerate(tv.rows) if r.kind == "cell"))


class TestSnapshots:
    def test_what_if_dialog(self, snap_compare, tmp_path, fixed_workspace):
        app, before = _snap(build_chain(tmp_path / "c"), _open_step, _cursor_on_first_cell, "w", "checked",
                            lambda a: _value(a, '"C"'), "checked")
        assert snap_compare(app, terminal_size=SIZE, run_before=before)

    def test_what_if_result_diff(self, snap_compare, tmp_path, fixed_workspace):
        app, before = _snap(build_chain(tmp_path / "c"), _open_step, _cursor_on_first_cell, "w", "checked",
                            lambda a: _value(a, '"C"'), "checked", "ctrl+r")
        assert snap_compare(app, terminal_size=SIZE, run_before=before)

    def test_sessions_grouped(self, snap_compare, demo_master, tmp_path):
        import shutil

        store = Path(shutil.copytree(demo_master, tmp_path / "demo"))
        app, before = _snap(store, "t")
        assert snap_compare(app, terminal_size=SIZE, run_before=before)

    def test_what_if_dialog_80x24(self, snap_compare, tmp_path, fixed_workspace):
        app, before = _snap(build_chain(tmp_path / "c"), _open_step, _cursor_on_first_cell, "w", "checked")
        assert snap_compare(app, terminal_size=(80, 24), run_before=before)

    def test_what_if_replan_this_turn(self, snap_compare, tmp_path, fixed_workspace):
        """F4 this turn only, F5 re-plan with the session's model (mock): the model and instructions
        fields, the live model call in the preview."""
        app, before = _snap(build_chain(tmp_path / "c"), _open_step, _cursor_on_first_cell, "w", "checked", "f4",
                            "checked", "f5", "checked")
        assert snap_compare(app, terminal_size=SIZE, run_before=before)

    def test_what_if_replan_80x24(self, snap_compare, tmp_path, fixed_workspace):
        app, before = _snap(build_chain(tmp_path / "c"), _open_step, _cursor_on_first_cell, "w", "checked", "f5",
                            "checked")
        assert snap_compare(app, terminal_size=(80, 24), run_before=before)
