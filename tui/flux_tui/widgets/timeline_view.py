"""The statement / cell stepper: a turn's accepted plans as highlighted Flux-Lang, statement by
statement, each followed by the cassette cells it dispatched. Built on :class:`VirtualList`, so a
turn with 100,000 cells renders only what is on screen."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable

from rich.cells import cell_len
from rich.text import Text

from flux.model.session import Cell, Turn
from flux.model.timeline import Statement, TimelinePlan, TurnTimeline

from ..fmt import in_user_words, one_line
from ..highlight import highlight_flux
from ..keys import key_table
from ..render import display_statement_text, statement_marker
from .virtual_list import VirtualList

__all__ = ["TLRow", "TimelineView", "build_rows"]


@dataclass(eq=False, slots=True)
class TLRow:
    kind: str  # heading | source | note | statement | cell
    stop: int = -1  # index into timeline.items (cursor stops), -1 for display-only rows
    plan: TimelinePlan | None = None
    statement: Statement | None = None
    cell: Cell | None = None
    text: Text | None = None
    last_cell: bool = False
    display: str = ""  # a statement's text as shown (without the one-statement flow wrapper)
    _height: tuple[int, int] | None = field(default=None, repr=False)  # (width, lines)
    _wrapped: tuple[int, list[Text]] | None = field(default=None, repr=False)

    @property
    def key(self) -> Hashable:
        if self.cell is not None:
            return ("cell", self.cell.global_seq)
        if self.statement is not None:
            return ("stmt", self.statement.plan_index, self.statement.node)
        return ("row", id(self))


def build_rows(turn: Turn, timeline: TurnTimeline) -> list[TLRow]:
    """Display rows in cursor order, with plan headings and non-accepted attempts between them."""
    stops: dict[tuple, int] = {}
    for i, it in enumerate(timeline.items):
        stops[(it.plan_index, it.statement, it.cell.global_seq if it.cell is not None else None)] = i
    rows: list[TLRow] = []
    if timeline.loose_cells:
        rows.append(TLRow("heading", text=Text("cells recorded before any accepted plan", style="dim italic")))
        for j, c in enumerate(timeline.loose_cells):
            rows.append(TLRow("cell", stop=stops.get((-1, -1, c.global_seq), -1), cell=c,
                              last_cell=j == len(timeline.loose_cells) - 1))
    by_attempt = {tp.attempt.global_seq: tp for tp in timeline.plans}
    for attempt in turn.plan_attempts:
        tp = by_attempt.get(attempt.global_seq)
        if tp is None:
            if attempt.accepted:
                continue
            style = "red" if attempt.outcome in ("compile_error", "rejected") else "dim"
            t = Text.assemble((f"attempt step {attempt.step}", "bold " + style), (f" · {attempt.outcome}", style))
            if attempt.error:
                t.append(f": {one_line(attempt.error, 300)}", style=style)
            elif attempt.outcome == "accepted":
                t.append(" · no plan_source (not replayable)", style="yellow")
            rows.append(TLRow("note", text=t))
            continue
        head = Text.assemble((f"plan {tp.index + 1}", "bold"), (f" · step {attempt.step}", "dim"))
        if attempt.phase:
            head.append(f" · {attempt.phase}", style="dim")
        if tp.flow_key:
            head.append(f" · {tp.flow_key}", style="dim")
        if tp.parse_error:
            head.append(f" · does not parse: {one_line(tp.parse_error, 300)}", style="bold red")
        rows.append(TLRow("heading", plan=tp, text=head))
        if tp.parse_error:
            for line in highlight_flux(attempt.plan_source or "").split("\n"):
                rows.append(TLRow("source", plan=tp, text=Text("    ") + line))
            continue
        for si, st in enumerate(tp.statements):
            rows.append(TLRow("statement", stop=stops.get((tp.index, si, None), -1), plan=tp, statement=st,
                              display=display_statement_text(st.text)))
            for j, c in enumerate(st.cells):
                rows.append(TLRow("cell", stop=stops.get((tp.index, si, c.global_seq), -1), plan=tp, statement=st,
                                  cell=c, last_cell=j == len(st.cells) - 1))
        if not tp.statements:
            rows.append(TLRow("note", text=Text("    (empty plan)", style="dim italic")))
    if not rows:
        rows.append(TLRow("note", text=Text("no accepted plan and no cassette cell in this turn", style="dim italic")))
    return rows


def _cell_line(c: Cell, last: bool, width: int) -> Text:
    r = c.rec
    t = Text("    " + ("└ " if last else "├ "), style="dim")
    t.append(f"#{c.index} ", style="dim")
    t.append(r.op, style="cyan")
    if c.flagged_error:
        t.append(" ✗", style="bold red")
    for on, label, style in ((r.is_error, "err", "bold red"), (r.denied, "denied", "bold red"),
                             (r.redacted, "redacted", "magenta"), (r.truncated, "truncated", "yellow")):
        if on:
            t.append(f" [{label}]", style=style)
    t.append("  ")
    t.append(one_line(r.view if r.view else in_user_words(r.content), max(width, 20)) or "(empty)",
             style="red" if c.flagged_error else "dim")
    return t


def _inner(width: int) -> int:
    return max(8, width - 5)  # prefix (4) and a one-cell right margin


def _fold_offsets(line: str, width: int) -> list[int]:
    """Character offsets where a line is cut to fit ``width`` cells (hard fold, like an editor)."""
    if line.isascii():
        return list(range(width, len(line), width)) if len(line) > width else []
    offsets: list[int] = []
    used = 0
    for i, ch in enumerate(line):
        w = cell_len(ch)
        if used + w > width:
            offsets.append(i)
            used = 0
        used += w
    return offsets


class TimelineView(VirtualList[TLRow]):
    """Cursor over statements and cells; headings and source lines are display-only."""

    HELP_TOPIC = "timeline"

    BINDINGS = key_table("timeline", """
        # keys id       action  label
        enter  inspect  select  Inspect  [hidden]
            Move to the inspector to read (and scroll) the item under the cursor
    """)

    def __init__(self, **kw) -> None:
        super().__init__(empty_text="loading…", **kw)
        self.replay = None  # ReplayMarks: a replay result drawn in the first column

    def set_replay(self, marks) -> None:
        self.replay = marks
        self.refresh_rows()

    def _replay_gutter(self, row: TLRow, text: Text, line: int) -> Text:
        m = self.replay
        if m is None or line != 0:
            return text
        if row.kind == "cell" and row.cell is not None:
            mark, style = m.cell_mark(row.cell.index)
        elif row.kind == "statement" and row.statement is not None and row.plan is not None:
            mark, style = m.stmt_mark(row.plan.flow_key, row.statement.node)
        else:
            return text
        return Text.assemble((mark, style), text[1:])

    @property
    def variable_height(self) -> bool:
        return True

    def row_key(self, row: TLRow) -> Hashable:
        return row.key

    def is_selectable(self, row: TLRow) -> bool:
        return row.kind in ("statement", "cell")

    def _statement_lines(self, row: TLRow, width: int) -> list[Text]:
        """The statement's highlighted lines, hard-folded at the panel width (only for rows on screen)."""
        if row.statement is None:
            return [Text("")]
        if row._wrapped is not None and row._wrapped[0] == width:
            return row._wrapped[1]
        mark, style = statement_marker(row.statement)
        code = highlight_flux(row.display or display_statement_text(row.statement.text))
        inner = _inner(width)
        lines: list[Text] = []
        for i, src_line in enumerate(code.split("\n")):
            offsets = _fold_offsets(src_line.plain, inner)
            parts = src_line.divide(offsets) if offsets else [src_line]
            for j, part in enumerate(parts):
                prefix = Text(f"  {mark} ", style=style) if (i == 0 and j == 0) else Text("    ")
                lines.append(prefix + part)
        if not lines:
            lines = [Text(f"  {mark} ", style=style)]
        row._wrapped = (width, lines)
        return lines

    def row_height(self, row: TLRow, width: int) -> int:
        """Lines a row takes — from the plain text only, so a 100k-row layout stays cheap."""
        if row.kind != "statement":
            return 1
        if row._height is not None and row._height[0] == width:
            return row._height[1]
        inner = _inner(width)
        text = row.display or (display_statement_text(row.statement.text) if row.statement else "")
        h = sum(len(_fold_offsets(line, inner)) + 1 for line in text.split("\n")) or 1
        row._height = (width, h)
        return h

    def render_row(self, row: TLRow, index: int, line: int, width: int, selected: bool) -> Text:
        if row.kind == "statement":
            lines = self._statement_lines(row, width)
            return self._replay_gutter(row, lines[line], line) if line < len(lines) else Text("")
        if row.kind == "cell" and row.cell is not None:
            return self._replay_gutter(row, _cell_line(row.cell, row.last_cell, width), 0)
        return row.text.copy() if row.text is not None else Text("")

    def set_rows(self, rows, **kw) -> None:  # type: ignore[override]
        super().set_rows(rows, **kw)
        self._stop_rows = {r.stop: i for i, r in enumerate(self.rows) if r.stop >= 0}

    def find_row(self, target: tuple) -> int | None:
        """Display index of ``("stmt", flow_key, node)`` or ``("cell", tape_index)``."""
        for i, r in enumerate(self.rows):
            if target[0] == "cell" and r.kind == "cell" and r.cell is not None and r.cell.index == target[1]:
                return i
            if (target[0] == "stmt" and r.kind == "statement" and r.plan is not None and r.statement is not None
                    and r.plan.flow_key == target[1] and r.statement.node == target[2]):
                return i
        return None

    def stop_row(self, stop: int) -> int | None:
        """Display index of cursor stop ``stop`` (an index into ``timeline.items``)."""
        return getattr(self, "_stop_rows", {}).get(stop)
