"""Freeze one recorded turn at a fork point into a bundle (what ``flux case save`` does).

The calls are the turn's cassette cells and its model calls from ``model.jsonl``; the fork point is a
count of op calls (``at``) or a ``global_seq`` (``fork_after_seq``). A capture a replay could not use
(a model call with no record, an op in flight at the fork, a turn that never ended) is refused with
``capture_incomplete`` (docs/cases.md).
"""

from __future__ import annotations

import json
import tempfile
import tomllib
from pathlib import Path
from typing import Any, Optional

from .. import __version__
from ..agent.builtin_ops import coding_ops
from ..agent.model_cassette import load_records
from ..canonical import sha256_hex
from ..errors import FluxError
from ..model.session import SessionDetail, Turn, load_session
from ..store.events import Message, OpRecorded, Run, StepStarted
from ..store.store import StoreReader
from .bundle import FORMAT, KINDS, Bundle
from .errors import CaseRefusal

__all__ = ["capture_case", "builtin_effects", "MODEL_FILE", "SCENARIO_FILE"]

MODEL_FILE = "model.jsonl"
SCENARIO_FILE = "scenario.toml"
_TERMINAL_KINDS = ("turn_ended",)
FLOW_INPUT = "<flow run>"  # the user input `flux flow run` records: its closing message is no model call
_READ_EFFECTS = ("pure", "read")


def builtin_effects() -> dict[str, str]:
    """The declared effect of each built-in coding op, by name."""
    with tempfile.TemporaryDirectory(prefix="flux-case-ops-") as d:
        return {o.name: o.effect for o in coding_ops(d)}


def _tool_entry(name: str, effects: dict[str, str]) -> dict:
    effect = effects.get(name, "undeclared")
    return {"name": name, "effect": effect, "writes": effect not in _READ_EFFECTS}


def _assistant_tool_uses(detail: SessionDetail, turn: Turn) -> list[int]:
    """Per assistant message of the turn (one per model call), how many tool calls it asked for."""
    out = []
    for e in detail.turn_messages(turn):
        if isinstance(e.body, Message) and e.body.role == "assistant":
            content = e.body.content if isinstance(e.body.content, list) else []
            out.append(sum(1 for b in content if isinstance(b, dict) and b.get("type") == "tool_use"))
    return out


def _conversation_before(detail: SessionDetail, turn: Turn) -> list[dict]:
    out = []
    for t in detail.turns[: turn.number - 1]:
        for e in detail.turn_messages(t):
            if isinstance(e.body, Message):
                out.append({"role": e.body.role, "content": e.body.content})
    return out


def _scenario_runtime(store: Path) -> Optional[str]:
    p = store / SCENARIO_FILE
    if not p.is_file():
        return None
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    v = data.get("flux_version")
    return f"flux {v}" if isinstance(v, str) else None


def _history_rows(reader: StoreReader, session: str, start: int, end: int) -> list[dict]:
    rows = reader.query("SELECT global_seq, stream_seq, kind, ts, turn_id, payload FROM events "
                        "WHERE stream = ? AND global_seq >= ? AND global_seq <= ? ORDER BY stream_seq",
                        (session, start, end))
    out = []
    for gs, ss, kind, ts, turn_id, payload in rows:
        if kind in _TERMINAL_KINDS or type(gs) is not int:
            continue
        try:
            body = json.loads(payload) if isinstance(payload, str) else None
        except ValueError:
            body = None  # a row the reader would skip: kept as a marker, not dropped silently
        data = body.get("data") if isinstance(body, dict) else None
        out.append({"global_seq": gs, "stream_seq": ss if type(ss) is int else None, "kind": str(kind),
                    "ts": ts if type(ts) is int else None, "turn_id": turn_id if type(turn_id) is int else None,
                    "data": data})
    return out


def _op_result(index: int, cell: Any) -> dict:
    rec: OpRecorded = cell.rec
    entry: dict[str, Any] = {"kind": "op", "key": str(index), "op": rec.op, "fingerprint": rec.input_hash,
                             "fingerprint_redacted": rec.input_hash_redacted, "input_view": rec.input_view,
                             "global_seq": cell.global_seq, "truncated": bool(rec.truncated),
                             "redacted": bool(rec.redacted)}
    if rec.is_error or rec.denied:
        entry["error"] = {"content": rec.content, "view": rec.view, "denied": bool(rec.denied)}
    else:
        entry["result"] = {"content": rec.content, "view": rec.view}
    return entry


