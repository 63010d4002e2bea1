"""The pytest plugin, driven by pytester: it loads through its pytest11 entry point (as a user's
pytest would load it), parametrizes over scenario directories, fails vacuous tests and missing
fixtures, shows the trajectory diff on failure, and maps --flux-update to golden mode."""

from __future__ import annotations

import json
import shutil

import pytest

pytest_plugins = ["pytester"]
# In-process runs: the SVG snapshot plugin keeps a process-wide temp dir the inner session would remove.
INNER = ("-p", "no:randomly", "-p", "no:textual-snapshot")

TEST = '''
import pytest

@pytest.mark.flux_scenarios("scenarios")
def test_scenario(flux_scenario, flux_client):
    flux_scenario.replay().assert_faithful().assert_plan_snapshot()
    report = flux_scenario.check(flux_client)
    assert not report.plan_changed and not report.left_world and report.model_live == 0
    assert report.is_clean()
'''


@pytest.fixture
def project(pytester, openai_dir):
    shutil.copytree(openai_dir, pytester.path / "scenarios" / "note")
    return pytester


def test_the_plugin_is_registered_through_its_entry_point(project):
    from importlib.metadata import entry_points

    assert any(ep.value == "flux.testkit.pytest_plugin" for ep in entry_points(group="pytest11"))
    project.makepyfile(TEST)
    res = project.runpytest(*INNER, "-v")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["*test_scenario?note? PASSED*"])


def test_a_failing_check_shows_the_trajectory_diff(project):
    model = project.path / "scenarios" / "note" / "model.jsonl"
    lines = model.read_text().splitlines()
    rec = json.loads(lines[1])
    for ch in rec["chunks"]:
        if ch["t"] == "block" and ch["c"].get("type") == "tool_use":
            ch["c"]["input"]["path"] = "elsewhere.txt"
    lines[1] = json.dumps(rec)
    model.write_text("\n".join(lines) + "\n")
    project.makepyfile(TEST)
    res = project.runpytest(*INNER)
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*flux trajectory diff*", "*golden*this run*", "*▶*", "*FLUX_GOLDEN=update*"])


def test_a_test_that_asserts_nothing_fails(project):
    project.makepyfile('''
import pytest

@pytest.mark.flux_scenarios("scenarios")
def test_nothing(flux_scenario):
    flux_scenario.replay()
''')
    res = project.runpytest(*INNER)
    res.assert_outcomes(passed=1, errors=1)
    res.stdout.fnmatch_lines(["*asserted nothing about the scenario*no vacuous pass*"])


def test_no_scenarios_fails_with_record_first(pytester, offline):
    (pytester.path / "scenarios").mkdir()
    pytester.makepyfile(TEST)
    res = pytester.runpytest(*INNER)
    res.assert_outcomes(errors=1)
    res.stdout.fnmatch_lines(["*MissingFixture*record first*"])


def test_flux_update_re_baselines_the_snapshot(project):
    snap = project.path / "scenarios" / "note" / "plan.flux.snap"
    good = snap.read_text()
    snap.write_text("stale\n")
    project.makepyfile(TEST)
    project.runpytest(*INNER).assert_outcomes(failed=1)
    project.runpytest(*INNER, "--flux-update").assert_outcomes(passed=1)
    assert snap.read_text() == good
    project.runpytest(*INNER).assert_outcomes(passed=1)
