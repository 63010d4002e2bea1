"""Durability by effect (docs/store-format.md): the recorder group-commits, yet a SIGKILL between two
dispatches loses no acknowledged cell of an op with an effect, and the op in flight is on disk."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from flux.model.session import load_session
from flux.store.store import StoreReader
from tests.helpers import REPO

KILLED = textwrap.dedent('''
    import pathlib, sys, time
    from flux.agent.builtin_ops import coding_ops
    from flux.agent.client import Client
    from flux.agent.ops import op
    from flux.agent.providers.scripted import ScriptedProvider

    store, ws, marker, blocker = sys.argv[1:5]

    @op(effect="pure")
    def echo(i: int) -> str:
        """Echo."""
        return str(i)

    @op(effect=blocker)
    def block(target: str) -> str:
        """Block until killed."""
        pathlib.Path(marker).write_text("dispatching")
        time.sleep(60)
        return "never"

    calls = [{"name": "write", "input": {"path": "a.txt", "content": "A"}}]
    calls += [{"name": "echo", "input": {"i": i}} for i in range(3)]
    calls += [{"name": "block", "input": {"target": "x"}}]
    prov = ScriptedProvider(responses=[{"tool_calls": calls}, {"text": "done"}])
    c = Client(prov, model="scripted", store=store, workspace=ws, ops=coding_ops(ws) + [echo, block], auto_approve=True)
    c.session().send_sync("go")
''')


def _run_and_kill(tmp_path, ws, blocker: str):
    s, marker = tmp_path / "S", tmp_path / "marker"
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    env = dict(os.environ, PYTHONPATH=str(REPO / "core"))
    proc = subprocess.Popen([sys.executable, str(script), str(s), str(ws), str(marker), blocker], env=env)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():  # wait for the condition (the last op is dispatching), not for time
            assert proc.poll() is None, "the agent process exited before the kill point"
            assert time.monotonic() < deadline, "the agent never reached the kill point"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    with StoreReader(s) as r:
        return load_session(r, "last")


def test_sigkill_during_an_effectful_dispatch_keeps_every_earlier_cell_and_the_op_in_flight(tmp_path, ws):
    d = _run_and_kill(tmp_path, ws, "exec")
    assert (ws / "a.txt").read_text() == "A"
    # the write's cell was acknowledged before the pure ops ran; the pure ones were flushed before `block`
    assert [c.op for c in d.cells] == ["write", "echo", "echo", "echo"]
    [turn] = d.turns
    assert not turn.ended and turn.accepted_plans[-1].plan_source.find("block(") > 0  # its plan is on disk
    last = d.events[-1]
    assert last.kind == "run" and last.body.event.TAG == "step_started" and last.body.event.op == "block"


@pytest.mark.parametrize("blocker", ["pure", "read"])
def test_sigkill_during_a_rerunnable_op_keeps_the_acknowledged_effectful_cell(tmp_path, ws, blocker):
    d = _run_and_kill(tmp_path, ws, blocker)
    cells = [c.op for c in d.cells]
    # the write's cell is on disk; buffered rows of re-runnable ops may or may not be (by contract)
    assert cells[:1] == ["write"] and set(cells[1:]) <= {"echo"}
    assert (ws / "a.txt").read_text() == "A"
    assert not d.turns[0].ended
