"""The sessions list: a :class:`VirtualList` of registry rows whose per-session facts (turns, last
outcome, cost, interrupted flag) fill in as summaries arrive."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Hashable

from rich.text import Text
from textual.message import Message

from flux.model.listing import SessionSummary
from flux.model.lineage import lineage_of
from flux.model.wording import outcome_text
from flux.store.store import SessionRow

from ..fmt import lineage_mark, fmt_age, fmt_cost, outcome_style
from ..keys import key_table
from .virtual_list import VirtualList

__all__ = ["SessionItem", "SessionsTable", "SORTS"]

PENDING = "…"


@dataclass(slots=True)
class SessionItem:
    row: SessionRow
    summary: SessionSummary | None = None

    @property
    def id(self) -> str:
        return self.row.id


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int  # 0: flexible
    align: str = "left"
    drop: int = 0  # narrow terminals drop columns with the lowest non-zero value first


COLUMNS = [
    Column("id", "id", 7),
    Column("model", "model", 0),
    Column("messages", "msgs", 6, "right", drop=1),
    Column("turns", "turns", 7, "right", drop=2),
    Column("outcome", "last", 11, drop=4),  # `resurrected` whole
    Column("cost", "cost", 8, "right"),
    Column("updated", "updated", 10, "right", drop=3),
    Column("status", "status", 14),
    Column("lineage", "lineage", 0),
]
FLEX_MIN = 34  # model + lineage want this much before fixed columns keep their space


# sort name -> (label, key function, default reverse)
SORTS: dict[str, tuple[str, Callable[[SessionItem], Any], bool]] = {
    "updated": ("updated", lambda it: (it.row.updated_at, it.row.n), True),
    "id": ("id", lambda it: it.row.n, True),
    "model": ("model", lambda it: (it.row.model.casefold(), -it.row.n), False),
    "messages": ("msgs", lambda it: (it.row.msg_count, it.row.n), True),
    "turns": ("turns", lambda it: (-1 if it.summary is None else it.summary.turns, it.row.n), True),
    "cost": ("cost", lambda it: (-2 if it.summary is None else (-1 if it.summary.cost is None else it.summary.cost), it.row.n), True),
    "status": ("status", lambda it: (_status_rank(it), it.row.updated_at), True),
}
SORT_ORDER = list(SORTS)
SUMMARY_SORTS = frozenset({"turns", "cost", "status"})


def _status_rank(it: SessionItem) -> int:
    s = it.summary
    if s is None:
        return -1
    if s.interrupted:
        return 3
    if s.interrupt.reason:
        return 2
    if s.last_outcome and outcome_style(s.last_outcome) == "red":
        return 1
    return 0


def _cell(text: str | Text, width: int, align: str = "left", style: str = "") -> Text:
    t = text if isinstance(text, Text) else Text(text, style=style)
    t = t.copy()
    t.truncate(width, overflow="ellipsis")
    pad = width - t.cell_len
    if pad > 0:
        if align == "right":
            t = Text(" " * pad) + t
        else:
            t.append(" " * pad)
    return t


class SessionsTable(VirtualList[SessionItem]):
    """One row per session. Sorting and filtering are the screen's business (``set_sort``)."""

    HELP_TOPIC = "sessions"

    BINDINGS = key_table("sessions", """
        # keys id    action  label
        enter  open  select  Open
            Open the highlighted session
    """)

    def __init__(self, *, now_ms: Callable[[], int], **kw) -> None:
        super().__init__(show_header=True, empty_text="no sessions", **kw)
        self._now_ms = now_ms
        self.sort_name = "updated"
        self.sort_reverse = True
        self.grouped = False  # children (forks, what-ifs, sub-agents) under their source
        self._tree: dict[int, str] = {}  # row n -> its tree prefix when grouped
        self._id_width = COLUMNS[0].width

    def set_grouped(self, grouped: bool) -> None:
        self.grouped = grouped
        self.resort()

    def arrange(self, view: list[int]) -> list[int]:
        """Grouped: each root in the sorted order, then its children (and theirs) in the order
        they were made, drawn with ├─ └─ under it. A child whose source is not shown (another
        store, or filtered out) stands as a root. Cycles in a hostile registry are cut."""
        self._tree = {}
        self._id_width = COLUMNS[0].width
        if not self.grouped:
            return view
        src = self._source
        shown = {src[i].row.id: i for i in view}
        kids: dict[str, list[int]] = {}
        roots: list[int] = []
        for i in view:
            corr = src[i].row.correlation_id
            if corr and corr != src[i].row.id and corr in shown:
                kids.setdefault(corr, []).append(i)
            else:
                roots.append(i)
        for k in kids.values():
            k.sort(key=lambda i: src[i].row.n)
        out: list[int] = []
        seen: set[int] = set()
        deepest = 0

        def walk(i: int, prefix: str, last: bool, depth: int) -> None:
            nonlocal deepest
            if i in seen:
                return
            seen.add(i)
            out.append(i)
            n = src[i].row.n
            if depth:
                self._tree[n] = prefix + ("└ " if last else "├ ")
                deepest = max(deepest, depth)
            children = [c for c in kids.get(src[i].row.id, []) if c not in seen]
            for j, c in enumerate(children):
                walk(c, (prefix + ("  " if last else "│ ")) if depth else "", j == len(children) - 1, depth + 1)

        for r in roots:
            walk(r, "", True, 0)
        for i in view:  # only a cycle leaves rows unreached: show them as roots
            if i not in seen:
                walk(i, "", True, 0)
        self._id_width = COLUMNS[0].width + 2 * min(deepest, 4)
        return out

    class SortClicked(Message):
        """The header of a sortable column was clicked: sort by it (again: reverse it)."""

        def __init__(self, sort_name: str) -> None:
            super().__init__()
            self.sort_name = sort_name

    def column_at(self, x: int) -> Column | None:
        """The column drawn at cell ``x`` of a line (a leading space, one between columns)."""
        at = 1
        for col, w in self.columns(self._content_width()):
            if at <= x < at + w:
                return col
            at += w + 1
        return None

    def header_clicked(self, x: int) -> None:
        col = self.column_at(x)
        if col is None:
            return
        if col.key in SORTS:
            self.post_message(self.SortClicked(col.key))
        else:
            self.app.notify(f"the list cannot be sorted by {col.label} — s cycles the sortable columns "
                            f"({', '.join(SORTS[k][0] for k in SORT_ORDER)})", timeout=3)

    def row_key(self, row: SessionItem) -> Hashable:
        return row.row.n

    def columns(self, width: int) -> list[tuple[Column, int]]:
        """The columns that fit ``width`` and their widths: on a narrow terminal the least useful
        fixed columns (msgs, turns, updated, last) go before model and lineage get cut."""
        width -= 1  # leading space
        cols = list(COLUMNS)
        for victim in sorted((c for c in COLUMNS if c.drop), key=lambda c: c.drop):
            fixed = sum(c.width for c in cols if c.width) + len(cols) - 1 + (self._id_width - COLUMNS[0].width)
            if width - fixed >= FLEX_MIN:
                break
            if victim.key == self.sort_name and self.sort_name != "updated":
                continue  # never hide a column you sorted by (newest first, the default, is said in the header)
            cols.remove(victim)
        fixed = sum(c.width for c in cols if c.width) + len(cols) - 1 + (self._id_width - COLUMNS[0].width)
        flex = max(width - fixed, 16)
        model_w = min(max(flex // 2, 8), 28)
        lineage_w = max(flex - model_w, 8)
        return [(c, self._id_width if c.key == "id" else (c.width or (model_w if c.key == "model" else lineage_w)))
                for c in cols]

    def _widths(self, width: int) -> list[int]:
        return [w for _, w in self.columns(width)]

    def render_header(self, width: int) -> Text:
        cells = []
        for col, w in self.columns(width):
            label = col.label
            if col.key == self.sort_name:
                arrow = "▼" if self.sort_reverse else "▲"
                label = f"{label} {arrow}" if len(label) + 2 <= w else f"{label[:w - 2]} {arrow}"
            cells.append(_cell(label, w, col.align))
        return Text(" ") + Text(" ").join(cells)

    def render_row(self, row: SessionItem, index: int, line: int, width: int, selected: bool) -> Text:
        r = row.row
        s = row.summary
        cells = []
        for col, w in self.columns(width):
            value = self._value(col.key, r, s)
            if col.key == "model" and value.cell_len > w and ":" in value.plain:
                value = Text(value.plain.split(":", 1)[1])  # narrow: `claude-sonnet-4-5`, not `anthropic:claude…`
            cells.append(_cell(value, w, col.align))
        return Text(" ") + Text(" ").join(cells)

    def _value(self, key: str, r: SessionRow, s: SessionSummary | None) -> Text:
        if key == "id":
            prefix = self._tree.get(r.n)
            if prefix:
                return Text.assemble((prefix, "dim"), (r.id, "bold"))
            return Text(r.id, style="bold")
        if key == "model":
            return Text(r.model or "–")
        if key == "messages":
            return Text(str(r.msg_count))
        if key == "updated":
            return Text(fmt_age(r.updated_at, self._now_ms()), style="dim")
        if key == "lineage":
            lin = s.lineage if s is not None else lineage_of(r)
            if lin is None:
                return Text("")
            t = Text(lineage_mark(lin), style="magenta")
            t.append(f" ← {lin.source}{lin.detail if lin.kind in ('fork', 'what-if') else ''}", style="dim")
            return t
        if s is None:
            return Text(PENDING, style="dim")
        if key == "turns":
            return Text(str(s.turns))
        if key == "outcome":
            return Text(outcome_text(s.last_outcome), style=outcome_style(s.last_outcome))
        if key == "cost":
            return Text(fmt_cost(s.cost), style="dim" if s.cost is None else "")
        if key == "status":
            if s.interrupted:
                return Text("⚠ interrupted", style="bold yellow")
            if s.interrupt.recording_pid is not None:
                return Text("● recording", style="green")
            if s.interrupt.reason:
                return Text("open turn", style="yellow")
            return Text("")
        return Text("")
