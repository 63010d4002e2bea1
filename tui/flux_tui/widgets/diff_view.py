"""The side-by-side run diff: one row per aligned position, A | B, marked as ``flux diff`` marks
them (``=`` same, ``~`` the plan diverges, ``≠`` same statement, different world), on a
:class:`VirtualList` so a 10,000-row diff scrolls like a 10-row one."""

from __future__ import annotations

import difflib
import json
from typing import Any, Hashable

from rich.highlighter import JSONHighlighter
from rich.text import Text

from ..highlight import highlight_flux
from ..keys import key_table
from ..render import display_statement_text
from .virtual_list import VirtualList

__all__ = ["DiffList", "gap_text", "row_marker", "row_meaning", "side_by_side", "side_refs", "MARKERS"]

MARKERS: dict[str, tuple[str, str, str]] = {
    # marker, style, meaning
    "same": ("=", "dim", "same statement, same recorded output"),
    "plan": ("~", "bold yellow", "plan diverges: the agent did something else here"),
    "output": ("≠", "bold magenta", "same statement, different world (recorded output differs)"),
    # One-sided rows are plan divergences too: `~` as `flux diff` prints them, ∅ on the empty side.
    "b_only": ("~", "bold yellow", "plan diverges: only B has a statement at this position"),
    "a_only": ("~", "bold yellow", "plan diverges: only A has a statement at this position"),
}


def row_marker(row) -> str:
    """``same`` | ``plan`` | ``output`` | ``a_only`` | ``b_only``."""
    if row.kind == "plan":
        if row.a_stmt is None:
            return "b_only"
        if row.b_stmt is None:
            return "a_only"
    return row.kind


def side_refs(diff, row) -> str:
    """Which row of each side a row pairs: ``A cell #2 ↔ B cell #1`` (``B ∅`` on a gap)."""
    unit = "cell #" if diff.cell_rows else "statement row "

    def ref(label: str, i: int | None) -> str:
        return f"{label} {unit}{i}" if i is not None else f"{label} ∅"

    return f"{ref('A', row.a_index)} ↔ {ref('B', row.b_index)}"


def row_meaning(diff, row) -> str:
    """What a row's marker means, in words (a sequence-aligned gap says it pairs nothing)."""
    if diff is not None and diff.sequence_aligned and row.is_gap:
        unit = "cell" if diff.cell_rows else "statement"
        only = "A" if row.b_stmt is None else "B"
        return f"plan diverges: only {only} has this {unit} (nothing paired with it)"
    return MARKERS[row_marker(row)][2]


def gap_text(diff, row, side: str) -> str:
    """The empty side of a gap row in the payload view."""
    unit = "cell" if diff.cell_rows else "statement"
    if diff.sequence_aligned:
        other, i = ("B", row.b_index) if side == "A" else ("A", row.a_index)
        return f"∅ {side} has no {unit} paired with {other}'s {unit} {'#' if diff.cell_rows else 'row '}{i}"
    return f"∅ {side} has no {unit} at this position"


def _fit(text: Text, width: int) -> Text:
    t = text.copy()
    t.no_wrap = True
    t.truncate(width, overflow="ellipsis", pad=True)
    return t


def _excerpt(s: str | None, limit: int = 400) -> str:
    s = (s or "").replace("\n", " ⏎ ")
    return s[:limit]


