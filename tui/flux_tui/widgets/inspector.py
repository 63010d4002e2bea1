"""The session screen's inspector: every recorded field of the item under the plan cursor — a
cell, or a statement with its number in the turn — and, after a replay, what the replay made of it."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text

from flux.model.timeline import TurnTimeline

from ..render import render_cell, render_statement
from ..replay_marks import ReplayMarks
from .rendered_view import RenderedView
from .timeline_view import TLRow

__all__ = ["Inspector", "turn_position"]


def turn_position(timeline: TurnTimeline | None, row: TLRow) -> int:
    """The statement's number in its turn: the turn's plans laid end to end, as fork --turn,
    replay and resurrect count (the inspector and the copy toast say it)."""
    plans = timeline.plans if timeline is not None else []
    return sum(len(p.statements) for p in plans[:row.plan.index]) + row.statement.node


class Inspector(RenderedView):
    def __init__(self, **kw) -> None:
        super().__init__("inspector", **kw)

    def show_row(self, row: TLRow | None, timeline: TurnTimeline | None, marks: ReplayMarks | None) -> None:
        if row is None or timeline is None:
            self.show(Text("nothing under the cursor", style="dim italic"))
            return
        if row.cell is not None:
            body = render_cell(row.cell, row.statement)
            self.show(Group(marks.describe_cell(row.cell.index), body) if marks is not None else body)
            self.border_title = f"Inspector · cell #{row.cell.index}"
        elif row.statement is not None and row.plan is not None:
            position = turn_position(timeline, row)
            body = render_statement(row.plan, row.statement, position)
            self.show(Group(marks.describe_stmt(row.plan.flow_key, row.statement.node), body) if marks is not None else body)
            self.border_title = f"Inspector · statement {position}"
