"""What a hermetic replay says about each statement and cell of the timeline (✓ served, ✗ diverged,
○ unconsumed), and where the cursor goes to show what went wrong."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .fmt import failure_line, in_user_words

__all__ = ["ReplayMarks", "marks_from_report", "divergence_target", "render_report", "CELL_MARKS", "STMT_MARKS"]

CELL_MARKS: dict[str, tuple[str, str]] = {
    "served": ("✓", "bold green"),
    "unconsumed": ("○", "bold yellow"),
    "truncated": ("✗", "bold red"),
}
STMT_MARKS: dict[str, tuple[str, str]] = {
    "ok": ("✓", "bold green"),
    "halted": ("✓", "bold yellow"),  # halted as recorded (reproduced)
    "diverged": ("✗", "bold red"),
    "tape end": ("⏸", "bold yellow"),  # the recording stops here: the turn was interrupted
    "not replayed": ("○", "dim"),
}
_RANK = {"ok": 0, "halted": 1, "tape end": 2, "diverged": 3}


@dataclass
class ReplayMarks:
    session_id: str
    report: Any  # ReplayReport
    cells: list[str] = field(default_factory=list)  # per tape index: served | unconsumed | truncated
    stmts: dict[tuple[str, int], str] = field(default_factory=dict)  # (flow_key, node) -> ok | halted | diverged
    stmt_errors: dict[tuple[str, int], str] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def faithful(self) -> bool:
        return bool(self.report.faithful)

    def cell_status(self, index: int) -> str:
        return self.cells[index] if 0 <= index < len(self.cells) else "unconsumed"

    def cell_mark(self, index: int) -> tuple[str, str]:
        return CELL_MARKS.get(self.cell_status(index), ("?", "dim"))

    def stmt_status(self, flow_key: str | None, node: int) -> str:
        if flow_key is None:
            return "not replayed"
        return self.stmts.get((flow_key, node), "not replayed")

    def stmt_mark(self, flow_key: str | None, node: int) -> tuple[str, str]:
        return STMT_MARKS[self.stmt_status(flow_key, node)]

    def describe_cell(self, index: int) -> Text:
        status = self.cell_status(index)
        mark, style = CELL_MARKS.get(status, ("?", "dim"))
        what = {"served": "served to the replay", "unconsumed": "never asked for by the replay (unconsumed)",
                "truncated": "truncated — the replay refused to serve it"}.get(status, status)
        return Text.assemble(("replay  ", "dim"), (f"{mark} {what}", style))

    def describe_stmt(self, flow_key: str | None, node: int) -> Text:
        status = self.stmt_status(flow_key, node)
        mark, style = STMT_MARKS[status]
        what = {"ok": "ran, every op served from tape", "halted": "halted as recorded (reproduced)",
                "diverged": "diverged", "not replayed": "not reached by the replay",
                "tape end": "the tape ends here — the turn was interrupted (resurrect it with `flux resurrect`)",
                }[status]
        t = Text.assemble(("replay  ", "dim"), (f"{mark} {what}", style))
        err = self.stmt_errors.get((flow_key or "", node))
        if err and status in ("diverged", "halted"):
            t.append(f"\n        {err}", style="red" if status == "diverged" else "yellow")
        return t


def _diverged_result(sr) -> bool:
    return any(r.status != "served" for r in sr.requests)


def marks_from_report(session_id: str, report, seconds: float = 0.0) -> ReplayMarks:
    m = ReplayMarks(session_id, report, list(report.cell_status), seconds=seconds)
    for sr in report.statement_results:
        if _diverged_result(sr):
            status = "diverged"
        elif sr.status == "halted":
            status = "halted"
        else:
            status = "ok"
        key = (sr.plan, sr.node)
        end = report.tape_end
        if end is not None and status == "diverged" and (end.flow_key, end.node) == key:
            status = "tape end"
        if _RANK[status] >= _RANK.get(m.stmts.get(key, "ok"), 0):
            m.stmts[key] = status
            if sr.error:
                m.stmt_errors[key] = in_user_words(sr.error)
    return m


def divergence_target(report, detail) -> tuple[int, tuple] | None:
    """Where the replay went wrong, as ``(turn number, row target)``: the statement whose request
    missed (or hit a truncated cell), else the first unconsumed cell of an unfaithful replay."""
    from flux.model.session import turn_index_of
    from flux.timemachine.replay import plan_turns

    if report.diverged is not None:
        sr = next((s for s in report.statement_results if _diverged_result(s)), None)
        if sr is None:
            sr = next((s for s in report.statement_results if s.status == "halted"), None)
        if sr is not None:
            # A truncated cell that refused service sits in the turn that recorded it.
            idx = next((r.index for r in sr.requests if r.status == "truncated" and r.index is not None), None)
            if idx is not None and idx < len(detail.cells):
                ti = turn_index_of(detail.turns, detail.cells[idx].global_seq)
                if ti is not None:
                    return ti + 1, ("stmt", sr.plan, sr.node)
            turn = plan_turns(detail).get(sr.plan)
            if turn is not None:
                return turn, ("stmt", sr.plan, sr.node)
    end = report.tape_end
    if end is not None:
        return end.turn, ("stmt", end.flow_key, end.node)
    un = report.unconsumed
    if un and not report.faithful and un[0] < len(detail.cells):
        ti = turn_index_of(detail.turns, detail.cells[un[0]].global_seq)
        if ti is not None:
            return ti + 1, ("cell", un[0])
    return None


def render_report(marks: ReplayMarks) -> RenderableType:
    rep = marks.report
    parts: list[RenderableType] = []
    if rep.faithful:
        head = Text.assemble(("REPLAY ", "bold reverse green"), " ", ("faithful", "bold green"),
                             (f" · {marks.session_id} re-executed from tape, no model call, no side effect", "dim"))
        if rep.tape_end is not None:
            head = Text.assemble(("REPLAY ", "bold reverse green"), " ", ("✓ reproduced up to the interruption", "bold green"),
                                 (f" · {marks.session_id} re-executed from tape, no model call, no side effect", "dim"))
    else:
        head = Text.assemble(("REPLAY ", "bold reverse red"), " ", ("not faithful", "bold red"),
                             (f" · {marks.session_id}", "dim"))
    parts.append(head)
    served = Text(f"replayed {len(rep.plans)} plan(s) · {rep.cells_consumed}/{rep.cells_total} recorded cell(s) served",
                  style="bold")
    parts.append(served)
    if rep.tape_end is not None:
        parts.append(Text.assemble(("⏸ ", "bold yellow"), (rep.tape_end.message(), "yellow")))
    if rep.diverged:
        parts.append(failure_line(rep.diverged, "diverged"))
    elif not rep.faithful and rep.unfaithful_reason:
        parts.append(failure_line(rep.unfaithful_reason))
    if rep.missing_sources:
        parts.append(Text(f"⚠ {rep.missing_sources} execution(s) without a stored plan_source (not replayed)", style="yellow"))
    un = rep.unconsumed
    if un:
        shown = ", ".join(f"#{i}" for i in un[:12]) + (f" … (+{len(un) - 12})" if len(un) > 12 else "")
        parts.append(Text.assemble(("○ unconsumed cells: ", "yellow"), shown))
    plans = Table.grid(padding=(0, 1))
    plans.add_column(no_wrap=True)
    plans.add_column(overflow="fold")
    limit = 200
    for p in rep.plans[:limit]:
        # The CLI's wording (ReplayReport.plan_line), coloured: ✓ ran / ✓ halted as recorded /
        # ⏸ the tape ends (interrupted turn) / ✗ diverged.
        line = rep.plan_line(p)
        mark, rest = line[0], line[2:]
        style = {"✓": "bold green", "⏸": "bold yellow", "✗": "bold red"}.get(mark, "")
        if p.halted is not None and mark == "✓":
            style = "bold yellow"
        key, _, tail = rest.partition(" — ")
        if mark == "✗":
            tail = "diverged"  # the divergence itself is spelled out once, above
        plans.add_row(Text(mark, style=style),
                      Text.assemble(key, (f" — {tail}" if tail else "", "red" if mark == "✗" else "yellow")))
    parts.append(Text(""))
    parts.append(Text("plans", style="dim bold"))
    parts.append(plans)
    if len(rep.plans) > limit:
        parts.append(Text(f"… {len(rep.plans) - limit:,} more plan(s)", style="dim italic"))
    parts.append(Text(""))
    parts.append(Text("r replays again · Esc clears the marks", style="dim"))
    return Group(*parts)
