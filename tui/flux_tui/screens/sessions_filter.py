"""The sessions screen's filter (``/``): ids and models match at once; conversation text and
recorded calls are searched in the store in a worker after a short pause, and the rows they match
join the filter when the answer comes back."""

from __future__ import annotations

from textual import on, work
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Input
from textual.worker import get_current_worker

from flux.errors import FluxError, StoreError
from flux.model.listing import list_sessions
from flux.store.store import StoreReader

from ..messages import QueryMatched
from ..widgets.sessions_table import SessionItem

__all__ = ["SessionsFilter"]


def _cells_matching(reader: StoreReader, query: str) -> set[str]:
    """Sessions with a recorded op call (``op_recorded``: its op, input or content) containing
    ``query``, case-insensitively — the filter's search beyond the conversation. Matched in the
    stored JSON text, so a query with a quote or a newline finds only what it spells escaped."""
    q = query.casefold()
    rows = reader.query("SELECT DISTINCT stream FROM events WHERE kind = 'run' AND instr(lower(payload), ?) > 0 "
                        "AND instr(payload, '\"op_recorded\"') > 0", (q,))
    return {stream for (stream,) in rows if isinstance(stream, str)}


class SessionsFilter(Screen):
    """The filter bar's half of the sessions screen: the text typed, the store's answer to it and
    the table's filter; the screen provides ``table``, ``_items`` and ``_paint_topbar``."""

    def __init__(self) -> None:
        super().__init__()
        self._filter_text = ""
        self._query_ids: set[str] | None = None
        self._query_running = False
        self._query_timer: Timer | None = None

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
