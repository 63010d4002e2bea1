"""The two surfaces a check compares, the transcript (what a person sees) and the event log (every
event, volatile values as placeholders), and the side-by-side trajectory text.

The volatile keys (:data:`VOLATILE_KEYS`: wall-clock durations, per-store observation ids) were found
by recording one scenario twice (:func:`discover_volatile`); a test re-derives them.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, Iterable, Sequence

from ..canonical import canonical_json
from ..model.session import SessionDetail

__all__ = [
    "VOLATILE_KEYS", "normalize", "event_log", "transcript", "cell_trajectory", "discover_volatile", "side_by_side",
    "aligned_rows", "first_change", "differing_keys", "cell_key", "redacted_cells", "as_the_redrive_sees_it",
    "surface_diff",
]

VOLATILE_KEYS = frozenset({"duration_us", "elapsed_us", "execution_us", "ttft_us", "session_id", "turn_id"})
_ADDR = re.compile(r"0x[0-9a-fA-F]{6,16}")
_TMP = re.compile(r"/tmp/[A-Za-z0-9_.-]+")


def normalize(value: Any, volatile: frozenset[str] = VOLATILE_KEYS) -> Any:
    """``value`` with volatile keys' values replaced by ``"<key>"``, object addresses by
    ``0xADDR`` and temp paths by ``/tmp/<tmp>``."""
    if isinstance(value, dict):
        return {k: (f"<{k}>" if k in volatile else normalize(v, volatile)) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v, volatile) for v in value]
    if isinstance(value, str):
        return _TMP.sub("/tmp/<tmp>", _ADDR.sub("0xADDR", value))
    return value


def _body(ev: Any) -> Any:
    body = ev.body
    to_body = getattr(body, "to_body", None)
    if callable(to_body):
        return to_body()
    return getattr(body, "__dict__", body)


def cell_key(cell: Any) -> tuple:
    """What identifies a recorded cell's answer: op, input hash, stored content and view."""
    return (cell.op, cell.input_hash, cell.content, cell.view)


def redacted_cells(detail: SessionDetail) -> frozenset[tuple]:
    """The :func:`cell_key` of every cell of ``detail`` that was stored redacted."""
    return frozenset(cell_key(c.rec) for c in detail.cells if c.rec.redacted)


def event_log(detail: SessionDetail, volatile: frozenset[str] = VOLATILE_KEYS,
              served_redacted: frozenset[tuple] = frozenset()) -> list[str]:
    """One line per event, in stream order: ``kind <normalized body JSON>``.

    ``served_redacted``: the recording's redacted cells (:func:`redacted_cells`) when ``detail``
    is a re-drive answered from that recording. A cell served from tape holds text that is
    already redacted, so re-redacting it finds nothing and its ``redacted`` flag reads false;
    the answer is the recorded cell's, and so is the flag."""
    out = []
    for ev in detail.events:
        try:
            body = _body(ev)
            if (served_redacted and isinstance(body, dict) and body.get("event") == "op_recorded"
                    and body.get("redacted") is False
                    and (body.get("op"), body.get("input_hash"), body.get("content"), body.get("view")) in served_redacted):
                body = {**body, "redacted": True}
            text = canonical_json(normalize(body, volatile))
        except (TypeError, ValueError):
            text = repr(ev.body)
        out.append(f"{ev.kind} {text}")
    return out


def _excerpt(s: str, width: int = 70) -> str:
    s = " ".join(str(s).split())
    return s if len(s) <= width else s[: width - 1] + "…"


def _result_text(block: dict) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content if isinstance(c, dict))
    return str(content or "")


def transcript(detail: SessionDetail) -> list[str]:
    """What a person sees of the session's turns, one line per step."""
    out: list[str] = []
    names: dict[str, str] = {}
    for m in detail.conversation:
        role = getattr(m, "role", "")
        for b in getattr(m, "content", []) or []:
            if not isinstance(b, dict):
                continue
            t = b.get("type")
            if t == "text":
                who = "user" if role == "user" else "model"
                out.append(f"{who}: {_excerpt(normalize(b.get('text', '')))}")
            elif t == "tool_use":
                names[str(b.get("id"))] = str(b.get("name"))
                out.append(f"model → {b.get('name')} {_excerpt(canonical_json(normalize(b.get('input'))), 60)}")
            elif t == "tool_result":
                name = names.get(str(b.get("tool_use_id")), "?")
                flag = "error " if b.get("is_error") else ""
                out.append(f"  {name} ← {flag}{_excerpt(normalize(_result_text(b)), 60)}")
            elif t == "thinking":
                out.append(f"model (thinking): {_excerpt(b.get('thinking', ''))}")
    for t in detail.turns:
        out.append(f"turn ended {t.outcome}")
    return out


def cell_trajectory(detail: SessionDetail) -> list[str]:
    """The session's dispatches, one line each (``op input → result``): what a fork or replay did,
    when there is no conversation to show."""
    out = []
    for c in detail.cells:
        r = c.rec
        flag = "denied " if r.denied else ("error " if r.is_error else "")
        out.append(f"{r.op} {_excerpt(normalize(r.input_view or ''), 50)} → {flag}{_excerpt(normalize(r.content), 50)}")
    return out


