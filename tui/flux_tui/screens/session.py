"""One session: its turns, the selected turn's plans and cells with a cursor, the inspector, and the
bottom tabs. The screen owns the state (the session read, the turn shown, its timeline, the replay
marks); the panels draw it and post what the user did (a cursor move, a tab shown) back up."""

from __future__ import annotations


from rich.panel import Panel as RichPanel
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import get_current_worker

from flux.errors import FluxError, SessionNotFound, StoreError
from flux.model.interrupted import InterruptCheck
from flux.model.session import SessionDetail, Turn
from flux.model.timeline import TurnTimeline

from ..agent_loop_view import AgentLoopCache, render_agent_loop
from ..messages import (
    LoadFailed, ReportsWorkerFailures, SessionLoaded, StoreChanged, TimelineReady,
)
from ..render import render_observations, render_turn_info, render_unknown
from ..replay_marks import ReplayMarks
from ..widgets.footer import KeyFooter
from ..widgets.inspector import Inspector
from ..widgets.rendered_view import RenderedView
from ..widgets.session_header import session_header
from ..widgets.session_tabs import SessionTabs
from ..widgets.timeline_view import TimelineView, TLRow
from ..widgets.topbar import TopBar
from ..widgets.turn_list import TurnList
from ..widgets.virtual_list import VirtualList
from .session_actions import SessionActions
from .session_keys import SESSION_BINDINGS
from .session_load import FIRST_ROWS, PARTIAL_OVER, TurnDetails, initial_turn, read_in_full, read_session, read_turn
from .session_replay import SessionReplay, no_replay

__all__ = ["SessionScreen", "FIRST_ROWS", "PARTIAL_OVER"]

_KEEP_CURSOR = object()  # TimelineReady.restore: keep whatever the cursor is on when the rows arrive
REST_AFTER_S = 0.1  # after the first rows are painted, start reading the rest of the turn


