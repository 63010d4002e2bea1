"""Claude Code session logs (``~/.claude/projects/<project>/<session>.jsonl``) as runs: the person's
``user`` lines open turns, the lines of one assistant ``message.id`` are one model call, ``tool_result``
blocks are the results, and a ``Task``/``Agent`` call naming an ``agentId`` imports that sub-agent's log as
a child session. The format's rules: docs/import.md ("Claude Code")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from .atif import iso_to_ms
from .jsonl import first_object, json_lines
from .model import ImportedRun, ImportFormatError, ModelCall, ToolUse, Turn, as_text, content_text, token_count

__all__ = ["parse_claude_code", "looks_like_claude_code"]

_TASK_TOOLS = ("Task", "Agent")
_INTERRUPTED = "[Request interrupted by user"


def looks_like_claude_code(text: str) -> bool:
    for obj in first_object(text, 8):
        if obj.get("type") in ("user", "assistant", "summary", "system", "file-history-snapshot") and (
                "sessionId" in obj or "leafUuid" in obj or "uuid" in obj):
            return True
    return False


def _blocks(content: Any, where: str) -> list[dict]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise ImportFormatError(f"{where}: `message.content` must be a string or a list of blocks, got "
                                f"{type(content).__name__}")
    out = []
    for i, b in enumerate(content):
        if not isinstance(b, dict):
            raise ImportFormatError(f"{where}: content block {i + 1} must be an object")
        out.append(b)
    return out


def _usage(u: Any, where: str) -> Optional[dict]:
    if u is None:
        return None
    if not isinstance(u, dict):
        raise ImportFormatError(f"{where}: `message.usage` must be an object")
    out = {}
    for ours, theirs in (("input_tokens", "input_tokens"), ("output_tokens", "output_tokens"),
                         ("cache_read_input_tokens", "cache_read_input_tokens"),
                         ("cache_creation_input_tokens", "cache_creation_input_tokens")):
        out[ours] = token_count(u.get(theirs), where, f"usage.{theirs}")
    return out


def parse_claude_code(text: str, name: str, path: Optional[Path] = None, *, agent: Optional[str] = None,
                      depth: int = 0, side: Optional[dict] = None) -> ImportedRun:
    """The run of a Claude Code session log. ``path`` locates its ``subagents/`` directory; ``side``
    gives the sub-agent logs' texts instead (``subagents/agent-<id>.jsonl`` -> text). The sub-agent
    logs read end up in the run's ``files``."""
    lines = list(json_lines(text, name))
    if not lines:
        raise ImportFormatError(f"{name}: the log is empty — no Claude Code session in it")
    has_main = agent is not None or any(not o.get("isSidechain") for _n, o in lines if o.get("type") in ("user", "assistant"))
    run = ImportedRun(format="claude-code", version="unknown", agent="claude-code", model="unknown")
    results: dict[str, tuple[dict, Optional[int], int, Any]] = {}
    uses: list[tuple[ToolUse, int]] = []
    turn: Optional[Turn] = None
    call: Optional[ModelCall] = None
    call_id: Optional[str] = None
    sidechains: dict[str, list[str]] = {}
    for n, obj in lines:
        where = f"{name}: line {n}"
        kind = obj.get("type")
        if isinstance(obj.get("version"), str) and run.version == "unknown":
            run.version = obj["version"]
        if isinstance(obj.get("sessionId"), str) and run.foreign_id is None:
            run.foreign_id = obj["sessionId"]
        if isinstance(obj.get("cwd"), str) and "cwd" not in run.extra:
            run.extra["cwd"] = obj["cwd"]
        if kind not in ("user", "assistant"):
            continue
        if obj.get("isSidechain") and has_main and agent is None:
            aid = obj.get("agentId")
            if isinstance(aid, str):
                sidechains.setdefault(aid, []).append(json.dumps(obj))
            continue
        msg = obj.get("message")
        if not isinstance(msg, dict):
            raise ImportFormatError(f"{where}: a {kind} line needs a `message` object")
        ts = iso_to_ms(obj.get("timestamp"), where)
        blocks = _blocks(msg.get("content"), where)
        if kind == "user":
            call, call_id = None, None
            tool_results = [b for b in blocks if b.get("type") == "tool_result"]
            if tool_results:
                for b in tool_results:
                    tid = b.get("tool_use_id")
                    if not isinstance(tid, str):
                        raise ImportFormatError(f"{where}: a tool_result needs a `tool_use_id`")
                    results[tid] = (b, ts, n, obj.get("toolUseResult"))
                continue
            if obj.get("isMeta"):
                continue
            said = "".join(as_text(b.get("text"), where, "text") for b in blocks if b.get("type") == "text")
            if said.startswith(_INTERRUPTED) and turn is not None:
                turn.error = "interrupted by the user"
                continue
            turn = Turn(user=said, ts=ts)
            run.turns.append(turn)
            continue
        mid = msg.get("id") if isinstance(msg.get("id"), str) else None
        model = msg.get("model") if isinstance(msg.get("model"), str) else None
        if turn is None:
            turn = Turn(user="", ts=ts)
            run.turns.append(turn)
        if obj.get("isApiErrorMessage"):
            said = "".join(as_text(b.get("text"), where, "text") for b in blocks if b.get("type") == "text")
            turn.calls.append(ModelCall(error=said or "API error", ts=ts, model=model))
            call, call_id = None, None
            continue
        if call is None or mid is None or mid != call_id:
            call = ModelCall(ts=ts, model=model)
            call_id = mid
            turn.calls.append(call)
        if model and model != "<synthetic>" and run.model == "unknown":
            run.model = model
        u = _usage(msg.get("usage"), where)
        if u is not None and (call.usage is None or u["output_tokens"] >= call.usage["output_tokens"]):
            call.usage = u
        for b in blocks:
            t = b.get("type")
            if t == "text":
                call.text += as_text(b.get("text"), where, "text")
            elif t == "thinking":
                call.thinking += as_text(b.get("thinking"), where, "thinking")
            elif t == "tool_use":
                tid, tname, tin = b.get("id"), b.get("name"), b.get("input", {})
                if not isinstance(tid, str) or not isinstance(tname, str) or not tname:
                    raise ImportFormatError(f"{where}: a tool_use block needs an `id` and a `name`")
                if not isinstance(tin, dict):
                    raise ImportFormatError(f"{where}: the input of tool_use `{tname[:40]}` must be an object")
                use = ToolUse(id=tid, name=as_text(tname, where, "name"), input=tin, ts=ts)
                call.tool_uses.append(use)
                uses.append((use, n))
    for use, n in uses:
        got = results.get(use.id)
        if got is None:
            continue
        block, ts, rn, meta = got
        use.result = content_text(block.get("content"), f"{name}: line {rn}", "tool_result.content",
                                  mark_others=True)  # an image part: `[image]`
        use.is_error = bool(block.get("is_error"))
        use.ts = ts
        if use.name in _TASK_TOOLS and depth < 8:
            aid = meta.get("agentId") if isinstance(meta, dict) else None
            if isinstance(aid, str) and aid:
                role = use.input.get("subagent_type") if isinstance(use.input.get("subagent_type"), str) else "general-purpose"
                child = _child(aid, path, sidechains, name, depth, side, run.files)
                if child is not None:
                    use.child, use.role = child, role
    if not any(o.get("type") in ("user", "assistant") for _n, o in lines):
        raise ImportFormatError(f"{name}: no Claude Code `user` or `assistant` line in it — not a Claude Code session log")
    return run


def _child(aid: str, path: Optional[Path], sidechains: dict[str, list[str]], name: str, depth: int,
           side: Optional[dict], files: dict) -> Optional[ImportedRun]:
    key = f"subagents/agent-{aid}.jsonl"
    text: Optional[str] = None
    if side is not None:
        text = side.get(key) if isinstance(side.get(key), str) else None
    elif path is not None:
        f = path.with_suffix("") / key
        if f.is_file():
            try:
                text = f.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise ImportFormatError(f"{name}: the sub-agent log {f.name} cannot be read ({type(e).__name__})") from None
    if text is not None:
        child = parse_claude_code(text, f"{name} (sub-agent {key})", None, agent=aid, depth=depth + 1, side=side or {})
        files[key] = text
        files.update(child.files)
        return child
    lines = sidechains.get(aid)
    if lines:
        return parse_claude_code("\n".join(lines), f"{name} (sub-agent {aid[:40]})", None, agent=aid, depth=depth + 1)
    return None
