"""The toolbox travels with the scenario: scenario.toml names the ops a scenario was recorded with
(``ops = "module:attr"``), ``flux test`` imports them (``--ops`` overrides), and an import that
fails is that scenario's one-line failure. Without it a scenario recorded with a user's own ops
was always red (``tools[0].description: 'Charge a card.' → 'Append text…'``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flux.agent.client import Client
from flux.agent.providers.scripted import ScriptedProvider
from flux.testkit import Scenario, ScenarioError
from flux.testkit.verdict import run_all

from tests.testkit.corpus import record_custom_ops, write_custom_ops

VENV_BIN = Path(sys.executable).parent


@pytest.fixture
def tools_dir(tmp_path, monkeypatch, offline):
    d = write_custom_ops(tmp_path / "tools")
    monkeypatch.syspath_prepend(str(d))
    return d


def test_the_recorded_ops_are_named_in_scenario_toml_and_flux_test_uses_them(tools_dir, tmp_path):
    sc_dir = record_custom_ops(tmp_path / "sc" / "charge")
    assert 'ops = "payments_ops:OPS"' in (sc_dir / "scenario.toml").read_text()
    results, _ = run_all([tmp_path / "sc"])
    assert [(r.name, r.ok) for r in results] == [("charge", True)], results[0].detail
    assert results[0].check == "✓ faithful"
    env = {**os.environ, "PYTHONPATH": str(tools_dir)}
    out = subprocess.run([str(VENV_BIN / "flux"), "test", "--dir", str(tmp_path / "sc")], capture_output=True,
                         text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    # the module is found under the current directory too, as `python -m` would find it
    out = subprocess.run([str(VENV_BIN / "flux"), "test", "--dir", str(tmp_path / "sc")], capture_output=True,
                         text=True, cwd=tools_dir, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert out.returncode == 0, out.stdout + out.stderr


def test_ops_that_cannot_be_imported_are_the_scenarios_one_line_failure(tools_dir, tmp_path):
    sc_dir = record_custom_ops(tmp_path / "sc" / "charge")
    toml = sc_dir / "scenario.toml"
    good = toml.read_text()
    toml.write_text(good.replace("payments_ops:OPS", "payments_ops:NOPE"))
    (res,), _ = run_all([tmp_path / "sc"])
    assert not res.ok and res.error == "ops 'payments_ops:NOPE': payments_ops has no attribute NOPE"
    toml.write_text(good.replace("payments_ops:OPS", "no_such_module:OPS"))
    (res,), _ = run_all([tmp_path / "sc"])
    assert not res.ok and res.error.startswith("ops 'no_such_module:OPS': cannot import no_such_module "
                                               "(ModuleNotFoundError: No module named 'no_such_module')")
    toml.write_text(good.replace('"payments_ops:OPS"', '"not a ref"'))
    (res,), _ = run_all([tmp_path / "sc"])
    assert not res.ok and "`ops` must name the recorded ops as \"module:attr\"" in res.error


def test_ops_override_re_drives_with_other_ops(tools_dir, tmp_path):
    record_custom_ops(tmp_path / "sc" / "charge")
    (res,), _ = run_all([tmp_path / "sc"], ops="payments_ops:RENAMED")
    assert not res.ok
    assert "Charge a card." in res.first_divergence and "Charge a card, twice." in res.first_divergence
    out = subprocess.run([str(VENV_BIN / "flux"), "test", "--dir", str(tmp_path / "sc"), "--ops", "bad ref", "--json"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tools_dir)})
    assert out.returncode == 1 and out.stderr.startswith("error: --ops 'bad ref': name the ops as module:attr")
    out = subprocess.run([str(VENV_BIN / "flux"), "test", "--dir", str(tmp_path / "sc"), "--ops", "payments_ops:OPS",
                          "--json"], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tools_dir)})
    assert out.returncode == 0 and json.loads(out.stdout)["ok"]


def test_record_refuses_ops_that_nothing_names(tools_dir, tmp_path):
    import payments_ops

    ws = tmp_path / "ws"
    ws.mkdir()
    with Client(ScriptedProvider(responses=[{"text": "hi"}]), workspace=ws, ops=payments_ops.OPS,
                auto_approve=True, env_secrets=False) as c:
        with pytest.raises(ScenarioError, match=r"this client's ops \(charge\) are not the built-in coding ops, and "
                                                r"nothing names them"):
            Scenario.record(c, "charge it", tmp_path / "sc" / "x")
        assert not (tmp_path / "sc" / "x" / "scenario.toml").exists()
        with pytest.raises(ScenarioError, match="'payments_ops:RENAMED' are not the ops this client records with"):
            Scenario.record(c, "charge it", tmp_path / "sc" / "x", ops="payments_ops:RENAMED")
        Scenario.record(c, "charge it", tmp_path / "sc" / "x", ops="payments_ops:OPS").close()
    assert 'ops = "payments_ops:OPS"' in (tmp_path / "sc" / "x" / "scenario.toml").read_text()


def test_flux_record_takes_ops(tools_dir, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "charge", "input": {"card": "4242", "amount": 5}}]},
                                  {"text": "charged"}]))
    env = {**os.environ, "PYTHONPATH": str(tools_dir)}
    out = subprocess.run([str(VENV_BIN / "flux"), "record", "pay", "charge the card", "--dir", str(tmp_path / "sc"),
                          "-m", f"scripted:{script}", "--yes", "--ops", "payments_ops:OPS"], capture_output=True,
                         text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert 'ops = "payments_ops:OPS"' in (tmp_path / "sc" / "pay" / "scenario.toml").read_text()
    out = subprocess.run([str(VENV_BIN / "flux"), "test", "--dir", str(tmp_path / "sc")], capture_output=True,
                         text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
