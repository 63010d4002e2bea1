"""The resume ledger over stored events. One home: :class:`flux.lang.ledger.ResumeLedger`
(it folds run-event bodies); this module only adapts a session's stored rows to it."""

from __future__ import annotations

from typing import Iterable

from ..lang.ledger import LedgerEntry, ResumeLedger
from ..store.events import CheckpointReached, PlanResumed, Run, StatementCompleted
from ..store.store import StoredEvent

__all__ = ["LedgerEntry", "ResumeLedger", "run_bodies", "ledger_from_interrupted", "open_halt_latch"]


def run_bodies(trace: Iterable[StoredEvent]) -> list[dict]:
    """The ``run`` rows of a trace as the event-body dicts the interpreter folds."""
    return [e.body.event.to_body() for e in trace if isinstance(e.body, Run)]


# The rows ResumeLedger.from_interrupted reads; the rest of a long trace need not become dicts.
_LEDGER_EVENTS = (StatementCompleted, PlanResumed, CheckpointReached)


def ledger_from_interrupted(trace: Iterable[StoredEvent], flow_key: str, *,
                            across_resumes: bool = False) -> ResumeLedger | None:
    return ResumeLedger.from_interrupted(
        [e.body.event.to_body() for e in trace if isinstance(e.body, Run) and isinstance(e.body.event, _LEDGER_EVENTS)],
        flow_key, across_resumes=across_resumes)


def open_halt_latch(trace: Iterable[StoredEvent]) -> ResumeLedger | None:
    return ResumeLedger.fold(run_bodies(trace))
