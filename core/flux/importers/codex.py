"""Codex CLI session logs (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) as runs: ``user_message`` events
open turns, the ``response_item`` entries between two tool results are one model call, the ``*_output``
items are the results (joined by ``call_id``), ``token_count`` is the usage. The format's rules:
docs/import.md ("Codex")."""

from __future__ import annotations

import json
from typing import Any, Optional

from .atif import iso_to_ms
from .jsonl import first_object, json_lines
from .model import (ImportedRun, ImportFormatError, ModelCall, ToolUse, Turn, arguments_object, as_text, content_text,
                    token_count)

__all__ = ["parse_codex", "looks_like_codex"]

_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output")


def looks_like_codex(text: str) -> bool:
    for obj in first_object(text, 4):
        if obj.get("type") in ("session_meta", "response_item", "event_msg", "turn_context") and "payload" in obj:
            return True
    return False


# The part types of a Codex message's, a reasoning summary's or a tool output's content that hold text.
_TEXT_PARTS = ("output_text", "input_text", "text", "summary_text")


def _text(content: Any, where: str, field: str) -> str:
    """A Codex content field as text: only the parts typed as text count (an untyped part is not)."""
    return content_text(content, where, field, text_types=_TEXT_PARTS, untyped_is_text=False)


def _output(payload: dict, where: str) -> tuple[str, bool]:
    out = payload.get("output")
    if isinstance(out, dict):  # (some versions: {"content": …, "success": …})
        content = out.get("content")
        text = content if isinstance(content, str) else _text(content, where, "output.content")
        return as_text(text, where, "output"), out.get("success") is False
    if out is None:
        return "", False
    if not isinstance(out, str):
        raise ImportFormatError(f"{where}: `output` must be a string, got {type(out).__name__}")
    text = as_text(out, where, "output")
    failed = False
    try:  # the shell tool's output: {"output": …, "metadata": {"exit_code": …}}
        obj = json.loads(text)
    except (ValueError, RecursionError):  # plain text (or text nested past the stack): not that shape
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        code = obj["metadata"].get("exit_code")
        failed = isinstance(code, int) and not isinstance(code, bool) and code != 0
    return text, failed


def _arguments(payload: dict, kind: str, where: str) -> dict:
    if kind == "function_call":
        return arguments_object(payload.get("arguments", "{}"), where, str(payload.get("name")))
    if kind == "custom_tool_call":
        return {"input": as_text(payload.get("input"), where, "input")}
    action = payload.get("action")
    if not isinstance(action, dict):
        raise ImportFormatError(f"{where}: a local_shell_call needs an `action` object")
    return action


def parse_codex(text: str, name: str) -> ImportedRun:
    """The run of a Codex rollout log."""
    run = ImportedRun(format="codex", version="unknown", agent="codex", model="unknown")
    turn: Optional[Turn] = None
    call: Optional[ModelCall] = None
    uses: dict[str, ToolUse] = {}
    seen = False
    for n, obj in json_lines(text, name):
        where = f"{name}: line {n}"
        kind, payload = obj.get("type"), obj.get("payload")
        if kind not in ("session_meta", "response_item", "event_msg", "turn_context", "compacted"):
            continue
        if not isinstance(payload, dict):
            raise ImportFormatError(f"{where}: a {kind} line needs a `payload` object")
        seen = True
        ts = iso_to_ms(obj.get("timestamp"), where)
        ptype = payload.get("type")
        if kind == "session_meta":
            meta = payload.get("meta") if isinstance(payload.get("meta"), dict) else payload
            if isinstance(meta.get("id"), str):
                run.foreign_id = meta["id"]
            if isinstance(meta.get("cli_version"), str):
                run.version = meta["cli_version"]
            if isinstance(meta.get("instructions"), str):
                run.instructions = as_text(meta["instructions"], where, "instructions")
            if isinstance(meta.get("cwd"), str):
                run.extra["cwd"] = meta["cwd"]
            if isinstance(meta.get("originator"), str):
                run.extra["originator"] = meta["originator"]
            if run.started_ms is None:
                run.started_ms = iso_to_ms(meta.get("timestamp"), where) if meta.get("timestamp") is not None else ts
            continue
        if kind == "turn_context":
            if isinstance(payload.get("model"), str) and run.model == "unknown":
                run.model = payload["model"]
            continue
        if kind == "event_msg":
            if ptype == "user_message":
                turn = Turn(user=as_text(payload.get("message"), where, "message"), ts=ts)
                run.turns.append(turn)
                call = None
            elif ptype == "token_count":
                info = payload.get("info")
                if isinstance(info, dict) and isinstance(info.get("last_token_usage"), dict) and turn and turn.calls:
                    last = info["last_token_usage"]
                    cached = token_count(last.get("cached_input_tokens"), where, "cached_input_tokens")
                    turn.calls[-1].usage = {
                        "input_tokens": max(0, token_count(last.get("input_tokens"), where, "input_tokens") - cached),
                        "cache_read_input_tokens": cached,
                        "output_tokens": token_count(last.get("output_tokens"), where, "output_tokens"),
                        "reasoning_tokens": token_count(last.get("reasoning_output_tokens"), where, "reasoning_output_tokens")}
            elif ptype in ("error", "stream_error") and turn is not None:
                turn.calls.append(ModelCall(error=as_text(payload.get("message"), where, "message") or "error", ts=ts))
                call = None
            elif ptype == "turn_aborted" and turn is not None:
                turn.error = f"aborted ({as_text(payload.get('reason'), where, 'reason') or 'interrupted'})"
            continue
        if kind != "response_item":
            continue
        if ptype == "message" and payload.get("role") in ("user", "developer", "system"):
            continue  # context Codex sends; the person's words are the user_message event
        if turn is None:
            turn = Turn(user="", ts=ts)
            run.turns.append(turn)
        if ptype in _OUTPUTS:
            cid = payload.get("call_id")
            if not isinstance(cid, str) or cid not in uses:
                raise ImportFormatError(f"{where}: a {ptype} names a call_id no earlier call has")
            use = uses[cid]
            use.result, use.is_error = _output(payload, where)
            use.ts = ts
            call = None
            continue
        if ptype not in ("message", "reasoning") + _CALLS:
            continue
        if call is None or (call.tool_uses and ptype in ("message", "reasoning")):
            call = ModelCall(ts=ts, model=None if run.model == "unknown" else run.model)
            turn.calls.append(call)
        if ptype == "message":
            call.text += _text(payload.get("content"), where, "content")
        elif ptype == "reasoning":
            summary = payload.get("summary")
            call.thinking += _text(summary, where, "summary") if isinstance(summary, list) else ""
        else:
            cid = payload.get("call_id") or payload.get("id")
            tname = payload.get("name") if ptype != "local_shell_call" else "local_shell"
            if not isinstance(cid, str) or not isinstance(tname, str) or not tname:
                raise ImportFormatError(f"{where}: a {ptype} needs a `name` and a `call_id`")
            use = ToolUse(id=cid, name=as_text(tname, where, "name"), input=_arguments(payload, ptype, where), ts=ts)
            uses[cid] = use
            call.tool_uses.append(use)
    if not seen:
        raise ImportFormatError(f"{name}: no Codex session lines in it (session_meta, response_item, event_msg)")
    return run
