"""``flux test``: discover scenario directories, replay and check each, report.

Per scenario:

1. **replay** (§4.4) must be faithful, and the recorded plans must equal ``plan.flux.snap``
   (re-baselined under ``--update``);
2. **check** (unless ``--replay-only``) re-drives the recorded input through this runtime's agent
   loop, offline: an :func:`offline_client` with the recorded request settings (system prompt,
   max tokens, temperature, model id from ``model.jsonl``'s first record) and the built-in coding
   ops, the model served strictly from ``model.jsonl``, the world frozen on the recorded cells.
   A scenario recorded by another runtime is *replay only* (its replay still has to pass);
3. a ``trajectory.golden.json`` in the scenario directory is compared with the run's ATIF shape
   (see :mod:`flux.testkit.atif`).

Guards: a directory tree holding a ``*.golden.json`` that no scenario owns fails (orphan golden);
a scenario for which nothing could be asserted (no cells to replay and ``--replay-only``) fails.

Nothing here touches the network: the provider of the offline client refuses every call, and the
strict cassette never falls through to it.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from ..agent.providers.base import ModelRequest, ProviderError
from ..errors import FluxError, NotReplayable
from .errors import AssertionFailed
from .golden import Rebaseline, update_mode
from .manifest import MANIFEST_FILE

__all__ = ["ScenarioResult", "discover", "orphan_goldens", "run_scenario", "run_all", "offline_client", "keyword_match",
           "GOLDEN_FILE"]

GOLDEN_FILE = "trajectory.golden.json"
GOLDEN_GLOB = "*.golden.json"


class OfflineProvider:
    """A provider that refuses every call — the offline check client's; the strict cassette
    answers every model call before it could be asked."""

    def __init__(self, name: str, model: str):
        self.name = name
        self.model = model

    async def stream(self, request: ModelRequest):
        raise ProviderError("offline: flux test never calls a live model")
        yield  # pragma: no cover


@dataclass
class ScenarioResult:
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

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.name, "path": str(self.path), "ok": self.ok, "replay": self.replay, "check": self.check,
            "first_divergence": self.first_divergence, "error": self.error, "seconds": round(self.seconds, 4),
            "rebaselined": [r.line() for r in self.rebaselined],
            "report": self.report.to_json() if self.report is not None else None,
        }


def discover(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Scenario directories under ``paths`` (a scenario directory itself, or any directory tree),
    sorted, without descending into a scenario. A path that does not exist is an error."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw).expanduser()
        if not p.exists():
            raise FluxError(f"{p} does not exist — give a scenario directory or a directory of scenarios")
        if not p.is_dir():
            raise FluxError(f"{p} is not a directory — give a scenario directory or a directory of scenarios")
        if (p / MANIFEST_FILE).is_file():
            found.append(p)
            continue
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            if MANIFEST_FILE in files:
                found.append(Path(root))
                dirs[:] = []
    out: list[Path] = []
    for f in found:
        if f not in out:
            out.append(f)
    return out


def orphan_goldens(paths: Iterable[str | os.PathLike[str]], scenarios: list[Path]) -> list[Path]:
    """``*.golden.json`` files under ``paths`` that no scenario owns (only ``trajectory.golden.json``
    directly inside a scenario directory is owned)."""
    owned = {(s / GOLDEN_FILE).resolve() for s in scenarios}
    out = []
    for raw in paths:
        p = Path(raw).expanduser()
        if p.is_dir():
            for g in sorted(p.rglob(GOLDEN_GLOB)):
                if g.resolve() not in owned and g not in out:
                    out.append(g)
    return out


_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


def keyword_match(expr: str, name: str) -> bool:
    """pytest's ``-k``: words (substring, case-insensitive) with ``and``/``or``/``not``/parentheses."""
    tokens = [t for t in _TOKEN.findall(expr) if t]
    pos = 0

    def peek() -> Optional[str]:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def atom() -> bool:
        t = peek()
        if t is None:
            raise FluxError(f"-k {expr!r}: the expression ends too early")
        if t == "not":
            take()
            return not atom()
        if t == "(":
            take()
            v = either()
            if peek() != ")":
                raise FluxError(f"-k {expr!r}: a parenthesis is not closed")
            take()
            return v
        if t in (")", "and", "or"):
            raise FluxError(f"-k {expr!r}: unexpected {t!r}")
        return take().lower() in name.lower()

    def both() -> bool:
        v = atom()
        while peek() == "and":
            take()
            v = atom() and v
        return v

    def either() -> bool:
        v = both()
        while peek() == "or":
            take()
            v = both() or v
        return v

    result = either()
    if peek() is not None:
        raise FluxError(f"-k {expr!r}: unexpected {peek()!r}")
    return result


def _client_settings(scenario: Any) -> tuple[dict[str, Any], Optional[str]]:
    """The recorded request settings (system prompt, max tokens, temperature) and request model
    id, read from model.jsonl's first record; the client defaults when there is none."""
    from ..agent.client import DEFAULT_INSTRUCTIONS
    from ..agent.model_cassette import load_records
    from .scenario import MODEL_FILE

    records = load_records(Path(scenario.path) / MODEL_FILE)
    if records and isinstance(records[0].request, dict):
        req = records[0].request
        model = req.get("model")
        return ({"instructions": req.get("system"), "max_tokens": req.get("max_tokens") or 4096,
                 "temperature": req.get("temperature")}, model if isinstance(model, str) else None)
    return {"instructions": DEFAULT_INSTRUCTIONS}, None


