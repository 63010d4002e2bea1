"""The app's side-by-side diff of a fork whose positions drift (issue 8): an inject fork of the
demo's adaptive s_1 has one cell fewer; `d` on it shows `=` up to the fork point, the missing
cell as a gap row (an empty side), then each later call beside the same call."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flux.agent.client import Client
from flux.timemachine import fork_session
from flux_tui.screens.diff import DiffScreen
from flux_tui.screens.diff_detail import DiffDetailScreen
from screen_text import screen_text, settle
from stores import NOW_MS

pytestmark = pytest.mark.anyio

SIZE = (120, 40)


@pytest.fixture(scope="module")
def forked_demo(demo_master: Path, tmp_path_factory) -> tuple[Path, str]:
    """A copy of the demo with ``flux fork s_1 --at 1 --inject '"injected"'`` done (offline)."""
    store = Path(shutil.copytree(demo_master, tmp_path_factory.mktemp("da") / "demo"))
    ws = store.parent / "ws"
    ws.mkdir()
    c = Client("mock", store=store, workspace=ws, env_secrets=False)
    res = fork_session(c, "s_1", 1, inject="injected")
    c.close()
    return store, res.session


async def _diff_of_fork(app, pilot, child: str) -> DiffScreen:
    app.open_session(child)
    await settle(pilot)
    await pilot.press("d")
    await settle(pilot)
    await pilot.press("enter")  # the prompt defaults to the fork's source
    await settle(pilot)
    assert isinstance(app.screen, DiffScreen)
    return app.screen


async def test_side_by_side_of_a_shifted_fork(make_app, forked_demo):
    store, child = forked_demo
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = await _diff_of_fork(app, pilot, child)
        assert (screen.a, screen.b) == (child, "s_1") and screen.diff.sequence_aligned
        lines = screen_text(app).splitlines()
        assert "5 same · 1 plan · 0 world · differ" in lines[0]
        assert "cells aligned as a sequence · 6 rows · A 5 cells · B 6 cells" in lines[1]
        rows = [ln for ln in lines if ln.startswith(("│= ", "│~ ", "│≠ "))]
        marks = [ln[1] for ln in rows]
        assert marks == ["=", "~", "=", "=", "=", "="]
        # each side numbers its own cells; the gap is an empty A side beside B's read
        assert rows[0].startswith("│= 0 op `task`") and "│ 0 op `task`" in rows[0]
        assert rows[1].startswith("│~   ∅ no cell here") and "│ 1 op `read`" in rows[1]
        assert rows[2].startswith("│= 1 op `run_tests`") and "│ 2 op `run_tests`" in rows[2]
        assert rows[5].startswith("│= 4 op `append`") and "│ 5 op `append`" in rows[5]
        # the first divergence is focused: the gap row
        assert screen.rows_view.cursor == 1
        text = screen_text(app)
        assert "only B has this cell (nothing paired with it) · row 1 · A ∅ ↔ B cell #1" in text
        assert f"{child}  ∅ (no cell here)" in text
        # its payloads: A empty, B the read cell
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, DiffDetailScreen)
        text = screen_text(app)
        assert "row 1 · A ∅ ↔ B cell #1" in text and "∅ A has no cell paired with B's cell #1" in text
        assert '"op": "read"' in text and '"path": "src/tokenizer.py"' in text
        await pilot.press("escape")
        await settle(pilot)
        # a paired row after the fork point fetches each side's own cell
        screen.rows_view.move_cursor(4)
        await settle(pilot)
        assert "row 4 · A cell #3 ↔ B cell #4" in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        text = screen_text(app)
        assert "A cell #3 ↔ B cell #4" in text and "nothing: both sides are the same" in text
        assert text.count('"op": "run_tests"') == 2
        await pilot.press("escape")
        await settle(pilot)
        # swapped, the gap moves to B's side
        await pilot.press("s")
        await settle(pilot)
        assert (app.screen.a, app.screen.b) == ("s_1", child)
        rows = [ln for ln in screen_text(app).splitlines() if ln.startswith(("│= ", "│~ ", "│≠ "))]
        assert rows[1].startswith("│~ 1 op `read`") and "│   ∅ no cell here" in rows[1]


def _snap(store: Path, child: str):
    from flux_tui.app import FluxApp

    app = FluxApp(store, now_ms=NOW_MS, display_name="demo", poll_interval=None)

    async def run_before(pilot) -> None:
        await settle(pilot)
        await _diff_of_fork(pilot.app, pilot, child)
        await settle(pilot)

    return app, run_before


class TestSnapshots:
    def test_shifted_fork_diff(self, snap_compare, forked_demo):
        app, before = _snap(*forked_demo)
        assert snap_compare(app, terminal_size=SIZE, run_before=before)

    def test_shifted_fork_diff_80x24(self, snap_compare, forked_demo):
        app, before = _snap(*forked_demo)
        assert snap_compare(app, terminal_size=(80, 24), run_before=before)


def _mixed(path: Path) -> Path:
    """s_1: task, read, run_tests (fails), edit a, run_tests; s_2 (its fork): task, run_tests
    (passes), edit b, run_tests, append — same length, shifted by one from the second cell on."""
    from flux.store import StoreWriter
    from tests.helpers import cell, write_turn

    with StoreWriter(path) as w:
        a = w.create_session("mock")
        write_turn(w, a, "go", cells=[
            cell("task", {"p": "map"}, "mapped"), cell("read", {"path": "x.py"}, "code"),
            cell("run_tests", {"path": "tests"}, "F. 1 failed"), cell("edit", {"path": "x.py", "new": "a"}, "ok"),
            cell("run_tests", {"path": "tests"}, "2 passed")])
        b = w.create_session("mock", context={"agent_id": f"fork:{a}@1", "correlation_id": a})
        write_turn(w, b, "go", cells=[
            cell("task", {"p": "map"}, "mapped"), cell("run_tests", {"path": "tests"}, "2 passed"),
            cell("edit", {"path": "x.py", "new": "b"}, "ok"), cell("run_tests", {"path": "tests"}, "2 passed"),
            cell("append", {"path": "CHANGELOG"}, "ok")])
    return path


async def test_gap_world_and_replaced_rows_of_a_shifted_pair(make_app, tmp_path):
    app = make_app(_mixed(tmp_path / "mixed"))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = await _diff_of_fork(app, pilot, "s_2")
        assert screen.diff.sequence_aligned and screen.rows_view.cursor == 1
        body = [ln[1:-1] for ln in screen_text(app).splitlines()[3:10]]
        assert body[0].startswith("= 0 op `task`") and "│ 0 op `task`" in body[0]
        assert body[1].startswith("~   ∅ no cell here") and "│ 1 op `read`" in body[1]
        assert body[2].startswith("≠ 1 op `run_tests`") and "│ 2 op `run_tests`" in body[2]
        assert body[3].startswith("    → 2 passed") and "│   → F. 1 failed" in body[3]  # under each side's text
        assert body[4].startswith("~ 2 op `edit`") and "│ 3 op `edit`" in body[4]  # a changed call: both sides
        assert body[5].startswith("= 3 op `run_tests`") and "│ 4 op `run_tests`" in body[5]
        assert body[6].startswith("~ 4 op `append`") and "│   ∅ no cell here" in body[6]
        await pilot.press("n")
        await settle(pilot)
        row = screen.rows_view.current
        assert screen.rows_view.cursor == 2 and (row.kind, row.a_index, row.b_index) == ("output", 1, 2)
        text = " ".join(screen_text(app).replace("│", " ").split())  # the row panel wraps at 80
        assert "row 2 · A cell #1 ↔ B cell #2" in text and "s_2 2 passed" in text and "s_1 F. 1 failed" in text
