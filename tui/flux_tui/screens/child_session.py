"""A session the time machine just wrote (a fork), opened with ``d`` one key from its diff
against the session it was made from."""

from __future__ import annotations


from ..keys import key_table
from .diff import DiffScreen
from .session import SessionScreen

__all__ = ["ChildSessionScreen"]


class ChildSessionScreen(SessionScreen):
    """A session the time machine just wrote: ``d`` diffs it against its source at once."""

    BINDINGS = key_table("child", """
        # keysid           action       label
        d  diff_source  diff_source  Diff vs source
            Diff this session against the session it was made from, side by side
    """)

    def __init__(self, session_id: str, source: str) -> None:
        super().__init__(session_id)
        self.source_session = source

    def action_diff_source(self) -> None:
        self.app.last_diffed = self.source_session
        self.app.push_screen(DiffScreen(self.source_session, self.session_id))
