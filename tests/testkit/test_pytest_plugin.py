"""The pytest plugin, driven by pytester: it loads through its pytest11 entry point (as a user's
pytest would load it), parametrizes over scenario directories, fails vacuous tests and missing
fixtures, shows the trajectory diff on failure, and maps --flux-update to golden mode.

Each inner pytest run costs a session start-up, so one run covers the pass / fail / vacuous /
missing cases together."""

from __future__ import annotations

import os
import shutil

from tests.testkit.conftest import change_tool_input

pytest_plugins = ["pytester"]
# In-process runs: the SVG snapshot plugin keeps a process-wide temp dir the inner session would
# remove; the other plugins are not needed inside.
INNER = ("-p", "no:randomly", "-p", "no:textual-snapshot", "-p", "no:hypothesispytest", "-p", "no:anyio",
         "-p", "no:syrupy", "-p", "no:xdist", "-p", "no:cacheprovider")

CHECK = '''
import pytest

@pytest.mark.flux_scenarios("{where}")
def test_scenario(flux_scenario, flux_client):
    flux_scenario.replay().assert_faithful().assert_plan_snapshot()
    report = flux_scenario.check(flux_client)
    assert not report.plan_changed and not report.left_world and report.model_live == 0
    assert report.is_clean()
'''


def test_plugin_parametrizes_fails_loudly_and_shows_the_trajectory_diff(pytester, openai_dir):
    from importlib.metadata import entry_points

    assert any(ep.value == "flux.testkit.pytest_plugin" for ep in entry_points(group="pytest11"))
    shutil.copytree(openai_dir, pytester.path / "good" / "note")
    shutil.copytree(openai_dir, pytester.path / "broken" / "note")
    change_tool_input(pytester.path / "broken" / "note" / "model.jsonl", 2, path="elsewhere.txt")
    (pytester.path / "empty").mkdir()
    pytester.makepyfile(
        test_good=CHECK.format(where="good"),
        test_broken=CHECK.format(where="broken"),
        test_missing=CHECK.format(where="empty"),
        test_vacuous='''
import pytest

@pytest.mark.flux_scenarios("good")
def test_nothing(flux_scenario):
    flux_scenario.replay()
''')
    res = pytester.runpytest(*INNER, "-v")
    res.assert_outcomes(passed=2, failed=1, errors=2)
    res.stdout.fnmatch_lines_random([
        "*test_good.py::test_scenario?note? PASSED*",
        "*test_broken.py::test_scenario?note? FAILED*",
        "*test_missing.py::test_scenario?no-scenarios? ERROR*",
        "*test_vacuous.py::test_nothing?note? ERROR*",
    ])
    res.stdout.fnmatch_lines(["*flux trajectory diff*", "*golden*this run*", "*▶*", "*FLUX_GOLDEN=update*"])
    res.stdout.fnmatch_lines(["*asserted nothing about the scenario*no vacuous pass*"])
    res.stdout.fnmatch_lines(["*MissingFixture*record first*"])


def test_flux_update_re_baselines_the_snapshot(pytester, openai_dir):
    shutil.copytree(openai_dir, pytester.path / "scenarios" / "note")
    snap = pytester.path / "scenarios" / "note" / "plan.flux.snap"
    good = snap.read_text()
    snap.write_text("stale\n")
    pytester.makepyfile(CHECK.format(where="scenarios"))
    pytester.runpytest(*INNER, "--flux-update").assert_outcomes(passed=1)
    assert snap.read_text() == good
    assert "FLUX_GOLDEN" not in os.environ, "the option's golden mode ends with its session"


