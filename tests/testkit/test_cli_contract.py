"""flux's own CLI contract for ``record`` and ``test`` (flux's crates/flux-cli tests agent_lab.rs,
lab_cmd.rs, args.rs): ``flux record NAME PROMPT [--dir DIR]`` with the one-plain-segment name guard,
``flux test [NAME] [--dir DIR] [--json]`` with flux's JSON keys beside ours, and ``--store`` as a
global flag that may stand before the verb."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main


def run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env or {}, catch_exceptions=False)


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLUX_GOLDEN", raising=False)
    monkeypatch.delenv("FLUX_CASSETTE", raising=False)
    return tmp_path


def test_record_name_writes_tests_scenarios_name_and_flux_test_reads_it(work):
    res = run("record", "note-taking", "write a quick note", "-m", "mock", "--yes")
    assert res.exit_code == 0, res.output
    fixture = work / "tests" / "scenarios" / "note-taking"
    for f in ("events.db", "flow.db", "model.jsonl", "plan.flux.snap", "scenario.toml"):
        assert (fixture / f).is_file(), f
    assert 'name = "note-taking"' in (fixture / "scenario.toml").read_text()
    res = run("test", "note-taking")
    assert res.exit_code == 0, res.output
    res = run("test", "--json")
    report = json.loads(res.output)
    assert res.exit_code == 0 and report["total"] == 1 and report["failed"] == 0
    assert report["fixtures"] == [{"name": "note-taking", "ok": True, "failure": None}]
    assert report["passed"] == 1 and report["scenarios"][0]["scenario"] == "note-taking"  # our keys stay
    # the fixture is an ordinary store: the time machine opens it with --store, before or after the verb
    assert run("replay", "--store", fixture, "last").exit_code == 0
    assert run("--store", fixture, "replay", "last").exit_code == 0


def test_record_dir_relocates_the_scenarios_root(work):
    res = run("record", "n", "write a quick note", "--dir", "elsewhere", "-m", "mock", "--yes")
    assert res.exit_code == 0, res.output
    assert (work / "elsewhere" / "n" / "scenario.toml").is_file() and not (work / "tests").exists()
    assert run("test", "n", "--dir", "elsewhere").exit_code == 0
    assert run("test", "--dir", "elsewhere", "--json").exit_code == 0


@pytest.mark.parametrize("bad", ["..", ".", "a/b", "../escape", ""])
def test_record_refuses_a_name_that_is_not_one_plain_segment(work, bad):
    res = run("record", bad, "hi", "-m", "mock", "--yes")
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "plain path segment" in lines[0]
    assert list(work.iterdir()) == [], "an invalid name must not create any directory"


def test_the_older_record_path_form_gets_a_one_line_hint(work):
    res = run("record", "tests/scenarios/triage", "triage the build", "-m", "mock", "--yes")
    assert res.exit_code == 1
    assert res.output == ("error: a scenario NAME is one plain path segment, not 'tests/scenarios/triage' — write: "
                          "flux record triage 'triage the build' --dir tests/scenarios\n")
    assert not (work / "tests").exists()


def test_record_with_the_cassette_off_is_refused_before_anything_is_written(work):
    """Reproduction: ``FLUX_CASSETTE=0 flux record`` exited 0 with ``0 tool call(s)`` and left a
    fixture that could not be tested."""
    res = run("record", "off", "write a quick note", "-m", "mock", "--yes", env={"FLUX_CASSETTE": "0"})
    assert res.exit_code == 1 and res.output.startswith("error: FLUX_CASSETTE=0 turns the cassette off")
    assert res.output.count("\n") == 1 and not (work / "tests").exists()
    assert run("record", "off", "write a quick note", "-m", "mock", "--yes").exit_code == 0


def test_flux_test_names_and_paths(work):
    assert run("record", "a", "write a quick note", "-m", "mock", "--yes").exit_code == 0
    res = run("test", "nosuch")
    assert res.exit_code == 1 and res.output.startswith("error: no scenario 'nosuch' under tests/scenarios")
    for bad in ("..", ".", "a/b", "../escape"):
        res = run("test", bad, "--dir", "tests/scenarios")
        assert res.exit_code == 1 and "single plain path segment" in res.output and res.output.count("\n") == 1, bad
    # the older PATH form keeps working without --dir
    assert run("test", "tests/scenarios").exit_code == 0
    assert run("test", "tests/scenarios/a").exit_code == 0


def test_flux_test_json_names_a_failing_fixture(work):
    assert run("record", "good", "write a quick note", "-m", "mock", "--yes").exit_code == 0
    assert run("record", "drifted", "write a quick note", "-m", "mock", "--yes").exit_code == 0
    (work / "tests/scenarios/drifted/plan.flux.snap").write_text('flow drifted\n  return "something else"\n')
    res = run("test", "--json")
    report = json.loads(res.output)
    assert res.exit_code == 1 and report["total"] == 2 and report["failed"] == 1 and report["ok"] is False
    by_name = {f["name"]: f for f in report["fixtures"]}
    assert by_name["good"] == {"name": "good", "ok": True, "failure": None}
    assert by_name["drifted"]["ok"] is False and "snapshot" in by_name["drifted"]["failure"]


def test_store_is_a_global_flag_before_or_after_the_verb(work, tmp_path):
    store = tmp_path / "demo"
    assert run("demo", "--store", store).exit_code == 0
    after = run("sessions", "--store", store, "--json")
    before = run("--store", store, "sessions", "--json")
    assert after.exit_code == before.exit_code == 0 and json.loads(before.output) == json.loads(after.output)
    # the verb's own --store wins over the global one, and the global one over $FLUX_STORE_DIR
    assert json.loads(run("--store", tmp_path / "nothing-here", "sessions", "--store", store, "--json").output) \
        == json.loads(after.output)
    res = run("--store", store, "sessions", "--json", env={"FLUX_STORE_DIR": str(tmp_path / "nothing-here")})
    assert res.exit_code == 0 and json.loads(res.output) == json.loads(after.output)
    # and it does not leak into the next invocation
    assert run("sessions", "--json", env={"FLUX_STORE_DIR": str(tmp_path / "nothing-here")}).exit_code == 1
