"""The resume ledger over stored events. One home: :class:`flux.lang.ledger.ResumeLedger`
(it folds run-event bodies); this module only adapts a session's stored rows to it."""

from __future__ import annotations

from typing import Iterable

from ..lang.ledger import LedgerEntry, ResumeLedger
from ..store.events import Run
from ..store.store import StoredEvent

__all__ = ["LedgerEntry", "ResumeLedger", "run_bodies", "ledger_from_interrupted", "open_halt_latch"]


def run_bodies(trace: Iterable[StoredEvent]) -> list[dict]:
    """The ``run`` rows of a trace as the event-body dicts the interpreter folds."""
    return [e.body.event.to_body() for e in trace if isinstance(e.body, Run)]


def ledger_from_interrupted(trace: Iterable[StoredEvent], flow_key: str) -> ResumeLedger | None:
    return ResumeLedger.from_interrupted(run_bodies(trace), flow_key)


def open_halt_latch(trace: Iterable[StoredEvent]) -> ResumeLedger | None:
    return ResumeLedger.fold(run_bodies(trace))
