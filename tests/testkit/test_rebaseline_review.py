"""Reviewed re-baselines: a re-record never silently bakes in a broken run. A run the approver
denied wholesale, that errored or that reached no model is refused with the reason (the golden
kept byte for byte) unless the user asks for exactly that (``--allow-error``); an accepted
re-record reports what it overwrote, never an empty diff."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flux.agent.client import Client
from flux.agent.providers.scripted import ScriptedProvider
from flux.testkit import Scenario, ScenarioError
from flux.testkit.runner import offline_client

from tests.helpers import tree_digest
from tests.testkit.corpus import record_clean

VENV_BIN = Path(sys.executable).parent
ANSWERS = [{"tool_calls": [{"name": "read", "input": {"path": "README.md"}}]},
           {"tool_calls": [{"name": "append", "input": {"path": "note.txt", "content": "ok\n"}}]},
           {"text": "wrote note.txt"}]


@pytest.fixture
def golden(tmp_path, offline):
    return record_clean(tmp_path / "sc" / "clean")


def _client(tmp_path, answers, **kw):
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    (ws / "README.md").write_text("# demo\nconfig is wrong\n")
    return Client(ScriptedProvider(responses=answers), workspace=ws, env_secrets=False, **kw)


def test_a_re_record_the_approver_denied_is_refused_and_the_golden_kept(golden, tmp_path, monkeypatch):
    before = tree_digest(golden)
    monkeypatch.setenv("FLUX_GOLDEN", "update")
    with _client(tmp_path, ANSWERS) as c, Scenario.load(golden) as sc:  # the default approver denies all
        with pytest.raises(ScenarioError) as e:
            sc.check(c)
    assert str(e.value).startswith("the approver denied every tool call of the recorded turn (2: read, append) — "
                                   "nothing was written (the old golden is kept)")
    assert "--allow-error" in str(e.value)
    assert tree_digest(golden) == before


def test_a_re_record_that_errored_or_reached_no_model_is_refused(golden, tmp_path, monkeypatch):
    before = tree_digest(golden)
    monkeypatch.setenv("FLUX_GOLDEN", "update")
    with _client(tmp_path, [ANSWERS[0], {"error": "invalid api key", "status": 401}], auto_approve=True) as c, \
            Scenario.load(golden) as sc:
        with pytest.raises(ScenarioError, match=r"the recorded turn ended in error \(.*invalid api key.*\) — nothing "
                                                r"was written \(the old golden is kept\)"):
            sc.check(c)
    with Scenario.load(golden) as sc:
        off = offline_client(sc)
        try:
            with pytest.raises(ScenarioError, match=r"the recorded turn reached no model \(no model call was answered\) \(.*offline"):
                sc.check(off, update=True)
        finally:
            off.close()
    assert tree_digest(golden) == before


def test_an_accepted_re_record_reports_what_it_overwrote(golden, tmp_path, monkeypatch):
    monkeypatch.setenv("FLUX_GOLDEN", "update")
    changed = [ANSWERS[0], {"tool_calls": [{"name": "append", "input": {"path": "other.txt", "content": "ok\n"}}]},
               ANSWERS[2]]
    with _client(tmp_path, changed, auto_approve=True) as c, Scenario.load(golden) as sc:
        rep = sc.check(c)
        (rb,) = rep.rebaselined
        assert sc.rebaselined == [rb]
    assert "-" in rb.diff and "note.txt" in rb.diff and "other.txt" in rb.diff
    with _client(tmp_path, changed, auto_approve=True) as c, Scenario.load(golden) as sc:
        (rb,) = sc.check(c).rebaselined
    assert rb.diff == "(the re-recorded run is the same as the golden)"


def test_flux_record_update_refuses_a_denied_run_unless_allow_error(golden, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps(ANSWERS))
    before = tree_digest(golden)
    env = {k: v for k, v in os.environ.items() if k != "FLUX_GOLDEN"}
    cmd = [str(VENV_BIN / "flux"), "record", "clean", "read the readme and write a note", "--dir",
           str(golden.parent), "-m", f"scripted:{script}", "--update"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert out.returncode == 1
    assert out.stderr.startswith("error: the approver denied every tool call of the recorded turn (2: read, append)")
    assert len(out.stderr.strip().splitlines()) == 1
    assert tree_digest(golden) == before
    out = subprocess.run(cmd + ["--allow-error"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert tree_digest(golden) != before
