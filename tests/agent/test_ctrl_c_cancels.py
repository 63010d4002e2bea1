"""Ctrl-C cancels `flux run` / `flux flow run` for real: a real SIGINT, delivered to a real child's
process group as a terminal delivers it, while a `bash` op sleeps. Counted after the signal: the
command and its children are gone, nothing further ran (no second model call, no `write`), the turn
is stored `cancelled`, the exit status is 130 and the last line says what was recorded. The same
runs without the signal do every step — so the counters do count."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import REPO

_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "core"), os.environ.get("PYTHONPATH", "")]),
            NO_COLOR="1")


def _command(sleep_s: float) -> str:
    # the sleep is a grandchild: killing bash alone would leave it running
    return f"echo started >> fx.log; sleep {sleep_s} & echo $! > sleep.pid; wait; echo slept >> fx.log"


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")  # a zombie has finished


def _start(args: list[str], ws: Path) -> subprocess.Popen:
    # its own session and process group, like a job a terminal runs in the foreground
    return subprocess.Popen([sys.executable, "-c", "from flux.cli import main; main()", *args], cwd=ws, env=_ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def _effects(ws: Path) -> list[str]:
    p = ws / "fx.log"
    return p.read_text().split() if p.exists() else []


def _turns(store: Path) -> list[tuple]:
    con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True, timeout=5)
    try:
        return con.execute("SELECT json_extract(payload, '$.data.outcome') FROM events WHERE kind = 'turn_ended'"
                           " ORDER BY global_seq").fetchall()
    finally:
        con.close()


def _interrupt_when_started(proc: subprocess.Popen, ws: Path) -> tuple[str, str]:
    deadline = time.monotonic() + 60
    while not (ws / "sleep.pid").exists() or not (ws / "sleep.pid").read_text().strip():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the bash op never started"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C at a terminal does: the whole foreground group
    try:
        return proc.communicate(timeout=20)  # the sleep is 30 s: an exit this early means it was stopped
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _script(tmp: Path, sleep_s: float) -> Path:
    p = tmp / "s2.json"
    p.write_text(json.dumps([{"tool_calls": [{"name": "bash", "input": {"command": _command(sleep_s)}}]},
                             {"tool_calls": [{"name": "write", "input": {"path": "after.txt", "content": "x"}}]},
                             {"text": "done"}]))
    return p


def _flow(tmp: Path, sleep_s: float) -> Path:
    p = tmp / "f.flux"
    p.write_text("flow f\n  a = bash(" + json.dumps({"command": _command(sleep_s)}) + ")\n"
                 '  b = write({"path":"after.txt","content":"x"})\n')
    return p


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    d.mkdir()
    return d


def _args(kind: str, tmp: Path, ws: Path, sleep_s: float) -> list[str]:
    store = ["--store", str(tmp / "st"), "--workspace", str(ws), "--yes"]
    if kind == "run":
        return ["run", "-m", f"scripted:{_script(tmp, sleep_s)}", *store, "go"]
    return ["flow", "run", str(_flow(tmp, sleep_s)), *store]


@pytest.mark.parametrize("kind", ["run", "flow"])
def test_sigint_stops_the_running_op_and_nothing_further_runs(tmp_path: Path, ws: Path, kind: str):
    proc = _start(_args(kind, tmp_path, ws, 30), ws)
    out, err = _interrupt_when_started(proc, ws)
    assert proc.returncode == 130, err
    sleep_pid = int((ws / "sleep.pid").read_text())
    deadline = time.monotonic() + 5  # SIGKILL was sent; a loaded machine may take a moment to schedule the death
    while _alive(sleep_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(sleep_pid), "the op's command outlived the cancel"  # it sleeps 30 s if not killed
    time.sleep(0.3)
    assert _effects(ws) == ["started"]  # the command stopped mid-way, nothing after the signal
    assert not (ws / "after.txt").exists()  # the next step never ran
    assert _turns(tmp_path / "st") == [("cancelled",)]
    assert err.strip().splitlines()[-1] == "cancelled — the turn is recorded as `cancelled`", err
    assert "Traceback" not in err


@pytest.mark.parametrize("kind", ["run", "flow"])
def test_without_the_signal_every_step_runs(tmp_path: Path, ws: Path, kind: str):
    proc = _start(_args(kind, tmp_path, ws, 0.1), ws)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert _effects(ws) == ["started", "slept"] and (ws / "after.txt").read_text() == "x"
    assert _turns(tmp_path / "st") == [("ok" if kind == "run" else "completed",)]


def test_a_cancel_before_the_op_stops_it_at_dispatch(tmp_path: Path):
    """In-process: a cancel requested while a turn runs is honoured at the next step — the op never
    dispatches, and the turn is recorded `cancelled`."""
    from flux.agent import Client
    from flux.agent.cancel import clear_cancel, request_cancel
    from flux.agent.ops import op
    from flux.agent.providers.scripted import ScriptedProvider

    ran: list[str] = []

    @op(effect="write", name="first")
    def first() -> str:
        """First step: asks for a cancel (as a Ctrl-C during it would)."""
        ran.append("first")
        request_cancel()
        return "ok"

    @op(effect="write", name="second")
    def second() -> str:
        """Second step."""
        ran.append("second")
        return "ok"

    prov = ScriptedProvider(responses=[{"tool_calls": [{"name": "first", "input": {}}]},
                                       {"tool_calls": [{"name": "second", "input": {}}]}, {"text": "done"}])
    try:
        with Client(prov, store=tmp_path / "st", ops=[first, second], auto_approve=True) as c:
            out = c.session().send_sync("go")
    finally:
        clear_cancel()
    assert ran == ["first"] and out.outcome == "cancelled" and out.model_calls == 1


def test_a_sigint_while_a_command_starts_still_kills_it(tmp_path: Path):
    """The race a loaded machine hits: Ctrl-C after the command was started but before it was
    registered. The handler must not unwind the start (the command would outlive the cancel): the
    command is killed as soon as it is registered, and the cancel stops the turn at its next step."""
    from flux.agent.cancel import cancel_requested, raise_if_cancelled, sigint_cancels, tracked

    def start() -> subprocess.Popen:
        proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
        os.kill(os.getpid(), signal.SIGINT)  # delivered to the main thread right here, mid-start
        return proc

    with sigint_cancels():
        with tracked(start) as proc:
            assert proc.wait(10) == -signal.SIGKILL
        assert cancel_requested()
        with pytest.raises(KeyboardInterrupt):
            raise_if_cancelled()
    assert not cancel_requested()  # the handler is gone and the flag clear after the block
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
