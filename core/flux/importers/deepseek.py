"""The deepseek harness's persisted session JSONL (its snapshot fixtures' ``session.jsonl``) as runs: turns
from ``turn/start`` and the user's ``user/message``, model calls from the ``(turn, step)`` groups of
``assistant/chunk`` events and the compact ``*-chunks`` lines, results from ``tool/result``, failures
from ``turn/end``; a ``replay.override.json`` beside the log replaces the model script call by call, as
the harness's replay does. The format's rules: docs/import.md ("deepseek harness")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from ..canonical import scrub_value
from .jsonl import first_object, json_lines
from .model import (ImportedRun, ImportFormatError, ModelCall, ToolUse, Turn, arguments_object, as_text,
                    check_json_value, load_json, token_count)

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
    doc = load_json(text, OVERRIDE_FILE, "it must be a JSON list of replay entries", "not an override file")
    if not isinstance(doc, list):
        raise ImportFormatError(f"{OVERRIDE_FILE}: must be a JSON list of replay entries (chunks, throw, hang)")
    check_json_value(doc, OVERRIDE_FILE)
    return OVERRIDE_FILE, scrub_value(doc)


def _usage(u: Any, where: str) -> dict:
    if not isinstance(u, dict):
        raise ImportFormatError(f"{where}: a usage chunk needs a `usage` object")
    cached = token_count(u.get("cacheReadTokens"), where, "cacheReadTokens")
    return {"input_tokens": token_count(u.get("inputTokens"), where, "inputTokens"),
            "output_tokens": token_count(u.get("outputTokens"), where, "outputTokens"),
            "cache_read_input_tokens": cached, "reasoning_tokens": token_count(u.get("reasoningTokens"), where, "reasoningTokens")}


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
        """The call's response: each block in index order from its ``block-end`` when it has one, else
        from its deltas."""
        out = ModelCall(ts=self.ts, usage=self.usage, error=self.error)
        for index in self.order:
            block = self.blocks.get(index)
            if block is not None:
                kind = block.get("type")
                text = as_text(block.get("text"), where, "text") if kind in ("text", "reasoning") else ""
                tool = (block.get("id"), block.get("name"), block.get("arguments"))
            elif index in self.deltas:
                s = self.deltas[index]
                kind, text, tool = s["type"], s["text"], (s["id"], s["name"], s["args"])
            else:
                continue
            if kind == "text":
                out.text += text
            elif kind == "reasoning":
                out.thinking += text
            elif kind == "tool-call":
                out.tool_uses.append(_tool_use(*tool, where))
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
    parsed = arguments_object(args, where, name)
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
    run = _run_of_header(lines[0][1])
    log = _SessionLog(name, run)
    for n, obj in lines[1:]:
        log.read(obj, f"{name}: line {n}")
    run.turns = log.turns_in_order()
    if override is not None:
        fname, entries = override
        _apply_override(run, _override_calls(entries, fname), fname)
        run.extra["override"] = {"file": fname, "entries": len(entries)}
    for turn in run.turns:
        for call in turn.calls:
            for use in call.tool_uses:
                got = log.results.get(use.id)
                if got is not None:
                    use.result, use.is_error, use.ts = got
    if run.model == "unknown":
        run.model = "deepseek"
    return run


def _run_of_header(header: dict) -> ImportedRun:
    run = ImportedRun(format="deepseek", version=f"session-v{header.get('version', 0)}", agent="deepseek-harness",
                      model="unknown", foreign_id=header.get("id") if isinstance(header.get("id"), str) else None)
    created = header.get("createdAt")
    if isinstance(created, int) and not isinstance(created, bool) and 0 <= created < 1e14:
        run.started_ms = created
    return run


#: The events that carry a ``data`` object (any other event without one is skipped).
_DATA_EVENTS = frozenset({"turn/start", "user/message", "assistant/chunk", "tool/result", "turn/end", "step/start",
                          *_COMPACT})


def _turn_no(data: dict, where: str) -> int:
    t = data.get("turn")
    if isinstance(t, bool) or not isinstance(t, int):
        raise ImportFormatError(f"{where}: `data.turn` must be an integer")
    return t


def _parts_text(parts: list, where: str) -> str:
    """The text parts of a message's content, joined."""
    return "".join(as_text(p.get("text"), where, "text") for p in parts if isinstance(p, dict) and p.get("type") == "text")


