"""The test kit's pytest plugin (entry point ``pytest11``): ``@pytest.mark.flux_scenarios(DIR)``, the
``flux_scenario`` and ``flux_client`` fixtures, ``--flux-update``, and a trajectory diff on a failing
assert. Every scenario test is also held to ``flux test``'s verdict (:mod:`flux.testkit.verdict`),
and a test that asserts nothing fails. Usage and rules: docs/testing.md ("pytest").
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, Optional

import pytest

# The scenario machinery (the agent loop, the stores) is imported when a scenario test runs, not
# when pytest starts: the plugin loads in every pytest session of a project that installs flux-tui.
from .errors import AssertionFailed, MissingFixture, kit_failure

MARK = "flux_scenarios"


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("flux", "flux test kit")
    group.addoption("--flux-update", action="store_true", default=False,
                    help="Re-baseline flux goldens instead of failing (FLUX_GOLDEN=update); prints every rewrite.")


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", f"{MARK}(directory): run the test once per flux scenario under directory")
    config._flux_rebaselined = []
    if config.getoption("flux_update", False):
        config._flux_prev_golden = os.environ.get("FLUX_GOLDEN")
        os.environ["FLUX_GOLDEN"] = "update"


def pytest_unconfigure(config: Any) -> None:
    if hasattr(config, "_flux_prev_golden"):
        prev = config._flux_prev_golden
        if prev is None:
            os.environ.pop("FLUX_GOLDEN", None)
        else:
            os.environ["FLUX_GOLDEN"] = prev


class _Missing:
    """A parameter standing for "no scenario found": the fixture fails with "record first"."""

    def __init__(self, where: Path):
        self.where = where


class _Broken:
    """A parameter standing for a directory the verdict already failed (an incomplete scenario,
    an orphan golden): the fixture fails with the verdict's message."""

    def __init__(self, result: Any):
        self.result = result


def marked_directory(metafunc: Any, mark: str, fixture: str, example: str) -> Optional[Path]:
    """The directory ``@pytest.mark.<mark>(DIR)`` names (relative to the test file), or ``None`` when
    the test has no such mark or does not use ``fixture``. A mark with no directory is a usage error."""
    marker = metafunc.definition.get_closest_marker(mark)
    if marker is None or fixture not in metafunc.fixturenames:
        return None
    if not marker.args:
        raise pytest.UsageError(f"@pytest.mark.{mark} needs a directory: @pytest.mark.{mark}(\"{example}\")")
    where = Path(marker.args[0])
    return where if where.is_absolute() else Path(str(metafunc.definition.fspath)).parent / where


def pytest_generate_tests(metafunc: Any) -> None:
    where = marked_directory(metafunc, MARK, "flux_scenario", "scenarios")
    if where is None:
        return
    from .verdict import Collection, collect, judge_incomplete, judge_orphan

    found = collect([where]) if where.is_dir() else Collection()
    params: list[Any] = [*found.scenarios, *(_Broken(judge_incomplete(i)) for i in found.incomplete),
                         *(_Broken(judge_orphan(o)) for o in found.orphans)]
    if not params:
        metafunc.parametrize("flux_scenario", [_Missing(where)], ids=["no-scenarios"], indirect=True)
        return
    ids = [p.name if isinstance(p, Path) else p.result.name.replace(" ", "-") for p in params]
    metafunc.parametrize("flux_scenario", params, ids=ids, indirect=True)


@pytest.fixture
def flux_scenario(request: Any) -> Iterator[Any]:
    __tracebackhide__ = kit_failure
    from .scenario import Scenario

    param = getattr(request, "param", None)
    if param is None:
        raise pytest.UsageError(f"flux_scenario needs @pytest.mark.{MARK}(DIR) on the test (or parametrize it "
                                f"indirectly with scenario directories)")
    if isinstance(param, _Missing):
        raise MissingFixture(f"no scenarios under {param.where} — record first: flux record NAME \"PROMPT\" --dir {param.where} -m MODEL")
    if isinstance(param, _Broken):
        raise AssertionFailed(param.result.summary())
    sc = Scenario.load(param)
    request.node._flux_scenario = sc
    try:
        yield sc
    finally:
        sc.close()
        request.config._flux_rebaselined += sc.rebaselined
    rep = getattr(request.node, "rep_call", None)
    if sc.assertions == 0 and (rep is None or rep.passed):
        pytest.fail(f"{sc.path}: the test asserted nothing about the scenario — a scenario test must assert "
                    f"(replay().assert_faithful(), check(client).assert_clean(), …): no vacuous pass", pytrace=False)


@pytest.fixture
def flux_client(flux_scenario: Any) -> Iterator[Any]:
    from .runner import offline_client

    client = offline_client(flux_scenario)
    try:
        yield client
    finally:
        client.close()


def _verdict(item: Any, sc: Any) -> None:
    """``flux test``'s verdict on the test's scenario, with the test's ``flux_client`` if it has
    one (else the offline client ``flux test`` uses); raises the verdict's failure."""
    __tracebackhide__ = kit_failure
    from .runner import offline_client
    from .verdict import judge

    client = item.funcargs.get("flux_client") if hasattr(item, "funcargs") else None
    factory = (lambda _sc: client) if client is not None else offline_client
    if client is not None:
        client.shared = True  # the fixture closes it
    asserted = sc.assertions
    res = judge(sc, client_factory=factory)
    sc.assertions = asserted  # the verdict's own assertions are not the test asserting
    sc.rebaselined += res.rebaselined
    res.assert_ok("flux test fails this scenario — ")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: Any) -> Iterator[None]:
    __tracebackhide__ = True
    result = yield
    sc = getattr(item, "_flux_scenario", None)
    if sc is not None:
        _verdict(item, sc)
    return result


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call":
        item.rep_call = rep
        sc = getattr(item, "_flux_scenario", None)
        last = getattr(sc, "last_report", None) if sc is not None else None
        # A kit assertion's failure already carries the diff; a plain ``assert`` on the report's
        # fields gets it as a section.
        shown = call.excinfo is not None and call.excinfo.errisinstance(AssertionFailed)
        if rep.failed and not shown and last is not None and not last.replay_only and not last.is_clean():
            rep.sections.append(("flux trajectory diff", last.explain()))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: Any, config: Any) -> None:
    """Golden mode lists every file it rewrote, with the diff it overwrote — and says so when
    nothing needed rewriting."""
    if not config.getoption("flux_update", False):
        return
    done = getattr(config, "_flux_rebaselined", [])
    terminalreporter.section("flux re-baselines")
    if not done:
        terminalreporter.write_line("--flux-update: nothing to re-baseline — every plan snapshot and trajectory golden "
                                    "already matches")
        return
    seen = set()
    for rb in done:
        if (rb.path, rb.diff) in seen:
            continue
        seen.add((rb.path, rb.diff))
        terminalreporter.write_line(rb.line())
        if rb.diff:
            terminalreporter.write_line(rb.diff)
