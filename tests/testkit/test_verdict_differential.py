"""One verdict, three front ends: ``flux test --json`` (a subprocess) and pytest with the plugin
(a subprocess, JUnit XML) run over one corpus of scenario directories built here, and must give
the same verdict on every entry — green or red, and the same one-line reason. The app's Tests
screen runs the same function (tests/testkit/test_tests_screen.py).

The corpus: clean, drifted (a model answer changed), stale trajectory golden, a plan snapshot
out of date, an orphan golden, a half scenario (events.db and model.jsonl, no scenario.toml), an
error-path recording (401 on call 2, kept with allow_error) and the same with call 2 answered, a
``throw`` override, a recording whose ``read`` returned a secret, a drifted redaction marker, a
recording made with the user's own ops (named in scenario.toml, imported by both front ends)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from flux.testkit.atif import check_golden_file
from flux.testkit import Scenario

from tests.testkit.conftest import change_tool_input
from tests.testkit.corpus import (record_clean, record_custom_ops, record_error_path, record_secret,
                                  write_custom_ops)

VENV_BIN = Path(sys.executable).parent


def build_corpus(root: Path) -> dict[str, bool]:
    """The corpus under ``root``; returns each entry's expected verdict (True = green)."""
    clean = record_clean(root / "clean")
    expected = {"clean": True}
    shutil.copytree(clean, root / "drifted")
    change_tool_input(root / "drifted" / "model.jsonl", 2, path="other.txt")
    expected["drifted"] = False

    shutil.copytree(clean, root / "golden-ok")
    shutil.copytree(clean, root / "golden-stale")
    for name in ("golden-ok", "golden-stale"):
        with Scenario.load(root / name) as sc:
            check_golden_file(sc.golden(), root / name / "trajectory.golden.json", update=True)
    stale = root / "golden-stale" / "trajectory.golden.json"
    stale.write_text(stale.read_text().replace('"append"', '"write"'))
    expected.update({"golden-ok": True, "golden-stale": False})

    shutil.copytree(clean, root / "snapshot-stale")
    snap = root / "snapshot-stale" / "plan.flux.snap"
    snap.write_text(snap.read_text().replace("README.md", "OLD.md"))
    expected["snapshot-stale"] = False

    (root / "strays").mkdir()
    (root / "strays" / "note.golden.json").write_text("{}\n")
    expected["orphan note.golden.json"] = False

    shutil.copytree(clean, root / "half")
    (root / "half" / "scenario.toml").unlink()
    expected["half"] = False

    record_error_path(root / "error-path")
    expected["error-path"] = True  # the recorded 401 replays as that error: the agent behaves as recorded
    shutil.copytree(root / "error-path", root / "error-path-answered")
    cassette = root / "error-path-answered" / "model.jsonl"
    lines = cassette.read_text().splitlines()
    answered = json.loads(lines[1])
    del answered["error"]
    answered["chunks"] = [{"t": "text_delta", "c": "all good"}]
    lines[1] = json.dumps(answered)
    cassette.write_text("\n".join(lines) + "\n")
    expected["error-path-answered"] = False  # where the recording failed, the re-drive now answers

    shutil.copytree(clean, root / "throw-override")
    (root / "throw-override" / "replay.override.json").write_text(
        json.dumps({"calls": {"2": {"kind": "throw", "status": 401, "message": "invalid api key"}}}))
    expected["throw-override"] = False  # the recording answered call 2; the override fails it

    record_secret(root / "secret")
    expected["secret"] = True
    shutil.copytree(root / "secret", root / "marker-drift")
    toml = root / "marker-drift" / "scenario.toml"
    toml.write_text(toml.read_text().replace('"[redacted]"', '"[gone]"'))
    expected["marker-drift"] = False

    record_custom_ops(root / "custom-ops")
    expected["custom-ops"] = True
    for ws in root.glob(".*-ws"):
        shutil.rmtree(ws)
    return expected


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "FLUX_GOLDEN"}
    env["FLUX_TESTKIT_TMP"] = str(tmp)
    env["PYTHONPATH"] = str(tmp / "tools")  # the custom ops' module
    return env


def cli_verdicts(corpus: Path, tmp: Path) -> dict[str, tuple[bool, str]]:
    out = subprocess.run([str(VENV_BIN / "flux"), "test", "--dir", str(corpus), "--json"], capture_output=True,
                         text=True, env=_env(tmp), timeout=300)
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    verdicts = {r["scenario"]: (r["ok"], r["first_divergence"] or "") for r in data["scenarios"]}
    for o in data["orphans"]:
        verdicts[f"orphan {Path(o).name}"] = (False, f"orphan golden {o}")
    return verdicts


PYTEST_FILE = '''
import pytest

@pytest.mark.flux_scenarios({corpus!r})
def test_corpus(flux_scenario, flux_client):
    report = flux_scenario.check(flux_client)
    assert report.status()
'''


def pytest_verdicts(corpus: Path, tmp: Path) -> dict[str, tuple[bool, str]]:
    work = tmp / "pytest-run"
    work.mkdir()
    (work / "test_corpus.py").write_text(PYTEST_FILE.format(corpus=str(corpus)))
    xml = work / "report.xml"
    out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
                          f"--junit-xml={xml}", "test_corpus.py"], cwd=work, capture_output=True, text=True,
                         env=_env(tmp), timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    verdicts = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        name = case.get("name")
        assert name.startswith("test_corpus[") and name.endswith("]"), name
        param = name[len("test_corpus["):-1]
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        verdicts[param.replace("orphan-", "orphan ", 1)] = (bad is None, "" if bad is None else bad.get("message", ""))
    return verdicts


def test_flux_test_and_pytest_give_the_same_verdict_on_every_scenario(tmp_path, offline, monkeypatch):
    monkeypatch.syspath_prepend(str(write_custom_ops(tmp_path / "tools")))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    expected = build_corpus(corpus)
    cli = cli_verdicts(corpus, tmp_path)
    plugin = pytest_verdicts(corpus, tmp_path)
    assert sorted(cli) == sorted(expected), "flux test saw another corpus"
    assert sorted(plugin) == sorted(expected), "pytest saw another corpus"
    for name, want in expected.items():
        (cli_ok, cli_why), (py_ok, py_why) = cli[name], plugin[name]
        assert cli_ok == py_ok == want, (name, cli[name], plugin[name])
        if not want:
            assert cli_why and cli_why.rstrip("…")[:80] in py_why, (name, cli_why, py_why)
    reds = sum(1 for v in expected.values() if not v)
    assert (len(expected), reds) == (13, 8)
