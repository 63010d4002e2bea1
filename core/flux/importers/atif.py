"""ATIF trajectories (one JSON document, as NOOA, Harbor and ``atif-make`` write them) as runs: a
``user`` step opens a turn, each ``agent`` step is one model call whose ``observation`` results are
its tool results, and an embedded sub-agent trajectory is a child session (docs/import.md).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Optional

from ..canonical import scrub_value
from .model import (ImportedRun, ImportFormatError, ModelCall, ToolUse, Turn, as_text, check_json_value, content_text,
                    load_json, token_count)

__all__ = ["parse_atif", "looks_like_atif", "iso_to_ms"]


def looks_like_atif(text: str) -> bool:
    head = text.lstrip()[:4096]
    return head.startswith("{") and '"schema_version"' in head and "ATIF" in head


def iso_to_ms(value: Any, where: str) -> Optional[int]:
    """An ISO-8601 time (or epoch milliseconds) as epoch milliseconds; ``None`` for none."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ImportFormatError(f"{where}: a timestamp must be an ISO-8601 string, got a boolean")
    if isinstance(value, (int, float)):
        if not 0 <= value < 1e14:
            raise ImportFormatError(f"{where}: the timestamp {value} is out of range")
        return int(value)
    if not isinstance(value, str):
        raise ImportFormatError(f"{where}: a timestamp must be an ISO-8601 string, got {type(value).__name__}")
    try:
        dt = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ImportFormatError(f"{where}: {value[:40]!r} is not an ISO-8601 timestamp") from None
    if dt.tzinfo is None:
        from datetime import timezone

        dt = dt.replace(tzinfo=timezone.utc)
    try:
        ms = int(dt.timestamp() * 1000)
    except (OverflowError, ValueError, OSError):
        raise ImportFormatError(f"{where}: the timestamp {value[:40]!r} is out of range") from None
    return ms if ms >= 0 else 0


def _usage(metrics: Any, where: str) -> Optional[dict]:
    if metrics is None:
        return None
    if not isinstance(metrics, dict):
        raise ImportFormatError(f"{where}: `metrics` must be an object")
    prompt = token_count(metrics.get("prompt_tokens"), where, "prompt_tokens")
    cached = token_count(metrics.get("cached_tokens"), where, "cached_tokens")
    extra = metrics.get("extra") if isinstance(metrics.get("extra"), dict) else {}
    return {"input_tokens": max(0, prompt - cached), "output_tokens": token_count(metrics.get("completion_tokens"), where,
                                                                            "completion_tokens"),
            "cache_read_input_tokens": cached, "reasoning_tokens": token_count(extra.get("reasoning_tokens"), where,
                                                                        "reasoning_tokens")}


def parse_atif(text: str, name: str) -> ImportedRun:
    """The run of an ATIF document (``name`` is the file, for the errors)."""
    doc = load_json(text, name, "an ATIF trajectory is one JSON document", "not an ATIF trajectory")
    return _trajectory(doc, name, depth=0)


