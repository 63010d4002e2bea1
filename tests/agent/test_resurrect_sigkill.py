"""Resurrect on stores left by real SIGKILLs of `flux run` subprocesses (spec §4.7, beyond flux):
no op that has a cell runs twice — counted as side effects in the workspace."""

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
from click.testing import CliRunner

from flux.cli import main
from tests.agent.fake_servers import Answer, FakeOpenAI, ToolCall
from tests.helpers import REPO

KEY = "sk-test-resurrect-0001"


def _bash(i: int, cmd: str) -> Answer:
    return Answer(tool_calls=[ToolCall("bash", json.dumps({"command": cmd}), id=f"call_{i}")])


def _cells(store: Path) -> int:
    db = store / "events.db"
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return con.execute("SELECT COUNT(*) FROM events WHERE kind='run' AND payload LIKE '%op_recorded%'").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def _flux_run(server: FakeOpenAI, store: Path, ws: Path) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "core"), os.environ.get("PYTHONPATH", "")]),
               OPENAI_API_KEY=KEY)
    return subprocess.Popen([sys.executable, "-c", "from flux.cli import main; main()", "run", "-m", "openai:fake-model",
                             "--base-url", server.base_url, "--store", str(store), "--workspace", str(ws), "--yes",
                             "do the three steps"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _kill_when(proc: subprocess.Popen, ready, what: str) -> None:
    deadline = time.monotonic() + 60
    try:
        while not ready():
            assert proc.poll() is None, f"flux run exited before {what}"
            assert time.monotonic() < deadline, f"flux run never reached {what}"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL


def _effects(ws: Path) -> list[str]:
    p = ws / "effects.log"
    return p.read_text().split() if p.exists() else []


def _resurrect(store: Path, ws: Path, *extra: str):
    return CliRunner().invoke(main, ["resurrect", "last", "--store", str(store), "--workspace", str(ws), *extra])


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    d.mkdir()
    return d


def test_killed_after_the_cell_the_op_is_served_not_repeated(tmp_path: Path, ws: Path) -> None:
    """Killed while the model thinks after op 2 recorded its cell: flux's rule would run op 2 again
    (no statement boundary in an adaptive turn); ours serves its cell. Every op ran exactly once."""
    store = tmp_path / "S"
    with FakeOpenAI(api_key=KEY) as server:
        server.script(_bash(1, "echo one >> effects.log"), _bash(2, "echo two >> effects.log"),
                      Answer(text="done", first_byte_delay=60))
        proc = _flux_run(server, store, ws)
        _kill_when(proc, lambda: _cells(store) == 2 and len(server.requests) >= 3, "the third model call")
    assert _effects(ws) == ["one", "two"]
    res = _resurrect(store, ws)
    assert res.exit_code == 0, res.output
    # one statement of the turn is complete (op 1's one-statement plan); op 2's plan recorded its cell
    # but no statement boundary — the turn is counted as fork --turn 1 --at 1 counts it (op 2 is 1)
    assert "interrupted after 1 statement(s)" in res.stderr
    assert "1 op(s) served from the cassette, 0 run live, 1 unanchored cell(s) served" in res.stderr
    assert _effects(ws) == ["one", "two"]  # nothing ran twice; no gate was needed (offline)
    again = CliRunner().invoke(main, ["sessions", "--store", str(store)])
    assert "interrupted" not in again.output


def test_killed_mid_dispatch_only_the_op_in_flight_runs_again(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "S"
    with FakeOpenAI(api_key=KEY) as server:
        (ws / "slow").write_text("")  # the first dispatch of op 2 hangs; its re-run does not
        server.script(_bash(1, "echo one >> effects.log"),
                      _bash(2, "echo two >> effects.log; if [ -e slow ]; then sleep 60; fi"), Answer(text="done"))
        proc = _flux_run(server, store, ws)
        _kill_when(proc, lambda: _effects(ws) == ["one", "two"], "the second op")
    # the gate: the in-flight op has no cell, so resurrect needs --yes (nothing written without it)
    refused = _resurrect(store, ws)
    assert refused.exit_code == 1 and "would run live (bash (exec))" in refused.stderr
    assert "nothing was written" in refused.stderr and _effects(ws) == ["one", "two"]
    (ws / "slow").unlink()
    res = _resurrect(store, ws, "--yes", "--json")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["ops_run_live"] == 1 and rep["ops_served_from_cassette"] == 0 and rep["outcome"] == "resurrected"
    eff = _effects(ws)
    assert eff.count("one") == 1  # it has a cell: exactly once
    assert eff.count("two") == 2  # in flight with no cell: at-least-once


def test_auto_resurrect_on_flux_run_session(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "S"
    with FakeOpenAI(api_key=KEY) as server:
        server.script(_bash(1, "echo one >> effects.log"), Answer(text="done", first_byte_delay=60))
        proc = _flux_run(server, store, ws)
        _kill_when(proc, lambda: _cells(store) == 1 and len(server.requests) >= 2, "the second model call")
    res = CliRunner().invoke(main, ["run", "-m", "mock", "--store", str(store), "--workspace", str(ws), "--session", "s_1",
                                    "--yes", "write a quick note"])
    assert res.exit_code == 0, res.output
    assert ("resurrect · session s_1 · turn 1 was interrupted after 0 statement(s) — finishing it offline "
            "(no model call)") in res.stderr
    assert "resurrect · resurrected · 0 statement(s) fast-forwarded, 1 op(s) served from the cassette, 0 run live" in res.stderr
    assert _effects(ws) == ["one"]
    shown = CliRunner().invoke(main, ["show", "s_1", "--store", str(store)])
    assert "needs manual recovery" not in shown.output


def test_auto_resurrect_off(tmp_path: Path, ws: Path, monkeypatch) -> None:
    store = tmp_path / "S"
    with FakeOpenAI(api_key=KEY) as server:
        server.script(_bash(1, "echo one >> effects.log"), Answer(text="done", first_byte_delay=60))
        proc = _flux_run(server, store, ws)
        _kill_when(proc, lambda: _cells(store) == 1 and len(server.requests) >= 2, "the second model call")
    monkeypatch.setenv("FLUX_AUTO_RESURRECT", "0")
    res = CliRunner().invoke(main, ["run", "-m", "mock", "--store", str(store), "--workspace", str(ws), "--session", "s_1",
                                    "--yes", "write a quick note"])
    assert res.exit_code == 0 and "resurrect ·" not in res.stderr
