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
from screen_text import screen_text, settle
from stores import NOW_MS, build_gallery
from tests.helpers import cell, tree_digest, write_turn

pytestmark = pytest.mark.anyio

SIZE = (120, 40)
PLAN = 'flow\n  a = read({"path":"A"})\n  b = read({"path":"B"})\n'


def _family(path: Path) -> Path:
    """s_1 root; s_2 fork of s_1 (one world change at statement 1); s_3 sub-agent of s_1;
    s_4 fork of s_2 (identical to it)."""
    with StoreWriter(path) as w:
        s1 = w.create_session("mock")
        write_turn(w, s1, "go", plan=PLAN, cells=[cell("read", {"path": "A"}, "a"), cell("read", {"path": "B"}, "b")])
        s2 = w.create_session("mock", context={"agent_id": f"fork:{s1}@1", "correlation_id": s1})
        write_turn(w, s2, "<fork>", plan=PLAN, cells=[cell("read", {"path": "A"}, "a"), cell("read", {"path": "B"}, "B!")])
        s3 = w.create_session("mock", context={"agent_id": "subagent:explorer", "correlation_id": s1})
        write_turn(w, s3, "explore", cells=[cell("grep", {"p": "x"}, "hit")])
        s4 = w.create_session("mock", context={"agent_id": f"fork:{s2}@0", "correlation_id": s2})
        write_turn(w, s4, "<fork>", plan=PLAN, cells=[cell("read", {"path": "A"}, "a"), cell("read", {"path": "B"}, "B!")])
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


# -- snapshots -----------------------------------------------------------------------------------


def _snap_app(store: Path, name: str):
    from flux_tui.app import FluxApp

    return FluxApp(store, now_ms=NOW_MS, display_name=name, poll_interval=None)


def _run(*steps):
    async def run_before(pilot) -> None:
        await settle(pilot)
        for step in steps:
            if step.startswith("open:"):
                pilot.app.open_session(step[5:])
            else:
                await pilot.press(step)
            await settle(pilot)

    return run_before


class TestSnapshots:
    def test_lineage_tree(self, snap_compare, tmp_path):
        app = _snap_app(_family(tmp_path / "fam"), "fam")
        assert snap_compare(app, terminal_size=SIZE, run_before=_run("open:s_2", "l"))
