"""Every file of a scenario directory read as hostile input, in one place, before anything is written.

:func:`validate_scenario_inputs` decodes ``scenario.toml``, ``model.jsonl``, ``replay.override.json``,
``plan.flux.snap`` and ``trajectory.golden.json`` (UTF-8, depth- and size-bounded, types checked, see
:mod:`flux.documents`); ``flux test`` calls it first, and a bad file is one line naming it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

from ..agent.model_cassette import load_records
from ..documents import json_document, read_text, short
from ..errors import FluxError
from .cassette import OVERRIDE_FILE, load_overrides
from .manifest import MANIFEST_FILE, Manifest

__all__ = ["validate_scenario_inputs", "load_golden", "load_snapshot", "golden_shape_problem", "SNAPSHOT_FILE",
           "MODEL_CASSETTE_FILE", "TRAJECTORY_GOLDEN_FILE"]

SNAPSHOT_FILE = "plan.flux.snap"
MODEL_CASSETTE_FILE = "model.jsonl"
TRAJECTORY_GOLDEN_FILE = "trajectory.golden.json"


def load_snapshot(path: str | os.PathLike[str]) -> Optional[str]:
    """The committed plan snapshot's text, or ``None`` when there is none."""
    p = Path(path)
    if not os.path.lexists(p):
        return None
    return read_text(p, "the plan snapshot", "re-baseline it: flux test --update (or delete it)")


def _int_or_none(v: Any) -> bool:
    return v is None or (type(v) is int)


def golden_shape_problem(golden: Any) -> Optional[str]:
    """What makes ``golden`` not a trajectory the comparison can read (``None`` when it is one)."""
    if not isinstance(golden, dict):
        return "a golden trajectory is a JSON object"
    sv = golden.get("schema_version")
    if sv is not None and not isinstance(sv, str):
        return f"`schema_version` must be a string, got {short(sv)}"
    steps = golden.get("steps", [])
    if not isinstance(steps, list):
        return f"`steps` must be a list, got {short(steps)}"
    for i, s in enumerate(steps):
        if not isinstance(s, dict):
            return f"steps[{i}] must be an object, got {short(s)}"
        if not isinstance(s.get("source", ""), str):
            return f"steps[{i}].source must be a string"
        if not _int_or_none(s.get("llm_call_count")):
            return f"steps[{i}].llm_call_count must be an integer"
        metrics = s.get("metrics")
        if metrics is not None and (not isinstance(metrics, dict)
                                    or not all(_int_or_none(metrics.get(k)) for k in ("prompt_tokens", "completion_tokens"))):
            return f"steps[{i}].metrics must be an object of integer token counts"
        calls = s.get("tool_calls")
        if calls is not None and (not isinstance(calls, list) or not all(
                isinstance(c, dict) and isinstance(c.get("function_name", ""), str) for c in calls)):
            return f"steps[{i}].tool_calls must be a list of objects with a string function_name"
    fm = golden.get("final_metrics")
    if fm is not None and (not isinstance(fm, dict) or not all(
            _int_or_none(fm.get(k)) for k in ("total_prompt_tokens", "total_completion_tokens"))):
        return "`final_metrics` must be an object of integer token totals"
    if not isinstance(golden.get("extra") or {}, dict):
        return "`extra` must be an object"
    return None


def load_golden(path: str | os.PathLike[str]) -> tuple[str, dict]:
    """``(text, trajectory)`` of a golden trajectory file, checked to be one."""
    p = Path(path)
    fix = f"re-create it: flux golden update S {p}"
    text = read_text(p, "the golden trajectory", fix)
    golden = json_document(text, str(p), fix)
    problem = golden_shape_problem(golden)
    if problem is not None:
        raise FluxError(f"{p}: not a golden trajectory ({problem}) — {fix}")
    return text, golden


def validate_scenario_inputs(path: str | os.PathLike[str]) -> Manifest:
    """Read every file of the scenario at ``path`` the way the test kit will; returns its manifest.
    Nothing is written; the first bad file raises."""
    p = Path(path)
    manifest = Manifest.read(p / MANIFEST_FILE)
    load_records(p / MODEL_CASSETTE_FILE)
    load_overrides(p / OVERRIDE_FILE)
    load_snapshot(p / SNAPSHOT_FILE)
    if os.path.lexists(p / TRAJECTORY_GOLDEN_FILE):
        load_golden(p / TRAJECTORY_GOLDEN_FILE)
    return manifest