class ClientCache:
    """One offline client per distinct recorded configuration, shared by the scenarios of a run
    (``flux test`` over many scenarios recorded the same way builds one client, not one each).
    Its own store is a throwaway directory: check writes into each scenario's work copy."""

    def __init__(self) -> None:
        import tempfile

        from .scenario import work_root

        self.dir = Path(tempfile.mkdtemp(prefix="flux-test-clients-", dir=work_root()))
        self.clients: dict[str, Any] = {}

    def __call__(self, scenario: Any) -> Any:
        import json as _json

        settings, request_model = _client_settings(scenario)
        key = _json.dumps([scenario.manifest.model, request_model, settings], sort_keys=True, default=str)
        c = self.clients.get(key)
        if c is None:
            c = offline_client(scenario, store=self.dir / str(len(self.clients)), settings=(settings, request_model))
            c.shared = True
            self.clients[key] = c
        return c

    def close(self) -> None:
        import shutil

        for c in self.clients.values():
            c.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def offline_client(scenario: Any, *, store: Any = None, settings: Any = None) -> Any:
    """A client that re-drives ``scenario`` as it was recorded by ``flux record``: the recorded
    request settings, the built-in coding ops, no network."""
    from ..agent.client import Client

    m = scenario.manifest
    provider = m.model.split(":", 1)[0] if ":" in m.model else m.model
    kw, request_model = settings if settings is not None else _client_settings(scenario)
    store_dir = store if store is not None else scenario.work
    client = Client(OfflineProvider(provider, m.model), model=m.model, workspace=scenario.work, store=store_dir,
                    env_secrets=True, **kw)
    if isinstance(request_model, str):
        client.request_model = request_model
    from .scenario import throwaway

    throwaway(client.writer)  # its store is the scenario's throwaway work copy
    client.offline = True  # check never re-records through it, even under FLUX_GOLDEN=update
    return client


def _replay_part(sc: Any, res: ScenarioResult) -> bool:
    """Replay + plan snapshot; returns whether anything was asserted."""
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
    try:
        out.assert_plan_snapshot()
    except AssertionFailed as e:
        res.replay += " · ✗ plan snapshot"
        problems.append(e)
    res.rebaselined += out.rebaselined
    if problems:
        res.first_divergence = problems[0].summary
        res.detail = "\n\n".join(str(p) for p in problems)
        res.ok = False
    return True


def run_scenario(path: Path, *, replay_only: bool = False, client_factory: Optional[Callable[[Any], Any]] = None,
                 timeout: float = 60.0) -> ScenarioResult:
    from ..store.store import StoreReader
    from .atif import check_golden_file
    from .scenario import Scenario

    t0 = time.perf_counter()
    res = ScenarioResult(path, path.name, ok=True)
    sc = None
    client = None
    try:
        sc = Scenario.load(path)
        asserted = _replay_part(sc, res)
        golden_session = sc.golden()
        if replay_only:
            res.check = "skipped (--replay-only)"
        else:
            client = (client_factory or offline_client)(sc)
            rep = sc.check(client, timeout=timeout, update=False)
            res.report = rep
            res.check = rep.status() if not rep.replay_only else f"replay only ({sc.manifest.recorded_by})"
            if not rep.replay_only:
                asserted = True
                if not rep.is_clean():
                    res.ok = False
                    res.first_divergence = res.first_divergence or rep.first_divergence
                    res.detail = (res.detail + "\n\n" if res.detail else "") + rep.explain()
                else:
                    golden_session = sc.session_detail(rep.session)
        golden_path = Path(path) / GOLDEN_FILE
        if golden_path.exists():
            asserted = True
            with StoreReader(sc.work) as reader:  # the work copy: the golden embeds the run's sub-agents
                problem, rb = check_golden_file(golden_session, golden_path, update=update_mode(), reader=reader)
            if rb is not None:
                res.rebaselined.append(rb)
            if problem is not None:
                res.ok = False
                res.first_divergence = res.first_divergence or problem.splitlines()[0]
                res.detail = (res.detail + "\n\n" if res.detail else "") + problem
        if not asserted:
            res.ok = False
            res.error = ("nothing was asserted: no tool calls to replay and check skipped — drop --replay-only, or "
                         "record a scenario whose turn calls a tool")
    except (FluxError, AssertionFailed) as e:
        res.ok = False
        res.error = str(e).splitlines()[0]
        res.detail = str(e)
    finally:
        if client is not None and not getattr(client, "shared", False):
            client.close()
        if sc is not None:
            sc.close()
    if res.error and not res.first_divergence:
        res.first_divergence = res.error
    res.seconds = time.perf_counter() - t0
    return res


def run_all(paths: Iterable[str | os.PathLike[str]], *, replay_only: bool = False, keyword: Optional[str] = None,
            client_factory: Optional[Callable[[Any], Any]] = None, on_result: Optional[Callable[[ScenarioResult], None]] = None
            ) -> tuple[list[ScenarioResult], list[Path]]:
    """Run every discovered scenario; returns the results and the orphan goldens."""
    paths = list(paths)
    scenarios = discover(paths)
    orphans = orphan_goldens(paths, scenarios)
    if keyword:
        scenarios = [s for s in scenarios if keyword_match(keyword, s.name)]
    results = []
    cache = ClientCache() if client_factory is None and not replay_only else None
    try:
        for s in scenarios:
            r = run_scenario(s, replay_only=replay_only, client_factory=client_factory or cache)
            results.append(r)
            if on_result is not None:
                on_result(r)
    finally:
        if cache is not None:
            cache.close()
    return results, orphans
