"""Reading the sessions list in the background: the registry's rows first, then each session's
summary (the visible rows first, in small chunks while another screen is on top), and the
store-wide interrupted count — each posted back to the screen as a message."""

from __future__ import annotations

import time
from itertools import islice

from textual import on, work
from textual.screen import Screen
from textual.worker import get_current_worker

from flux.errors import FluxError, StoreError
from flux.model.listing import summarize_sessions
from flux.store.store import SessionRow, StoreReader

from ..messages import InterruptedCount, LoadFailed, RowsLoaded, StoreChanged, SummariesLoaded
from ..widgets.sessions_table import SUMMARY_SORTS, SessionItem
from ..widgets.virtual_list import VirtualList

__all__ = ["SessionsLoader"]

VISIBLE_BATCH = 50
BACKGROUND_BATCH = 200
CHUNK = 20


def _warm_imports() -> None:
    """Import the session screen's modules once the list is on screen (idle time), not when the
    first session opens: with no bytecode cache that is ~0.1 s off the open."""
    from . import diff, session  # noqa: F401


class SessionsLoader(Screen):
    """The sessions screen's reading half: its state (the items by id, the summary progress, the
    load error) and the workers that fill it; the screen draws it (``table``, ``_paint_topbar``,
    ``_show_notice``, ``_apply_filter``, ``_sync_row_keys``)."""

    def __init__(self) -> None:
        super().__init__()
        self._generation = 0
        self._items: dict[str, SessionItem] = {}
        self._visible_ids: list[str] = []
        self._progress: tuple[int, int] = (0, 0)
        self._loaded = False
        self._error: str | None = None
        self._opened_initial = False
        self._interrupted_ids: set[str] | None = None  # store-wide, ahead of the summary scan

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
