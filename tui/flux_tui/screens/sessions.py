"""The sessions screen: every session of the store, triaged (interrupted, lineage, cost)."""

from __future__ import annotations

import time
from itertools import islice

from rich.console import Group
from rich.panel import Panel
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Input, Label, Static
from textual.worker import get_current_worker

from flux.errors import FluxError, StoreError
from flux.model.lineage import lineage_of
from flux.model.listing import list_sessions, summarize_sessions
from flux.store.store import SessionRow, StoreReader

from ..keys import key_table
from ..messages import ReportsWorkerFailures, InterruptedCount, LoadFailed, QueryMatched, RowsLoaded, StoreChanged, SummariesLoaded
from ..widgets.footer import KeyFooter
from ..widgets.sessions_table import SORT_ORDER, SORTS, SUMMARY_SORTS, SessionItem, SessionsTable
from ..widgets.topbar import TopBar
from ..widgets.virtual_list import VirtualList
from .delete import DELETABLE, DeleteScreen, deletion_set

__all__ = ["SessionsScreen"]


def _deletable(item: SessionItem | None) -> bool:
    lin = lineage_of(item.row) if item is not None else None
    return lin is not None and lin.kind in DELETABLE


VISIBLE_BATCH = 50
BACKGROUND_BATCH = 200
CHUNK = 20


def _warm_imports() -> None:
    """Import the session screen's modules once the list is on screen (idle time), not when the
    first session opens: with no bytecode cache that is ~0.1 s off the open."""
    from . import diff, session  # noqa: F401


def _cells_matching(reader: StoreReader, query: str) -> set[str]:
    """Sessions with a recorded op call (``op_recorded``: its op, input or content) containing
    ``query``, case-insensitively — the filter's search beyond the conversation. Matched in the
    stored JSON text, so a query with a quote or a newline finds only what it spells escaped."""
    q = query.casefold()
    rows = reader.query("SELECT DISTINCT stream FROM events WHERE kind = 'run' AND instr(lower(payload), ?) > 0 "
                        "AND instr(payload, '\"op_recorded\"') > 0", (q,))
    return {stream for (stream,) in rows if isinstance(stream, str)}


