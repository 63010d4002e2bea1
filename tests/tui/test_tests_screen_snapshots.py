"""Snapshots of the Tests screen (``flux-tui --tests DIR``): the list with a clean, a drifted and a
stale-snapshot scenario under the screens' own top bar and key footer, and the detail of the
stale snapshot — the trajectory, then the plan snapshot's per-line diff with the cursor on it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from flux.agent.client import Client
from flux.testkit import Scenario

from tests.testkit.conftest import change_tool_input


@pytest.fixture
def scenarios(tmp_path: Path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "FLUX_GOLDEN"):
        monkeypatch.delenv(k, raising=False)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("# x\n")
    root = Path("scenarios")  # relative: the top bar shows no temp path
    with Client("mock", workspace=ws, auto_approve=True, env_secrets=False) as c:
        Scenario.record(c, "write a quick note", root / "note").close()
    shutil.copytree(root / "note", root / "broken")
    change_tool_input(root / "broken" / "model.jsonl", 2, path="other.txt")
    shutil.copytree(root / "note", root / "stale-snap")
    snap = root / "stale-snap" / "plan.flux.snap"
    snap.write_text(snap.read_text().replace("flux-mock.txt", "old-name.txt"))
    return root


async def _done(pilot) -> None:
    screen = pilot.app.screen
    for _ in range(500):
        if len(screen.results) == len(screen.targets) and not screen.running:
            break
        await pilot.pause(0.02)
    await pilot.pause()


def test_tests_list_snapshot(snap_compare, scenarios):
    from flux_tui.app import FluxApp

    app = FluxApp(tests_dir=scenarios, poll_interval=None)
    assert snap_compare(app, terminal_size=(120, 24), run_before=_done)


def test_tests_snapshot_mismatch_detail_snapshot(snap_compare, scenarios):
    from textual.widgets import DataTable

    from flux_tui.app import FluxApp

    app = FluxApp(tests_dir=scenarios, poll_interval=None)

    async def run_before(pilot) -> None:
        await _done(pilot)
        table = pilot.app.screen.query_one(DataTable)
        table.move_cursor(row=table.get_row_index(str(scenarios / "stale-snap")))
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(app, terminal_size=(120, 30), run_before=run_before)