def _trajectory(doc: Any, name: str, depth: int) -> ImportedRun:
    if depth > 8:
        raise ImportFormatError(f"{name}: sub-agent trajectories nest deeper than 8 levels")
    if not isinstance(doc, dict):
        raise ImportFormatError(f"{name}: an ATIF trajectory is a JSON object, got {type(doc).__name__}")
    check_json_value(doc, name)
    doc = scrub_value(doc)
    version = doc.get("schema_version")
    if not isinstance(version, str) or not version.startswith("ATIF"):
        raise ImportFormatError(f"{name}: `schema_version` must name an ATIF version (e.g. \"ATIF-v1.7\"), got "
                                f"{json.dumps(version)[:40]}")
    agent = doc.get("agent")
    if not isinstance(agent, dict):
        raise ImportFormatError(f"{name}: `agent` must be an object with the agent's name")
    steps = doc.get("steps")
    if not isinstance(steps, list):
        raise ImportFormatError(f"{name}: `steps` must be a list")
    subs = doc.get("subagent_trajectories") or []
    if not isinstance(subs, list):
        raise ImportFormatError(f"{name}: `subagent_trajectories` must be a list")
    by_ref: dict[str, Any] = {}
    for i, sub in enumerate(subs):
        if not isinstance(sub, dict):
            raise ImportFormatError(f"{name}: subagent_trajectories[{i}] must be an object")
        for key in ("trajectory_id", "session_id"):
            if isinstance(sub.get(key), str):
                by_ref.setdefault(sub[key], sub)
    model = agent.get("model_name")
    run = ImportedRun(format="atif", version=version, agent=as_text(agent.get("name"), name, "agent.name") or "agent",
                      model=as_text(model, name, "agent.model_name") or "unknown",
                      foreign_id=doc.get("session_id") if isinstance(doc.get("session_id"), str) else None)
    turn: Optional[Turn] = None
    for i, step in enumerate(steps):
        where = f"{name}: step {i + 1}"
        if not isinstance(step, dict):
            raise ImportFormatError(f"{where}: a step must be an object")
        source = step.get("source")
        ts = iso_to_ms(step.get("timestamp"), where)
        if source == "system":
            if turn is None and run.instructions is None:
                run.instructions = content_text(step.get("message"), where, "message")
            continue
        if source == "user":
            turn = Turn(user=content_text(step.get("message"), where, "message"), ts=ts)
            run.turns.append(turn)
            continue
        if source != "agent":
            raise ImportFormatError(f"{where}: `source` must be system, user or agent, got {json.dumps(source)[:40]}")
        if turn is None:
            turn = Turn(user="", ts=ts)
            run.turns.append(turn)
        call = ModelCall(text=content_text(step.get("message"), where, "message"),
                         thinking=as_text(step.get("reasoning_content"), where, "reasoning_content"),
                         usage=_usage(step.get("metrics"), where), ts=ts,
                         model=step.get("model_name") if isinstance(step.get("model_name"), str) else None)
        if run.model == "unknown" and call.model:
            run.model = call.model
        calls = step.get("tool_calls") or []
        if not isinstance(calls, list):
            raise ImportFormatError(f"{where}: `tool_calls` must be a list")
        obs = step.get("observation")
        results = []
        if obs is not None:
            if not isinstance(obs, dict) or not isinstance(obs.get("results", []), list):
                raise ImportFormatError(f"{where}: `observation` must be an object with a `results` list")
            results = obs.get("results", [])
        by_id: dict[str, dict] = {}
        loose: list[dict] = []
        for k, r in enumerate(results):
            if not isinstance(r, dict):
                raise ImportFormatError(f"{where}: observation result {k + 1} must be an object")
            cid = r.get("source_call_id")
            if isinstance(cid, str) and cid:
                by_id[cid] = r
            else:
                loose.append(r)
        for k, c in enumerate(calls):
            if not isinstance(c, dict):
                raise ImportFormatError(f"{where}: tool call {k + 1} must be an object")
            fn = c.get("function_name")
            if not isinstance(fn, str) or not fn:
                raise ImportFormatError(f"{where}: tool call {k + 1} needs a `function_name`")
            args = c.get("arguments") if c.get("arguments") is not None else {}
            if not isinstance(args, dict):
                raise ImportFormatError(f"{where}: the arguments of tool call {k + 1} (`{fn[:40]}`) must be an object")
            cid = c.get("tool_call_id")
            cid = cid if isinstance(cid, str) and cid else f"call_{i + 1}_{k + 1}"
            r = by_id.pop(cid, None) or (loose.pop(0) if loose else None)
            use = ToolUse(id=cid, name=as_text(fn, where, "function_name"), input=args, ts=ts)
            if r is not None:
                use.result = content_text(r.get("content"), f"{where}: the result of tool call {k + 1}",
                                          "content")
                extra = r.get("extra") if isinstance(r.get("extra"), dict) else {}
                use.is_error = bool(extra.get("is_error"))
                refs = r.get("subagent_trajectory_ref") or []
                if isinstance(refs, dict):
                    refs = [refs]
                if not isinstance(refs, list):
                    raise ImportFormatError(f"{where}: `subagent_trajectory_ref` must be a list")
                for ref in refs:
                    key = next((ref.get(x) for x in ("trajectory_id", "session_id")
                                if isinstance(ref, dict) and isinstance(ref.get(x), str) and ref.get(x) in by_ref), None)
                    if key is not None and use.child is None:
                        sub = by_ref[key]
                        use.child = _trajectory(sub, f"{name} (sub-agent {key[:40]})", depth + 1)
                        use.role = use.child.agent
            call.tool_uses.append(use)
        turn.calls.append(call)
    extra = doc.get("extra") if isinstance(doc.get("extra"), dict) else {}
    if extra.get("crashed") and run.turns:
        run.turns[-1].error = f"the agent crashed ({as_text(extra.get('outcome'), name, 'outcome') or 'extra.crashed'})"
    return run