class _SessionLog:
    """One read of a session log's events, line by line: the turns, the model-call groups in log order,
    the tool results by call id and each turn's end."""

    def __init__(self, name: str, run: ImportedRun):
        self.name, self.run = name, run
        self.turns: dict[int, Turn] = {}
        self.groups: dict[tuple[int, int], _Group] = {}  # (turn, step) -> its chunks, in log order
        self.results: dict[str, tuple[str, bool, Optional[int]]] = {}  # tool call id -> (text, is_error, ts)
        self.ends: dict[int, dict] = {}
        self.current: Optional[int] = None  # the turn the last turn/start opened
        self._readers = {"turn/start": self._turn_start, "user/message": self._user_message,
                         "request/header": self._request_header, "assistant/chunk": self._chunk,
                         "assistant/message": self._assistant_message, "tool/result": self._tool_result,
                         "turn/end": self._turn_end, **{kind: self._chunk for kind in _COMPACT}}

    def read(self, obj: dict, where: str) -> None:
        kind = obj.get("type") if isinstance(obj.get("type"), str) else None
        data = obj.get("data")
        if not isinstance(data, dict):
            if kind in _DATA_EVENTS:
                raise ImportFormatError(f"{where}: a {kind} event needs a `data` object")
            return
        ts = obj.get("time", obj.get("time0"))
        ts = ts if isinstance(ts, int) and not isinstance(ts, bool) and 0 <= ts < 1e14 else None
        reader = self._readers.get(kind)
        if reader is not None:
            reader(kind, data, ts, where)

    def _turn_start(self, kind: str, data: dict, ts: Optional[int], where: str) -> None:
        self.current = _turn_no(data, where)
        self.turns.setdefault(self.current, Turn(user="", ts=ts))

    def _user_message(self, kind: str, data: dict, ts: Optional[int], where: str) -> None:
        src = data.get("source")
        if self.current is None or not isinstance(src, dict) or src.get("kind") != "user":
            return  # plugin-injected context: kept in the source only
        content = data.get("content")
        if not isinstance(content, list):
            raise ImportFormatError(f"{where}: a user/message needs a `content` list")
        said = _parts_text(content, where)
        t = self.turns[self.current]
        t.user = t.user + ("\n\n" if t.user else "") + said

    def _request_header(self, kind: str, data: dict, ts: Optional[int], where: str) -> None:
        config = data.get("header", {}).get("config") if isinstance(data.get("header"), dict) else None
        if isinstance(config, dict) and isinstance(config.get("model"), str) and self.run.model == "unknown":
            self.run.model = config["model"]
            if isinstance(config.get("provider"), str):
                self.run.extra["provider"] = config["provider"]

    def _chunk(self, kind: str, data: dict, ts: Optional[int], where: str) -> None:
        t = _turn_no(data, where)
        step = data.get("step")
        if isinstance(step, bool) or not isinstance(step, int):
            raise ImportFormatError(f"{where}: `data.step` must be an integer")
        group = self.groups.get((t, step))
        if group is None:
            group = self.groups[(t, step)] = _Group(ts)
        if kind == "assistant/chunk":
            group.chunk(data.get("chunk"), where)
        else:
            group.compact(data, _COMPACT[kind], where)

    def _assistant_message(self, kind: str, data: dict, ts: Optional[int], where: str) -> None:
        msg = data.get("message")
        src = msg.get("source") if isinstance(msg, dict) else None
        if isinstance(src, dict) and isinstance(src.get("model"), str) and self.run.model == "unknown":
            self.run.model = src["model"]

    def _tool_result(self, kind: str, data: dict, ts: Optional[int], where: str) -> None:
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
                said = _parts_text(body, where)
            elif isinstance(body, str) or body is None:
                said = as_text(body, where, "content")
            else:
                raise ImportFormatError(f"{where}: a tool-result's `content` must be a list or a string")
            self.results[cid] = (said, bool(part.get("isError")), ts)

    def _turn_end(self, kind: str, data: dict, ts: Optional[int], where: str) -> None:
        self.ends[_turn_no(data, where)] = data

    def turns_in_order(self) -> list[Turn]:
        """The turns by number, each with its model calls in log order and ended as its turn/end says."""
        name = self.name
        if not self.turns and self.groups:
            raise ImportFormatError(f"{name}: model chunks with no turn/start — not a deepseek session log")
        for (t, step), group in self.groups.items():
            if t not in self.turns:
                raise ImportFormatError(f"{name}: chunks of turn {t}, step {step} come before that turn started")
            self.turns[t].calls.append(group.call(f"{name}: turn {t}, step {step}"))
        for t, data in self.ends.items():
            if t in self.turns:
                _end_turn(self.turns[t], data, name)
        return [self.turns[k] for k in sorted(self.turns)]


def _end_turn(turn: Turn, data: dict, name: str) -> None:
    """A turn/end's reason on its turn: ``error`` a failure (a failed call when the last call asked for
    tools or there is none, else the turn's error), ``aborted`` an interrupted turn."""
    reason = data.get("reason") if isinstance(data.get("reason"), dict) else {}
    if reason.get("kind") == "error":
        msg = _error_text(reason.get("failure") or reason.get("error"), name) or "the turn failed"
        code = reason.get("failure", {}).get("code") if isinstance(reason.get("failure"), dict) else None
        msg = f"{msg} ({code})" if isinstance(code, str) and code else msg
        if not turn.calls or turn.calls[-1].tool_uses:
            turn.calls.append(ModelCall(error=msg, ts=turn.ts))
        else:
            turn.error = msg
    elif reason.get("kind") == "aborted":
        turn.error = "aborted (cancelled)"


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
