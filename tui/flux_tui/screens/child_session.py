"""A session the time machine just wrote (a fork), opened with ``d`` one key from its diff
against the session it was made from."""

from __future__ import annotations

from textual.binding import Binding

from .diff import DiffScreen
from .session import SessionScreen

__all__ = ["ChildSessionScreen"]


class ChildSessionScreen(SessionScreen):
    """A session the time machine just wrote: ``d`` diffs it against its source at once."""

    BINDINGS = [
        Binding("d", "diff_source", "Diff vs source", id="child.diff_source",
                tooltip="Diff this session against the session it was made from, side by side"),
    ]

    def __init__(self, session_id: str, source: str) -> None:
        super().__init__(session_id)
        self.source_session = source

    def action_diff_source(self) -> None:
        self.app.last_diffed = self.source_session
        self.app.push_screen(DiffScreen(self.source_session, self.session_id))
