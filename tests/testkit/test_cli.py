"""`flux test`, `flux record`, `flux export --format atif`, `flux golden` — offline, on scenarios
recorded through the real providers."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from flux.cli import main


def run(*args, **kw):
    return CliRunner().invoke(main, [str(a) for a in args], **kw)


def test_flux_test_all_clean_exits_0_with_the_table(scenario_dir, fixture_store):
    res = run("test", scenario_dir, fixture_store)
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].split() == ["scenario", "replay", "check", "first", "divergence"]
    row = next(ln for ln in lines if ln.startswith(scenario_dir.name))
    assert "✓ faithful" in row and row.count("✓ faithful") == 2
    fx = next(ln for ln in lines if ln.startswith("coding-agent-note"))
    assert "✓ faithful" in fx and "replay only (flux 0.26.0)" in fx
    assert lines[-1].startswith("2 scenario(s): 2 clean, 0 failed")


def test_flux_test_failure_exits_1_with_first_divergence_and_junit(openai_dir, tmp_path):
    lines = (openai_dir / "model.jsonl").read_text().splitlines()
    (openai_dir / "model.jsonl").write_text("\n".join(lines[:2]) + "\n")
    xml = tmp_path / "out" / "junit.xml"
    res = run("test", openai_dir, "--junit-xml", xml, "-v")
    assert res.exit_code == 1
    row = next(ln for ln in res.output.splitlines() if ln.startswith("openai"))
    assert "model live 1" in row and "model call 3: the cassette is exhausted" in row
    assert "trajectory (golden ↔ this run):" in res.output and "▶" in res.output
    root = ET.parse(xml).getroot()
    suite = root.find("testsuite")
    assert suite.get("tests") == "1" and suite.get("failures") == "1"
    case = suite.find("testcase")
    assert case.get("name") == "openai"
    assert "model call 3" in case.find("failure").get("message")


def test_flux_test_json(scenario_dir):
    res = run("test", scenario_dir, "--json")
    assert res.exit_code == 0
    data = json.loads(res.output)
    assert data["ok"] and data["passed"] == 1 and data["scenarios"][0]["report"]["model_served"] == 3


def test_update_re_baselines_the_plan_snapshot_and_reports_it(openai_dir):
    snap = openai_dir / "plan.flux.snap"
    good = snap.read_text()
    snap.write_text(good.replace("README.md", "OLD.md"))
    res = run("test", openai_dir)
    assert res.exit_code == 1 and "plan snapshot mismatch" in res.output
    res = run("test", openai_dir, "--update", env={"FLUX_GOLDEN": None})
    assert res.exit_code == 0, res.output
    assert f"updated plan snapshot {snap}" in res.output and "-" in res.output and "OLD.md" in res.output
    assert snap.read_text() == good
    assert "nothing to re-baseline" not in res.output
    assert run("test", openai_dir, env={"FLUX_GOLDEN": None}).exit_code == 0
    again = run("test", openai_dir, "--update", env={"FLUX_GOLDEN": None})
    assert again.exit_code == 0
    assert "--update: nothing to re-baseline — every plan snapshot and trajectory golden already matches" in again.output
    assert snap.read_text() == good


def test_replay_only_and_keyword(scenario_dir, tmp_path):
    other = tmp_path / "zz-other"
    shutil.copytree(scenario_dir, other)
    res = run("test", tmp_path, "--replay-only", "-k", "zz and not nothing")
    assert res.exit_code == 0, res.output
    assert "zz-other" in res.output and "skipped (--replay-only)" in res.output
    assert f"\n{scenario_dir.name} " not in res.output
    assert "1 scenario(s)" in res.output
    bad = run("test", tmp_path, "-k", "zz and (")
    assert bad.exit_code == 1 and bad.output.startswith("error: -k")


def test_orphan_golden_fails(scenario_dir, tmp_path):
    (tmp_path / "stray.golden.json").write_text("{}")
    res = run("test", tmp_path)
    assert res.exit_code == 1 and "orphan golden" in res.output and "stray.golden.json" in res.output


def test_no_scenarios_is_a_one_line_error(tmp_path, offline):
    res = run("test", tmp_path)
    assert res.exit_code == 1 and res.output.startswith("error: no scenario fixtures under") and res.output.count("\n") == 1
    res = run("test", tmp_path / "missing")
    assert res.exit_code == 1 and "does not exist" in res.output


def test_trajectory_golden_in_a_scenario_is_checked(scenario_dir):
    pytest.importorskip("atif")  # in the [test] extra; an older venv needs pip install -e '.[test]'
    g = scenario_dir / "trajectory.golden.json"
    res = run("test", scenario_dir)
    assert res.exit_code == 0
    # A golden a scenario owns: created with --update, then checked.
    assert run("golden", "update", scenario_dir, g).exit_code == 0
    assert run("test", scenario_dir).exit_code == 0
    data = json.loads(g.read_text())
    data["steps"][1]["tool_calls"][0]["function_name"] = "grep"
    g.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    res = run("test", scenario_dir, "-v")
    assert res.exit_code == 1
    assert "functions: ('grep', 'append') -> ('read', 'append')" in res.output
    assert "-" in res.output and '"function_name": "grep"' in res.output


def test_export_and_golden_check_update(scenario_dir, tmp_path):
    pytest.importorskip("atif")
    res = run("export", scenario_dir, "--format", "atif")
    assert res.exit_code == 0
    doc = json.loads(res.output)
    assert doc["schema_version"] == "ATIF-v1.8" and doc["session_id"] == "s_1"
    assert [s["source"] for s in doc["steps"]] == ["user", "agent", "agent", "agent"]
    assert doc["steps"][1]["tool_calls"][0]["function_name"] == "read"
    g = tmp_path / "g.json"
    res = run("golden", "check", scenario_dir, g)
    assert res.exit_code == 1 and "a missing golden is a failure, not an auto-create" in res.output
    res = run("golden", "update", scenario_dir, g)
    assert res.exit_code == 0 and f"created trajectory golden {g}" in res.output
    assert run("golden", "check", scenario_dir, g).exit_code == 0
    norm = json.loads(g.read_text())
    assert norm["session_id"] == "<session_id>" and norm["steps"][0]["timestamp"] == "<timestamp>"
    assert norm["schema_version"] == "ATIF-v1.8"
    norm["schema_version"] = "ATIF-v1.7"
    g.write_text(json.dumps(norm))
    res = run("golden", "check", scenario_dir, g)
    assert res.exit_code == 1
    assert res.output == (f"error: golden recorded under ATIF-v1.7, this run exports ATIF-v1.8 — re-baseline with: "
                          f"flux golden update S {g}\n")


def test_record_bad_arguments_are_one_line(tmp_path, offline):
    res = run("record", "s", "  ", "--dir", tmp_path, "-m", "mock")
    assert res.exit_code == 1 and res.output.startswith("error: the prompt is empty")
    res = run("record", "s", "hi", "--dir", tmp_path, "-m", "openai:x")
    assert res.exit_code == 1 and res.output.startswith("error: missing key")
    res = run("record", "s", "hi", "--dir", tmp_path, "-m", "mock", "--workspace", tmp_path / "nope")
    assert res.exit_code == 1 and "is not a directory" in res.output
