"""Golden trajectories: a session as an ATIF trajectory (:func:`export`), normalised so two
recordings of one scenario agree (:func:`normalize`), reduced to a :class:`Shape`, and compared with a
committed golden file (:func:`check_golden`).

What normalisation replaces and what a Shape compares are in docs/testing.md ("Golden trajectories").
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Optional

from .. import __version__
from ..errors import FluxError, import_extra
from ..model.session import SessionDetail
from ..timefmt import iso_ms
from .golden import Rebaseline
from .inputs import load_golden

__all__ = ["export", "normalize", "Shape", "shape", "shape_deltas", "check_golden", "check_golden_file", "dumps",
           "ATIF_VOLATILE", "discover_volatile", "GoldenMismatch", "SUBAGENTS"]

ATIF_VOLATILE = ("session_id", "timestamp")
SUBAGENTS = "subagent_trajectories"  # one name for the export, the normaliser and the Shape
_TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "cached_tokens", "total_prompt_tokens",
               "total_completion_tokens", "total_cached_tokens", "reasoning_tokens")
_ADDR = re.compile(r"0x[0-9a-fA-F]{6,16}")
_TMP = re.compile(r"/tmp/[A-Za-z0-9_.-]+")
UPDATE_HINT = "if this change is intended: flux golden update S GOLDEN.json (or FLUX_GOLDEN=update flux test)"


class GoldenMismatch(FluxError):
    pass


def _atif() -> Any:
    return import_extra("atif", "ATIF export needs the `atif` package — install it with pip install 'flux-tui[atif]'")


def _str(v: object) -> str:
    """A stored text field as text, whatever a hostile row put there (a number, a list)."""
    return v if isinstance(v, str) else "" if v is None else str(v)


def _text(blocks: list) -> str:
    return "".join(_str(b.get("text", "")) for b in blocks if isinstance(b, dict) and b.get("type") == "text")


def _result_text(block: dict) -> str:
    c = block.get("content")
    if isinstance(c, list):
        return "".join(_str(x.get("text", "")) for x in c if isinstance(x, dict))
    return "" if c is None else str(c)


def export(detail: SessionDetail, reader: Any = None) -> dict:
    """The session as an ATIF trajectory (a JSON-ready dict, ``None`` fields dropped). With the
    store's ``reader``, its sub-agent sessions are embedded (docs/testing.md)."""
    return _trajectory(detail, reader, None, set()).model_dump(mode="json", exclude_none=True)


def _subagents(detail: SessionDetail, reader: Any, seen: set[str]) -> list[Any]:
    from ..model.lineage import lineage_of
    from ..model.session import load_session

    out = []
    for row in reader.children_of(detail.id):
        lin = lineage_of(row)
        if lin is None or lin.kind != "sub-agent" or row.id in seen:
            continue
        seen.add(row.id)
        out.append(_trajectory(load_session(reader, row.id), reader, lin.detail or "sub-agent", seen))
    return out


def _trajectory(detail: SessionDetail, reader: Any, role: Optional[str], seen: set[str]) -> Any:
    atif = _atif()
    from ..store.events import Compacted, Message

    msgs: list[tuple[int, Message]] = []
    for ev in detail.events:
        if isinstance(ev.body, Message):
            msgs.append((ev.ts, ev.body))
        elif isinstance(ev.body, Compacted):
            msgs = [(ev.ts, Message(role=m.get("role", "user"), content=m.get("content") or []))
                    for m in ev.body.messages if isinstance(m, dict)]
    usages = [u for t in detail.turns for (_m, u) in t.call_models]
    model = detail.turns[-1].model if detail.turns else detail.row.model
    steps: list[Any] = []
    calls = 0
    for i, (ts, m) in enumerate(msgs):
        blocks = [b for b in (m.content or []) if isinstance(b, dict)]
        if m.role == "user":
            if blocks and all(b.get("type") == "tool_result" for b in blocks):
                continue  # folded into the agent step that made the calls
            steps.append(atif.Step(step_id=len(steps) + 1, timestamp=iso_ms(ts), source="user", message=_text(blocks)))
            continue
        if m.role != "assistant":
            continue
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        thinking = "".join(_str(b.get("thinking", "")) for b in blocks if b.get("type") == "thinking") or None
        tool_calls = [atif.ToolCall(tool_call_id=str(b.get("id", "")), function_name=str(b.get("name", "")),
                                    arguments=b.get("input") if isinstance(b.get("input"), dict) else {})
                      for b in uses] or None
        observation = None
        if uses and i + 1 < len(msgs) and msgs[i + 1][1].role == "user":
            results = [atif.ObservationResult(source_call_id=str(b.get("tool_use_id", "")), content=_result_text(b))
                       for b in msgs[i + 1][1].content if isinstance(b, dict) and b.get("type") == "tool_result"]
            observation = atif.Observation(results=results) if results else None
        metrics = None
        if calls < len(usages):
            u = usages[calls]
            metrics = atif.Metrics(
                prompt_tokens=u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens,
                completion_tokens=u.output_tokens, cached_tokens=u.cache_read_input_tokens,
                extra={"reasoning_tokens": u.reasoning_tokens} if u.reasoning_tokens else None)
        calls += 1
        steps.append(atif.Step(step_id=len(steps) + 1, timestamp=iso_ms(ts), source="agent", model_name=model,
                               message=_text(blocks), reasoning_content=thinking, tool_calls=tool_calls,
                               observation=observation, metrics=metrics, llm_call_count=1))
    crashed = any(t.outcome in ("error", "cancelled") or not t.ended for t in detail.turns)
    extra: dict[str, Any] = {"flux_session": detail.id}
    if crashed:
        extra["crashed"] = True
        extra["outcome"] = detail.turns[-1].outcome if detail.turns else "pending"
    total_p = sum(u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens for u in usages)
    subs = _subagents(detail, reader, seen | {detail.id}) if reader is not None else []
    traj = atif.Trajectory(
        schema_version=_schema_version(atif), session_id=detail.id,
        trajectory_id=detail.id if role is not None else None,
        agent=atif.Agent(name=role or "flux-tui", version=__version__, model_name=model),
        steps=steps,
        final_metrics=atif.FinalMetrics(total_prompt_tokens=total_p,
                                        total_completion_tokens=sum(u.output_tokens for u in usages),
                                        total_cached_tokens=sum(u.cache_read_input_tokens for u in usages),
                                        total_steps=len(steps)),
        extra=extra, subagent_trajectories=subs or None)
    return traj


