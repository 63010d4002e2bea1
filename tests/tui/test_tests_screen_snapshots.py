"""Snapshots of the Tests screen (``flux-tui --tests DIR``): the list with a clean, a drifted and a
stale-snapshot scenario under the screens' own top bar and key footer, and the detail of the
stale snapshot — the trajectory, then the plan snapshot's per-line diff with the cursor on it."""

from __future__ import annotations


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