def test_the_no_vacuous_guard_counts_a_test_that_read_the_report(pytester, openai_dir):
    """The design's own idiom (plain asserts on the report's fields, ``is_clean()``) counts as
    asserting: green on a clean scenario, red on a drifted one. A test that ran a check or a
    replay and read nothing of it — or only printed it — still fails."""
    shutil.copytree(openai_dir, pytester.path / "good" / "note")
    shutil.copytree(openai_dir, pytester.path / "drifted" / "note")
    change_tool_input(pytester.path / "drifted" / "note" / "model.jsonl", 2, path="elsewhere.txt")
    idiom = '''
import pytest

@pytest.mark.flux_scenarios("{where}")
def test_idiom(flux_scenario, flux_client):
    report = flux_scenario.check(flux_client)
    assert not report.plan_changed
    assert not report.left_world

@pytest.mark.flux_scenarios("{where}")
def test_is_clean(flux_scenario, flux_client):
    assert flux_scenario.check(flux_client).is_clean()

@pytest.mark.flux_scenarios("{where}")
def test_replay_fields(flux_scenario):
    out = flux_scenario.replay()
    assert out.faithful and out.calls == ["read", "append"]
'''
    pytester.makepyfile(
        test_good=idiom.format(where="good"),
        test_drifted=idiom.format(where="drifted"),
        test_touched_nothing='''
import pytest

@pytest.mark.flux_scenarios("good")
def test_check_dropped(flux_scenario, flux_client):
    flux_scenario.check(flux_client)

@pytest.mark.flux_scenarios("good")
def test_printed(flux_scenario, flux_client):
    print(flux_scenario.check(flux_client), flux_scenario.replay())
''')
    res = pytester.runpytest(*INNER, "-v")
    res.stdout.fnmatch_lines_random([
        "*test_good.py::test_idiom?note? PASSED*",
        "*test_good.py::test_is_clean?note? PASSED*",
        "*test_good.py::test_replay_fields?note? PASSED*",
        "*test_drifted.py::test_idiom?note? FAILED*",
        "*test_drifted.py::test_is_clean?note? FAILED*",
        "*test_touched_nothing.py::test_check_dropped?note? ERROR*",
        "*test_touched_nothing.py::test_printed?note? ERROR*",
    ])
    # the drifted scenario's replay is faithful (the recording itself is intact), but its test is
    # held to flux test's verdict too, whose check is red; a teardown error counts its test's call
    # as passed too
    res.stdout.fnmatch_lines_random(["*test_drifted.py::test_replay_fields?note? FAILED*"])
    res.assert_outcomes(passed=5, failed=3, errors=2)
    res.stdout.fnmatch_lines(["*ERROR at teardown of test_check_dropped*", "*asserted nothing about the scenario*"])


def _failure_block(lines: list[str], test: str) -> list[str]:
    start = next(i for i, ln in enumerate(lines) if ln.startswith("_") and f" {test} " in ln)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith(("_", "=")))
    return lines[start:end]


def test_a_kit_failure_reads_as_its_message_without_library_frames(pytester, openai_dir):
    """The kit's own frames are hidden (``__tracebackhide__``): a failing kit assertion shows the
    test's line and the message with its diff, no frame of flux.testkit, and — for a check — the
    diff once (the report section is only added when a plain ``assert`` failed)."""
    shutil.copytree(openai_dir, pytester.path / "sc" / "note")
    change_tool_input(pytester.path / "sc" / "note" / "model.jsonl", 2, path="elsewhere.txt")
    snap = pytester.path / "sc" / "note" / "plan.flux.snap"
    snap.write_text(snap.read_text().replace("README.md", "OLD.md"))
    pytester.makepyfile('''
import pytest

@pytest.mark.flux_scenarios("sc")
def test_snapshot(flux_scenario):
    flux_scenario.replay().assert_plan_snapshot()

@pytest.mark.flux_scenarios("sc")
def test_check(flux_scenario, flux_client):
    flux_scenario.check(flux_client).assert_clean()
''')
    res = pytester.runpytest(*INNER)
    res.assert_outcomes(failed=2)
    out = res.stdout.lines
    assert not [ln for ln in out if "flux/testkit/" in ln], "a kit frame is shown"
    snap_block = _failure_block(out, "test_snapshot[note]")
    message = [ln for ln in snap_block if ln.startswith("E ")]
    assert message[0].startswith("E       flux.errors.AssertionFailed: openai: plan snapshot mismatch — "
                                 "plan.flux.snap line 2 is")
    assert message[0].endswith("re-baseline: flux test --update (pytest --flux-update)")
    # the header, the test's source (decorator, def, the failing line), the message, the location
    assert len(snap_block) - len(message) <= 10, "\n".join(snap_block)
    check_block = _failure_block(out, "test_check[note]")
    check_message = [ln for ln in check_block if ln.startswith("E ")]
    assert len(check_block) - len(check_message) <= 10, "\n".join(check_block)
    # (counted in the failure sections: under CI=… pytest prints the short summary's messages whole)
    failures = out[:next((i for i, ln in enumerate(out) if "short test summary info" in ln), len(out))]
    assert sum("trajectory (golden ↔ this run):" in ln for ln in failures) == 1
    assert not any("flux trajectory diff" in ln for ln in out)
