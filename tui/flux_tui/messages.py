"""Domain messages: thread workers post these; the screens and the App own the state they carry."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from flux.model.interrupted import InterruptCheck
from flux.model.listing import SessionSummary
from flux.model.session import SessionDetail
from flux.model.timeline import TurnTimeline
from flux.store.store import SessionRow

__all__ = [
    "StoreChanged", "RowsLoaded", "LoadFailed", "SummariesLoaded", "QueryMatched", "SessionLoaded",
    "TimelineReady", "OpenSession", "ReplayProgress", "ReplayFinished", "ReplayFailed",
    "DiffReady", "InterruptedCount", "ReportsWorkerFailures",
]


class StoreChanged(Message, bubble=False):
    """Another process committed to the store; reload what you show (the reader is refreshed).

    The App receives it from its poll worker and hands a copy to every screen; it must not bubble
    back up to the App (that would loop)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, StoreChanged)


@dataclass
class RowsLoaded(Message):
    """The registry rows (newest first) — enough for the first paint of the sessions list."""

    generation: int
    rows: list[SessionRow]
    skipped_rows: int = 0


@dataclass
class LoadFailed(Message):
    """The store (or a session) could not be read; ``error`` is the one-line reason."""

    error: str
    what: str = "store"


@dataclass
class SummariesLoaded(Message):
    """Per-session facts for some rows, computed by a worker (visible window first)."""

    generation: int
    summaries: list[SessionSummary]
    done: int = 0
    total: int = 0


@dataclass
class QueryMatched(Message):
    """Sessions whose conversation text contains ``query`` (``None``: the search failed)."""

    query: str
    ids: set[str] | None
    error: str | None = None


@dataclass
class SessionLoaded(Message):
    detail: SessionDetail
    interrupt: InterruptCheck
    reload: bool = False
    messages: dict = field(default_factory=dict)  # turn number -> messages (filled lazily by the screen)
    unknown: list = field(default_factory=list)  # detail.unknown_events
    initial: Any = None  # (turn number, timeline, rows): the first turn's timeline, built by the loader


@dataclass
class TimelineReady(Message):
    turn_number: int
    timeline: TurnTimeline
    restore: Any = None


@dataclass
class OpenSession(Message):
    """Ask the App to open a session screen."""

    session_id: str


@dataclass
class ReplayProgress(Message):
    """``done`` of ``total`` executions replayed (throttled by the worker)."""

    session_id: str
    done: int
    total: int


@dataclass
class ReplayFinished(Message):
    """A replay ended. ``focus`` says where it went wrong: ``(turn_number, ("stmt", flow_key, node))``
    or ``(turn_number, ("cell", tape_index))``; None when there is nothing to point at."""

    session_id: str
    report: Any
    focus: Any = None
    seconds: float = 0.0


@dataclass
class ReplayFailed(Message):
    """The session cannot be replayed at all (no cells, no plans, a plan that does not parse…)."""

    session_id: str
    error: str


@dataclass
class DiffReady(Message):
    diff: Any = None  # flux.timemachine.diff.RunDiff
    error: str | None = None


@dataclass
class InterruptedCount(Message):
    """The store-wide interrupted set (``interrupted_sessions``), ahead of the summary scan."""

    generation: int
    ids: set[str]


class ReportsWorkerFailures:
    """Mixed into every screen that runs workers: a worker that raised is handed to the App, which
    says so in a toast and lets the screen show it where the data would be (``worker_failed``).
    Textual posts ``Worker.StateChanged`` to the worker's screen only (it does not bubble), so
    without this an unexpected error left a screen saying "loading…" for good."""

    def on_worker_state_changed(self, event) -> None:
        self.app.report_worker_failure(event)

