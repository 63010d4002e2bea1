"""Durability by effect (docs/store-format.md): the recorder group-commits, yet a SIGKILL between two
dispatches loses no acknowledged cell of an op with an effect, and the op in flight is on disk. An
effectful op costs one commit: its cell rides with the commit made before the next dispatch (or
wait, or model call), never later."""

from __future__ import annotations

import os
import signal
import sqlite3
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

    store, ws, marker, blocker, between = sys.argv[1:6]

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
    calls += [{"name": "echo", "input": {"i": i}} for i in range(int(between))]
    calls += [{"name": "block", "input": {"target": "x"}}]
    prov = ScriptedProvider(responses=[{"tool_calls": calls}, {"text": "done"}])
    c = Client(prov, model="scripted", store=store, workspace=ws, ops=coding_ops(ws) + [echo, block], auto_approve=True)
    c.session().send_sync("go")
''')


def _run_and_kill(tmp_path, ws, blocker: str, between: int = 3):
    s, marker = tmp_path / "S", tmp_path / "marker"
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    env = dict(os.environ, PYTHONPATH=str(REPO / "core"))
    proc = subprocess.Popen([sys.executable, str(script), str(s), str(ws), str(marker), blocker, str(between)], env=env)
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


def test_sigkill_during_the_next_effectful_dispatch_keeps_the_previous_effectful_cell(tmp_path, ws):
    # write, then at once another effectful op: the write's cell rode with block's pre-dispatch commit
    d = _run_and_kill(tmp_path, ws, "exec", between=0)
    assert [c.op for c in d.cells] == ["write"]
    last = d.events[-1]
    assert last.kind == "run" and last.body.event.TAG == "step_started" and last.body.event.op == "block"


def _commits(client) -> list[int]:
    seen: list[int] = []
    client.writer.conn.set_trace_callback(lambda sql: seen.append(1) if sql == "COMMIT" else None)
    return seen


def test_an_effectful_op_costs_one_commit(make_client, tmp_path):
    from flux.agent.ops import op
    from flux.agent.providers.scripted import ScriptedProvider

    @op(effect="write")
    def touch(i: int) -> str:
        """Pretend to write."""
        return str(i)

    def run(n: int) -> int:
        prov = ScriptedProvider(responses=[{"tool_calls": [{"name": "touch", "input": {"i": i}} for i in range(n)]},
                                           {"text": "done"}])
        c = make_client(prov, model="scripted", ops=[touch], store=tmp_path / f"s{n}", auto_approve=True)
        seen = _commits(c)
        assert c.session().send_sync("go").outcome == "ok"
        return len(seen)

    assert run(40) - run(10) == 30  # the turn's own commits are the same; each op adds exactly one


def test_an_owed_cell_is_on_disk_before_a_confirm_prompt(make_client, store, ws):
    from flux.agent.approver import CallbackApprover

    seen_cells: list[list[str]] = []

    def approve(req):
        if req.kind == "confirm":
            with StoreReader(store) as r:
                seen_cells.append([c.op for c in load_session(r, "last").cells])
        return True

    c = make_client("mock", approver=CallbackApprover(approve))
    src = ('flow\n  a = write({"path":"a.txt","content":"1"})\n  confirm "go on?"\n'
           '    b = write({"path":"b.txt","content":"2"})\n')
    out = c.session().run_flow_sync(src)
    assert out.outcome == "completed", out.answer
    assert seen_cells == [["write"]]  # the first write's cell was committed before the human was asked


def test_an_owed_cell_that_cannot_be_committed_fails_its_op_loudly(make_client, store, ws, monkeypatch):
    from flux.store.events import OpRecorded, Run
    from flux.store.payload_decode import decode_payload
    from flux.store.store import StoreWriter

    real = StoreWriter._write_pending
    failed = []

    def body(kind, b):  # the recorder buffers its hot rows as payload text
        return decode_payload(kind, b) if isinstance(b, str) else b

    def write_pending(self):  # the disk is full once: at the commit that carries the first write's cell
        if not failed and any(isinstance(body(k, b), Run) and isinstance(body(k, b).event, OpRecorded)
                              and body(k, b).event.op == "write" for _, k, b, _, _ in self._pending):
            failed.append(self._pending)
            self._pending = []
            raise sqlite3.OperationalError("database or disk is full")
        return real(self)

    monkeypatch.setattr(StoreWriter, "_write_pending", write_pending)
    from tests.agent.test_agent_loop import scripted

    prov = scripted({"tool_calls": [{"name": "write", "input": {"path": "out.txt", "content": "hi"}},
                                    {"name": "write", "input": {"path": "never.txt", "content": "no"}}]},
                    {"text": "never reached"})
    c = make_client(prov, model="scripted", auto_approve=True)
    out = c.session().send_sync("write it")
    assert out.outcome == "error" and out.model_calls == 1
    assert out.error.startswith("op `write` ran but its cassette cell could not be recorded (OperationalError: database or disk is full)")
    assert (ws / "out.txt").read_text() == "hi" and not (ws / "never.txt").exists()  # the next op never dispatched
    assert out.cells == [] and len(failed) == 1
    with StoreReader(store) as r:
        d = load_session(r, "last")
    assert d.cells == [] and d.turns[0].outcome == "error"


def test_in_a_flow_with_branches_an_effectful_cell_is_committed_while_the_other_branch_runs(make_client, store, ws):
    from flux.agent.builtin_ops import coding_ops
    from flux.agent.loop import runs_one_branch
    from flux.agent.ops import op
    from flux.lang.parser import parse

    @op(effect="read")
    def watch(path: str) -> str:
        """Wait (up to 10 s) until the store holds a cell of `write`."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with StoreReader(store) as r:
                if any(c.op == "write" for c in load_session(r, "last").cells):
                    return "seen"
            time.sleep(0.02)
        return "not seen"

    src = ('flow\n  parallel\n    branch a\n      w = write({"path":"a.txt","content":"1"})\n'
           '    branch b\n      seen = watch({"path":"a.txt"})\n  return $seen\n')
    assert not runs_one_branch(parse(src))
    assert runs_one_branch(parse('flow\n  a = write({"path":"a.txt","content":"1"})\n'))
    c = make_client("mock", auto_approve=True, ops=coding_ops(ws) + [watch])
    out = c.session().run_flow_sync(src)
    assert out.outcome == "completed", out.answer
    with StoreReader(store) as r:
        d = load_session(r, "last")
    [watched] = [cell for cell in d.cells if cell.op == "watch"]
    assert watched.rec.content == "seen"  # the write's cell reached the disk while `watch` still ran
