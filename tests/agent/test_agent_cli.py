"""`flux run` and `flux flow run` as a user runs them, compared against the real flux fixture, plus
the provider registry's errors and a process killed mid-turn."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from click.testing import CliRunner

from flux.cli import agent as _agent  # noqa: F401  (registers `run` and `flow` until the lead adds the import)
from flux.cli import main
from flux.agent.registry import UnknownModel
from flux.errors import FluxError
from flux.lang.parser import parse
from flux.model.session import load_session
from flux.store.store import StoreReader
from tests.helpers import REPO, fixture_dir


def run(*args, env=None, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env or {}, input=input)


def test_flux_run_mock_matches_the_real_fixture_shape(tmp_path, ws):
    s = tmp_path / "S"
    res = run("run", "-m", "mock", "--store", s, "--workspace", ws, "--yes", "write a quick note")
    assert res.exit_code == 0, res.output
    assert "Finished." in res.stdout
    with StoreReader(s) as r, StoreReader(fixture_dir()) as fr:
        ours, theirs = load_session(r, "last"), load_session(fr, "last")
    [ot], [tt] = ours.turns, theirs.turns
    assert (ot.user_input, ot.outcome, ot.answer) == (tt.user_input, tt.outcome, tt.answer) == \
        ("write a quick note", "ok", "Finished.")
    # the fixture's one accepted plan: an `append` host-derived one-statement plan, phase execute
    [tp] = tt.accepted_plans
    ours_exec = [p for p in ot.accepted_plans if p.phase == "execute"]
    assert len(ours_exec) == 1 and tp.phase == "execute"
    od, td = parse(ours_exec[0].plan_source), parse(tp.plan_source)
    assert len(od.body) == len(td.body) == 1
    assert od.body[0].value.op == td.body[0].value.op == "append"
    assert od.body[0].value.args == td.body[0].value.args
    assert od.body[0].name.startswith("adaptive_batch_") and od.body[0].name.endswith("_action_1")
    # …and its cell: same op, same input hash, same step id, same content
    tc = theirs.cells[0].rec
    oc = [c.rec for c in ours.cells if c.rec.op == "append"][0]
    for f in ("step", "op", "input_hash", "input_view", "content", "is_error", "denied", "redacted", "truncated"):
        assert getattr(oc, f) == getattr(tc, f), f
    assert (ws / "flux-mock.txt").read_text() == "created by flux mock\n"
    # same event layout: message, turn_started, plans+run rows, flow_returned, call_usage, turn_ended, observations, message
    def layout(d):
        out = []
        for e in d.events:
            k = e.kind if e.kind != "run" else ("flow_returned" if e.body.event.TAG == "flow_returned" else "run")
            if not out or out[-1] != k:
                out.append(k)
        return out
    assert layout(theirs)[:3] == layout(ours)[:3] == ["session_started", "message", "turn_started"]
    assert layout(ours)[-5:] == layout(theirs)[-5:] == ["flow_returned", "call_usage", "turn_ended", "observation", "message"]
    # replay is faithful
    res = run("replay", "last", "--store", s, "--json")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["diverged"] is None and rep["cells_consumed"] == rep["cells_total"] == 2


def test_flux_run_json_continue_and_session(tmp_path, ws):
    s = tmp_path / "S"
    res = run("run", "--store", s, "--workspace", ws, "--yes", "--json", "write a quick note")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["outcome"] == "ok" and out["session"] == "s_1" and out["model"] == "mock" and out["cells"] == 2
    assert out["cost_usd"] == 0.0 and out["usage"]["input_tokens"] > 0
    res = run("run", "--store", s, "--workspace", ws, "--yes", "--json", "--continue", "again")
    assert json.loads(res.stdout)["session"] == "s_1"
    res = run("run", "--store", s, "--workspace", ws, "--yes", "--json", "--session", "s_1", "third")
    assert json.loads(res.stdout)["session"] == "s_1"
    res = run("sessions", "--store", s, "--json")
    [row] = json.loads(res.stdout)["sessions"]
    assert row["turns"] == 3 and row["interrupted"] is None


def test_flux_run_human_output_streams_tools_and_usage_line(tmp_path, ws):
    res = run("run", "--store", tmp_path / "S", "--workspace", ws, "write a quick note")
    assert res.exit_code == 0
    assert "▸ glob" in res.stderr and "denied" in res.stderr
    assert "s_1 · turn 1 · ok · 3 model call(s), 2 tool call(s)" in res.stderr and "$0.0000" in res.stderr


def test_flux_run_errors_are_one_line(tmp_path, ws):
    s = tmp_path / "S"
    res = run("run", "-m", "gpt-9", "--store", s, "--workspace", ws, "hi")
    assert res.exit_code == 1 and res.stderr.startswith("error: unknown model 'gpt-9'") and "openai:gpt-9" in res.stderr
    res = run("run", "-m", "warp:drive", "--store", s, "--workspace", ws, "hi")
    assert res.exit_code == 1 and "known provider (mock, scripted:PATH, null, openai:MODEL" in res.stderr
    res = run("run", "-m", "openai:gpt-4.1-mini", "--store", s, "--workspace", ws, "hi",
              env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""})
    assert res.exit_code == 1 and "missing key: set OPENAI_API_KEY" in res.stderr
    res = run("run", "-m", "anthropic:claude-sonnet-4-5", "--store", s, "--workspace", ws, "hi",
              env={"ANTHROPIC_API_KEY": "", "ANTHROPIC_BASE_URL": ""})
    assert res.exit_code == 1 and "ANTHROPIC_API_KEY" in res.stderr
    res = run("run", "--store", s, "--workspace", ws, "--yes", "--policy", tmp_path / "p.toml", "hi")
    assert res.exit_code == 1 and "either --yes or --policy" in res.stderr
    res = run("run", "--store", s, "--workspace", tmp_path / "nope", "hi")
    assert res.exit_code == 1 and "is not a directory" in res.stderr
    res = run("run", "--store", s, "--workspace", ws, "--session", "s_42", "hi")
    assert res.exit_code == 1 and "no session 's_42'" in res.stderr
    res = run("run", "-m", "null", "--store", s, "--workspace", ws, "hi")
    assert res.exit_code == 1 and "turn ended error: the null provider refuses every model call" in res.stderr
    res = run("run", "-m", "scripted:" + str(tmp_path / "missing.jsonl"), "--store", s, "--workspace", ws, "hi")
    assert res.exit_code == 1 and "cannot read the script" in res.stderr


def test_missing_sdk_gives_the_install_hint(monkeypatch):
    import flux.agent.registry as reg

    real = reg.importlib.import_module

    def fake(name, *a):
        if name.endswith("openai_provider"):
            raise ModuleNotFoundError("No module named 'openai'", name="openai")
        return real(name, *a)

    monkeypatch.setattr(reg.importlib, "import_module", fake)
    with pytest.raises(FluxError, match=r"pip install 'flux-tui\[openai\]'"):
        reg.resolve_model("openai:gpt-4.1-mini", env={"OPENAI_API_KEY": "k"})


def test_registry_resolves_names():
    from flux.agent.registry import resolve_model

    assert resolve_model(None).name == "mock"
    r = resolve_model("mock")
    assert (r.provider.name, r.request_model, r.own_retries) == ("mock", "mock", False)
    assert resolve_model("null").provider.name == "null"
    with pytest.raises(UnknownModel, match="needs a script file"):
        resolve_model("scripted")


def test_scripted_provider_from_a_jsonl_file_via_cli(tmp_path, ws):
    script = tmp_path / "turns.jsonl"
    script.write_text("\n".join(json.dumps(x) for x in [
        {"tool_calls": [{"name": "read", "input": {"path": "README.md"}}], "usage": {"input_tokens": 10, "output_tokens": 3}},
        {"tool_calls": [{"name": "write", "input": {"path": "../escape.txt", "content": "x"}}]},
        {"text": "Read it; the write was refused.", "usage": {"input_tokens": 20, "output_tokens": 4}},
    ]) + "\n")
    s = tmp_path / "S"
    res = run("run", "-m", f"scripted:{script}", "--store", s, "--workspace", ws, "--yes", "--json", "read the readme")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["tool_calls"] == [{"id": "toolu_s001_001", "name": "read", "status": "ok"},
                                 {"id": "toolu_s002_001", "name": "write", "status": "error"}]
    assert not (tmp_path / "escape.txt").exists()
    with StoreReader(s) as r:
        d = load_session(r, "last")
    assert "escapes the workspace" in d.cells[1].rec.content
    assert json.loads(run("replay", "last", "--store", s, "--json").stdout)["diverged"] is None


def test_flow_run_cli_records_a_replayable_turn(tmp_path, ws):
    f = tmp_path / "notes.flux"
    f.write_text('flow notes\n  readme = read({"path":"README.md"})\n  n = append({"path":"NOTES.md","content":"seen {readme}"})\n')
    s = tmp_path / "S"
    res = run("flow", "run", f, "--store", s, "--workspace", ws, "--yes")
    assert res.exit_code == 0, res.output
    assert "Flow completed (2 step(s))." in res.stdout
    # a flow never calls a model: its turn is numbered like any other and costs nothing, known
    assert " · turn 1 · completed · 0 model call(s), 2 tool call(s) · 0 in / 0 out tokens · $0.0000" in res.stderr
    assert (ws / "NOTES.md").read_text() == "seen # demo project\n"
    res = run("flow", "run", f, "--store", s, "--workspace", ws, "--json", "--continue")
    out = json.loads(res.stdout)
    assert res.exit_code == 1 and out["outcome"] == "halted"  # deny-all halts at the first read
    assert out["turn"] == 2 and out["cost_usd"] == 0.0
    rep = json.loads(run("replay", "last", "--store", s, "--json").stdout)
    assert rep["diverged"] is None and rep["cells_consumed"] == rep["cells_total"] == 3
    bad = tmp_path / "bad.flux"
    bad.write_text("flow\n  x = (\n")
    res = run("flow", "run", bad, "--store", s, "--workspace", ws)
    assert res.exit_code == 1 and "does not parse" in res.stderr


KILLED = textwrap.dedent('''
    import pathlib, sys, time
    from flux.agent.builtin_ops import coding_ops
    from flux.agent.client import Client
    from flux.agent.ops import op
    from flux.agent.providers.scripted import ScriptedProvider

    store, ws, marker = sys.argv[1:4]

    @op(effect="exec")
    def deploy(target: str) -> str:
        """Deploy (slowly)."""
        pathlib.Path(marker).write_text("dispatching")
        time.sleep(60)
        return "deployed"

    prov = ScriptedProvider(responses=[
        {"tool_calls": [{"name": "read", "input": {"path": "README.md"}}]},
        {"tool_calls": [{"name": "deploy", "input": {"target": "prod"}}]},
        {"text": "deployed"},
    ])
    c = Client(prov, model="scripted", store=store, workspace=ws, ops=coding_ops(ws) + [deploy], auto_approve=True)
    c.session().send_sync("deploy it")
''')


def test_sigkill_mid_turn_leaves_an_interrupted_turn(tmp_path, ws):
    s, marker = tmp_path / "S", tmp_path / "marker"
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    env = dict(os.environ, PYTHONPATH=str(REPO / "core"))
    proc = subprocess.Popen([sys.executable, str(script), str(s), str(ws), str(marker)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, "the agent process exited before the kill point"
            assert time.monotonic() < deadline, "the agent never reached the kill point"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL
    res = run("sessions", "--store", s, "--json")
    assert res.exit_code == 0, res.output
    [row] = json.loads(res.stdout)["sessions"]
    assert row["interrupted"] is not None
    human = run("sessions", "--store", s)
    assert "⚠ interrupted" in human.stdout
    with StoreReader(s) as r:
        d = load_session(r, "last")
    [turn] = d.turns
    assert not turn.ended and [p.phase for p in turn.accepted_plans] == ["gather", "execute"]
    assert [c.op for c in d.cells] == ["read"]  # the killed dispatch never got its cell
    assert d.events[-1].kind == "run" and d.events[-1].body.event.TAG == "step_started"
