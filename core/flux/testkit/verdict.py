"""The verdict on scenario directories: the one function ``flux test``, the pytest plugin and
``flux-tui --tests`` all call, so the three cannot disagree.

:func:`collect` finds the scenarios, the incomplete scenario directories and the orphan goldens
under the given paths; :func:`judge` gives one scenario's :class:`ScenarioResult` (replay and plan
snapshot, check, trajectory golden). Nothing here touches the network; the rules are in docs/testing.md.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from ..errors import FluxError, NotReplayable
from ..store.store import StoreReader
from .atif import check_golden_file
from .cassette import OVERRIDE_FILE
from .errors import AssertionFailed, kit_failure
from .inputs import validate_scenario_inputs
from .golden import Rebaseline, update_mode
from .imported import is_log_dir, log_scenario
from .manifest import MANIFEST_FILE
from .runner import ClientCache, keyword_match, offline_client
from .scenario import JUDGE_FILE, MODEL_FILE, SNAP_FILE, Scenario

__all__ = ["ScenarioResult", "Collection", "Incomplete", "collect", "judge", "judge_incomplete", "judge_orphan",
           "run_all", "GOLDEN_FILE", "REQUIRED_FILES", "discover"]

GOLDEN_FILE = "trajectory.golden.json"
GOLDEN_GLOB = "*.golden.json"
#: Files only a scenario directory holds: one of them makes a directory look like a scenario.
SCENARIO_MARKS = (MANIFEST_FILE, MODEL_FILE, SNAP_FILE, JUDGE_FILE, OVERRIDE_FILE)
#: Files every scenario needs (``plan.flux.snap`` may be missing under golden mode: it is created).
REQUIRED_FILES = (MANIFEST_FILE, "events.db", "flow.db", MODEL_FILE, SNAP_FILE)


@dataclass
class ScenarioResult:
    """One verdict: a scenario, an incomplete directory or an orphan golden (``kind``)."""

    path: Path
    name: str
    ok: bool = False
    replay: str = ""  # ✓ faithful | ✗ … | n/a (…)
    check: str = ""  # the check status, or "skipped" / "replay only"
    first_divergence: Optional[str] = None
    detail: str = ""  # the full failure text
    error: Optional[str] = None
    seconds: float = 0.0
    rebaselined: list[Rebaseline] = field(default_factory=list)
    report: Any = None  # the check Report, if one ran
    kind: str = "scenario"  # scenario | incomplete | orphan
    # each failure on its own: (what — "replay", "plan snapshot", "check", "trajectory golden",
    # "error" — and its full text); ``detail`` is their texts joined
    sections: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> str:
        """One line: what failed (``""`` when ok)."""
        if self.ok:
            return ""
        return self.first_divergence or self.error or "failed"

    def assert_ok(self, why: str = "") -> "ScenarioResult":
        """Raise :class:`AssertionFailed` with the one-line summary (after ``why``, when given) and
        the full detail when red."""
        __tracebackhide__ = kit_failure
        if not self.ok:
            line = self.summary()
            if line.startswith(f"{self.name}: "):
                line = line[len(self.name) + 2:]
            detail = self.detail if self.detail not in (self.error, self.first_divergence) else ""
            raise AssertionFailed(f"{self.name}: {why}{line}", detail=detail)
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.name, "path": str(self.path), "kind": self.kind, "ok": self.ok, "replay": self.replay,
            "check": self.check, "first_divergence": self.first_divergence, "error": self.error,
            "seconds": round(self.seconds, 4), "rebaselined": [r.line() for r in self.rebaselined],
            "report": self.report.to_json() if self.report is not None else None,
        }


@dataclass(frozen=True)
class Incomplete:
    """A directory that looks like a scenario and lacks files a scenario needs."""

    path: Path
    present: tuple[str, ...]
    missing: tuple[str, ...]

    def message(self) -> str:
        what = ", ".join(self.missing)
        has = ", ".join(self.present)
        return (f"incomplete scenario {self.path}: it has {has} but no {what} — re-record it (flux record NAME "
                f"\"PROMPT\" --dir DIR --update) or remove the directory")


@dataclass
class Collection:
    scenarios: list[Path] = field(default_factory=list)
    incomplete: list[Incomplete] = field(default_factory=list)
    orphans: list[Path] = field(default_factory=list)


def _missing(d: Path, names: set[str]) -> Optional[Incomplete]:
    if not any(m in names for m in SCENARIO_MARKS):
        return None
    required = [f for f in REQUIRED_FILES if not (f == SNAP_FILE and update_mode())]
    missing = tuple(f for f in required if f not in names)
    if not missing:
        return None
    return Incomplete(d, tuple(f for f in REQUIRED_FILES if f in names), missing)


def collect(paths: Iterable[str | os.PathLike[str]]) -> Collection:
    """Scenarios, incomplete scenario directories and orphan goldens under ``paths`` (each a scenario
    directory itself or any directory tree), sorted, not descending into a scenario-like directory.
    A path that does not exist, or is not a directory, is an error."""
    out = Collection()
    roots = []
    for raw in paths:
        p = Path(raw).expanduser()
        if not p.exists():
            raise FluxError(f"{p} does not exist — give a scenario directory or a directory of scenarios")
        if not p.is_dir():
            raise FluxError(f"{p} is not a directory — give a scenario directory or a directory of scenarios")
        roots.append(p)
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            here = Path(root)
            names = set(files)
            if is_log_dir(here):  # a deepseek harness snapshot: tested through its import
                dirs[:] = []
                if here not in out.scenarios:
                    out.scenarios.append(here)
                continue
            if not any(m in names for m in SCENARIO_MARKS):
                continue
            dirs[:] = []
            gap = _missing(here, names)
            if gap is not None:
                if gap not in out.incomplete:
                    out.incomplete.append(gap)
            elif here not in out.scenarios:
                out.scenarios.append(here)
    owned = {(s / GOLDEN_FILE).resolve() for s in out.scenarios}
    owned |= {(i.path / GOLDEN_FILE).resolve() for i in out.incomplete}  # the directory already fails
    for p in roots:
        for g in sorted(p.rglob(GOLDEN_GLOB)):
            if g.resolve() not in owned and g not in out.orphans:
                out.orphans.append(g)
    return out


def discover(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The scenario directories of :func:`collect`."""
    return collect(paths).scenarios


