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


def test_a_query_too_long_to_search_is_one_line(demo):
    """A 100 KB --query printed SQLite's own text ("LIKE or GLOB pattern too complex")."""
    store = str(demo)
    for q in ("x" * 100_000, "%" * 10_001, "é" * 20_000):
        res = CliRunner().invoke(main, ["sessions", "--query", q, "--store", store])
        assert res.exit_code == 1, res.output
        assert res.stdout == "" and res.stderr.count("\n") == 1, res.stderr[:300]
        assert res.stderr.startswith(f"error: the search text is {len(q):,} characters long") and \
            "at most 10,000 characters" in res.stderr
        assert "LIKE" not in res.stderr and len(res.stderr) < 300
    # at the bound, however it is spelled (escaped wildcards, 4-byte characters), it is a search
    for q in ("%" * 10_000, "_\\" * 5_000, "𝄞" * 10_000, "x" * 10_000):
        res = CliRunner().invoke(main, ["sessions", "--query", q, "--store", store])
        assert res.exit_code == 0 and "no sessions match" in res.stderr, res.output[:300]
    res = CliRunner().invoke(main, ["sessions", "--query", "quick note", "--json", "--store", store])
    assert res.exit_code == 0 and json.loads(res.stdout)["sessions"], res.output


def test_a_refused_second_writer_prints_nothing_before_its_refusal(tmp_path):
    """`flux run --continue` while another live `flux run` records that session: exit 1, the one
    refusal line on stderr, no run header (it printed `run · s_1 · mock · store …` first), nothing
    on stdout, no row written."""
    import os
    import sqlite3
    import subprocess
    import sys
    import time

    from flux.store.lease import lease_holder
    from tests.helpers import descendants, kill_tree

    flux = str(Path(sys.executable).with_name("flux"))
    env = {**os.environ, "FLUX_AUTO_RESURRECT": "0"}
    script = tmp_path / "slow.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "bash", "input": {"command": "sleep 60"}}]},
                                  {"text": "done"}]), encoding="utf-8")
    store = tmp_path / "st"
    first = subprocess.Popen([flux, "run", "-m", f"scripted:{script}", "--store", str(store), "--yes", "go"],
                             cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             )
    try:
        deadline = time.monotonic() + 90
        while lease_holder(store, "s_1") is None or "sleep" not in {n for _, n in descendants(first.pid)}:
            assert first.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)

        def rows() -> int:
            con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True)
            try:
                return con.execute("SELECT COUNT(*) FROM events").fetchone()[0]
            finally:
                con.close()

        before = rows()
        for args in (["run", "--continue", "-m", "mock", "--yes", "again"],
                     ["run", "--session", "s_1", "-m", "mock", "--yes", "again"]):
            res = subprocess.run([flux, *args, "--store", str(store)], capture_output=True, text=True, cwd=tmp_path,
                                 env=env, timeout=120)
            assert res.returncode == 1, res
            assert res.stdout == ""
            assert res.stderr == (f"error: s_1's turn is being recorded by pid {first.pid} — wait for it to finish "
                                  f"or stop it (kill {first.pid}), then try again\n"), res.stderr
        assert rows() == before
    finally:
        kill_tree(first.pid)
        first.wait(timeout=60)
