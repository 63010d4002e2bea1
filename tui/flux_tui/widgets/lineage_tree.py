"""The lineage tree panel: one row per session of a family, drawn as a tree (connectors, lineage
mark, id, how it was derived, how it differs from its parent, turns and cost), with each session's
resurrected turns drawn as its children."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

from rich.text import Text

from flux.model.listing import SessionSummary
from flux.timemachine.family import ChildDifference, FamilyNode, ResurrectedTurn

from ..fmt import fmt_cost, lineage_mark
from ..keys import key_table
from .virtual_list import VirtualList

__all__ = ["LineageTree", "TreeRow", "describe", "difference_text", "with_turns"]

DIFF_WIDTH = 34
DIFF_WIDTH_COMPACT = 16
WIDE = 96  # rows at least this wide show every column in full


def describe(node: FamilyNode) -> str:
    """``fork @ statement 2``, ``what-if @latest``, ``sub-agent explorer``, ``root``."""
    lin = node.lineage
    if lin is None:
        return "source" if node.depth == 0 else ""
    if lin.kind == "fork":
        at = lin.detail.lstrip("@")
        return f"fork @ statement {at}" if at.isdigit() else f"fork {lin.detail}".rstrip()
    if lin.kind == "what-if":
        at = lin.detail.lstrip("@")
        return f"what-if @ turn {at}" if at.isdigit() else f"what-if {lin.detail}".rstrip()
    if lin.kind == "check":
        return f"check {lin.detail}".rstrip()
    if lin.kind == "sub-agent":
        return f"sub-agent ({lin.detail})" if lin.detail else "sub-agent"
    return f"{lin.kind} {lin.detail}".rstrip()


def difference_text(d: ChildDifference | str | None, compact: bool = False) -> Text:
    """``= 3 · ~ 1 · ≠ 1 · diverges @ 2`` for a computed difference (``=3 ~1 ≠1 @2`` compact); a
    note otherwise."""
    if d is None:
        return Text("diffing…", style="dim italic")
    if isinstance(d, str):
        return Text(f"cannot diff: {d}", style="red")
    sep = " " if compact else " · "
    gap = "" if compact else " "
    if d.identical:
        return Text(f"identical{sep}={gap}{d.same}", style="green")
    t = Text()
    t.append(f"={gap}{d.same}", style="dim")
    t.append(sep)
    t.append(f"~{gap}{d.plan}", style="bold yellow" if d.plan else "dim")
    t.append(sep)
    t.append(f"≠{gap}{d.world}", style="bold magenta" if d.world else "dim")
    if d.first_node is not None:
        t.append(f"{sep}@{d.first_node}" if compact else f" · diverges @ {d.first_node}")
    return t


@dataclass(eq=False)
class TreeRow:
    node: FamilyNode
    summary: SessionSummary | None = None
    difference: ChildDifference | str | None = None
    focus: bool = False
    turn: ResurrectedTurn | None = None  # a resurrected turn of ``node`` (drawn as its child)
    turn_last: bool = False  # the last child drawn under ``node``


def tree_prefix(node: FamilyNode) -> str:
    if node.depth == 0:
        return ""
    return "".join("│  " if o else "   " for o in node.open_ancestors) + ("└─ " if node.last_child else "├─ ")


def turn_prefix(node: FamilyNode, last: bool) -> str:
    """The connector of a row drawn as a child of ``node`` (its resurrected turns)."""
    opens = node.open_ancestors + ((not node.last_child),) if node.depth >= 1 else node.open_ancestors
    return "".join("│  " if o else "   " for o in opens) + ("└─ " if last else "├─ ")


def with_turns(nodes: list[FamilyNode], turns: dict[str, list[ResurrectedTurn]]) -> list[tuple[FamilyNode, ResurrectedTurn | None, bool]]:
    """The tree's rows in order: each session, then its resurrected turns, then its child sessions."""
    has_children = {n.parent for n in nodes if n.parent is not None}
    out: list[tuple[FamilyNode, ResurrectedTurn | None, bool]] = []
    for n in nodes:
        out.append((n, None, False))
        mine = turns.get(n.id, [])
        for i, t in enumerate(mine):
            out.append((n, t, i == len(mine) - 1 and n.id not in has_children))
    return out


class LineageTree(VirtualList[TreeRow]):
    HELP_TOPIC = "lineage"

    BINDINGS = key_table("lineage", """
        # keys id    action  label
        enter  open  select  Open
            Open the highlighted session
    """)

    def __init__(self, **kw) -> None:
        super().__init__(show_header=False, empty_text="reading the family…", **kw)

    def row_key(self, row: TreeRow) -> Hashable:
        return row.node.id if row.turn is None else (row.node.id, row.turn.number)

    def render_row(self, row: TreeRow, index: int, line: int, width: int, selected: bool) -> Text:
        if row.turn is not None:
            return self._render_turn(row, width)
        n = row.node
        s = row.summary
        left = Text(" ")
        left.append(tree_prefix(n), style="dim")
        if n.lineage is not None:
            left.append(lineage_mark(n.lineage).split(" ", 1)[0] + " ", style="magenta")
        left.append(n.id, style="bold cyan" if row.focus else "bold")
        left.append("  ")
        left.append(describe(n), style="magenta" if n.lineage is not None else "dim")
        if n.depth == 0 or (n.lineage is not None and n.lineage.kind == "sub-agent"):
            left.append(f"  {n.row.model or '–'}", style="dim")
        right = Text()
        wide = width >= WIDE
        diff = difference_text(row.difference, compact=not wide) if n.diffable else Text("")
        if diff.cell_len > (DIFF_WIDTH if wide else DIFF_WIDTH_COMPACT):
            diff.truncate(DIFF_WIDTH if wide else DIFF_WIDTH_COMPACT, overflow="ellipsis")
        right.append_text(diff)
        right.append(" ")
        if s is not None:
            if wide:
                right.append(f"  {'⚠ interrupted' if s.interrupted else '':<13} ", style="bold yellow")
                right.append(f"{s.turns:>3} turn{'s' if s.turns != 1 else ' '}", style="dim")
                right.append(f" {fmt_cost(s.cost):>7}", style="dim")
            else:
                right.append("⚠ " if s.interrupted else "  ", style="bold yellow")
                right.append(f"{s.turns:>2}t", style="dim")
        else:
            right.append("…".rjust(32 if wide else 5), style="dim")
        room = width - right.cell_len - 1
        if room < 12:  # a narrow terminal: the tree and the id first, the facts below it
            right.truncate(max(0, width - 12), overflow="ellipsis")
            room = width - right.cell_len - 1
        left.truncate(max(room, 0), overflow="ellipsis", pad=True)
        left.append(" ")
        left.append_text(right)
        return left


    def _render_turn(self, row: TreeRow, width: int) -> Text:
        t = row.turn
        assert t is not None
        out = Text(" ")
        out.append(turn_prefix(row.node, row.turn_last), style="dim")
        out.append("↻ ", style="green")
        out.append(f"turn {t.number}", style="bold")
        out.append(f" of {t.session}", style="dim")
        out.append("  resurrected", style="green")
        gist = " ".join(t.answer.split())
        if gist:
            out.append("  " + gist, style="dim")
        out.truncate(width, overflow="ellipsis", pad=True)
        return out
