"""flux resurrect's first line says what will happen: "offline (no model call)" only when nothing
runs live; when the recording has no result for an op, it says which ops run live (after the gate)
— it said "offline" and then "2 run live" for the demo's interrupted publish."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from flux.cli import main


def test_a_resurrect_that_runs_ops_live_says_so_first(demo: Path):
    res = CliRunner().invoke(main, ["resurrect", "s_9", "--store", str(demo), "--yes"])
    assert res.exit_code == 0, res.output
    first = res.stderr.splitlines()[0]
    assert "offline" not in first
    assert first.endswith("finishing it with no model call; 2 op(s) run live after the side-effect gate "
                          "(publish, append)")
    assert "2 run live" in res.stderr  # the summary agrees

