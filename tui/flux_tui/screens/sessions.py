"""The sessions screen: every session of the store, triaged (interrupted, lineage, cost)."""

from __future__ import annotations

from rich.console import Group
from rich.panel import Panel
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Input, Label, Static

from flux.model.lineage import lineage_of

from ..keys import key_table
from ..messages import ReportsWorkerFailures
from ..widgets.footer import KeyFooter
from ..widgets.sessions_table import SORT_ORDER, SORTS, SessionItem, SessionsTable
from ..widgets.topbar import TopBar
from ..widgets.virtual_list import VirtualList
from .delete import DELETABLE, DeleteScreen, deletion_set
from .sessions_filter import SessionsFilter
from .sessions_load import SessionsLoader

__all__ = ["SessionsScreen"]


def _deletable(item: SessionItem | None) -> bool:
    lin = lineage_of(item.row) if item is not None else None
    return lin is not None and lin.kind in DELETABLE


class SessionsScreen(SessionsLoader, SessionsFilter, ReportsWorkerFailures, Screen):
    """Sessions list with sort, filter, counts and a clear notice for unusable stores."""

    CSS_PATH = "sessions.tcss"

    HELP_TOPIC = "sessions"
    FOOTER_ESSENTIAL = ("select", "filter", "diff")

    BINDINGS = key_table("sessions", """
        # keys  id            action        label
        slash   filter        filter        Filter
            Filter by id, model, conversation text or a recorded call (op, input, content)
        s       sort          cycle_sort    Sort
            Cycle the sort column: updated, id, model, msgs, turns, cost, status
        r       reverse       reverse_sort  Reverse
            Reverse the sort order
        l       lineage       lineage       Lineage
            Forks, what-ifs and sub-agents of the highlighted session
        d       diff          diff          Diff
            Diff the highlighted session against another one, side by side (default: its fork source)
        t       tree          toggle_tree   Group
            Group children (forks, what-ifs, sub-agents) under their source session, or list every session flat
            (t again)
        R       resurrect     resurrect     Resurrect
            Finish the highlighted session's interrupted turn from the crash point (the gate first if anything
            runs live)
        escape  clear_filter  clear_filter  Clear filter
            Clear the filter
        D       delete        delete        Delete
            Delete the highlighted fork, what-if or check (and what was derived from it), after a confirmation
            that lists every session and its events
        y       copy_id       copy_id       Copy id
            Copy the highlighted session's id (OSC 52), e.g. for flux show / fork / diff
        ctrl+r  reload        reload        Reload  [hidden]
            Re-read the store now
    """)

    # -- layout ---------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield TopBar(id="topbar")
        with Horizontal(id="filter-bar"):
            yield Label("/", id="filter-label")
            yield Input(placeholder="id, model, conversation text or a recorded call (op, input, content)", id="filter")
        yield SessionsTable(id="sessions", now_ms=self.app.now_ms)
        yield Static(id="notice")
        yield KeyFooter()

    @property
    def table(self) -> SessionsTable:
        return self.query_one(SessionsTable)

    def on_mount(self) -> None:
        self.query_one("#filter-bar").display = False
        self.query_one("#notice").display = False
        self._paint_topbar()
        self.table.grouped = bool(getattr(self.app, "sessions_grouped", False))
        self.table.set_sort(SORTS["updated"][1], reverse=True)
        self.table.empty_text = "opening the store…"
        self.table.focus()
        self._load_rows(self._generation)
        if self.app.frozen_now_ms is None:
            # Relative times ("3m ago") age while the screen is open.
            self.set_interval(30, self.table.refresh_rows, name="age-refresh")

    # -- open -----------------------------------------------------------------------------------

    @on(VirtualList.Selected, "#sessions")
    def _on_selected(self, message: VirtualList.Selected) -> None:
        self.app.open_session(message.row.id)

    def action_lineage(self) -> None:
        item = self.table.current
        if item is None:
            return
        from .lineage import LineageScreen

        self.app.push_screen(LineageScreen(item.id))

    def action_toggle_tree(self) -> None:
        t = self.table
        t.set_grouped(not t.grouped)
        self.app.sessions_grouped = t.grouped  # kept while the app runs
        self._paint_topbar()
        self.notify("grouped: children under their source — t lists them flat" if t.grouped else
                    "flat: every session by the sort — t groups children under their source", timeout=2.5)

    def _is_interrupted(self, item: SessionItem | None) -> bool:
        if item is None:
            return False
        if item.summary is not None:
            return item.summary.interrupted
        return self._interrupted_ids is not None and item.id in self._interrupted_ids

    def action_resurrect(self) -> None:
        item = self.table.current
        if item is None:
            return
        if not self._is_interrupted(item):
            self.notify(f"{item.id} has no interrupted turn — R resurrects a session marked ⚠ interrupted", timeout=3)
            return
        from .resurrect import ResurrectScreen

        self.app.push_screen(ResurrectScreen(item.id))

    @on(VirtualList.Highlighted, "#sessions")
    def _on_highlight(self, message: VirtualList.Highlighted) -> None:
        self._sync_row_keys()

    def _sync_row_keys(self) -> None:
        """The footer offers R only on an interrupted row and D only on a row the time machine made
        (both still explain themselves elsewhere)."""
        item = self.table.current if self.is_mounted else None
        want = (self._is_interrupted(item) if item is not None else False, _deletable(item))
        if want != getattr(self, "_row_keys_shown", None):
            self._row_keys_shown = want
            self.refresh_bindings()

    def footer_hidden(self, action: str) -> bool:
        resurrect, delete = getattr(self, "_row_keys_shown", (False, False))
        return (action == "resurrect" and not resurrect) or (action == "delete" and not delete)

    def action_delete(self) -> None:

        item = self.table.current
        if item is None:
            return
        lin = lineage_of(item.row)
        if lin is None or lin.kind not in DELETABLE:
            what = "a recording" if lin is None else f"a {lin.kind}"
            self.notify(f"{item.id} is {what} — D deletes what the time machine made (forks, what-ifs, checks), "
                        "never a recording", timeout=4)
            return
        rows = deletion_set(item.row, [it.row for it in self._items.values()])

        def done(deleted: dict | None) -> None:
            if deleted:
                events = sum(deleted.values())
                self.notify(f"deleted {', '.join(deleted)} ({events} event(s))", timeout=5)
                self.action_reload()

        self.app.push_screen(DeleteScreen(rows), done)

    def action_copy_id(self) -> None:
        item = self.table.current
        if item is None:
            self.notify("no session here to copy", timeout=2)
            return
        self.app.copy_to_clipboard(item.id)
        self.notify(f"copied {item.id}", timeout=2)

    def action_diff(self) -> None:
        item = self.table.current
        if item is None:
            return
        from .diff import ask_and_diff

        ask_and_diff(self.app, item.id, item.row.correlation_id)

    # -- sort -----------------------------------------------------------------------------------

    def action_cycle_sort(self) -> None:
        t = self.table
        name = SORT_ORDER[(SORT_ORDER.index(t.sort_name) + 1) % len(SORT_ORDER)]
        t.sort_name = name
        t.sort_reverse = SORTS[name][2]
        t.set_sort(SORTS[name][1], reverse=t.sort_reverse)
        self._paint_topbar()

    @on(SessionsTable.SortClicked)
    def _on_sort_clicked(self, message: SessionsTable.SortClicked) -> None:
        t = self.table
        if message.sort_name == t.sort_name:
            self.action_reverse_sort()
            return
        t.sort_name = message.sort_name
        t.sort_reverse = SORTS[message.sort_name][2]
        t.set_sort(SORTS[message.sort_name][1], reverse=t.sort_reverse)
        self._paint_topbar()

    def action_reverse_sort(self) -> None:
        t = self.table
        t.sort_reverse = not t.sort_reverse
        t.set_sort(SORTS[t.sort_name][1], reverse=t.sort_reverse)
        self._paint_topbar()

    # -- keys ---------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_filter":
            bars = self.query("#filter-bar")
            return bool(self._filter_text) or bool(bars and bars.first().display)
        if action in ("cycle_sort", "reverse_sort", "lineage", "filter", "diff", "toggle_tree", "copy_id", "delete"):
            return self._error is None and bool(self._items)
        if action == "resurrect":
            return self._error is None and bool(self._items)
        return True

    # -- chrome ---------------------------------------------------------------------------------

    def _paint_topbar(self) -> None:
        left = Text.assemble(("flux-tui", "bold"), "  ", ("store ", "dim"), (self.app.display_name, "bold"))
        right = Text()
        if self._error is not None:
            right.append("cannot open", style="bold red")
        elif not self._loaded:
            right.append("opening…", style="dim")
        else:
            n = len(self._items)
            right.append(f"{n} session{'s' if n != 1 else ''}")
            if n and self.table.grouped:
                right.append(" · grouped by source", style="cyan")
            interrupted = self._interrupted_count()
            done, total = self._progress
            if interrupted:
                right.append(" · ")
                right.append(f"⚠ {interrupted} interrupted", style="bold yellow")
            elif interrupted is not None and n:
                right.append(" · 0 interrupted", style="dim")
            if done < total:
                right.append(f" · summarizing {done}/{total}", style="dim")
            if self._filter_text:
                right.append(" · ")
                right.append(f"filter “{self._filter_text}”: {self.table.row_count} shown", style="cyan")
                if self._query_running:
                    right.append(" (searching…)", style="dim")
            t = self.table
            if n:
                right.append(f" · sort {SORTS[t.sort_name][0]} {'▼' if t.sort_reverse else '▲'}", style="dim")
        self.query_one(TopBar).set(left, right, squeeze=self.app.display_name)

    def _show_notice(self, title: str, reason: str, todo: str, *, error: bool) -> None:
        notice = self.query_one("#notice", Static)
        body = Group(
            Text(reason, style="bold red" if error else "bold"),
            Text(""),
            Text.assemble(("What to do: ", "bold"), todo),
        )
        notice.update(Panel(body, title=title, title_align="left", border_style="red" if error else "yellow",
                            padding=(1, 2)))
        notice.display = True
        self.table.display = False
        self.query_one("#filter-bar").display = False
        notice.can_focus = True
        notice.focus()
        self.refresh_bindings()

    def _hide_notice(self) -> None:
        notice = self.query_one("#notice", Static)
        if notice.display:
            notice.display = False
            self.table.display = True
            self.table.focus()