def _schema_version(atif: Any) -> str:
    """The package's ATIF version tag (``ATIF-v1.8`` for atif 1.8.x)."""
    from importlib.metadata import version

    major, minor = version("atif").split(".")[:2]
    return f"ATIF-v{major}.{minor}"


def dumps(d: Any) -> str:
    return json.dumps(d, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def normalize(traj: dict, *, sort_subagents: bool = True) -> dict:
    """Placeholders for volatile values (docs/testing.md); ``schema_version`` untouched.
    Embedded sub-agent trajectories are normalised each on its own, then content-sorted (unless
    ``sort_subagents`` is false) and numbered ``subagent_1…`` in that order."""
    subs = traj.get(SUBAGENTS) if isinstance(traj, dict) else None
    top = {k: v for k, v in traj.items() if k != SUBAGENTS} if isinstance(subs, list) else traj
    out = _normalize_one(top)
    if isinstance(subs, list) and subs:
        norm = [normalize({**s, "trajectory_id": "<trajectory_id>"} if isinstance(s, dict) else s,
                          sort_subagents=sort_subagents) for s in subs]
        if sort_subagents:
            norm.sort(key=lambda d: json.dumps(d, sort_keys=True, ensure_ascii=False))
        for i, d in enumerate(norm, 1):
            if isinstance(d, dict):
                d["trajectory_id"] = f"subagent_{i}"
        out[SUBAGENTS] = norm
    return out


def _normalize_one(traj: Any) -> Any:
    ids: dict[str, str] = {}

    def call_id(v: str) -> str:
        if v not in ids:
            ids[v] = f"call_{len(ids) + 1}"
        return ids[v]

    def walk(x: Any, key: Optional[str]) -> Any:
        if isinstance(x, dict):
            out = {}
            for k, v in x.items():
                if k in ATIF_VOLATILE:
                    out[k] = f"<{k}>"
                elif k in ("tool_call_id", "source_call_id") and isinstance(v, str):
                    out[k] = call_id(v)
                elif k == "flux_session":
                    out[k] = "<session_id>"
                else:
                    out[k] = walk(v, k)
            return out
        if isinstance(x, list):
            return [walk(v, key) for v in x]
        if isinstance(x, str):
            return _TMP.sub("/tmp/<tmp>", _ADDR.sub("0xADDR", x))
        return x

    return walk(traj, None)


def discover_volatile(a: dict, b: dict) -> set[str]:
    """Keys whose values differ between two exports of runs of the same scenario."""
    from ..model.surfaces import differing_keys

    return differing_keys(a, b)


@dataclass(frozen=True)
class Shape:
    step_count: int
    sources: tuple[str, ...]
    llm_calls: int
    functions: tuple[str, ...]
    subagents: tuple[str, ...]
    crashed: bool
    prompt_tokens: int
    completion_tokens: int
    content_hash: str


def _dict(x: Any) -> dict:
    return x if isinstance(x, dict) else {}


def _dicts(x: Any) -> list[dict]:
    return [v for v in x if isinstance(v, dict)] if isinstance(x, list) else []


def _count(x: Any) -> int:
    """A token or call count as a golden file holds it; anything that is not a number counts 0
    (a hand-edited or hostile golden gets a verdict, not a crash)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or x != x or x in (float("inf"), float("-inf")):
        return 0
    return int(x)


def _subagent_names(norm: dict, depth: int = 0) -> list[str]:
    names = []
    for s in _dicts(norm.get(SUBAGENTS)):
        names.append(str(_dict(s.get("agent")).get("name", "")))
        if depth < 32:
            names += _subagent_names(s, depth + 1)
    return names


def _without_tokens(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _without_tokens(v) for k, v in x.items() if k not in _TOKEN_KEYS}
    if isinstance(x, list):
        return [_without_tokens(v) for v in x]
    return x


def shape(norm: dict) -> Shape:
    norm = _dict(norm)
    steps = _dicts(norm.get("steps"))
    fm = _dict(norm.get("final_metrics"))
    pt = fm.get("total_prompt_tokens")
    ct = fm.get("total_completion_tokens")
    pt = _count(pt) if pt is not None else sum(_count(_dict(s.get("metrics")).get("prompt_tokens", 0)) for s in steps)
    ct = _count(ct) if ct is not None else sum(_count(_dict(s.get("metrics")).get("completion_tokens", 0)) for s in steps)
    return Shape(
        step_count=len(steps), sources=tuple(str(s.get("source", "")) for s in steps),
        llm_calls=sum(_count(s.get("llm_call_count") or 0) for s in steps),
        functions=tuple(str(tc.get("function_name", "")) for s in steps for tc in _dicts(s.get("tool_calls"))),
        subagents=tuple(sorted(_subagent_names(norm))),
        crashed=bool(_dict(norm.get("extra")).get("crashed")), prompt_tokens=pt, completion_tokens=ct,
        content_hash=hashlib.sha256(dumps(_without_tokens(norm)).encode()).hexdigest()[:12])


def shape_deltas(golden: Shape, actual: Shape, *, token_tolerance: float = 0.0, compare_content: bool = True) -> list[str]:
    """``field: golden -> actual`` for every differing field (tokens within the relative
    tolerance count as equal; the content hash last)."""
    out = []
    for f in fields(Shape):
        a, b = getattr(golden, f.name), getattr(actual, f.name)
        if f.name == "content_hash":
            continue
        if f.name in ("prompt_tokens", "completion_tokens"):
            if abs(a - b) <= token_tolerance * max(abs(a), 1):
                continue
        elif a == b:
            continue
        out.append(f"{f.name}: {a!r} -> {b!r}")
    if compare_content and golden.content_hash != actual.content_hash:
        out.append(f"content_hash: {golden.content_hash} -> {actual.content_hash}")
    return out


def check_golden(path: str | Path, actual: dict, *, update: bool = False, token_tolerance: float = 0.0,
                 compare_content: bool = True) -> tuple[Optional[str], Optional[Rebaseline]]:
    """Compare the normalised ``actual`` trajectory with the golden at ``path``.

    Returns ``(problem, rebaseline)``: ``problem`` is the failure text (``None`` when it matches),
    ``rebaseline`` what was written under ``update``."""
    p = Path(path)
    new_text = dumps(actual)
    if not p.exists():
        if update:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(new_text, encoding="utf-8")
            return None, Rebaseline(str(p), "trajectory golden", "", created=True)
        return (f"no golden trajectory at {p} — a missing golden is a failure, not an auto-create; create it: "
                f"flux golden update S {p}"), None
    try:
        old_text, golden = load_golden(p)
    except FluxError as e:
        if not update:
            return str(e), None
        old_text, golden = "", {}  # re-baselining replaces an unreadable golden
    gv, av = golden.get("schema_version"), actual.get("schema_version")
    if gv != av and not update:
        return f"golden recorded under {gv}, this run exports {av} — re-baseline with: flux golden update S {p}", None
    old_form = dumps(golden)  # the golden in the one pretty form: a formatting difference is no difference
    if old_form == new_text:
        return None, None
    diff = "\n".join(difflib.unified_diff(old_form.splitlines(), new_text.splitlines(), f"golden {p.name}",
                                          f"this run {p.name}", lineterm=""))
    if update:
        p.write_text(new_text, encoding="utf-8")
        return None, Rebaseline(str(p), "trajectory golden", diff)
    deltas = shape_deltas(shape(golden), shape(actual), token_tolerance=token_tolerance,
                          compare_content=compare_content)
    if not deltas:
        return None, None
    head = f"trajectory differs from {p}: " + "; ".join(deltas)
    return head + "\n\n" + diff + "\n\n" + UPDATE_HINT, None


def check_golden_file(detail: SessionDetail, path: str | Path, *, update: bool = False, token_tolerance: float = 0.0,
                      compare_content: bool = True, reader: Any = None) -> tuple[Optional[str], Optional[Rebaseline]]:
    return check_golden(path, normalize(export(detail, reader)), update=update, token_tolerance=token_tolerance,
                        compare_content=compare_content)