def judge_incomplete(gap: Incomplete) -> ScenarioResult:
    msg = gap.message()
    return ScenarioResult(gap.path, gap.path.name, ok=False, replay="-", check="-", error=msg, first_divergence=msg,
                          detail=msg, kind="incomplete")


def judge_orphan(path: Path) -> ScenarioResult:
    msg = (f"orphan golden {path}: no scenario owns it — delete it, or move it into its scenario directory as "
           f"{GOLDEN_FILE}")
    return ScenarioResult(path, f"orphan {path.name}", ok=False, replay="-", check="-", error=msg,
                          first_divergence=msg, detail=msg, kind="orphan")


def _replay_part(sc: Scenario, res: ScenarioResult, update: bool) -> bool:
    """Replay + plan snapshot; returns whether anything was asserted."""
    if not sc.golden().cells:  # a turn that called no tool (it failed on its first model call): nothing to replay
        res.replay = "n/a (no tool calls to replay)"
        return False
    try:
        out = sc.replay()
    except NotReplayable as e:
        if "no cassette cells" in str(e):
            res.replay = "n/a (no tool calls to replay)"
            return False
        raise
    problems = []
    try:
        out.assert_faithful()
        res.replay = "✓ faithful"
    except AssertionFailed as e:
        res.replay = "✗ unfaithful"
        problems.append(e)
        res.sections.append(("replay", str(e)))
    try:
        out.assert_plan_snapshot(update=update)
    except AssertionFailed as e:
        res.replay += " · ✗ plan snapshot"
        problems.append(e)
        res.sections.append(("plan snapshot", str(e)))
    res.rebaselined += out.rebaselined
    if problems:
        res.first_divergence = problems[0].summary
        res.detail = "\n\n".join(str(p) for p in problems)
        res.ok = False
    return True


def _fail(res: ScenarioResult, summary: str, detail: str, what: str) -> None:
    res.ok = False
    res.sections.append((what, detail))
    res.first_divergence = res.first_divergence or summary
    res.detail = (res.detail + "\n\n" if res.detail else "") + detail


