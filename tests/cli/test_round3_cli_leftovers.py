"""A new user's first hour, round 3 — the CLI's leftovers: one statement numbering in every note,
one clear line for a hostile --query, a refused second writer that prints nothing before its
refusal."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from click.testing import CliRunner

from flux.cli import main


def run(*args: str):
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return res


def _numbers(text: str) -> set[int]:
    """Every statement number a note gives for the interrupted turn's stop."""
    pats = [r"tape ends at statement (\d+)", r"interrupted after (\d+) statement\(s\)",
            r"interrupted: turn \d+ after (\d+) statement\(s\)", r"interrupted at statement (\d+) of"]
    return {int(m) for p in pats for m in re.findall(p, text)}


def test_every_note_on_an_adaptive_interrupted_turn_counts_as_fork_at_does(demo, monkeypatch):
    """s_8: an adaptive turn of three one-statement plans, killed while its third call (publish) was
    in flight. `fork --turn 1 --at 2` targets publish; replay said `tape ends at statement 2`, but
    show said `after 0 statement(s)` and resurrect's first line `interrupted after 0 statement(s)`
    (each plan's own node) above its panel's `interrupted at statement 2 of 3`."""
    monkeypatch.setenv("FLUX_AUTO_RESURRECT", "0")
    store = str(demo)
    outputs = {
        "replay": run("replay", "s_8", "--store", store).output,
        "show": run("show", "s_8", "--store", store).output,
        "resurrect": run("resurrect", "s_8", "--store", store).output,  # refused at the gate (no TTY, no --yes)
    }
    seen = {verb: _numbers(text) for verb, text in outputs.items()}
    assert all(seen.values()), (seen, outputs)
    assert set().union(*seen.values()) == {2}, seen
    assert "of 3 of the turn" in outputs["resurrect"]
    past = run("fork", "s_8", "--turn", "1", "--at", "3", "--inject", '"x"', "--store", store)
    assert past.exit_code == 1 and "numbered 0–2" in past.output, past.output  # 3 statements: publish is 2

    shown = json.loads(run("show", "s_8", "--json", "--store", store).stdout)["interrupted"]
    listed = {r["id"]: r for r in json.loads(run("sessions", "--json", "--store", store).stdout)["sessions"]}
    tape_end = json.loads(run("replay", "s_8", "--json", "--store", store).stdout)["tape_end"]
    assert shown["position"] == listed["s_8"]["interrupted"]["position"] == tape_end["position"] == 2
    assert shown["completed"] == 0  # flux's own count inside the last plan stays in the JSON, named apart


def test_a_planned_turn_keeps_its_one_plan_numbering(demo, monkeypatch):
    """s_9 ran one plan: the turn's numbering is the plan's — every note says 2 there too."""
    monkeypatch.setenv("FLUX_AUTO_RESURRECT", "0")
    store = str(demo)
    text = "".join(run(*verb, "s_9", "--store", store).output for verb in (["replay"], ["show"], ["resurrect"]))
    assert _numbers(text) == {2}, text
