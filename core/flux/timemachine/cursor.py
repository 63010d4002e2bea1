"""From a browser's cursor to the time machine's coordinates.

:func:`position_at` maps the app's plan cursor (a statement of an accepted plan) to the flat position
fork and what-if name; :func:`tail_text` is the edit mode's starting text; :func:`row_of_cell` is the
diff row a what-if's ``substitute_at`` replaces when the cursor is on a cell.
"""

from __future__ import annotations

from ..lang import ast as A
from ..lang.formatter import format_flow
from ..model.session import SessionDetail
from .engine import NotForkable, Position, executions_of
from .fork import fork_points

__all__ = ["position_at", "tail_text", "row_of_cell"]


def position_at(detail: SessionDetail, turn: int, flow_key: str | None, node: int) -> Position:
    """The fork position of statement ``node`` of the plan ``flow_key`` accepted in ``turn``.
    Raises :class:`NotForkable` (one line) when that plan never ran or cannot be re-executed."""
    if flow_key is None:
        raise NotForkable(f"this plan does not parse, so session {detail.id} cannot be forked at it")
    points = fork_points(detail)
    same = [p for p in points if p.flow_key == flow_key and p.node == node]
    if not same:
        raise NotForkable(f"statement {node} of this plan was never executed in session {detail.id} — "
                          "fork at a statement that ran")
    return next((p for p in same if p.turn == turn), same[0])


def tail_text(detail: SessionDetail, position: Position) -> str:
    """The execution holding ``position``, from that statement on, as canonical Flux-Lang."""
    ex = executions_of(detail)[position.execution]
    d = ex.draft
    return format_flow(A.DraftAst(name=d.name, params=d.params, returns=d.returns, body=tuple(d.body[position.node:])))


def row_of_cell(detail: SessionDetail, cell_index: int) -> int | None:
    """The diff row (what ``what-if --substitute-at NODE`` counts: statement rows, else cell rows)
    whose first cell is tape cell ``cell_index``; ``None`` when that cell is not the first of its
    statement (``substitute_at`` cannot name it — substitute by op instead). ``detail`` must hold
    the whole session's run trace (``kinds=TRACE_KINDS``)."""
    from .whatif import row_cells

    rows = row_cells(detail)
    return next((r for r, first in enumerate(rows) if first == cell_index), None)
