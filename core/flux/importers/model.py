"""What every importer parses a foreign log into, before anything is written: a run of turns, each
turn the model calls it made, each call the tool calls it asked for with their recorded results.

A parser builds this whole structure (or raises :class:`ImportFormatError` naming the line or step
that is wrong) before the shared writer (:mod:`flux.importers.writer`) opens the store, so a file
that is not what it claims leaves nothing behind.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Collection, Optional

from ..canonical import scrub_text
from ..errors import FluxError

__all__ = ["ImportFormatError", "ToolUse", "ModelCall", "Turn", "ImportedRun", "check_json_value", "as_text",
           "content_text", "load_json", "token_count", "arguments_object", "MAX_DEPTH"]

#: How deeply a value in a foreign log may nest (deeper is refused: no honest log nests so far).
MAX_DEPTH = 64


class ImportFormatError(FluxError):
    """A file is not the log it claims to be; the message names the file and the line or step."""


@dataclass
class ToolUse:
    """One tool call the model asked for, and what the log recorded as its result."""

    id: str
    name: str
    input: dict
    result: Optional[str] = None  # None: the log holds no result for this call
    is_error: bool = False
    ts: Optional[int] = None  # when the result was recorded (ms)
    child: Optional["ImportedRun"] = None  # the sub-agent run this call started
    role: Optional[str] = None  # the sub-agent's role (its agent name)


@dataclass
class ModelCall:
    """One model response: its text, reasoning, tool calls and usage — or the error it failed with."""

    text: str = ""
    thinking: str = ""
    tool_uses: list[ToolUse] = field(default_factory=list)
    usage: Optional[dict] = None  # our Usage field names
    ts: Optional[int] = None
    model: Optional[str] = None
    error: Optional[str] = None  # the call failed with this message
    status: Optional[int] = None  # its HTTP status, when the log says


@dataclass
class Turn:
    """One user input and the model calls the agent made for it."""

    user: str
    ts: Optional[int] = None
    calls: list[ModelCall] = field(default_factory=list)
    error: Optional[str] = None  # the turn ended with this error after its calls (aborted, crashed)


@dataclass
class ImportedRun:
    """One session of a foreign agent."""

    format: str  # atif | claude-code | codex | deepseek
    version: str  # the producing tool's version (or the format's), as the log says
    agent: str  # the producing agent's name
    model: str
    foreign_id: Optional[str] = None  # the log's own session id
    instructions: Optional[str] = None  # the system prompt, when the log has one
    started_ms: Optional[int] = None
    turns: list[Turn] = field(default_factory=list)
    extra: dict = field(default_factory=dict)  # facts of the log kept beside the session
    files: dict = field(default_factory=dict)  # other files the log's run was read from: name -> text

    def tool_calls(self) -> int:
        return sum(len(c.tool_uses) for t in self.turns for c in t.calls)

    def model_calls(self) -> int:
        return sum(len(t.calls) for t in self.turns)


def check_json_value(value: Any, where: str, depth: int = 0) -> None:
    """Refuse a value no importer can carry: nested deeper than :data:`MAX_DEPTH`, or a float that is
    not finite (JSON has no NaN or infinity)."""
    if depth > MAX_DEPTH:
        raise ImportFormatError(f"{where}: a value nests deeper than {MAX_DEPTH} levels — not a log this importer reads")
    if isinstance(value, dict):
        for k, v in value.items():
            check_json_value(v, where, depth + 1)
    elif isinstance(value, list):
        for v in value:
            check_json_value(v, where, depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ImportFormatError(f"{where}: a number is not finite ({value}) — JSON has no NaN or infinity")


def as_text(value: Any, where: str, what: str, *, optional: bool = True) -> str:
    """A text field of a log as text (lone surrogates made U+FFFD); a wrong type is an error naming ``where``."""
    if value is None and optional:
        return ""
    if not isinstance(value, str):
        raise ImportFormatError(f"{where}: `{what}` must be a string, got {type(value).__name__}")
    return scrub_text(value)


def content_text(value: Any, where: str, field: str, *, text_types: Collection[str] = ("text",),
                 untyped_is_text: bool = True, mark_others: bool = False) -> str:
    """A content field — absent (``""``), text, or a list of parts (objects) — as one text: the
    ``text`` of every part whose ``type`` is one of ``text_types`` (a part with no ``type`` counts
    as text when ``untyped_is_text``), joined; a part of another type gives nothing, or ``[<its
    type>]`` when ``mark_others``. Anything else is an error naming ``where`` and the ``field``."""
    if value is None:
        return ""
    if isinstance(value, str):
        return as_text(value, where, field)
    if not isinstance(value, list):
        raise ImportFormatError(f"{where}: `{field}` must be a string or a list of content parts, "
                                f"got {type(value).__name__}")
    untyped = "text" if untyped_is_text else None
    parts = []
    for i, part in enumerate(value):
        if not isinstance(part, dict):
            raise ImportFormatError(f"{where}: content part {i + 1} of `{field}` must be an object, "
                                    f"got {type(part).__name__}")
        if part.get("type", untyped) in text_types:
            parts.append(as_text(part.get("text"), where, f"{field}[{i}].text"))
        elif mark_others:
            parts.append(f"[{as_text(part.get('type'), where, f'{field}[{i}].type') or 'part'}]")
    return "".join(parts)


def load_json(text: str, where: str, not_json: str, too_deep: str) -> Any:
    """``text`` decoded; else :class:`ImportFormatError` — ``<where> is not JSON (<why>) — <not_json>``, or
    ``<where> nests too deeply — <too_deep>`` for nesting past Python's stack."""
    try:
        return json.loads(text)
    except ValueError as e:  # bad JSON, or an integer longer than Python reads
        why = e.msg if isinstance(e, json.JSONDecodeError) else str(e).split(":")[0]
        raise ImportFormatError(f"{where} is not JSON ({why}) — {not_json}") from None
    except RecursionError:
        raise ImportFormatError(f"{where} nests too deeply — {too_deep}") from None


def token_count(value: Any, where: str, what: str) -> int:
    """A count the log records (tokens and the like): absent is 0, else a non-negative number up to 1e15."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ImportFormatError(f"{where}: `{what}` must be a non-negative number, got {type(value).__name__}")
    if not 0 <= value <= 1e15:  # (NaN fails too)
        raise ImportFormatError(f"{where}: `{what}` must be a non-negative number up to 1e15")
    return int(value)


def arguments_object(raw: Any, where: str, tool: str) -> dict:
    """A tool call's arguments as the log holds them — an object, or JSON text of one (empty text: no
    arguments) — as a dict."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        raise ImportFormatError(f"{where}: the arguments of tool call `{tool[:40]}` must be a JSON string, "
                                f"got {type(raw).__name__}")
    if not raw.strip():
        return {}
    args = load_json(raw, f"{where}: the arguments text of tool call `{tool[:40]}`",
                     "a tool call's arguments are a JSON object", "not arguments this importer reads")
    if not isinstance(args, dict):
        raise ImportFormatError(f"{where}: the arguments of tool call `{tool[:40]}` must be a JSON object")
    return args
