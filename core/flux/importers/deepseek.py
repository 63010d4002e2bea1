"""The deepseek harness's persisted session JSONL (its snapshot fixtures' ``session.jsonl``) as runs.

The first line is the ``session`` header (``id``, ``createdAt``, ``cwd``); then one event a line,
``{"type", "seq", "time", "data"}``. ``turn/start`` opens a turn; its ``user/message`` whose source is
the user is the turn's input (plugin-injected context messages are kept in the source only). The
model calls are the ``(turn, step)`` groups of ``assistant/chunk`` events, in log order — as the
harness's own replay derives them — with the compact ``reasoning-chunks`` / ``text-chunks`` /
``tool-call-chunks`` lines counted in their group: ``block-end`` blocks (reasoning, text,
tool-call) or else the deltas give the response, ``usage`` its tokens, and a ``finish`` of kind
``error`` makes the call a failure. ``tool/result`` messages are the results, joined by
``toolCallId``. A turn whose ``turn/end`` reason is ``error`` ends in that failure (with no chunks,
a call that failed before streaming); ``aborted`` ends it as interrupted.

``replay.override.json`` beside the log (a list of ``{"kind": "chunks" | "throw" | "hang"}``
entries) replaces the derived model script, call by call, as the harness's replay does: ``chunks``
is the call's stream, ``throw`` its prefix chunks then the error, ``hang`` a call that never
answered (recorded as a failure that says so — a hang cannot be replayed as time).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from ..canonical import scrub_value
from .jsonl import first_object, json_lines
from .model import ImportedRun, ImportFormatError, ModelCall, ToolUse, Turn, as_text, check_json_value

__all__ = ["parse_deepseek", "looks_like_deepseek", "override_text", "parse_override", "OVERRIDE_FILE"]

OVERRIDE_FILE = "replay.override.json"
_COMPACT = {"reasoning-chunks": "reasoning", "text-chunks": "text", "tool-call-chunks": "tool-call"}


def looks_like_deepseek(text: str) -> bool:
    first = first_object(text, 1)
    return bool(first) and first[0].get("type") == "session" and "delegationDepth" in first[0] or (
        bool(first) and first[0].get("type") == "session" and "cwd" in first[0] and "createdAt" in first[0])


def override_text(path: Path) -> Optional[str]:
    """The text of the ``replay.override.json`` beside ``path``, if there is one."""
    p = path.parent / OVERRIDE_FILE
    if not p.is_file():
        return None
    try:
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ImportFormatError(f"{p.name}: cannot be read ({type(e).__name__})") from None


def parse_override(text: str) -> tuple[str, list]:
    """``(file name, entries)`` of an override file's text."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ImportFormatError(f"{OVERRIDE_FILE}: not a JSON list of replay entries ({type(e).__name__})") from None
    if not isinstance(doc, list):
        raise ImportFormatError(f"{OVERRIDE_FILE}: must be a JSON list of replay entries (chunks, throw, hang)")
    check_json_value(doc, OVERRIDE_FILE)
    return OVERRIDE_FILE, scrub_value(doc)


def _int(v: Any, where: str, what: str) -> int:
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1e15:
        raise ImportFormatError(f"{where}: `{what}` must be a non-negative number")
    return int(v)


def _usage(u: Any, where: str) -> dict:
    if not isinstance(u, dict):
        raise ImportFormatError(f"{where}: a usage chunk needs a `usage` object")
    cached = _int(u.get("cacheReadTokens"), where, "cacheReadTokens")
    return {"input_tokens": _int(u.get("inputTokens"), where, "inputTokens"),
            "output_tokens": _int(u.get("outputTokens"), where, "outputTokens"),
            "cache_read_input_tokens": cached, "reasoning_tokens": _int(u.get("reasoningTokens"), where, "reasoningTokens")}


