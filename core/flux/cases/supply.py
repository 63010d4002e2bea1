"""Supplied answers (``--supply FILE``): the ladder's second rung.

A JSON object of ``calls`` (keyed ``op:N`` / ``model:N``) and ``tools`` (keyed by op name), at most 200
entries each and 64 KiB in all. A file of the wrong shape is invalid input when read; an answer of the
wrong shape for the call it meets stops the run with ``missing_context`` (docs/cases.md).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..errors import FluxError

__all__ = ["Supplied", "load_supply", "parse_supply", "MAX_ENTRIES", "MAX_BYTES"]

MAX_ENTRIES = 200
MAX_BYTES = 64 * 1024


@dataclass
class Supplied:
    calls: dict[str, Any] = field(default_factory=dict)
    tools: dict[str, Any] = field(default_factory=dict)

    def for_call(self, key: str, op: Optional[str] = None) -> tuple[bool, Any]:
        if key in self.calls:
            return True, self.calls[key]
        if op is not None and op in self.tools:
            return True, self.tools[op]
        return False, None


def op_answer(value: Any) -> Optional[tuple[str, bool]]:
    """``(content, is_error)`` of a supplied op answer, or None for the wrong shape."""
    if isinstance(value, str):
        return value, False
    if isinstance(value, dict) and isinstance(value.get("content"), str) and set(value) <= {"content", "is_error"} \
            and isinstance(value.get("is_error", False), bool):
        return value["content"], bool(value.get("is_error", False))
    return None


def model_answer(value: Any) -> Optional[list[dict]]:
    """The content blocks of a supplied model answer, or None for the wrong shape."""
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if isinstance(value, dict) and value.get("role") == "assistant" and isinstance(value.get("content"), list) \
            and value["content"] and all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in value["content"]):
        for b in value["content"]:
            if b["type"] == "tool_use" and not (isinstance(b.get("name"), str) and isinstance(b.get("input"), dict)):
                return None
            if b["type"] == "text" and not isinstance(b.get("text"), str):
                return None
        return list(value["content"])
    return None


def parse_supply(text: str, where: str = "--supply") -> Supplied:
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise FluxError(f"{where}: over {MAX_BYTES // 1024} KiB — supply fewer or shorter answers")
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise FluxError(f"{where}: not JSON ({e}) — a JSON object with \"calls\" and/or \"tools\"") from None
    if not isinstance(obj, dict) or not set(obj) <= {"calls", "tools"}:
        raise FluxError(f"{where}: a JSON object with only \"calls\" and \"tools\" keys")
    out = Supplied()
    for part in ("calls", "tools"):
        v = obj.get(part, {})
        if not isinstance(v, dict):
            raise FluxError(f"{where}: \"{part}\" is an object")
        if len(v) > MAX_ENTRIES:
            raise FluxError(f"{where}: \"{part}\" has {len(v)} entries, at most {MAX_ENTRIES}")
        if part == "calls":
            for k in v:
                kind, _, num = k.partition(":")
                if kind not in ("op", "model") or not num.isdigit():
                    raise FluxError(f"{where}: calls key {k!r} is not \"op:N\" or \"model:N\"")
        setattr(out, part, dict(v))
    return out


def load_supply(path: str | os.PathLike[str]) -> Supplied:
    p = Path(path).expanduser()
    try:
        if p.stat().st_size > MAX_BYTES:
            raise FluxError(f"--supply {p}: over {MAX_BYTES // 1024} KiB — supply fewer or shorter answers")
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise FluxError(f"cannot read --supply {p}: {getattr(e, 'strerror', None) or e}") from None
    return parse_supply(text, f"--supply {p}")