class DiffList(VirtualList[Any]):
    """Cursor over the aligned rows of a :class:`flux.timemachine.diff.RunDiff`."""

    HELP_TOPIC = "diff"

    BINDINGS = key_table("diff", """
        # keys id    action  label
        enter  open  select  Payloads  [hidden]
            Open the row's two payloads side by side
    """)

    def __init__(self, **kw) -> None:
        super().__init__(show_header=True, empty_text="diffing…", **kw)
        self.diff = None
        self.a_label = "A"
        self.b_label = "B"
        self._texts: dict[str | None, str] = {}

    def set_diff(self, diff) -> None:
        self.diff = diff
        self._texts = {}
        self.a_label, self.b_label = diff.a, diff.b
        self.set_rows(diff.rows, keep_cursor=False)

    @property
    def variable_height(self) -> bool:
        return True

    def row_key(self, row) -> Hashable:
        return row.index

    def row_height(self, row, width: int) -> int:
        return 2 if row.kind == "output" else 1

    def statement_text(self, stmt: str | None) -> str:
        if stmt is not None:
            return self._text(stmt)
        if self.sequence_aligned:  # a gap of a sequence alignment: there is no shared "position"
            return f"∅ (no {'cell' if self.diff.cell_rows else 'statement'} here)"
        return "∅ (no statement at this position)"

    def _text(self, stmt: str | None) -> str:
        t = self._texts.get(stmt)
        if t is None:
            full = self.diff.sources.get(stmt) if (self.diff is not None and stmt) else None
            if full:  # the formatter wraps a statement in a one-statement flow: show the statement
                t = " ⏎ ".join(line.strip() for line in display_statement_text(full).split("\n"))
            else:
                t = self.diff.text(stmt) if self.diff is not None else str(stmt)
            self._texts[stmt] = t
        return t

    @property
    def sequence_aligned(self) -> bool:
        return bool(self.diff is not None and self.diff.sequence_aligned)

    def _widths(self, width: int) -> tuple[int, int]:
        """(number width, side width). Positional: one row number in the gutter. Sequence-aligned:
        the gutter is the marker alone and each side starts with its own number."""
        if self.sequence_aligned:
            num = len(str(max(self.diff.a_rows, self.diff.b_rows, 1) - 1))
            return num, max(8, (width - 2 - 3) // 2)
        num = len(str(max(self.row_count - 1, 0)))
        gutter = 2 + num + 1  # marker, space, index, space
        side = max(8, (width - gutter - 3) // 2)
        return num, side

    def _gutter(self, num: int) -> int:
        return 2 if self.sequence_aligned else 2 + num + 1

    def render_header(self, width: int) -> Text:
        num, side = self._widths(width)
        t = Text(" " * self._gutter(num))
        t.append_text(_fit(Text(f"A  {self.a_label}", style="bold"), side))
        t.append(" │ ", style="dim")
        t.append_text(_fit(Text(f"B  {self.b_label}", style="bold"), side))
        return t

    def _side(self, stmt: str | None, side: int, *, dim: bool) -> Text:
        if stmt is None:
            return _fit(Text("∅ no statement", style="dim italic"), side)
        text = self._text(stmt)
        if dim:
            return _fit(Text(text, style="dim"), side)
        return _fit(highlight_flux(text) if not text.startswith("op `") else Text(text, style="cyan"), side)

    def _numbered(self, i: int | None, stmt: str | None, side: int, num: int, *, dim: bool) -> Text:
        """A sequence-aligned side: its own row number, then the statement (∅ on a gap)."""
        t = Text(f"{i:>{num}} " if i is not None else " " * (num + 1), style="dim")
        if stmt is None:
            unit = "cell" if self.diff.cell_rows else "statement"
            t.append_text(_fit(Text(f"∅ no {unit} here", style="dim italic"), side - num - 1))
        else:
            t.append_text(self._side(stmt, side - num - 1, dim=dim))
        return t

    def render_row(self, row, index: int, line: int, width: int, selected: bool) -> Text:
        num, side = self._widths(width)
        m = row_marker(row)
        mark, style, _ = MARKERS[m]
        t = Text()
        if line == 0 and self.sequence_aligned:
            t.append(mark, style=style)
            t.append(" ")
            plan = row.kind == "plan"
            t.append_text(self._numbered(row.a_index, row.a_stmt if plan else row.stmt, side, num,
                                         dim=row.kind == "same"))
            t.append(" │ ", style="dim")
            t.append_text(self._numbered(row.b_index, row.b_stmt if plan else row.stmt, side, num,
                                         dim=row.kind == "same"))
            return t
        if line == 0:
            t.append(mark, style=style)
            t.append(f" {row.index:>{num}} ", style="dim")
            if row.kind == "plan":
                t.append_text(self._side(row.a_stmt, side, dim=False))
                t.append(" │ ", style="dim")
                t.append_text(self._side(row.b_stmt, side, dim=False))
            else:
                same = row.kind == "same"
                t.append_text(self._side(row.stmt, side, dim=same))
                t.append(" │ ", style="dim")
                t.append_text(self._side(row.stmt, side, dim=same))
            return t
        # second line of an output row: the recorded outputs
        t.append(" " * self._gutter(num))
        if self.sequence_aligned:  # under each side's text, past its own number column
            pad = " " * (num + 1)
            t.append_text(_fit(Text.assemble((pad + "→ ", "dim"), (_excerpt(row.a), "red")), side))
            t.append(" │ ", style="dim")
            t.append_text(_fit(Text.assemble((pad + "→ ", "dim"), (_excerpt(row.b), "green")), side))
            return t
        t.append_text(_fit(Text.assemble(("  → ", "dim"), (_excerpt(row.a), "red")), side))
        t.append(" │ ", style="dim")
        t.append_text(_fit(Text.assemble(("  → ", "dim"), (_excerpt(row.b), "green")), side))
        return t

    def divergences(self) -> list[int]:
        rows = self._source
        return [i for i, r in enumerate(rows) if r.kind != "same"]


# -- payloads side by side ------------------------------------------------------------------------

_JSON = JSONHighlighter()


def _pretty(s: str) -> tuple[str, bool]:
    try:
        v = json.loads(s)
    except (ValueError, TypeError):
        return s, False
    if isinstance(v, (dict, list)):
        return json.dumps(v, indent=2, ensure_ascii=False), True
    return s, False


def side_by_side(a: str, b: str, limit: int = 4000) -> tuple[Text, Text, bool]:
    """Both payloads as ``Text``: pretty JSON when both parse (syntax-coloured), lines that differ
    in red (A) and green (B). Returns (a, b, json?). Very long payloads show their first ``limit``
    lines."""
    pa, ja = _pretty(a)
    pb, jb = _pretty(b)
    is_json = ja and jb
    if not is_json:
        pa, pb = a, b
    al, bl = pa.splitlines() or [""], pb.splitlines() or [""]
    al, bl = al[:limit], bl[:limit]
    ta, tb = Text(), Text()

    def line(t: Text, s: str, style: str | None) -> None:
        piece = Text(s)
        if is_json:
            _JSON.highlight(piece)
        if style:
            piece.stylize(style)
        t.append_text(piece)
        t.append("\n")

    sm = difflib.SequenceMatcher(None, al, bl, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        for s in al[i1:i2]:
            line(ta, s, None if op == "equal" else "on #4a1f24")
        for s in bl[j1:j2]:
            line(tb, s, None if op == "equal" else "on #1f4a2a")
    ta.rstrip()
    tb.rstrip()
    return ta, tb, is_json
