"""Calls a stored conversation never answered: what flux's fork refuses a parent for.

A ``tool_use`` with no ``tool_result`` in the next message is a turn killed while that call ran, so a
fork on it would start from a world nobody recorded. :func:`unanswered_tool_use` names the first one
in flux's words (plus its op), or returns ``None``; a ``compacted`` event replaces what came before.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

__all__ = ["unanswered_tool_use"]


def _blocks(m: Any, kind: str) -> list[dict]:
    content = m.get("content") if isinstance(m, dict) else None
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == kind]


def _text(v: Any) -> str:
    return v if isinstance(v, str) else repr(v)


def unanswered_tool_use(messages: Sequence[Any]) -> Optional[str]:
    """The first ``tool_use`` of ``messages`` that the next message does not answer (module doc),
    as one phrase, or ``None``."""
    for i, m in enumerate(messages):
        uses = _blocks(m, "tool_use")
        if not uses:
            continue
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        answered = {_text(b.get("tool_use_id")) for b in _blocks(nxt, "tool_result")}
        for u in uses:
            tid = _text(u.get("id"))
            if tid not in answered:
                name = u.get("name")
                call = f" (a call to `{name}`)" if isinstance(name, str) and name else ""
                return f"tool_use {tid} at index {i} is never answered by a tool_result{call}"
    return None