def capture_case(store_dir: str | Path, session: str, *, at: Optional[int] = None,
                 fork_after_seq: Optional[int] = None, kind: Optional[str] = None, turn: Optional[int] = None,
                 target_name: Optional[str] = None, effects: Optional[dict[str, str]] = None) -> Bundle:
    """The bundle of ``session``'s turn (default: the last) frozen at the fork point."""
    if at is not None and fork_after_seq is not None:
        raise FluxError("give --at N or --fork-after-seq SEQ, not both")
    if kind is not None and kind not in KINDS:
        raise FluxError(f"--kind {kind!r}: a case is one of {', '.join(KINDS)}")
    store = Path(store_dir).expanduser().resolve()
    eff = dict(builtin_effects())
    eff.update(effects or {})
    with StoreReader(store) as reader:
        detail = load_session(reader, session)
        if not detail.turns:
            raise FluxError(f"session {detail.id} has no turn to save as a case — run a turn first")
        n = len(detail.turns) if turn is None else turn
        if not 1 <= n <= len(detail.turns):
            raise FluxError(f"session {detail.id} has turns 1–{len(detail.turns)}; --turn {turn} names none")
        t = detail.turns[n - 1]
        cells = detail.turn_cells(t)
        uses = _assistant_tool_uses(detail, t) if t.user_input != FLOW_INPUT else []
        earlier_calls = sum(len(_assistant_tool_uses(detail, u)) for u in detail.turns[: n - 1]
                            if u.user_input != FLOW_INPUT)
        records = load_records(store / MODEL_FILE)
        model_count = len(uses)
        turn_records = records[earlier_calls: earlier_calls + model_count]
        detected = "agent" if model_count or t.calls else "flow"
        if kind is not None and kind != detected:
            raise CaseRefusal("kind_mismatch", f"--kind {kind}: turn {n} of {detail.id} is a{'n' if detected == 'agent' else ''} "
                                               f"{detected} run ({model_count} model call(s)) — omit --kind or pass "
                                               f"--kind {detected}")
        window_start = detail.turn_messages(t)[0].global_seq if detail.turn_messages(t) else t.turn_id
        window_end = detail.turns[n].turn_id - 1 if n < len(detail.turns) else None
        # The fork point: the number of op calls before it, and the row it follows.
        if fork_after_seq is not None:
            if fork_after_seq < t.turn_id or (window_end is not None and fork_after_seq > window_end):
                raise FluxError(f"--fork-after-seq {fork_after_seq} is outside turn {n} of {detail.id} (its rows start at "
                                f"global_seq {t.turn_id}) — pick a row of the turn (`flux show {detail.id}`)")
            at_n = sum(1 for c in cells if c.global_seq <= fork_after_seq)
            after = fork_after_seq
        else:
            at_n = 0 if at is None else at
            if not 0 <= at_n <= len(cells):
                raise FluxError(f"--at {at}: turn {n} of {detail.id} made {len(cells)} op call(s) — give 0–{len(cells)}")
            after = t.turn_id if at_n == 0 else cells[at_n - 1].global_seq
        # The model calls that asked for the prefix's op calls.
        prefix_model = 0
        if at_n:
            covered = 0
            for i, k in enumerate(uses, 1):
                covered += k
                if covered >= at_n:
                    prefix_model = i
                    break
            else:
                prefix_model = model_count
        history = _history_rows(reader, detail.id, window_start, after)
        # What a replay would need and the recording lacks.
        missing: list[str] = []
        if not t.ended:
            missing.append(f"turn {n} never ended (outcome pending: the recording stops mid-run) — resurrect or "
                           f"finish it first")
        if detected == "agent" and len(turn_records) < model_count:
            missing.append(f"{model_count - len(turn_records)} of turn {n}'s {model_count} model call(s) have no record in "
                           f"{MODEL_FILE} — record with `flux record` or `flux run --model-cassette {store / MODEL_FILE}`")
        cell_steps = {c.rec.step for c in cells if c.global_seq <= after}
        for e in detail.turn_run_trace(t):
            if e.global_seq > after:
                break
            ev = e.body.event if isinstance(e.body, Run) else None
            if isinstance(ev, StepStarted) and ev.step not in cell_steps:
                missing.append(f"op `{ev.op}` (step {ev.step}, started at global_seq {e.global_seq}) was in flight at "
                               f"the fork — pick a fork point before it or after its cell")
        truncated = [f"op:{i} ({c.op})" for i, c in enumerate(cells) if c.rec.truncated]
        if missing:
            raise CaseRefusal("capture_incomplete", f"turn {n} of {detail.id} cannot be replayed: " + "; ".join(missing))
        results = [_op_result(i, c) for i, c in enumerate(cells)]
        for i, r in enumerate(turn_records, 1):
            results.append({"kind": "model", "key": str(i), "fingerprint": r.hash, "model": r.model,
                            "request": r.request, "result": {"chunks": r.chunks}})
        first_req = turn_records[0].request if turn_records and isinstance(turn_records[0].request, dict) else {}
        tool_names: list[str] = []
        for tool in first_req.get("tools") or []:
            if isinstance(tool, dict) and isinstance(tool.get("name"), str) and tool["name"] not in tool_names:
                tool_names.append(tool["name"])
        for c in cells:
            if c.op not in tool_names:
                tool_names.append(c.op)
        plans = [p.plan_source for p in t.accepted_plans if p.plan_source is not None]
        if detected == "agent":
            code_version = sha256_hex(json.dumps({"system": first_req.get("system"), "tools": first_req.get("tools")},
                                                 sort_keys=True, default=str))[:16]
        else:
            code_version = sha256_hex("\n".join(p.fingerprint or "" for p in t.accepted_plans))[:16] if plans else None
        manifest = {
            "format": FORMAT,
            "kind": detected,
            "target_name": target_name or detail.id,
            "code_version": code_version,
            "product_version": f"flux-tui {__version__}",
            "recorded_by": _scenario_runtime(store) or f"flux-tui {__version__}",
            "registration": {"tools": [_tool_entry(name, eff) for name in tool_names]},
            "recorded_config": {"model": first_req.get("model") if isinstance(first_req.get("model"), str) else t.model,
                                "session_model": detail.row.model, "system": first_req.get("system"),
                                "max_tokens": first_req.get("max_tokens"), "temperature": first_req.get("temperature")},
            "source": {"store": str(store), "session": detail.id, "turn": n, "turn_id": t.turn_id},
            "fork": {"at": at_n, "fork_after_seq": after, "prefix_model_calls": prefix_model},
            "capture": {"complete": True, "missing": [], "truncated": truncated},
            "inputs": {"input": t.user_input, "conversation": _conversation_before(detail, t), "plans": plans},
        }
        return Bundle.build(manifest, history, results)