class _Group:
    """The chunks of one ``(turn, step)`` model call, folded into a response."""

    def __init__(self, ts: Optional[int]):
        self.ts = ts
        self.blocks: dict[int, dict] = {}  # index -> the block-end block
        self.deltas: dict[int, dict] = {}  # index -> {"type", "text", "id", "name", "args"}
        self.order: list[int] = []
        self.usage: Optional[dict] = None
        self.error: Optional[str] = None
        self.finished = False

    def _slot(self, index: int, kind: str) -> dict:
        if index not in self.deltas:
            self.deltas[index] = {"type": kind, "text": "", "id": None, "name": None, "args": ""}
            if index not in self.order:
                self.order.append(index)
        return self.deltas[index]

    def chunk(self, c: Any, where: str) -> None:
        if not isinstance(c, dict):
            raise ImportFormatError(f"{where}: a chunk must be an object")
        t = c.get("type")
        index = c.get("index", 0)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 10_000:
            raise ImportFormatError(f"{where}: a chunk's `index` must be a small non-negative integer")
        if t == "block-start":
            kind = as_text(c.get("blockType"), where, "blockType") or "text"
            self._slot(index, kind)
        elif t == "block-end":
            block = c.get("block")
            if not isinstance(block, dict):
                raise ImportFormatError(f"{where}: a block-end chunk needs a `block` object")
            self.blocks[index] = block
            if index not in self.order:
                self.order.append(index)
        elif t in ("text-delta", "reasoning-delta"):
            self._slot(index, "text" if t == "text-delta" else "reasoning")["text"] += as_text(c.get("text"), where, "text")
        elif t == "tool-call-delta":
            s = self._slot(index, "tool-call")
            s["id"] = c.get("id") if isinstance(c.get("id"), str) else s["id"]
            s["name"] = c.get("name") if isinstance(c.get("name"), str) else s["name"]
            s["args"] += as_text(c.get("argumentsDelta"), where, "argumentsDelta")
        elif t == "usage":
            self.usage = _usage(c.get("usage"), where)
        elif t == "finish":
            self.finished = True
            reason = c.get("reason")
            if isinstance(reason, dict) and reason.get("kind") == "error":
                err = reason.get("error") or reason.get("failure") or reason.get("message")
                self.error = _error_text(err, where) or "the model stream finished with an error"

    def compact(self, data: dict, kind: str, where: str) -> None:
        index = data.get("index", 0)
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 10_000:
            raise ImportFormatError(f"{where}: `index` must be a small non-negative integer")
        s = self._slot(index, kind)
        pieces = data.get("args" if kind == "tool-call" else "texts", [])
        if not isinstance(pieces, list) or not all(isinstance(p, str) for p in pieces):
            raise ImportFormatError(f"{where}: the chunk texts must be a list of strings")
        if kind == "tool-call":
            s["id"] = data.get("id") if isinstance(data.get("id"), str) else s["id"]
            s["name"] = data.get("name") if isinstance(data.get("name"), str) else s["name"]
            s["args"] += "".join(pieces)
        else:
            s["text"] += "".join(pieces)

    def call(self, where: str) -> ModelCall:
        out = ModelCall(ts=self.ts, usage=self.usage, error=self.error)
        for index in self.order:
            block = self.blocks.get(index)
            if block is not None:
                kind = block.get("type")
                if kind == "text":
                    out.text += as_text(block.get("text"), where, "text")
                elif kind == "reasoning":
                    out.thinking += as_text(block.get("text"), where, "text")
                elif kind == "tool-call":
                    out.tool_uses.append(_tool_use(block.get("id"), block.get("name"), block.get("arguments"), where))
                continue
            s = self.deltas.get(index)
            if s is None:
                continue
            if s["type"] == "text":
                out.text += s["text"]
            elif s["type"] == "reasoning":
                out.thinking += s["text"]
            elif s["type"] == "tool-call":
                out.tool_uses.append(_tool_use(s["id"], s["name"], s["args"], where))
        return out


def _error_text(err: Any, where: str) -> str:
    if isinstance(err, str):
        return as_text(err, where, "error")
    if isinstance(err, dict):
        return as_text(err.get("message") if isinstance(err.get("message"), str) else json.dumps(err)[:200], where,
                       "message")
    return ""


def _tool_use(cid: Any, name: Any, args: Any, where: str) -> ToolUse:
    if not isinstance(cid, str) or not cid or not isinstance(name, str) or not name:
        raise ImportFormatError(f"{where}: a tool call needs an `id` and a `name`")
    if isinstance(args, dict):
        parsed = args
    elif isinstance(args, str):
        try:
            parsed = json.loads(args) if args.strip() else {}
        except ValueError:
            raise ImportFormatError(f"{where}: the arguments of tool call `{name[:40]}` are not JSON") from None
        if not isinstance(parsed, dict):
            raise ImportFormatError(f"{where}: the arguments of tool call `{name[:40]}` must be a JSON object")
    else:
        raise ImportFormatError(f"{where}: the arguments of tool call `{name[:40]}` must be a JSON string")
    check_json_value(parsed, where)
    return ToolUse(id=cid, name=as_text(name, where, "name"), input=scrub_value(parsed))