def differing_keys(a: Any, b: Any) -> set[str]:
    """Keys whose values differ between two JSON values of the same shape (lists paired by
    position when their lengths agree)."""
    found: set[str] = set()

    def walk(x: Any, y: Any, key: str | None) -> None:
        if isinstance(x, dict) and isinstance(y, dict):
            for k in set(x) & set(y):
                walk(x[k], y[k], k)
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for p, q in zip(x, y):
                walk(p, q, key)
        elif x != y and key is not None:
            found.add(key)

    walk(a, b, None)
    return found


def discover_volatile(a: Sequence[Any], b: Sequence[Any]) -> set[str]:
    """Keys whose values differ between two runs of the same scenario (events paired by position
    and kind). Used to derive :data:`VOLATILE_KEYS`."""
    found: set[str] = set()
    for ea, eb in zip(a, b):
        if ea.kind == eb.kind:
            found |= differing_keys(_body(ea), _body(eb))
    return found


def surface_diff(golden: Iterable[str], actual: Iterable[str], name: str) -> list[str]:
    """A unified diff (no file headers' timestamps) of two surfaces; empty when equal."""
    g, a = list(golden), list(actual)
    if g == a:
        return []
    return list(difflib.unified_diff(g, a, f"golden {name}", f"this run {name}", lineterm="", n=2))


def _fit(s: str, w: int) -> str:
    return s if len(s) <= w else s[: w - 1] + "…"


def aligned_rows(golden: Sequence[str], actual: Sequence[str]) -> list[tuple[str, str, str]]:
    """Two trajectories aligned (difflib): ``(mark, golden line, this run's line)`` with mark
    ``=`` same, ``≠`` changed, ``-`` golden only, ``+`` this run only."""
    rows: list[tuple[str, str, str]] = []
    sm = difflib.SequenceMatcher(a=list(golden), b=list(actual), autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            rows += [("=", golden[i1 + k], actual[j1 + k]) for k in range(i2 - i1)]
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            a = golden[i1 + k] if i1 + k < i2 else ""
            b = actual[j1 + k] if j1 + k < j2 else ""
            rows.append(("≠" if a and b else ("-" if a else "+"), a, b))
    return rows


def first_change(rows: Sequence[tuple[str, str, str]]) -> int | None:
    return next((i for i, r in enumerate(rows) if r[0] != "="), None)


def side_by_side(golden: Sequence[str], actual: Sequence[str], width: int = 120,
                 titles: tuple[str, str] = ("golden", "this run")) -> str:
    """Two trajectories in columns (:func:`aligned_rows`), the first divergence marked ``▶``."""
    col = max(20, (width - 6) // 2)
    lines = [f"   {titles[0]:<{col}} │ {titles[1]}", f"   {'─' * col}─┼─{'─' * col}"]
    rows = aligned_rows(golden, actual)
    first = first_change(rows)
    for i, (mark, a, b) in enumerate(rows):
        lead = "▶" if i == first else " "
        lines.append(f"{lead}{mark} {_fit(a, col):<{col}} │ {_fit(b, col)}")
    return "\n".join(lines)


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def as_the_redrive_sees_it(detail: SessionDetail, marker: str) -> SessionDetail:
    """The recording as a check's re-drive can see it. The model's answers were stored redacted,
    so a tool call whose input held a secret reaches the re-drive with the redacted input: its
    input hash is the cell's ``input_hash_redacted``, its step id is named after that hash, and the
    accepted plan (stored redacted, with ``marker`` in it) hashes to the fingerprint of its stored
    text. Every other row is the recording's own; a session with no such cell is returned as is."""
    from dataclasses import replace

    from ..errors import FluxError
    from ..lang.hashes import fingerprint
    from ..model.stored_plan import parse_stored_plan
    from ..store.events import PlanAttempted, Run
    from ..store.store import StoredEvent

    seen = {c.rec.input_hash: c.rec.input_hash_redacted for c in detail.cells
            if c.rec.input_hash_redacted and c.rec.input_hash_redacted != c.rec.input_hash}
    if not seen:
        return detail

    def step_id(step: str) -> str:
        for old, new in seen.items():
            if step.endswith("_" + old[:16]):
                return step[: -16] + new[:16]
        return step

    def run_event(ev: object) -> object:
        changes = {}
        old = getattr(ev, "input_hash", None)
        if isinstance(old, str) and old in seen:
            changes["input_hash"] = seen[old]
            if hasattr(ev, "input_hash_redacted"):
                changes["input_hash_redacted"] = None
        step = getattr(ev, "step", None)
        if isinstance(step, str) and step_id(step) != step:
            changes["step"] = step_id(step)
        return replace(ev, **changes) if changes else ev

    events = []
    for e in detail.events:
        body = e.body
        if isinstance(body, Run):
            inner = run_event(body.event)
            if inner is not body.event:
                body = replace(body, event=inner)
        elif isinstance(body, PlanAttempted) and body.plan_source and marker in body.plan_source:
            try:
                draft, _key = parse_stored_plan(body.plan_source)
                body = replace(body, fingerprint=fingerprint(draft))
            except FluxError:
                pass
        events.append(e if body is e.body else StoredEvent(e.global_seq, e.stream, e.stream_seq, e.id, e.kind, e.ts,
                                                           e.turn_id, body))
    cells = [replace(c, rec=run_event(c.rec)) for c in detail.cells]
    return replace(detail, events=events, cells=cells)
