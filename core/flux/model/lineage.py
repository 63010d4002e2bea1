"""Lineage: forks, what-ifs and sub-agents are linked only through the registry's
``correlation_id`` (the source session) and told apart by ``agent_id``."""

from __future__ import annotations

from ..records import FrozenRecord
from ..store.store import SessionRow

__all__ = ["Lineage", "lineage_of", "LINEAGE_MARKS"]

# One-glyph marks the list views use.
LINEAGE_MARKS = {"fork": "⋔ fork", "what-if": "? what-if", "sub-agent": "↳ sub-agent", "check": "✓ check", "a2a": "⇄ a2a", "child": "↳ child"}


class Lineage(FrozenRecord):
    __slots__ = ("kind", "source", "detail")
    kind: str  # fork | what-if | check | sub-agent | a2a | child
    source: str  # the correlated (parent) session id
    detail: str  # "@3" for a fork at statement 3, the role of a sub-agent, …

    def __init__(self, kind: str, source: str, detail: str) -> None:
        _set = object.__setattr__
        _set(self, "kind", kind)
        _set(self, "source", source)
        _set(self, "detail", detail)

    @property
    def mark(self) -> str:
        return LINEAGE_MARKS.get(self.kind, self.kind)


def lineage_of(row: SessionRow) -> Lineage | None:
    """How this session relates to its source, or ``None`` for a root session."""
    corr = row.correlation_id
    agent = row.agent_id or ""
    if not corr:
        return None
    if agent.startswith("fork:"):
        at = agent.split("@", 1)[1] if "@" in agent else ""
        return Lineage("fork", corr, f"@{at}" if at else "")
    if agent.startswith("what_if:check@"):
        return Lineage("check", corr, agent.split("@", 1)[1])
    if agent.startswith("what_if:"):
        at = agent.split("@", 1)[1] if "@" in agent else ""
        return Lineage("what-if", corr, f"@{at}" if at else "")
    if agent.startswith("subagent:"):
        return Lineage("sub-agent", corr, agent.split(":", 1)[1])
    if agent == "a2a":
        return Lineage("a2a", corr, "")
    return Lineage("child", corr, agent)
