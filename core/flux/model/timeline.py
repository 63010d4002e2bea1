"""A turn as a walkable timeline: its accepted plans, their top-level statements, and the cassette
cells each statement dispatched (what the app's cursor and ``flux show`` step through).

Cells go to statements by the ledger when the run wrote one; a natively dispatched plan writes none,
so its cells go, in order, to the latest accepted plan whose calls include the cell's op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import FluxError
from ..store.events import OpRecorded, PlanAttempted, PlanHalted, Run, StatementCompleted
from .session import Cell, PlanAttempt, SessionDetail, Turn

__all__ = ["Statement", "TimelinePlan", "TurnTimeline", "CursorItem", "build_timeline"]


@dataclass
class Statement:
    plan_index: int
    node: int
    text: str  # canonical one-statement text
    stmt_hash: str
    ops: tuple[str, ...]  # ops its calls name, in order
    cells: list[Cell] = field(default_factory=list)
    status: str = "not run"  # completed | skipped | halted | dispatched | not run
    halt_kind: str | None = None
    halt_error: str | None = None

    @property
    def has_error(self) -> bool:
        return self.status == "halted" or any(c.flagged_error for c in self.cells)


@dataclass
class TimelinePlan:
    index: int
    attempt: PlanAttempt
    flow_key: str | None
    statements: list[Statement]
    parse_error: str | None = None


@dataclass(frozen=True, slots=True)
class CursorItem:
    """One stop of the cursor: a statement, or one of its cells (``cell`` set)."""

    plan_index: int
    statement: int  # index into plan.statements (-1: cells outside any plan)
    cell: Cell | None = None

@dataclass
class TurnTimeline:
    turn: Turn
    plans: list[TimelinePlan]
    loose_cells: list[Cell]  # cells recorded in the turn before any accepted plan
    items: list[CursorItem]

    def error_positions(self) -> list[int]:
        out = []
        for i, it in enumerate(self.items):
            if it.cell is not None:
                if it.cell.flagged_error:
                    out.append(i)
            elif it.statement >= 0 and self.plans[it.plan_index].statements[it.statement].status == "halted":
                out.append(i)
        return out

    def statement_of(self, item: CursorItem) -> Statement | None:
        if item.statement < 0:
            return None
        return self.plans[item.plan_index].statements[item.statement]


def _call_ops(node_json: Any, out: list[str]) -> None:
    if isinstance(node_json, dict):
        if node_json.get("kind") == "call" and isinstance(node_json.get("op"), str):
            out.append(node_json["op"])
        for v in node_json.values():
            _call_ops(v, out)
    elif isinstance(node_json, list):
        for v in node_json:
            _call_ops(v, out)


def _plan_statements(index: int, attempt: PlanAttempt) -> TimelinePlan:
    from ..lang.astjson import node_to_json
    from ..lang.formatter import format_node_lines
    from ..lang.hashes import stmt_hash16

    from .stored_plan import parse_stored_plan

    try:
        draft, key = parse_stored_plan(attempt.plan_source or "")
    except FluxError as e:
        return TimelinePlan(index, attempt, None, [], parse_error=str(e))
    from ..lang import ast as A

    stmts = []
    for i, node in enumerate(draft.body):
        ops: list[str] = []
        if isinstance(node, A.Bind) and isinstance(node.value, A.Call) and all(isinstance(a, A.Lit) for a in node.value.args):
            ops.append(node.value.op)  # the host-derived shape: no need to walk the tree
        else:
            _call_ops(node_to_json(node), ops)
        stmts.append(Statement(index, i, "".join(format_node_lines(node)).rstrip("\n"), stmt_hash16(node), tuple(ops)))
    return TimelinePlan(index, attempt, key, stmts)


def build_timeline(detail: SessionDetail, turn: Turn) -> TurnTimeline:
    events = detail.turn_events(turn)
    cell_by_seq = {c.global_seq: c for c in detail.turn_cells(turn)}
    attempts_by_seq = {p.global_seq: p for p in turn.plan_attempts}
    plans: list[TimelinePlan] = []
    by_key: dict[str, TimelinePlan] = {}
    loose: list[Cell] = []
    pending: list[Cell] = []  # cells waiting for a ledger row to close their statement
    native_cursor: dict[int, int] = {}  # plan index -> statement index for ledger-less placement

    def place_native(cell: Cell) -> None:
        if not plans:
            loose.append(cell)
            return
        # Most recent plan whose statements call this op; else the most recent plan.
        for tp in reversed(plans):
            if tp.parse_error is None and any(cell.op in s.ops for s in tp.statements):
                start = native_cursor.get(tp.index, 0)
                for si in list(range(start, len(tp.statements))) + list(range(0, start)):
                    if cell.op in tp.statements[si].ops:
                        st = tp.statements[si]
                        st.cells.append(cell)
                        if st.status == "not run":
                            st.status = "dispatched"
                        native_cursor[tp.index] = si
                        return
        tp = plans[-1]
        if tp.statements:
            st = tp.statements[min(native_cursor.get(tp.index, 0), len(tp.statements) - 1)]
            st.cells.append(cell)
            if st.status == "not run":
                st.status = "dispatched"
        else:
            loose.append(cell)

    last_boundary: tuple[str, int] | None = None
    has_ledger = any(isinstance(e.body, Run) and isinstance(e.body.event, (StatementCompleted, PlanHalted)) for e in events)
    for ev in events:
        b = ev.body
        if isinstance(b, PlanAttempted):
            if b.outcome == "accepted" and b.plan_source is not None:
                attempt = attempts_by_seq.get(ev.global_seq)
                if attempt is None:
                    continue
                tp = _plan_statements(len(plans), attempt)
                plans.append(tp)
                if tp.flow_key:
                    by_key[tp.flow_key] = tp
            continue
        if not isinstance(b, Run):
            continue
        r = b.event
        if isinstance(r, OpRecorded):
            cell = cell_by_seq.get(ev.global_seq)
            if cell is None:
                continue
            if has_ledger:
                pending.append(cell)
            else:
                place_native(cell)
        elif isinstance(r, (StatementCompleted, PlanHalted)):
            last_boundary = (r.plan, r.node)
            tp = by_key.get(r.plan)
            if tp is None or not (0 <= r.node < len(tp.statements)):
                loose.extend(pending)
                pending = []
                continue
            st = tp.statements[r.node]
            st.cells.extend(pending)
            pending = []
            if isinstance(r, PlanHalted):
                st.status, st.halt_kind, st.halt_error = "halted", r.kind, r.error
            else:
                st.status = "skipped" if r.skipped else "completed"
    if pending:  # cells after the last boundary: the statement in flight when the run stopped
        tp = by_key.get(last_boundary[0]) if last_boundary else (plans[-1] if plans else None)
        nxt = last_boundary[1] + 1 if last_boundary else 0
        if tp is not None and nxt < len(tp.statements):
            tp.statements[nxt].cells.extend(pending)
            tp.statements[nxt].status = "dispatched"
        else:
            for c in pending:
                place_native(c)
    if turn.ended:
        for tp in plans:
            if not has_ledger:
                for st in tp.statements:
                    if st.status == "dispatched":
                        st.status = "completed"
    items: list[CursorItem] = [CursorItem(-1, -1, c) for c in loose]
    for tp in plans:
        for si, st in enumerate(tp.statements):
            items.append(CursorItem(tp.index, si))
            items.extend(CursorItem(tp.index, si, c) for c in st.cells)
    return TurnTimeline(turn, plans, loose, items)

