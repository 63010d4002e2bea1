"""The verdict's guards (flux.testkit.verdict): what looks like a scenario but lacks a file fails
by name, a plain store is not a scenario, an orphan golden fails, and pytest's golden mode
rewrites a stale trajectory golden and prints the diff it overwrote."""

from __future__ import annotations

import shutil

from click.testing import CliRunner

from flux.cli import main
from flux.testkit import Scenario
from flux.testkit.atif import check_golden_file
from flux.testkit.verdict import collect, run_all

from tests.testkit.corpus import record_clean

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:textual-snapshot", "-p", "no:hypothesispytest", "-p", "no:anyio",
         "-p", "no:syrupy", "-p", "no:xdist", "-p", "no:cacheprovider")


def test_a_directory_that_looks_like_a_scenario_but_lacks_a_file_fails_by_name(tmp_path, offline):
    clean = record_clean(tmp_path / "sc" / "clean")
    shutil.copytree(clean, tmp_path / "sc" / "half")
    (tmp_path / "sc" / "half" / "scenario.toml").unlink()
    shutil.copytree(clean, tmp_path / "sc" / "nomodel")
    (tmp_path / "sc" / "nomodel" / "model.jsonl").unlink()
    store = tmp_path / "sc" / "plain-store"
    store.mkdir()
    shutil.copy(clean / "events.db", store / "events.db")
    shutil.copy(clean / "flow.db", store / "flow.db")
    found = collect([tmp_path / "sc"])
    assert [p.name for p in found.scenarios] == ["clean"]
    assert [(i.path.name, i.missing) for i in found.incomplete] == [("half", ("scenario.toml",)),
                                                                    ("nomodel", ("model.jsonl",))]
    results, orphans = run_all([tmp_path / "sc"])
    assert [(r.name, r.ok, r.kind) for r in results] == [("clean", True, "scenario"), ("half", False, "incomplete"),
                                                         ("nomodel", False, "incomplete")]
    assert results[1].error.startswith(f"incomplete scenario {tmp_path / 'sc' / 'half'}: it has events.db, flow.db, "
                                       f"model.jsonl, plan.flux.snap but no scenario.toml — re-record it")
    assert orphans == []
    out = CliRunner().invoke(main, ["test", "--dir", str(tmp_path / "sc")])
    assert out.exit_code == 1
    assert "3 scenario(s): 1 clean, 2 failed" in out.output


def test_pytest_flux_update_rewrites_a_stale_trajectory_golden_and_prints_the_diff(pytester, tmp_path, offline):
    sc_dir = record_clean(pytester.path / "scenarios" / "clean")
    shutil.rmtree(pytester.path / "scenarios" / ".clean-ws")
    golden = sc_dir / "trajectory.golden.json"
    with Scenario.load(sc_dir) as sc:
        check_golden_file(sc.golden(), golden, update=True)
    good = golden.read_text()
    golden.write_text(good.replace('"append"', '"write"'))
    pytester.makepyfile('''
import pytest

@pytest.mark.flux_scenarios("scenarios")
def test_it(flux_scenario, flux_client):
    assert flux_scenario.check(flux_client).is_clean()
''')
    red = pytester.runpytest(*INNER)
    red.assert_outcomes(failed=1)
    red.stdout.fnmatch_lines(["*clean: flux test fails this scenario — trajectory differs from*"])
    upd = pytester.runpytest(*INNER, "--flux-update")
    upd.assert_outcomes(passed=1)
    assert golden.read_text() == good
    upd.stdout.fnmatch_lines(["*flux re-baselines*", f"updated trajectory golden {golden}", "*-*\"write\"*",
                              "*+*\"append\"*"])
    again = pytester.runpytest(*INNER, "--flux-update")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*--flux-update: nothing to re-baseline*"])