class SessionsScreen(ReportsWorkerFailures, Screen):
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

    def __init__(self) -> None:
        super().__init__()
        self._generation = 0
        self._items: dict[str, SessionItem] = {}
        self._filter_text = ""
        self._query_ids: set[str] | None = None
        self._query_running = False
        self._query_timer: Timer | None = None
        self._visible_ids: list[str] = []
        self._progress: tuple[int, int] = (0, 0)
        self._loaded = False
        self._error: str | None = None
        self._opened_initial = False
        self._interrupted_ids: set[str] | None = None  # store-wide, ahead of the summary scan

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

    # -- loading --------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="sessions-rows", exit_on_error=False, description="Reading the session registry")
    def _load_rows(self, generation: int) -> None:
        try:
            reader = self.app.ensure_reader()
            rows = reader.list_sessions()
        except StoreError as e:
            self.post_message(LoadFailed(str(e)))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(RowsLoaded(generation, rows, reader.skipped_rows))

    @on(LoadFailed)
    def _on_load_failed(self, message: LoadFailed) -> None:
        self._error = self.app.mask_path(message.error)
        self._show_notice(
            "Cannot open this store",
            self._error,
            "Point --store at a directory that holds a flux events.db, set $FLUX_STORE_DIR, "
            "or run `flux-tui --demo` to explore a demo store.",
            error=True,
        )
        self._paint_topbar()

    @on(RowsLoaded)
    def _on_rows(self, message: RowsLoaded) -> None:
        if message.generation != self._generation:
            return
        self._error = None
        items: dict[str, SessionItem] = {}
        for row in message.rows:
            item = self._items.get(row.id)
            if item is None:
                item = SessionItem(row)
            else:
                item.row = row
            item.summary = self.app.cached_summary(row)
            items[row.id] = item
        self._items = items
        self.table.empty_text = "no sessions"
        self.table.set_rows(list(items.values()))
        self._apply_filter()
        self._loaded = True
        if not items:
            self._show_notice(
                "This store holds no sessions yet",
                f"{self.app.display_name} is a flux store, but no session has been recorded in it.",
                "Run an agent with this store, or run `flux-tui --demo` to explore a demo store. "
                "New sessions appear here as they are written.",
                error=False,
            )
        else:
            self._hide_notice()
        if message.skipped_rows:
            self.notify(f"{message.skipped_rows} corrupt row(s) skipped while reading the store", severity="warning")
        self._paint_topbar()
        self._interrupted_wanted = message.generation
        self.set_timer(0.3, self._maybe_count_interrupted)
        todo = [r for r in message.rows if self.app.cached_summary(r) is None]
        self._progress = (len(message.rows) - len(todo), len(message.rows))
        if todo:
            self._summarize(self._generation, todo)
        self.refresh_bindings()
        self.call_after_refresh(_warm_imports)
        if self.app.initial_session and not self._opened_initial:
            self._opened_initial = True
            self.app.open_session(self.app.initial_session)

    @work(thread=True, exclusive=True, group="sessions-summaries", exit_on_error=False, description="Summarizing sessions")
    def _summarize(self, generation: int, rows: list[SessionRow]) -> None:
        worker = get_current_worker()
        reader = self.app.reader
        if reader is None:
            return
        todo: dict[str, SessionRow] = {r.id: r for r in rows}
        total = self._progress[1]
        base_done = self._progress[0]
        while todo and not worker.is_cancelled:
            visible = [todo[i] for i in list(self._visible_ids) if i in todo][:VISIBLE_BATCH]
            if self.app.screen is not self:
                # Another screen is on top: the scan yields the CPU (and the GIL) to it — the rows
                # on screen are still summarized, a small chunk at a time and only after a pause
                # (a session opening gets the CPU first); the rest waits until this screen is back.
                time.sleep(0.3)
                if not visible or self.app.screen is self:
                    continue
                visible = visible[:CHUNK]
            batch = visible or list(islice(todo.values(), BACKGROUND_BATCH))
            summaries = []
            try:
                # In small chunks, so a screen pushed on top (a session opening) gets the CPU at once.
                for i in range(0, len(batch), CHUNK):
                    chunk = batch[i:i + CHUNK]
                    summaries.extend(summarize_sessions(reader, chunk, self.app.prices))
                    for r in chunk:
                        todo.pop(r.id, None)
                    if self.app.screen is not self or worker.is_cancelled:
                        break
            except (StoreError, FluxError) as e:
                self.post_message(LoadFailed(str(e)))
                return
            if worker.is_cancelled:
                return
            self.post_message(SummariesLoaded(generation, summaries, base_done + len(rows) - len(todo), total))

    def _maybe_count_interrupted(self) -> None:
        """Run the store-wide interrupted scan while this screen is on top: it holds the store's
        connection for ~0.2 s on a big store, which a session being opened should not wait for."""
        gen = getattr(self, "_interrupted_wanted", None)
        if gen is None or gen != self._generation:
            return
        if self.app.screen is self:
            self._interrupted_wanted = None
            self._count_interrupted(gen)

    def on_screen_resume(self) -> None:
        self.set_timer(0.3, self._maybe_count_interrupted)

    @work(thread=True, exclusive=True, group="sessions-interrupted", exit_on_error=False,
          description="Finding interrupted sessions")
    def _count_interrupted(self, generation: int) -> None:
        """The header's interrupted count for the whole store in one indexed pass — before the
        per-session summaries (minutes on a 10k-session store) get there."""
        try:
            from flux.model.listing import interrupted_sessions
        except ImportError:  # an engine without it: the summaries will tell
            return
        reader = self.app.reader
        if reader is None:
            return
        # On a connection of its own where another one is cheap (no snapshot copy to make): the
        # pass holds its connection for ~0.2 s of CPU on a big store, and a session opened meanwhile
        # would wait for it on the app's shared one.
        own = None
        if reader.mode in ("ro", "immutable"):
            try:
                own = StoreReader(reader.dir)
            except StoreError:
                own = None
        try:
            ids = set(interrupted_sessions(own or reader))
        except (StoreError, FluxError):
            return
        finally:
            if own is not None:
                own.close()
        if not get_current_worker().is_cancelled:
            self.post_message(InterruptedCount(generation, ids))

    @on(InterruptedCount)
    def _on_interrupted(self, message: InterruptedCount) -> None:
        if message.generation == self._generation:
            self._interrupted_ids = message.ids
            self._paint_topbar()
            self._sync_row_keys()

    def _interrupted_count(self) -> int | None:
        """Sessions flagged interrupted: a summary's verdict where there is one, else the store-wide
        pass's; None while neither is known for every session."""
        ids = self._interrupted_ids
        n = 0
        for it in self._items.values():
            if it.summary is not None:
                n += bool(it.summary.interrupted)
            elif ids is not None:
                n += it.id in ids
        if ids is None and self._progress[0] < self._progress[1]:
            return n or None
        return n

    @on(SummariesLoaded)
    def _on_summaries(self, message: SummariesLoaded) -> None:
        if message.generation != self._generation:
            return
        self.app.store_summaries(message.summaries)
        for s in message.summaries:
            item = self._items.get(s.row.id)
            if item is not None and item.row.last_seq == s.row.last_seq:
                item.summary = s
        self._progress = (message.done, message.total)
        if self.table.sort_name in SUMMARY_SORTS:
            self.table.resort()
        else:
            self.table.refresh_rows()
        self._paint_topbar()
        self._sync_row_keys()

    @on(VirtualList.WindowChanged, "#sessions")
    def _on_window(self, message: VirtualList.WindowChanged) -> None:
        rows = self.table.rows[message.start:message.end + 10]
        self._visible_ids = [it.id for it in rows]

    @on(StoreChanged)
    def _on_store_changed(self, message: StoreChanged) -> None:
        self.action_reload()

    def action_reload(self) -> None:
        self._generation += 1
        self._load_rows(self._generation)
        if self._filter_text:
            self._start_query()

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

    # -- filter ---------------------------------------------------------------------------------

    def action_filter(self) -> None:
        if self._error is not None:
            return
        self.query_one("#filter-bar").display = True
        self.query_one("#filter", Input).focus()

    def action_clear_filter(self) -> None:
        inp = self.query_one("#filter", Input)
        if inp.value:
            inp.value = ""
        self.query_one("#filter-bar").display = False
        self.table.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_filter":
            bars = self.query("#filter-bar")
            return bool(self._filter_text) or bool(bars and bars.first().display)
        if action in ("cycle_sort", "reverse_sort", "lineage", "filter", "diff", "toggle_tree", "copy_id", "delete"):
            return self._error is None and bool(self._items)
        if action == "resurrect":
            return self._error is None and bool(self._items)
        return True

    @on(Input.Changed, "#filter")
    def _on_filter_changed(self, event: Input.Changed) -> None:
        self._filter_text = event.value.strip()
        self._query_ids = None
        self._apply_filter()
        if self._query_timer is not None:
            self._query_timer.stop()
            self._query_timer = None
        if self._filter_text:
            self._query_running = True
            self._query_timer = self.set_timer(0.25, self._start_query)
        else:
            self._query_running = False
        self._paint_topbar()
        self.refresh_bindings()

    @on(Input.Submitted, "#filter")
    def _on_filter_submitted(self, event: Input.Submitted) -> None:
        self.table.focus()
        if not self._filter_text:
            self.query_one("#filter-bar").display = False

    def _start_query(self) -> None:
        self._query_timer = None
        if self._filter_text:
            self._query_running = True
            self._run_query(self._filter_text)

    @work(thread=True, exclusive=True, group="sessions-query", exit_on_error=False, description="Searching conversations")
    def _run_query(self, query: str) -> None:
        reader = self.app.reader
        if reader is None:
            return
        try:
            hits = list_sessions(reader, limit=None, query=query, prices=self.app.prices)
        except ImportError:
            try:
                from flux.model.listing import session_matches_query

                ids = {r.id for r in reader.list_sessions() if session_matches_query(reader, r.id, query)}
            except (StoreError, FluxError) as e:
                self.post_message(QueryMatched(query, None, str(e)))
                return
            self.post_message(QueryMatched(query, ids))
            return
        except (StoreError, FluxError) as e:
            self.post_message(QueryMatched(query, None, str(e)))
            return
        ids = {s.id for s in hits}
        try:
            ids |= _cells_matching(reader, query)
        except StoreError:
            pass  # the conversation hits stand; a store that cannot be scanned says so elsewhere
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self.app.store_summaries, hits)
            self.post_message(QueryMatched(query, ids))

    @on(QueryMatched)
    def _on_query(self, message: QueryMatched) -> None:
        if message.query != self._filter_text:
            return
        self._query_running = False
        if message.error:
            self.notify(f"conversation search failed: {message.error}", severity="error")
        self._query_ids = message.ids
        for sid in message.ids or ():
            item = self._items.get(sid)
            if item is not None and item.summary is None:
                item.summary = self.app.cached_summary(item.row)
        self._apply_filter()
        self._paint_topbar()

    def _apply_filter(self) -> None:
        q = self._filter_text.casefold()
        if not q:
            self.table.set_filter(None)
            self.table.empty_text = "no sessions"
            return
        hits = self._query_ids or set()

        def match(it: SessionItem) -> bool:
            return q in it.row.id.casefold() or q in (it.row.model or "").casefold() or it.row.id in hits

        self.table.set_filter(match)
        self.table.empty_text = (f"no session matches “{self._filter_text}” yet — searching conversations…"
                                 if self._query_running else
                                 f"no session matches “{self._filter_text}” — Esc clears the filter")

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