def judge(target: "Path | Scenario", *, replay_only: bool = False,
          client_factory: Optional[Callable[[Any], Any]] = None, timeout: float = 60.0,
          on_miss: str = "strict", update: Optional[bool] = None) -> ScenarioResult:
    """The verdict on one scenario (docs/testing.md). ``target`` is its directory, or a loaded
    :class:`Scenario` (the pytest plugin's: the verdict then runs on that work copy). A client made
    by ``client_factory`` is closed afterwards unless it says it is ``shared``. ``update``: golden
    mode for this verdict alone (default: ``FLUX_GOLDEN=update``) — what the app's accept key asks."""
    update = update_mode() if update is None else update
    own = not isinstance(target, Scenario)
    path = Path(target) if own else Path(target.path)
    t0 = time.perf_counter()
    res = ScenarioResult(path, path.name, ok=True)
    sc: Optional[Scenario] = None if own else target
    client = None
    goldens: dict[Path, Optional[bytes]] = {}
    work: Optional[Path] = None  # the scenario a deepseek snapshot directory is imported into
    try:
        if sc is None and is_log_dir(path):
            work = Path(tempfile.mkdtemp(prefix="flux-log-scenario-"))
            sc = Scenario.load(log_scenario(path, work))
        elif sc is None:
            validate_scenario_inputs(path)  # every file read and checked before anything is written
            sc = Scenario.load(path)
        if update:
            goldens = {g: g.read_bytes() if g.is_file() else None for g in (path / SNAP_FILE, path / GOLDEN_FILE)}
        asserted = _replay_part(sc, res, update)
        replayed_clean = res.ok  # the recording replays faithfully and matches its plan snapshot
        golden_session = sc.golden()
        if replay_only:
            res.check = "skipped (--replay-only)"
        else:
            client = (client_factory or offline_client)(sc)
            rep = sc.check(client, timeout=timeout, update=False, on_miss=on_miss)
            res.report = rep
            res.check = rep.status() if not rep.replay_only else f"replay only ({sc.manifest.recorded_by})"
            if not rep.replay_only:
                asserted = True
                if not rep.is_clean():
                    _fail(res, rep.first_divergence or rep.status(), rep.explain(), "check")
                else:
                    golden_session = sc.session_detail(rep.session)
        golden_path = path / GOLDEN_FILE
        if golden_path.exists() or (work is not None and update):  # (a snapshot directory's first golden)
            asserted = True
            with StoreReader(sc.work) as reader:  # the work copy: the golden embeds the run's sub-agents
                # re-baselined only from a recording that replays faithfully
                problem, rb = check_golden_file(golden_session, golden_path, update=update and replayed_clean,
                                                reader=reader)
            if rb is not None:
                res.rebaselined.append(rb)
            if problem is not None:
                _fail(res, problem.splitlines()[0], problem, "trajectory golden")
        if not asserted:
            res.ok = False
            res.error = ("nothing was asserted: no tool calls to replay and check skipped — drop --replay-only, or "
                         "record a scenario whose turn calls a tool")
    except (FluxError, AssertionFailed) as e:
        res.ok = False
        res.error = str(e).splitlines()[0]
        res.detail = (res.detail + "\n\n" if res.detail else "") + str(e)
        res.sections.append(("error", str(e)))
    finally:
        if client is not None and not getattr(client, "shared", False):
            client.close()
        if own and sc is not None:
            sc.close()
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
    if goldens and not res.ok and res.rebaselined:
        _restore(goldens)  # a scenario that fails re-baselines nothing: its goldens are put back
        res.detail = (res.detail + "\n\n" if res.detail else "") + (
            "not re-baselined (the scenario failed): " + ", ".join(rb.path for rb in res.rebaselined))
        res.rebaselined = []
    if res.error and not res.first_divergence:
        res.first_divergence = res.error
    res.seconds = time.perf_counter() - t0
    return res


def _restore(goldens: dict[Path, Optional[bytes]]) -> None:
    for p, data in goldens.items():
        if data is None:
            p.unlink(missing_ok=True)
        elif not p.is_file() or p.read_bytes() != data:
            p.write_bytes(data)


def run_all(paths: Iterable[str | os.PathLike[str]], *, replay_only: bool = False, keyword: Optional[str] = None,
            client_factory: Optional[Callable[[Any], Any]] = None, ops: Optional[str] = None,
            on_result: Optional[Callable[[ScenarioResult], None]] = None,
            on_miss: str = "strict") -> tuple[list[ScenarioResult], list[Path]]:
    """The verdict on everything under ``paths``: one result per scenario and per incomplete
    directory (in path order), and the orphan goldens (``-k`` filters the scenarios and the
    incomplete directories by name; orphans always count). ``ops`` (``"module:attr"``) re-drives
    every scenario with those ops instead of the ones its scenario.toml names."""
    found = collect(paths)
    targets: list[Any] = sorted([*found.scenarios, *found.incomplete],
                                key=lambda t: str(t.path if isinstance(t, Incomplete) else t))
    if keyword:
        targets = [t for t in targets if keyword_match(keyword, (t.path if isinstance(t, Incomplete) else t).name)]
    results = []
    cache = ClientCache(ops) if client_factory is None and not replay_only else None
    try:
        for t in targets:
            if isinstance(t, Incomplete):
                r = judge_incomplete(t)
            else:
                r = judge(t, replay_only=replay_only, client_factory=client_factory or cache, on_miss=on_miss)
            results.append(r)
            if on_result is not None:
                on_result(r)
    finally:
        if cache is not None:
            cache.close()
    return results, found.orphans
