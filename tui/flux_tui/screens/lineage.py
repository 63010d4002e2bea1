"""Lineage: a session's whole family — its root, forks, what-ifs, checks and sub-agents — as a tree,
each child saying how it differs from its parent; Enter opens a node, ``d`` its diff, ``u`` its
parent."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Static
from textual.worker import get_current_worker

from flux.errors import FluxError, SessionNotFound, StoreError
from flux.model.listing import SessionSummary, summarize_sessions
from flux.timemachine.family import ChildDifference, Family, FamilyNode, ResurrectedTurn

from ..keys import key_table
from ..messages import ReportsWorkerFailures
from ..widgets.lineage_tree import LineageTree, TreeRow, describe, with_turns
from ..widgets.virtual_list import VirtualList

__all__ = ["LineageScreen", "open_source"]

# (store dir, parent id, parent last_seq, child id, child last_seq) -> difference or error text
_DIFF_CACHE: dict[tuple, ChildDifference | str] = {}
_DIFF_CACHE_MAX = 4096


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
