"""The session's turns, one line each: number, state marker, outcome, plan count, user input."""

from __future__ import annotations

from typing import Hashable

from rich.text import Text

from flux.model.interrupted import InterruptCheck
from flux.model.session import Turn
from flux.model.wording import outcome_text

from ..fmt import outcome_style
from ..keys import key_table
from .virtual_list import VirtualList

__all__ = ["TurnList", "turn_marker"]


def turn_marker(turn: Turn, check: InterruptCheck | None) -> tuple[str, str]:
    if not turn.ended:
        if check is not None and check.interrupted is not None and check.interrupted.turn_number == turn.number:
            return "⚠", "bold yellow"
        if check is not None and check.recording_pid is not None and check.open_turn == turn.number:
            return "●", "bold cyan"  # a live process is recording it
        return "…", "yellow"
    style = outcome_style(turn.outcome)
    if style == "green":
        return "✓", "green"
    if style == "red":
        return "✗", "bold red"
    return "•", "dim"


class TurnList(VirtualList[Turn]):
    HELP_TOPIC = "turns"

    BINDINGS = key_table("turns", """
        # keys id     action  label
        enter  enter  select  Step into  [hidden]
            Move to the turn's plan and cells
    """)

    def __init__(self, **kw) -> None:
        super().__init__(empty_text="no turns in this session", **kw)
        self.check: InterruptCheck | None = None
        # Turns whose rows were not read yet (a big session reads one turn at a time): their plan
        # count is unknown, shown as "…p" rather than a false "0p".
        self.unread: set[int] = set()

    def row_key(self, row: Turn) -> Hashable:
        return row.turn_id

    def render_row(self, row: Turn, index: int, line: int, width: int, selected: bool) -> Text:
        mark, mstyle = turn_marker(row, self.check)
        t = Text(f"{row.number:>3} ", style="bold" if selected else "dim")
        t.append(mark, style=mstyle)
        t.append(" ")
        t.append(f"{outcome_text(row.outcome)[:9]:<9} ", style=outcome_style(row.outcome))
        plans = "…" if row.number in self.unread else len(row.accepted_plans)
        t.append(f"{plans}p ", style="dim")  # 0p too: a blank would read as "not loaded yet"
        t.append(" ".join(row.user_input.split()) or "–")
        return t