class SessionScreen(SessionActions, SessionReplay, ReportsWorkerFailures, Screen):
    """One session: its turns, the plan and cells of the selected turn, the inspector and the tabs."""

    CSS_PATH = "session.tcss"
    BINDINGS = SESSION_BINDINGS  # Textual reads a screen's keys from its own classes, not from a mixin

    def __init__(self, session_id: str, turn: int | None = None) -> None:
        super().__init__()
        self.session_id = session_id
        self.initial_turn = turn  # open on this turn (else the interrupted one, else the first)
        self.detail: SessionDetail | None = None
        self.check = InterruptCheck()
        self.turn: Turn | None = None
        self.timeline: TurnTimeline | None = None
        self.load_error: str | None = None
        self._pending_restore: object = None
        self._turn_details = TurnDetails()
        self.turn_detail: SessionDetail | None = None  # the detail the shown timeline was built from
        self.replay: ReplayMarks | None = None
        self.replay_running: tuple[int, int] | None = None
        self._pending_focus: tuple | None = None
        self._turn_cursor: dict[int, object] = {}  # turn number -> timeline cursor key, kept across turn switches
        self._prebuilt: tuple | None = None  # (turn number, TimelineReady) built by the load worker
        self._agent_loops = AgentLoopCache()  # the "Loop" tab: agent-loops/<sha>.flux by turn
        self._timeline_pending = True  # a turn's timeline is being read or built (see check_action)

    # -- layout ---------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # The terminal's size classes before the first styling: set on the first resize, after
        # mounting, they restyle every widget of the screen once more.
        self._size_classes(self.app.size.width, self.app.size.height, update=False)
        # Start reading now: the store is read while the widgets below are built and styled, not
        # after (the SessionLoaded it posts is handled after on_mount all the same — Textual runs a
        # screen's Compose and Mount before anything in its queue).
        self._load(reload=False)
        yield TopBar(id="topbar")
        with Horizontal(id="session-main"):
            with Vertical(id="left"):
                yield TurnList(id="turns")
                yield RenderedView("turns", id="turn-info")
            with Vertical(id="right"):
                yield TimelineView(id="timeline")
                with Horizontal(id="lower"):
                    yield Inspector(id="inspector")
                    yield SessionTabs(id="bottom")
        yield KeyFooter()  # (#session-notice is mounted by the first failure to read)

    @property
    def turns_list(self) -> TurnList:
        return self.query_one(TurnList)

    @property
    def timeline_view(self) -> TimelineView:
        return self.query_one(TimelineView)

    @property
    def tabs(self) -> SessionTabs:
        return self.query_one(SessionTabs)

    def on_mount(self) -> None:
        self._apply_split()
        self.query_one("#turns").border_title = "Turns"
        self.query_one("#turn-info").border_title = "Turn"
        self.query_one("#timeline").border_title = "Plan & cells"
        self.query_one("#inspector").border_title = "Inspector"
        self.tabs.show_in("replay", no_replay)
        self.tabs.hide_tab("tab-loop")
        self._paint_topbar()
        self.timeline_view.focus()

    # -- loading --------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="session-load", exit_on_error=False, description="Reading the session")
    def _load(self, reload: bool) -> None:
        try:
            loaded = read_session(self.app.ensure_reader(), self.session_id, shown=self.detail if reload else None,
                                  shown_turn=self.turn.number if self.turn is not None else None,
                                  wanted_turn=self.initial_turn)
        except (StoreError, SessionNotFound, FluxError) as e:
            self.post_message(LoadFailed(str(e), "session"))
            return
        if loaded is not None and not get_current_worker().is_cancelled:
            self.post_message(loaded)

    @on(LoadFailed)
    def _on_failed(self, message: LoadFailed) -> None:
        self.load_error = self.app.mask_path(message.error)
        self._timeline_pending = False
        try:
            notice = self.query_one("#session-notice", Static)
        except NoMatches:  # one widget fewer to build for every session that reads fine
            notice = Static(id="session-notice")
            self.mount(notice, after="#session-main")
        notice.update(RichPanel(Text.assemble((self.load_error, "bold red"), "\n\n", ("Esc", "bold"), " goes back."),
                                title="Cannot read this session", title_align="left", border_style="red", padding=(1, 2)))
        notice.display = True
        self.query_one("#session-main").display = False
        self._paint_topbar()
        self.refresh_bindings()  # the footer keeps Back / Help / Quit only

    @on(SessionLoaded)
    def _on_loaded(self, message: SessionLoaded) -> None:
        prev_turn = self.turn.number if self.turn is not None else None
        cur = self.timeline_view.current
        self._pending_restore = (cur.key if cur is not None else None) if message.reload else None
        self.detail = message.detail
        self.session_id = message.detail.row.id
        self.check = message.interrupt
        self.tabs.forget_messages()
        self._turn_details.clear()
        self._turn_details.remember(message.detail)
        tl = self.turns_list
        tl.check = self.check
        turns = message.detail.turns
        tl.unread = {t.number for t in turns} - read_in_full(message.detail)
        if message.reload and prev_turn is not None:
            key = next((t.turn_id for t in turns if t.number == prev_turn), None)
        else:
            key = initial_turn(message.detail, self.check, self.initial_turn).turn_id if turns else None
            if message.initial is not None:
                number, timeline, rows = message.initial
                self._prebuilt = (number, TimelineReady(number, timeline, (rows, None, message.detail)))
        tl.set_rows(turns, cursor_key=key)
        tl.refresh_rows()
        pre = self._prebuilt
        if pre is not None and tl.current is not None and tl.current.number == pre[0]:
            # The loader built this turn's timeline already: show it now, in this same refresh.
            self._prebuilt = None
            self.turn = tl.current
            self._apply_timeline(pre[1])
        unknown = len(message.unknown)
        self.tabs.set_label("tab-unknown", f"Unknown ({unknown})" if unknown else "Unknown")
        self.tabs.show_in("unknown", lambda: render_unknown(message.detail, message.unknown))
        if message.detail.skipped_rows and not message.reload:
            self.notify(f"{message.detail.skipped_rows} corrupt row(s) skipped", severity="warning")
        if not turns:
            self._timeline_pending = False
            self.timeline_view.empty_text = "this session has no turns"
            self.timeline_view.set_rows([])
            self._show_turn(None)
        elif message.reload and self.turn is not None and tl.current is not None and tl.current.number == self.turn.number:
            self.turn = tl.current
            self._build_timeline(self.turn, self._pending_restore)
        if message.reload and (self.replay is not None or self.replay_running is not None):
            self._replay_again()
        self._paint_topbar()
        self._refresh_bindings()

    @on(VirtualList.Highlighted, "#turns")
    def _on_turn(self, message: VirtualList.Highlighted) -> None:
        turn = message.row
        if turn is None or self.detail is None:
            return
        if self.turn is not None and self.turn.turn_id == turn.turn_id and self.timeline is not None:
            return
        if self.turn is not None and self.timeline_view.current is not None:
            self._turn_cursor[self.turn.number] = self.timeline_view.current.key
        self.turn = turn
        self.timeline = None
        self._timeline_pending = True
        self._search = None  # its matches were rows of the other turn
        held = self._turn_details.get(turn) is not None
        self.timeline_view.empty_text = "loading…" if held else f"reading turn {turn.number}…"
        self.timeline_view.set_rows([], keep_cursor=False)
        self._show_turn(turn)
        pre, self._prebuilt = self._prebuilt, None
        if pre is not None and pre[0] == turn.number:
            self.workers.cancel_group(self, "session-timeline")
            self.post_message(pre[1])
            return
        self._build_timeline(turn, self._turn_cursor.get(turn.number))

    @work(thread=True, exclusive=True, group="session-timeline", exit_on_error=False, description="Building the turn timeline")
    def _build_timeline(self, turn: Turn, restore) -> None:
        try:
            turn, timeline, rows, detail = read_turn(self.app.ensure_reader(), self.session_id, turn,
                                                     self._turn_details.get(turn))
        except (StoreError, SessionNotFound, FluxError) as e:
            self.post_message(LoadFailed(str(e), "timeline"))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(TimelineReady(turn.number, timeline, (rows, restore, detail)))

    @on(TimelineReady)
    def _on_timeline(self, message: TimelineReady) -> None:
        if self.turn is None or message.turn_number != self.turn.number:
            return
        self._apply_timeline(message)

    def _apply_timeline(self, message: TimelineReady) -> None:
        rows, restore, detail = message.restore
        tv, tl = self.timeline_view, self.turns_list
        if restore is _KEEP_CURSOR:  # the rest of a turn whose first rows are on screen
            restore = tv.current.key if tv.current is not None else None
        self._turn_details.remember(detail)
        self.turn_detail = detail
        self.timeline = message.timeline
        self._timeline_pending = False
        full = detail.turns[self.turn.number - 1] if self.turn.number - 1 < len(detail.turns) else None
        if full is not None and full is not self.turn and len(full.plan_attempts) != len(self.turn.plan_attempts):
            # a big session's turn list holds headers only (and a first read, its first rows):
            # now that the turn was read in full, its row counts its plans
            self.turn.plan_attempts = list(full.plan_attempts)
            tl.refresh_rows()
        if self.turn.number in tl.unread and self.turn.number in read_in_full(detail):
            tl.unread.discard(self.turn.number)
            tl.refresh_rows()
        self._timeline_title()
        tv.set_rows(rows, keep_cursor=False, cursor_key=restore)
        if restore is None or tv.index_of_key(restore) is None:
            tv.move_cursor(0)
        if self._pending_focus is not None and self._pending_focus[0] == self.turn.number:
            i = tv.find_row(self._pending_focus[1])
            self._pending_focus = None
            if i is not None:
                tv.move_cursor(i)
                tv.focus()
        self._show_turn(self.turn)
        self._show_item(tv.current)
        self._paint_topbar()
        self._refresh_bindings()
        if detail.truncated:  # the turn's first rows: once they are painted, read all of it, keeping the cursor
            turn = self.turn

            def read_rest() -> None:
                if self.turn is turn:
                    self._build_timeline(turn, _KEEP_CURSOR)

            # A moment after the paint: the worker's decoding holds the GIL in 5 ms slices, which
            # would slow the paint still composing (and the first key after it) by half.
            self.call_after_refresh(lambda: self.set_timer(REST_AFTER_S, read_rest))

    def worker_failed(self, worker, error: BaseException) -> None:
        """Called by the App when one of this screen's workers raised: say so where the data would be."""
        if worker.group == "session-replay":
            self.replay_running = None
            self._paint_topbar()
            self._refresh_bindings()
        elif worker.group == "session-timeline":
            self._timeline_pending = False
            self._refresh_bindings()
            self.timeline_view.empty_text = f"could not build this turn's timeline: {type(error).__name__}: {error}"
            self.timeline_view.set_rows([])
        elif worker.group == "session-load":
            self.post_message(LoadFailed(f"{type(error).__name__}: {error}", "session"))

    @on(StoreChanged)
    def _on_store_changed(self, message: StoreChanged) -> None:
        if self.detail is not None:
            self._load(reload=True)

    # -- the panels -----------------------------------------------------------------------------

    @on(VirtualList.Highlighted, "#timeline")
    def _on_item(self, message: VirtualList.Highlighted) -> None:
        self._show_item(message.row)

    @on(VirtualList.Selected, "#turns")
    def _on_turn_selected(self, message: VirtualList.Selected) -> None:
        self.timeline_view.focus()

    @on(VirtualList.Selected, "#timeline")
    def _on_item_selected(self, message: VirtualList.Selected) -> None:
        self.query_one(Inspector).focus()

    def _show_item(self, row: TLRow | None) -> None:
        self.query_one(Inspector).show_row(row, self.timeline, self.replay)

    def _show_turn(self, turn: Turn | None) -> None:
        info = self.query_one("#turn-info", RenderedView)
        tabs = self.tabs
        if turn is None or self.detail is None:
            info.show(Text("no turn selected", style="dim italic"))
            tabs.show_conversation(self.detail, None)
            return
        info.show(render_turn_info(self.detail, turn, self.check, self.app.prices, self.timeline))
        info.border_title = f"Turn {turn.number}"
        loop = self._agent_loops.get(self.app.store_dir, turn.loop_binding)
        tabs.show_loop((lambda: render_agent_loop(loop)) if loop is not None else None)
        tabs.show_conversation(self.detail, turn)
        d = self._turn_details.get(turn)
        if d is not None:
            tabs.show_in("observations", lambda: render_observations(d.observations(d.turns[turn.number - 1])))
        else:
            tabs.show_in("observations", lambda: Text(f"reading turn {turn.number}…", style="dim italic"))

    def _paint_topbar(self) -> None:
        left, right = session_header(self.app.display_name, self.session_id, self.detail, self.check,
                                     error=self.load_error, replay_running=self.replay_running, replay=self.replay)
        self.query_one(TopBar).set(left, right, squeeze=self.app.display_name, keep_tail=True)

    def _timeline_title(self) -> None:
        if self.turn is None:
            return
        title = f"Plan & cells · turn {self.turn.number}"
        if self.turn_detail is not None and self.turn_detail.truncated:
            title += " · reading the rest of the turn…"
        if self._search is not None:
            title += f" · /{self._search.query} {self._search.position + 1}/{len(self._search.matches)}"
        if self.replay is not None:
            ends = self.replay.report.tape_end is not None
            title += " · replay: ✓ served  " + ("⏸ tape ends" if ends else "✗ diverged") + "  ○ unconsumed"
        self.timeline_view.border_title = Text(title)  # Text: the query is the user's, never markup
