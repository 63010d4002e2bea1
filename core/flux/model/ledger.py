"""The resume ledger (spec §3.8): which top-level statements of a plan already completed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..store.events import PlanHalted, PlanResumed, Run, StatementCompleted
from ..store.store import StoredEvent

__all__ = ["LedgerEntry", "ResumeLedger"]


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    node: int
    stmt: str
    value: str | None


@dataclass(frozen=True, slots=True)
class ResumeLedger:
    plan: str  # flow_key the entries belong to
    completed: tuple[LedgerEntry, ...]

    def __len__(self) -> int:
        return len(self.completed)

    @classmethod
    def from_interrupted(cls, trace: Iterable[StoredEvent], plan: str) -> "ResumeLedger | None":
        """The completed statements of ``plan``; cleared on a same-plan restart (node not strictly
        increasing) or when a ``plan_resumed`` names ``plan`` as its prior. ``None`` if empty."""
        entries: list[LedgerEntry] = []
        for ev in trace:
            if not isinstance(ev.body, Run):
                continue
            r = ev.body.event
            if isinstance(r, StatementCompleted) and r.plan == plan:
                if entries and r.node <= entries[-1].node:
                    entries = []
                entries.append(LedgerEntry(r.node, r.stmt, r.value))
            elif isinstance(r, PlanResumed) and r.prior == plan:
                entries = []
        return cls(plan, tuple(entries)) if entries else None

    @classmethod
    def fold(cls, trace: Iterable[StoredEvent]) -> "ResumeLedger | None":
        """The open halt latch: the last ``plan_halted`` not later named ``prior`` by a
        ``plan_resumed``; its ledger is every ``statement_completed`` row of that plan."""
        events = list(trace)
        latch: str | None = None
        for ev in events:
            if not isinstance(ev.body, Run):
                continue
            r = ev.body.event
            if isinstance(r, PlanHalted):
                latch = r.plan
            elif isinstance(r, PlanResumed) and r.prior == latch:
                latch = None
        if latch is None:
            return None
        entries = [LedgerEntry(r.node, r.stmt, r.value) for ev in events if isinstance(ev.body, Run)
                   for r in (ev.body.event,) if isinstance(r, StatementCompleted) and r.plan == latch]
        return cls(latch, tuple(entries))
