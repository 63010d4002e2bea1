"""The saved-case pytest fixture, driven by pytester through its pytest11 entry point: one test per
bundle under a directory; a case that no longer replays fails; an empty directory and a test that
never runs its case fail (no vacuous pass)."""

from __future__ import annotations

import json

from flux.cases import Bundle, FileStore, capture_case
from flux.cases.bundle import readable_json

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:textual-snapshot", "-p", "no:hypothesispytest", "-p", "no:anyio",
         "-p", "no:syrupy", "-p", "no:xdist", "-p", "no:cacheprovider")

TESTS = '''
import pytest

@pytest.mark.flux_cases("good")
def test_good(flux_case):
    flux_case.run(replay_only=True).assert_complete()

@pytest.mark.flux_cases("broken")
def test_broken(flux_case):
    flux_case.run(replay_only=True).assert_complete()

@pytest.mark.flux_cases("empty")
def test_empty(flux_case):
    flux_case.run(replay_only=True).assert_complete()

@pytest.mark.flux_cases("good")
def test_vacuous(flux_case):
    assert flux_case.hash
'''


def test_one_test_per_case_and_the_failures_are_loud(pytester, recorded):
    from importlib.metadata import entry_points

    assert any(ep.value == "flux.cases.pytest_plugin" for ep in entry_points(group="pytest11"))
    good = FileStore(pytester.path / "good")
    for at in (0, 1):
        good.put(capture_case(recorded, "s_1", at=at))
    b = capture_case(recorded, "s_1", at=1)
    obj = json.loads(b.data)
    obj["results"].append({"kind": "op", "key": "2", "op": "read", "fingerprint": "1" * 64, "truncated": False,
                           "result": {"content": "x", "view": None}})
    (pytester.path / "broken").mkdir()
    (pytester.path / "broken" / "extra-call.json").write_bytes(readable_json(Bundle.build(**obj)))
    (pytester.path / "empty").mkdir()
    pytester.makepyfile(test_cases=TESTS)
    res = pytester.runpytest_inprocess(*INNER, "-q")
    out = res.stdout.str()
    res.assert_outcomes(passed=4, failed=1, errors=3)  # the vacuous tests pass, then fail at teardown
    assert "unconsumed" in out or "incomplete" in out
    assert "no saved cases under" in out and "save first" in out
    assert "never ran its case" in out