def _override_calls(entries: list, name: str) -> list[ModelCall]:
    calls = []
    for i, e in enumerate(entries):
        where = f"{name}: entry {i + 1}"
        if not isinstance(e, dict) or e.get("kind") not in ("chunks", "throw", "hang"):
            raise ImportFormatError(f"{where}: must be an object of kind chunks, throw or hang")
        if e["kind"] == "hang":
            calls.append(ModelCall(error="the model stream hung (replay.override.json: hang) — the turn was cancelled"))
            continue
        chunks = e.get("chunks", [])
        if not isinstance(chunks, list):
            raise ImportFormatError(f"{where}: `chunks` must be a list")
        g = _Group(None)
        for c in chunks:
            g.chunk(c, where)
        call = g.call(where)
        if e["kind"] == "throw":
            msg = as_text(e.get("message"), where, "message") or "the model call failed"
            code = e.get("code")
            call.error = f"{msg} ({code})" if isinstance(code, str) and code else msg
            status = e.get("status")
            call.status = status if isinstance(status, int) and not isinstance(status, bool) and 100 <= status < 600 else None
        calls.append(call)
    return calls


def parse_deepseek(text: str, name: str, override: Optional[tuple[str, list]] = None) -> ImportedRun:
    """The run of a deepseek session JSONL (with the override entries, if given)."""
    lines = list(json_lines(text, name))
    if not lines or lines[0][1].get("type") != "session":
        raise ImportFormatError(f"{name}: line 1 must be the `session` header of a deepseek session log")
    header = lines[0][1]
    run = ImportedRun(format="deepseek", version=f"session-v{header.get('version', 0)}", agent="deepseek-harness",
                      model="unknown", foreign_id=header.get("id") if isinstance(header.get("id"), str) else None)
    created = header.get("createdAt")
    if isinstance(created, int) and not isinstance(created, bool) and 0 <= created < 1e14:
        run.started_ms = created
    turns: dict[int, Turn] = {}
    groups: dict[tuple[int, int], _Group] = {}
    order: list[tuple[int, int]] = []
    results: dict[str, tuple[str, bool, Optional[int]]] = {}
    ends: dict[int, dict] = {}
    step_turns: dict[tuple[int, int], int] = {}

    def turn_no(data: dict, where: str) -> int:
        t = data.get("turn")
        if isinstance(t, bool) or not isinstance(t, int):
            raise ImportFormatError(f"{where}: `data.turn` must be an integer")
        return t

    current: Optional[int] = None
    for n, obj in lines[1:]:
        where = f"{name}: line {n}"
        kind = obj.get("type") if isinstance(obj.get("type"), str) else None
        data = obj.get("data")
        if not isinstance(data, dict):
            if kind in ("turn/start", "user/message", "assistant/chunk", "tool/result", "turn/end", "step/start") \
                    or kind in _COMPACT:
                raise ImportFormatError(f"{where}: a {kind} event needs a `data` object")
            continue
        ts = obj.get("time", obj.get("time0"))
        ts = ts if isinstance(ts, int) and not isinstance(ts, bool) and 0 <= ts < 1e14 else None
        if kind == "turn/start":
            current = turn_no(data, where)
            turns.setdefault(current, Turn(user="", ts=ts))
        elif kind == "user/message":
            src = data.get("source")
            if current is None or not isinstance(src, dict) or src.get("kind") != "user":
                continue
            content = data.get("content")
            if not isinstance(content, list):
                raise ImportFormatError(f"{where}: a user/message needs a `content` list")
            said = "".join(as_text(p.get("text"), where, "text") for p in content
                           if isinstance(p, dict) and p.get("type") == "text")
            t = turns[current]
            t.user = t.user + ("\n\n" if t.user else "") + said
        elif kind == "request/header":
            header_cfg = data.get("header", {}).get("config") if isinstance(data.get("header"), dict) else None
            if isinstance(header_cfg, dict) and isinstance(header_cfg.get("model"), str) and run.model == "unknown":
                run.model = header_cfg["model"]
                if isinstance(header_cfg.get("provider"), str):
                    run.extra["provider"] = header_cfg["provider"]
        elif kind == "assistant/chunk" or kind in _COMPACT:
            t = turn_no(data, where)
            step = data.get("step")
            if isinstance(step, bool) or not isinstance(step, int):
                raise ImportFormatError(f"{where}: `data.step` must be an integer")
            key = (t, step)
            if key not in groups:
                groups[key] = _Group(ts)
                order.append(key)
                step_turns[key] = t
            if kind == "assistant/chunk":
                groups[key].chunk(data.get("chunk"), where)
            else:
                groups[key].compact(data, _COMPACT[kind], where)
        elif kind == "assistant/message":
            msg = data.get("message")
            src = msg.get("source") if isinstance(msg, dict) else None
            if isinstance(src, dict) and isinstance(src.get("model"), str) and run.model == "unknown":
                run.model = src["model"]
        elif kind == "tool/result":
            msg = data.get("message")
            content = msg.get("content") if isinstance(msg, dict) else None
            if not isinstance(content, list):
                raise ImportFormatError(f"{where}: a tool/result needs a `message.content` list")
            for part in content:
                if not isinstance(part, dict) or part.get("type") != "tool-result":
                    continue
                cid = part.get("toolCallId")
                if not isinstance(cid, str):
                    raise ImportFormatError(f"{where}: a tool-result needs a `toolCallId`")
                body = part.get("content")
                if isinstance(body, list):
                    said = "".join(as_text(p.get("text"), where, "text") for p in body
                                   if isinstance(p, dict) and p.get("type") == "text")
                elif isinstance(body, str) or body is None:
                    said = as_text(body, where, "content")
                else:
                    raise ImportFormatError(f"{where}: a tool-result's `content` must be a list or a string")
                results[cid] = (said, bool(part.get("isError")), ts)
        elif kind == "turn/end":
            ends[turn_no(data, where)] = data
    if not turns and order:
        raise ImportFormatError(f"{name}: model chunks with no turn/start — not a deepseek session log")
    for key in order:
        t = step_turns[key]
        if t not in turns:
            raise ImportFormatError(f"{name}: chunks of turn {t}, step {key[1]} come before that turn started")
        turns[t].calls.append(groups[key].call(f"{name}: turn {t}, step {key[1]}"))
    for t, data in ends.items():
        if t not in turns:
            continue
        reason = data.get("reason") if isinstance(data.get("reason"), dict) else {}
        if reason.get("kind") == "error":
            msg = _error_text(reason.get("failure") or reason.get("error"), name) or "the turn failed"
            code = reason.get("failure", {}).get("code") if isinstance(reason.get("failure"), dict) else None
            msg = f"{msg} ({code})" if isinstance(code, str) and code else msg
            turn = turns[t]
            if not turn.calls or turn.calls[-1].tool_uses:
                turn.calls.append(ModelCall(error=msg, ts=turn.ts))
            else:
                turn.error = msg
        elif reason.get("kind") == "aborted":
            turns[t].error = "aborted (cancelled)"
    run.turns = [turns[k] for k in sorted(turns)]
    if override is not None:
        fname, entries = override
        _apply_override(run, _override_calls(entries, fname), fname)
        run.extra["override"] = {"file": fname, "entries": len(entries)}
    for turn in run.turns:
        for call in turn.calls:
            for use in call.tool_uses:
                got = results.get(use.id)
                if got is not None:
                    use.result, use.is_error, use.ts = got
    if run.model == "unknown":
        run.model = "deepseek"
    return run


def _apply_override(run: ImportedRun, scripted: list[ModelCall], fname: str) -> None:
    """Replace the derived model calls with the override's, positionally across the run: turn by
    turn, each turn takes calls until one without tool calls (or a failure) ends it."""
    k = 0
    for turn in run.turns:
        calls: list[ModelCall] = []
        while k < len(scripted):
            c = scripted[k]
            k += 1
            calls.append(c)
            if c.error is not None or not c.tool_uses:
                break
        turn.calls = calls
    if k < len(scripted):
        raise ImportFormatError(f"{fname}: {len(scripted) - k} entr{'y' if len(scripted) - k == 1 else 'ies'} more than the "
                                "log's turns use — the override does not belong to this session log")
