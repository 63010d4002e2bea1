"""A resurrect SIGKILLed mid-dispatch, then resurrected again (qa6): the cell the first resurrect
recorded live is served by the second, never run again; only the op in flight at the kill runs
twice; the store stays readable in between. The plan is a host plan (resurrect's direct path,
DirectRunner.run_resume), recorded resumably or not. Side effects are counted in the workspace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.canonical import canonical_json, sha256_hex
from flux.cli import main
from flux.lang.hashes import flow_key, stmt_hash16
from flux.lang.parser import parse
from flux.store import (Message, OpRecorded, PlanAttempted, PlanResumed, Run, StatementCompleted, StepStarted,
                        StepSucceeded, StoreReader, StoreWriter)
from tests.helpers import REPO

_OPS = [("append", {"content": "one\n", "path": "effects.log"}),
        ("bash", {"command": "echo two >> effects.log"}),
        ("bash", {"command": "echo three >> effects.log; if [ -e slow ]; then sleep 60; fi"}),
        ("append", {"content": "four\n", "path": "effects.log"})]


def _killed_session(store: Path, ws: Path, resumable: bool) -> None:
    """Statement 0 recorded (its cell, and its statement row when resumable), then the kill."""
    text = "flow\n" + "".join(f"  s{k} = {op}({canonical_json(v)})\n" for k, (op, v) in enumerate(_OPS))
    draft = parse(text)
    op, v = _OPS[0]
    h = sha256_hex(canonical_json(v))
    step = f"step_{op}_{h[:16]}"
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        w.append(sid, Message.text("user", "go"))
        tid = w.begin_turn(sid, "go", "mock")
        w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=text), turn_id=tid)
        w.append(sid, Run(StepStarted(step=step, op=op, input_hash=h)))
        w.append(sid, Run(OpRecorded(seq=0, step=step, op=op, input_hash=h, input_view=canonical_json(v), content="ok")))
        w.append(sid, Run(StepSucceeded(step=step, output="v_1")))
        if resumable:
            w.append(sid, Run(StatementCompleted(plan=flow_key(draft.name, draft.body), node=0,
                                                 stmt=stmt_hash16(draft.body[0]), value="v_1")))
    (ws / "effects.log").write_text("one\n")  # statement 0's side effect happened before the kill


def _effects(ws: Path) -> list[str]:
    return (ws / "effects.log").read_text().split()


def _killed_then_resurrected(tmp_path: Path, resumable: bool) -> tuple[Path, Path]:
    """The interrupted session resurrected with --yes, SIGKILLed while statement 2's op runs (after
    statement 1's live cell is on disk), checked readable, then resurrected again to the end."""
    store, ws = tmp_path / "S", tmp_path / "ws"
    ws.mkdir()
    _killed_session(store, ws, resumable)
    (ws / "slow").write_text("")  # statement 2's first dispatch hangs: the kill comes there
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "core"), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", "from flux.cli import main; main()", "resurrect", "s_1", "--yes",
                             "--store", str(store), "--workspace", str(ws)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while _effects(ws) != ["one", "two", "three"]:
            assert proc.poll() is None, "resurrect exited before statement 2"
            assert time.monotonic() < deadline, "resurrect never reached statement 2"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    listed = CliRunner().invoke(main, ["sessions", "--store", str(store)])  # readable, and still interrupted
    assert listed.exit_code == 0 and "interrupted" in listed.output, listed.output
    (ws / "slow").unlink()
    res = CliRunner().invoke(main, ["resurrect", "s_1", "--yes", "--json", "--store", str(store), "--workspace", str(ws)])
    assert res.exit_code == 0, res.output
    return store, ws


@pytest.mark.parametrize("resumable", [False, True])
def test_a_killed_resurrect_loses_no_cell_and_reruns_only_the_op_in_flight(tmp_path: Path, resumable: bool) -> None:
    store, ws = _killed_then_resurrected(tmp_path, resumable)
    # statement 1's cell, recorded live by the killed resurrect, is served: `two` once; `three` was in flight
    assert _effects(ws) == ["one", "two", "three", "three", "four"]
    if not resumable:
        again = CliRunner().invoke(main, ["replay", "s_1", "--store", str(store)])
        assert again.exit_code == 0, again.output


def test_a_twice_resurrected_resumable_turn_replays(tmp_path: Path) -> None:
    """The second resurrect fast-forwards over statements 0-1 (the killed resurrect's skipped row and
    its live row) instead of re-running the plan from the top, so replay reads one execution and
    serves every cell once (qa6's finding; before, it diverged on the spent cells)."""
    store, _ws = _killed_then_resurrected(tmp_path, True)
    again = CliRunner().invoke(main, ["replay", "s_1", "--json", "--store", str(store)])
    assert again.exit_code == 0, again.output
    rep = json.loads(again.output.strip().splitlines()[-1])  # (the banner goes to stderr, mixed in here)
    assert rep["diverged"] is None and rep["cells_consumed"] == rep["cells_total"] == 4, rep  # one, two, three (the rerun), four
    with StoreReader(store) as r:
        rows = [e.body.event for e in r.events("s_1") if isinstance(e.body, Run)]
    resumes = [ev for ev in rows if isinstance(ev, PlanResumed)]
    assert [ev.skipped for ev in resumes] == [1, 2]  # each resurrect fast-forwarded what was done
