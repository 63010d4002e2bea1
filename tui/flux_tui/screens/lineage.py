"""Lineage tree: a session's whole family — the root source, forks (with the statement they branched
at), what-ifs, checks and sub-agents, recursively — one row per session, drawn as a tree.

Every row that re-runs its parent's plan (fork, what-if, check) says how it differs from its parent:
``run_diff`` in a worker, visible rows first, cached by (store, parent, child, their last seqs) for
as long as the app runs. Enter opens a node; ``d`` opens its diff against its parent; ``u`` opens
its parent. The facts come from :mod:`flux.timemachine.family`; this module only draws them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Static
from textual.worker import get_current_worker

from flux.errors import FluxError, SessionNotFound, StoreError
from flux.model.listing import SessionSummary, summarize_sessions
from flux.timemachine.family import ChildDifference, Family, FamilyNode, ResurrectedTurn

from ..fmt import fmt_cost, lineage_mark
from ..keys import key_table
from ..messages import ReportsWorkerFailures
from ..widgets.virtual_list import VirtualList

__all__ = ["LineageScreen", "LineageTree", "open_source", "difference_text"]

# (store dir, parent id, parent last_seq, child id, child last_seq) -> difference or error text
_DIFF_CACHE: dict[tuple, ChildDifference | str] = {}
_DIFF_CACHE_MAX = 4096
DIFF_WIDTH = 34
DIFF_WIDTH_COMPACT = 16
WIDE = 96  # rows at least this wide show every column in full


def open_source(app, source_id: str) -> None:
    """Open the source session, or say that it is not in this store."""
    reader = app.reader
    try:
        if reader is None:
            raise SessionNotFound(source_id)
        reader.get_session(source_id)
    except (SessionNotFound, StoreError):
        app.notify(f"source session {source_id} is not in this store (it may live in another store)", severity="warning")
        return
    app.open_session(source_id)


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

    BINDINGS = [
        Binding("enter", "select", "Open", id="lineage.open", tooltip="Open the highlighted session"),
    ]

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


class _TreeReady(Message):
    def __init__(self, family: Family | None, summaries: dict[str, SessionSummary], error: str | None = None,
                 turns: dict[str, list[ResurrectedTurn]] | None = None) -> None:
        super().__init__()
        self.family = family
        self.summaries = summaries
        self.error = error
        self.turns = turns or {}


class _DifferenceReady(Message):
    def __init__(self, results: dict[str, ChildDifference | str]) -> None:
        super().__init__()
        self.results = results


class LineageScreen(ReportsWorkerFailures, ModalScreen[str | None]):
    HELP_TOPIC = "lineage"
    CSS_PATH = "lineage.tcss"

    BINDINGS = key_table("lineage", """
        # keys    id      action    label
        escape,l  close   close     Close
            Close the lineage tree
        d         diff    diff      Diff vs parent
            Diff the highlighted session against its parent, side by side
        u         source  source    Parent
            Open the session the highlighted one was derived from
        f1        help    app.help  Help
            Explain this dialog and list its keys
    """)

    def __init__(self, session_id: str) -> None:
        super().__init__()
        self.session_id = session_id
        self.family: Family | None = None
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="lineage-box"):
            yield Static(id="lineage-head")
            yield LineageTree(id="children")
            yield Static(id="lineage-detail")
            yield Static(id="lineage-keys")

    @property
    def tree(self) -> LineageTree:
        return self.query_one(LineageTree)

    def on_mount(self) -> None:
        box = self.query_one("#lineage-box")
        box.border_title = f"Lineage of {self.session_id}"
        self.query_one("#lineage-head", Static).update(Text("reading the registry…", style="dim"))
        self._paint_keys()
        self.tree.focus()
        self._load()

    def _paint_keys(self) -> None:
        t = Text(style="dim")
        t.append("Enter", style="bold")
        t.append(" open  ")
        node = self.current_node
        row = self.tree.current if self.is_mounted else None
        if row is not None and row.turn is not None:
            t = Text(style="dim")
            t.append("Enter", style="bold")
            t.append(f" open {row.node.id} at turn {row.turn.number}  ")
            t.append("Esc", style="bold")
            t.append(" close")
            self.query_one("#lineage-keys", Static).update(t)
            return
        if node is not None and node.parent is not None:
            t.append("d", style="bold")
            t.append(f" diff against {node.parent}  ")
            t.append("u", style="bold")
            t.append(f" open {node.parent}  ")
        t.append("Esc", style="bold")
        t.append(" close")
        self.query_one("#lineage-keys", Static).update(t)

    @property
    def current_node(self) -> FamilyNode | None:
        row = self.tree.current if self.is_mounted else None
        return row.node if row is not None else None

    # -- loading --------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="lineage", exit_on_error=False, description="Reading the lineage")
    def _load(self) -> None:
        from flux.timemachine.family import family_of, resurrected_turns

        try:
            reader = self.app.ensure_reader()
            family = family_of(reader, self.session_id)
            turns = resurrected_turns(reader, [n.id for n in family.nodes])
            rows = [n.row for n in family.nodes]
            summaries: dict[str, SessionSummary] = {}
            todo = []
            for r in rows:
                cached = self.app.cached_summary(r)
                if cached is not None:
                    summaries[r.id] = cached
                else:
                    todo.append(r)
            if todo:
                fresh = summarize_sessions(reader, todo, self.app.prices)
                self.app.call_from_thread(self.app.store_summaries, fresh)
                summaries.update({s.id: s for s in fresh})
        except (StoreError, SessionNotFound, FluxError) as e:
            self.post_message(_TreeReady(None, {}, self.app.mask_path(str(e))))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(_TreeReady(family, summaries, turns=turns))

    @on(_TreeReady)
    def _on_tree(self, message: _TreeReady) -> None:
        head = self.query_one("#lineage-head", Static)
        tree = self.tree
        if message.error is not None or message.family is None:
            self.error = message.error
            head.update(Text(message.error or "cannot read the lineage", style="bold red"))
            tree.empty_text = "cannot read the lineage"
            tree.set_rows([])
            return
        fam = self.family = message.family
        key = self._cache_prefix()
        rows = []
        by_id = {n.id: n for n in fam.nodes}
        for n, turn, last in with_turns(fam.nodes, message.turns):
            if turn is not None:
                rows.append(TreeRow(n, message.summaries.get(n.id), turn=turn, turn_last=last))
                continue
            diff = None
            if n.diffable and n.parent is not None:
                diff = _DIFF_CACHE.get(key + (n.parent, by_id[n.parent].row.last_seq, n.id, n.row.last_seq))
            rows.append(TreeRow(n, message.summaries.get(n.id), diff, focus=n.id == fam.focus))
        t = Text()
        total = len(fam.nodes)
        t.append(f"{fam.focus}", style="bold cyan")
        if total <= 1:
            t.append(" is a root session with no forks, what-ifs or sub-agents", style="dim")
        else:
            t.append(f" · a family of {total} sessions", style="bold")
            if fam.root != fam.focus:
                t.append(" · source ", style="dim")
                t.append(fam.root, style="bold")
        nturns = sum(len(v) for v in message.turns.values())
        if nturns:
            t.append(f" · {nturns} resurrected turn{'s' if nturns != 1 else ''} (↻)", style="green")
        if fam.missing_source:
            t.append(f"\n{fam.root}'s source {fam.missing_source} is not in this store", style="yellow")
        for why in fam.cut:
            t.append(f"\n{why}", style="yellow")
        head.update(t)
        tree.empty_text = "no sessions"
        tree.set_rows(rows, cursor_key=fam.focus)
        self.query_one("#lineage-box").border_title = f"Lineage of {fam.focus}"
        self._paint_detail()
        self._paint_keys()
        self.refresh_bindings()
        self._diff_children([r.node for r in rows if r.turn is None and r.node.diffable and r.difference is None])

    def _cache_prefix(self) -> tuple:
        return (str(self.app.store_dir),)

    @work(thread=True, exclusive=True, group="lineage-diff", exit_on_error=False,
          description="Diffing each child against its parent")
    def _diff_children(self, nodes: list[FamilyNode]) -> None:
        from flux.timemachine.family import child_difference

        if not nodes:
            return
        worker = get_current_worker()
        fam = self.family
        assert fam is not None
        by_id = {n.id: n for n in fam.nodes}
        # Visible rows first, then the rest in tree order.
        start, end = self.app.call_from_thread(lambda: self.tree.visible_range())
        order = sorted(nodes, key=lambda n: (0 if start <= (fam.index_of(n.id) or 0) < end else 1, fam.index_of(n.id) or 0))
        reader = self.app.ensure_reader()
        batch: dict[str, ChildDifference | str] = {}
        key = self._cache_prefix()
        for n in order:
            if worker.is_cancelled:
                return
            parent = by_id[n.parent] if n.parent else None
            if parent is None:
                continue
            try:
                result: ChildDifference | str = child_difference(reader, parent.id, n.id)
            except (StoreError, FluxError) as e:
                result = self.app.mask_path(str(e))
            if len(_DIFF_CACHE) >= _DIFF_CACHE_MAX:
                _DIFF_CACHE.pop(next(iter(_DIFF_CACHE)))
            _DIFF_CACHE[key + (parent.id, parent.row.last_seq, n.id, n.row.last_seq)] = result
            batch[n.id] = result
            if len(batch) >= 8:
                self.post_message(_DifferenceReady(batch))
                batch = {}
        if batch:
            self.post_message(_DifferenceReady(batch))

    @on(_DifferenceReady)
    def _on_difference(self, message: _DifferenceReady) -> None:
        for row in self.tree.source:
            if row.turn is None and row.node.id in message.results:
                row.difference = message.results[row.node.id]
        self.tree.refresh_rows()
        self._paint_detail()

    # -- the highlighted node -------------------------------------------------------------------

    @on(VirtualList.Highlighted, "#children")
    def _on_highlight(self, message: VirtualList.Highlighted) -> None:
        self._paint_detail()
        self._paint_keys()
        self.refresh_bindings()

    def _paint_detail(self) -> None:
        panel = self.query_one("#lineage-detail", Static)
        row = self.tree.current
        if row is None:
            panel.update("")
            return
        n = row.node
        t = Text()
        if row.turn is not None:
            t.append(f"turn {row.turn.number} of {n.id}", style="bold")
            t.append(" — killed mid-run, then finished by resurrect from the crash point", style="")
            if row.turn.answer:
                t.append("\n" + " ".join(row.turn.answer.split())[:300], style="dim")
            panel.update(t)
            return
        t.append(n.id, style="bold")
        if n.parent is None:
            t.append(" — the source of this family", style="dim")
        else:
            t.append(f" — {describe(n)} of {n.parent}", style="")
            if n.diffable:
                d = row.difference
                if d is None:
                    t.append(" · diffing against it…", style="dim italic")
                elif isinstance(d, str):
                    t.append(f" · cannot diff: {d}", style="red")
                elif d.identical:
                    t.append(" · the same run: every statement and recorded result matches", style="green")
                else:
                    t.append(f" · {d.same} same, {d.plan} plan, {d.world} world", style="")
                    if d.first_node is not None:
                        t.append(f" · first divergence at statement {d.first_node}", style="bold")
        s = row.summary
        if s is not None:
            t.append(f"\n{n.row.model or '–'} · {s.turns} turn{'s' if s.turns != 1 else ''} · last {s.last_outcome or '–'}",
                     style="dim")
            if s.interrupted:
                t.append(" · ⚠ interrupted", style="bold yellow")
        panel.update(t)

    # -- actions --------------------------------------------------------------------------------

    @on(VirtualList.Selected, "#children")
    def _on_selected(self, message: VirtualList.Selected) -> None:
        sid = message.row.node.id
        self.dismiss(sid)
        self.app.open_session(sid, message.row.turn.number if message.row.turn is not None else None)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_source(self) -> None:
        node = self.current_node
        if node is None or node.parent is None:
            return
        sid = node.parent
        self.dismiss(None)
        open_source(self.app, sid)

    def action_diff(self) -> None:
        node = self.current_node
        if node is None or node.parent is None:
            return
        from .diff import DiffScreen

        self.dismiss(None)
        self.app.last_diffed = node.parent
        self.app.push_screen(DiffScreen(node.parent, node.id))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("source", "diff"):
            row = self.tree.current if self.is_mounted else None
            node = self.current_node
            return node is not None and node.parent is not None and (row is None or row.turn is None)
        return True
