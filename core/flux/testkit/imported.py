"""Scenarios made from imported runs: another agent's log as an offline, *replay only* test.

:func:`scenario_from_import` writes the scenario directory for a session ``flux import`` made
(``flux record --from-import``); :func:`log_scenario` is what ``flux test`` makes of a deepseek
harness snapshot directory: a temporary scenario that must replay faithfully and match the
directory's golden (docs/testing.md).
"""

from __future__ import annotations

import difflib
import json
import shutil
import tempfile
from pathlib import Path
from typing import Optional

from ..cassette.record import DEFAULT_CAP
from ..cassette.redactor import Redactor
from ..errors import FluxError
from ..importers import ImportFormatError, parse_file, parse_kept
from ..importers.model import ImportedRun
from ..importers.writer import Source, write_run
from ..model.provenance import source_of
from ..model.session import load_session
from ..store.store import StoreReader
from .atif import SUBAGENTS, check_golden_file, normalize
from .errors import ScenarioError
from .golden import update_mode
from .manifest import MANIFEST_FILE, Manifest
from .scenario import MODEL_FILE, SNAP_FILE, snapshot_text

__all__ = ["IMPORT_PREFIX", "scenario_from_import", "scenario_from_run", "is_log_dir", "log_scenario", "LOG_FILE",
           "GOLDEN", "roundtrip_differences"]

IMPORT_PREFIX = "import:"  # flux_version of a scenario made from an import
LOG_FILE = "session.jsonl"  # the deepseek harness's scenario log
GOLDEN = "trajectory.golden.json"


def is_log_dir(path: Path) -> bool:
    """A deepseek harness snapshot directory (its ``session.jsonl``, no ``scenario.toml``)."""
    return (path / LOG_FILE).is_file() and not (path / MANIFEST_FILE).exists()


def scenario_from_import(store: Path, session: str, directory: Path, *, name: Optional[str] = None,
                         update: bool = False) -> str:
    """Write the scenario for the imported ``session`` of ``store`` into ``directory``; returns its
    session id in the scenario's store."""
    with StoreReader(store) as reader:
        row = reader.resolve_session(session)
        payload = source_of(reader, row.id)
    if payload is None:
        raise ScenarioError(f"{row.id} was not made by `flux import` — record a run of this runtime with "
                            "flux record NAME PROMPT -m MODEL instead")
    if not payload.get("root"):
        raise ScenarioError(f"{row.id} is a sub-agent of an import — make the scenario from its root session")
    run, src = parse_kept(payload)
    return scenario_from_run(run, src, directory, name=name, update=update)


def scenario_from_run(run: ImportedRun, src: Source, directory: Path, *, name: Optional[str] = None,
                      update: bool = False) -> str:
    p = Path(directory)
    if (p / MANIFEST_FILE).exists() and not (update or update_mode()):
        raise ScenarioError(f"{p} already holds a recorded scenario — replace it deliberately with --update")
    if p.exists() and not p.is_dir():
        raise ScenarioError(f"{p} is a file — give a directory for the scenario")
    p.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".flux-import-", dir=p))
    try:
        res = write_run(staging, run, src, model_cassette=staging / MODEL_FILE)
        (staging / MODEL_FILE).touch()
        with StoreReader(staging) as reader:
            detail = load_session(reader, res.session)
            (staging / SNAP_FILE).write_text(snapshot_text(detail), encoding="utf-8")
            problem, _rb = check_golden_file(detail, staging / GOLDEN, update=True, reader=reader)
        if problem is not None:  # (update mode writes the golden; a problem here is the kit's own)
            raise ScenarioError(problem.splitlines()[0])
        first = detail.turns[0].user_input if detail.turns else ""
        redactor = Redactor()
        Manifest(schema=1, name=name or p.resolve().name, flux_version=f"{IMPORT_PREFIX}{run.format}:{run.version}",
                 recorded_at_ms=detail.row.updated_at, session=res.session, input=redactor.redact(first),
                 model=run.model, cassette_max_bytes=DEFAULT_CAP,
                 redaction_marker=redactor.marker).write(staging / MANIFEST_FILE)
        for f in ("events.db", "flow.db", MODEL_FILE, SNAP_FILE, GOLDEN, MANIFEST_FILE):
            for side in ("-wal", "-shm"):
                (p / (f + side)).unlink(missing_ok=True)
            (staging / f).replace(p / f)
        return res.session
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def log_scenario(log_dir: Path, work: Path) -> Path:
    """The scenario of a deepseek snapshot directory's ``session.jsonl``, written under ``work``,
    with the directory's golden (if any) beside it."""
    try:
        run, src = parse_file(log_dir / LOG_FILE, "deepseek")
    except ImportFormatError as e:
        raise FluxError(str(e)) from None
    out = work / log_dir.name
    scenario_from_run(run, src, out, name=log_dir.name, update=True)
    golden = log_dir / GOLDEN
    (out / GOLDEN).unlink(missing_ok=True)
    if golden.is_file():
        shutil.copyfile(golden, out / GOLDEN)
    return out


_STEP_KEYS = ("source", "message", "reasoning_content")
_METRIC_KEYS = ("prompt_tokens", "completion_tokens", "cached_tokens")


def _comparable(doc: dict) -> dict:
    """What an ATIF round trip keeps of a (normalised) trajectory: the non-system steps' source,
    message, reasoning, tool calls, observation results and token metrics, and the sub-agents."""
    steps = []
    for s in doc.get("steps") or []:
        if not isinstance(s, dict) or s.get("source") == "system":
            continue
        out = {k: s[k] for k in _STEP_KEYS if s.get(k) not in (None, "") or k == "source"}
        calls = [{k: c.get(k) for k in ("tool_call_id", "function_name", "arguments")} for c in s.get("tool_calls") or []]
        if calls:
            out["tool_calls"] = calls
        results = [{k: r.get(k) for k in ("source_call_id", "content")}
                   for r in (s.get("observation") or {}).get("results") or []]
        if results:
            out["results"] = results
        metrics = {k: (s.get("metrics") or {}).get(k) or 0 for k in _METRIC_KEYS}
        if any(metrics.values()):
            out["metrics"] = metrics
        steps.append(out)
    subs = [_comparable(x) for x in doc.get(SUBAGENTS) or [] if isinstance(x, dict)]
    return {"steps": steps, "subagents": sorted(subs, key=lambda d: json.dumps(d, sort_keys=True))}


def roundtrip_differences(source: dict, exported: dict) -> list[str]:
    """How an ATIF trajectory that was imported and exported again differs from the original, after
    normalisation (volatile values, call ids), on what a round trip keeps (:func:`_comparable`):
    ``[]`` when they are equal. The agent block, ``extra``, ``schema_version`` (the export writes the
    ``atif`` package's) and ``system`` steps (the imported run's instructions) are not compared."""
    a, b = _comparable(normalize(source)), _comparable(normalize(exported))
    if a == b:
        return []
    left = json.dumps(a, indent=1, sort_keys=True).splitlines()
    right = json.dumps(b, indent=1, sort_keys=True).splitlines()
    return [ln for ln in difflib.unified_diff(left, right, "imported", "exported", lineterm="", n=1)][2:]
