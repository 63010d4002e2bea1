"""The saved-case pytest plugin (entry point ``pytest11``, beside the test kit's).

``@pytest.mark.flux_cases(DIR)`` parametrizes the ``flux_case`` fixture (a :class:`CaseUnderTest`)
over every bundle under DIR; an empty DIR fails ("save first"), a corrupt bundle fails its own test,
and a test that never runs its case fails (docs/cases.md, "pytest").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest

from ..testkit.pytest_plugin import marked_directory

# The case machinery (the agent loop, the stores) is imported when a case test runs, not when pytest
# starts: the plugin loads in every pytest session of a project that installs flux-tui.
MARK = "flux_cases"


def pytest_configure(config: Any) -> None:
    config.addinivalue_line("markers", f"{MARK}(directory): run the test once per saved case under directory")


class _Missing:
    def __init__(self, where: Path):
        self.where = where


class CaseUnderTest:
    """One bundle file under test."""

    def __init__(self, path: Path):
        from .api import read_case_file

        self.path = path
        self.bundle = read_case_file(path)
        self.runs = 0

    @property
    def hash(self) -> str:
        return self.bundle.hash

    def run(self, **options: Any) -> Any:
        from .api import run_case

        self.runs += 1
        return run_case(self.bundle, **options)


def _bundle_files(where: Path) -> list[Path]:
    if not where.is_dir():
        return []
    return sorted(p for p in where.rglob("*") if p.is_file() and (p.suffix == ".case" or (
        p.suffix == ".json" and not p.name.endswith(".summary.json") and not p.name.endswith(".golden.json"))))


def pytest_generate_tests(metafunc: Any) -> None:
    where = marked_directory(metafunc, MARK, "flux_case", "cases")
    if where is None:
        return
    found = _bundle_files(where)
    if not found:
        metafunc.parametrize("flux_case", [_Missing(where)], ids=["no-cases"], indirect=True)
        return
    ids = [p.name[:12] if p.suffix == ".case" else p.stem for p in found]
    metafunc.parametrize("flux_case", found, ids=ids, indirect=True)


@pytest.fixture
def flux_case(request: Any) -> Iterator[CaseUnderTest]:
    from .errors import CaseRefusal

    param = getattr(request, "param", None)
    if param is None:
        raise pytest.UsageError(f"flux_case needs @pytest.mark.{MARK}(DIR) on the test")
    if isinstance(param, _Missing):
        pytest.fail(f"no saved cases under {param.where} — save first: flux case save SESSION --fixture-store "
                    f"{param.where}", pytrace=False)
    try:
        case = CaseUnderTest(param)
    except CaseRefusal as e:
        pytest.fail(f"{param}: {e.code}: {e.message}", pytrace=False)
    yield case
    rep = getattr(request.node, "_flux_case_call", None)
    if case.runs == 0 and (rep is None or rep.passed):
        pytest.fail(f"{param}: the test never ran its case — call flux_case.run(…): no vacuous pass", pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Iterator[None]:
    outcome = yield
    if call.when == "call":  # the fixture's teardown reads whether the test body passed
        item._flux_case_call = outcome.get_result()
