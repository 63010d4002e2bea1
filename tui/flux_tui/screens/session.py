"""One session: turns, the selected turn's plans and cells with a cursor, an inspector, the
conversation, observations and unknown events; usage and cost of the turn and the session."""

from __future__ import annotations

import time
from typing import Callable

from rich.console import Group, RenderableType
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import get_current_worker

from flux.errors import FluxError, SessionNotFound, StoreError
from flux.model.interrupted import InterruptCheck, check_session_interrupted
from flux.model.listing import summarize_sessions
from flux.model.lineage import lineage_of
from flux.model.session import TRACE_KINDS, SessionDetail, Turn, load_session
from flux.model.timeline import TurnTimeline, build_timeline

from ..agent_loop_view import AgentLoopCache, render_agent_loop
from ..fmt import lineage_mark
from ..messages import (
    ReportsWorkerFailures,
    LoadFailed, ReplayFailed, ReplayFinished, ReplayProgress, SessionLoaded, StoreChanged, TimelineReady,
)
from ..render import (
    display_statement_text, render_cell, render_conversation, render_observations, render_statement, render_turn_info, render_unknown,
)
from ..replay_marks import ReplayMarks, divergence_target, marks_from_report, render_report
from ..widgets.bottom_tabs import BottomTabs
from ..widgets.rendered_view import RenderedView as Panel
from ..widgets.timeline_view import TimelineView, TLRow, build_rows
from ..widgets.footer import KeyFooter
from ..widgets.topbar import TopBar
from ..widgets.turn_list import TurnList
from ..widgets.virtual_list import VirtualList

__all__ = ["SessionScreen"]


# A session with more events than this opens one turn at a time (the newest first); the others load
# when the turn list moves to them. Smaller sessions load whole, once.
PARTIAL_OVER = 20_000
_KEEP_CURSOR = object()  # TimelineReady.restore: keep whatever the cursor is on when the rows arrive
REST_AFTER_S = 0.1  # after the first rows are painted, start reading the rest of the turn
FIRST_ROWS = 400  # rows of a big session's turn read before the first paint (a screenful of statements and cells)
TURN_CACHE = 4

_NO_REPLAY = lambda: Text("no replay yet — r replays the session from its cassette", style="dim italic")  # noqa: E731
_TURN_GROUP = Binding.Group("Turn", compact=True)
# The bottom panel's tabs: (tab id, label, id of the panel it shows).
_BOTTOM_TABS = [("tab-conversation", "Conversation", "conversation"), ("tab-observations", "Observations", "observations"),
                ("tab-unknown", "Unknown", "unknown"), ("tab-replay", "Replay", "replay"), ("tab-loop", "Loop", "agent-loop")]
_ERROR_GROUP = Binding.Group("Error", compact=True)


def _read_in_full(detail: SessionDetail) -> set[int]:
    """Numbers of the turns whose rows ``detail`` holds in full (so whose plans it counts)."""
    if detail.truncated:
        return set()
    if not detail.partial:
        return {t.number for t in detail.turns}
    start = detail.window[0] if detail.window else None
    return {t.number for t in detail.turns if t.turn_id == start}


class SessionScreen(ReportsWorkerFailures, Screen):
    HELP_TOPIC = "timeline"
    FOOTER_ESSENTIAL = ("replay", "diff", "next_error", "prev_error")

    BINDINGS = [
        Binding("escape", "back", "Back", id="session.back",
                tooltip="Clear the replay marks if shown, else back to the previous screen"),
        Binding("left_square_bracket", "prev_turn", "Prev turn", id="session.prev_turn", tooltip="Select the previous turn",
                group=_TURN_GROUP),
        Binding("right_square_bracket", "next_turn", "Next turn", id="session.next_turn", tooltip="Select the next turn",
                group=_TURN_GROUP),
        Binding("n", "next_error", "Next error", id="session.next_error",
                tooltip="Move the cursor to the next halted statement or error cell", group=_ERROR_GROUP),
        Binding("N", "prev_error", "Prev error", id="session.prev_error",
                tooltip="Move the cursor to the previous halted statement or error cell", group=_ERROR_GROUP),
        Binding("o", "observations", "Observations", id="session.observations",
                tooltip="Show / hide the turn's observations"),
        Binding("p", "agent_loop", "Agent loop", show=False, id="session.agent_loop",
                tooltip="Show / hide the agent-loop program the turn ran (agent-loops/<sha>.flux)"),
        Binding("c", "conversation", "Conversation", show=False, id="session.conversation",
                tooltip="Show the conversation"),
        Binding("a", "conversation_scope", "Turn/all", show=False, id="session.conversation_scope",
                tooltip="Conversation: this turn only, or the whole session"),
        Binding("e", "unknown_events", "Unknown events", show=False, id="session.unknown",
                tooltip="Events of kinds this reader does not know"),
        Binding("l", "lineage", "Lineage", id="session.lineage", tooltip="Forks, what-ifs and sub-agents of this session"),
        Binding("u", "source", "Source", id="session.source", tooltip="Open the session this one was derived from"),
        Binding("r", "replay", "Replay", id="session.replay",
                tooltip="Replay the session hermetically from its cassette and mark every statement and cell"),
        Binding("d", "diff", "Diff", id="session.diff",
                tooltip="Diff this session against another one, side by side (default: its fork source)"),
        Binding("Y", "copy_hash", "Copy hash", show=False, id="session.copy_hash",
                tooltip="Copy the hash of the item under the cursor (input_hash / stmt_hash)"),
        Binding("less_than_sign", "split(-1)", "Narrower turns", show=False, id="session.split_narrower",
                tooltip="Move the split left: a narrower turns column (down to hidden)"),
        Binding("greater_than_sign", "split(1)", "Wider turns", show=False, id="session.split_wider",
                tooltip="Move the split right: a wider turns column"),
        Binding("C", "save_case", "Save case", show=False, id="session.save_case",
                tooltip="Save a case of this turn forked at the statement under the plan cursor (hash copied)"),
        Binding("R", "resurrect", "Resurrect", id="session.resurrect",
                tooltip="Finish the interrupted turn from the crash point, from tape (the gate first if anything runs live)"),
        Binding("f", "fork", "Fork", id="session.fork",
                tooltip="Fork the session at the statement under the plan cursor (inject, edit or re-plan)"),
        Binding("w", "what_if", "What-if", id="session.what_if",
                tooltip="What if the cell (or statement) under the cursor had returned something else, or the policy "
                        "were different: re-run the session offline into a new session and diff it"),
        Binding("slash", "search", "Search", id="session.search",
                tooltip="Search the session: this turn's plan text, cell ops, inputs and contents and conversation, "
                        "then the other turns' cells (n/N step)"),
        Binding("colon", "jump", "Jump", id="session.jump",
                tooltip="Jump to turn N, statement N (s3) or cell N (c7)"),
        Binding("y", "copy", "Copy", id="session.copy",
                tooltip="Copy what is under the cursor: a cell's content, a statement's source, a turn's input; in "
                        "the inspector or a tab, the text it shows"),
        Binding("z", "zoom", "Zoom", id="session.zoom",
                tooltip="Maximise the focused panel (z again restores the layout)"),
        Binding("1", "focus_panel('turns')", "Focus turns", show=False, id="session.focus_turns", tooltip="Focus the turn list"),
        Binding("2", "focus_panel('timeline')", "Focus plan", show=False, id="session.focus_timeline",
                tooltip="Focus the plan / cell stepper"),
        Binding("3", "focus_panel('inspector')", "Focus inspector", show=False, id="session.focus_inspector",
                tooltip="Focus the inspector"),
        Binding("4", "focus_panel('bottom')", "Focus conversation", show=False, id="session.focus_bottom",
                tooltip="Focus the conversation / observations panel"),
    ]

    def __init__(self, session_id: str, turn: int | None = None) -> None:
        super().__init__()
        self.session_id = session_id
        self.initial_turn = turn  # open on this turn (else the interrupted one, else the first)
        self.detail: SessionDetail | None = None
        self.check = InterruptCheck()
        self.turn: Turn | None = None
        self.timeline: TurnTimeline | None = None
        self._messages: dict[int, list] = {}
        self._scope = "turn"
        self._error: str | None = None
        self._pending_restore: tuple | None = None
        self._turn_details: dict[int, SessionDetail] = {}  # turn number -> the detail that holds its rows
        self.turn_detail: SessionDetail | None = None  # the detail the shown timeline was built from
        self.replay: ReplayMarks | None = None
        self.replay_running: tuple[int, int] | None = None
        self._pending_focus: tuple | None = None
        self._turn_cursor: dict[int, object] = {}  # turn number -> timeline cursor key, kept across turn switches
        self._prebuilt: tuple | None = None  # (turn number, TimelineReady) built by the load worker
        self._agent_loops = AgentLoopCache()  # the "Loop" tab: agent-loops/<sha>.flux by turn
        self._held_panels: dict[str, Callable[[], RenderableType]] = {}  # see _bottom_panel
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
                yield Panel("turns", id="turn-info")
            with Vertical(id="right"):
                yield TimelineView(id="timeline")
                with Horizontal(id="lower"):
                    yield Panel("inspector", id="inspector")
                    with BottomTabs(_BOTTOM_TABS, initial="tab-conversation", id="bottom"):
                        yield Panel("conversation", id="conversation")
                        # the other tabs' panels are built when their tab is first shown (_LAZY_PANELS)
        yield KeyFooter()  # (#session-notice is mounted by the first failure to read)

    @property
    def turns_list(self) -> TurnList:
        return self.query_one(TurnList)

    @property
    def timeline_view(self) -> TimelineView:
        return self.query_one(TimelineView)

    def on_mount(self) -> None:
        self._apply_split()
        self.query_one("#turns").border_title = "Turns"
        self.query_one("#turn-info").border_title = "Turn"
        self.query_one("#timeline").border_title = "Plan & cells"
        self.query_one("#inspector").border_title = "Inspector"
        self._bottom_panel("replay", _NO_REPLAY)
        self.query_one("#bottom", BottomTabs).hide_tab("tab-loop")
        self._paint_topbar()
        self.timeline_view.focus()

    # -- loading --------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="session-load", exit_on_error=False, description="Reading the session")
    def _load(self, reload: bool) -> None:
        try:
            reader = self.app.ensure_reader()
            if reload and self.detail is not None:
                row = reader.get_session(self.detail.row.id)
                if (row.last_seq, row.updated_at, row.msg_count) == (self.detail.row.last_seq, self.detail.row.updated_at,
                                                                    self.detail.row.msg_count):
                    return  # another session changed; this one did not
            row = reader.resolve_session(self.session_id)
            if row.last_seq > PARTIAL_OVER:
                # Big session: its messages and turn headers, and the rows of one turn only — on
                # opening, only the first rows of that turn (what the screen shows); the rest is
                # read by the timeline worker once they are painted. The interrupted check is the
                # session list's: it reads just the open turn, not the one on screen.
                check = summarize_sessions(reader, [row], None)[0].interrupt
                if reload and self.turn is not None:
                    detail = load_session(reader, row.id, turn=self.turn.number)
                else:
                    detail = load_session(reader, row.id, turn=self.initial_turn or check.open_turn or -1,
                                          max_rows=FIRST_ROWS)
            else:
                detail = load_session(reader, row.id)
                check = check_session_interrupted(reader.dir, detail)
            messages: dict = {}
            initial = None
            unknown = detail.unknown_events
            if not reload and detail.turns:
                # Build the first turn's timeline here too: one hop less before the first paint.
                first = self._initial_turn(detail, check)
                timeline = build_timeline(detail, first)
                initial = (first.number, timeline, build_rows(first, timeline))
        except (StoreError, SessionNotFound, FluxError) as e:
            self.post_message(LoadFailed(str(e), "session"))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(SessionLoaded(detail, check, reload, messages, unknown, initial))

    @on(LoadFailed)
    def _on_failed(self, message: LoadFailed) -> None:
        self._error = self.app.mask_path(message.error)
        self._timeline_pending = False
        try:
            notice = self.query_one("#session-notice", Static)
        except NoMatches:  # one widget fewer to build for every session that reads fine
            notice = Static(id="session-notice")
            self.mount(notice, after="#session-main")
        from rich.panel import Panel as RichPanel

        notice.update(RichPanel(Text.assemble((self._error, "bold red"), "\n\n", ("Esc", "bold"), " goes back."),
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
        self._messages = {}
        self._turn_details = {}
        self._remember(message.detail)
        tl = self.turns_list
        tl.check = self.check
        turns = message.detail.turns
        tl.unread = {t.number for t in turns} - _read_in_full(message.detail)
        if message.reload and prev_turn is not None:
            key = next((t.turn_id for t in turns if t.number == prev_turn), None)
        else:
            # Start on the interrupted (or open) turn if there is one, else the first — or, for a
            # big session opened one turn at a time, the newest (the one already read).
            key = self._initial_turn(message.detail, self.check).turn_id if turns else None
            initial = message.initial
            if initial is not None:
                number, timeline, rows = initial
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
        tab = self.query_one("#bottom", BottomTabs).get_tab("tab-unknown")
        label = f"Unknown ({unknown})" if unknown else "Unknown"
        if str(tab.label) != label:
            tab.label = label
        self._bottom_panel("unknown", lambda: render_unknown(message.detail, message.unknown))
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

    def _replay_again(self) -> None:
        """The session changed under a replay (a resurrect, a writer appending): its marks, badge and
        report describe a recording that is no longer the store's — replay what is there now."""
        self.workers.cancel_group(self, "session-replay")
        self.replay_running = None
        self.clear_replay()
        self.action_replay()

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
        self.timeline_view.empty_text = "loading…" if self._detail_for(turn) is not None else f"reading turn {turn.number}…"
        self.timeline_view.set_rows([], keep_cursor=False)
        self._show_turn(turn)
        pre = self._prebuilt
        self._prebuilt = None
        if pre is not None and pre[0] == turn.number:
            self.workers.cancel_group(self, "session-timeline")
            self.post_message(pre[1])
            return
        self._build_timeline(turn, self._turn_cursor.get(turn.number))

    def _initial_turn(self, detail: SessionDetail, check: InterruptCheck) -> Turn:
        turns = detail.turns
        default = turns[-1] if detail.partial else turns[0]
        wanted = next((t for t in turns if t.number == self.initial_turn), None)
        if wanted is not None:
            return wanted
        return next((t for t in turns if t.number == check.open_turn), default)

    def _remember(self, detail: SessionDetail) -> None:
        """Keep a loaded detail for the turn(s) it holds in full (a few one-turn windows at most)."""
        if detail.truncated:
            return  # the first rows of a turn only: the timeline worker reads the whole turn
        if not detail.partial:
            self._turn_details = {t.number: detail for t in detail.turns}
            return
        start = detail.window[0] if detail.window else None
        turn = next((t for t in detail.turns if t.turn_id == start), None)
        if turn is None:
            return
        self._turn_details.pop(turn.number, None)
        self._turn_details[turn.number] = detail
        while len(self._turn_details) > TURN_CACHE:
            self._turn_details.pop(next(iter(self._turn_details)))

    def _detail_for(self, turn: Turn) -> SessionDetail | None:
        return self._turn_details.get(turn.number)

    @work(thread=True, exclusive=True, group="session-timeline", exit_on_error=False, description="Building the turn timeline")
    def _build_timeline(self, turn: Turn, restore) -> None:
        try:
            detail = self._detail_for(turn)
            if detail is None:  # a big session: read this turn's rows now
                detail = load_session(self.app.ensure_reader(), self.session_id, turn=turn.number)
            if get_current_worker().is_cancelled:
                return
            turn = detail.turns[turn.number - 1] if turn.number - 1 < len(detail.turns) else turn
            timeline = build_timeline(detail, turn)
            rows = build_rows(turn, timeline)
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
        if restore is _KEEP_CURSOR:  # the rest of a turn whose first rows are on screen
            restore = self.timeline_view.current.key if self.timeline_view.current is not None else None
        self._remember(detail)
        self.turn_detail = detail
        self.timeline = message.timeline
        self._timeline_pending = False
        full = detail.turns[self.turn.number - 1] if self.turn.number - 1 < len(detail.turns) else None
        if full is not None and full is not self.turn and len(full.plan_attempts) != len(self.turn.plan_attempts):
            # a big session's turn list holds headers only (and a first read, its first rows):
            # now that the turn was read in full, its row counts its plans
            self.turn.plan_attempts = list(full.plan_attempts)
            self.turns_list.refresh_rows()
        if self.turn.number in self.turns_list.unread and self.turn.number in _read_in_full(detail):
            self.turns_list.unread.discard(self.turn.number)
            self.turns_list.refresh_rows()
        tv = self.timeline_view
        self._timeline_title()
        tv.set_rows(rows, keep_cursor=False, cursor_key=restore)
        if restore is None or tv.index_of_key(restore) is None:
            tv.move_cursor(0)
        if self._pending_focus is not None and self._pending_focus[0] == self.turn.number:
            target = self._pending_focus[1]
            self._pending_focus = None
            i = tv.find_row(target)
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
        if self.detail is None:
            return
        self._load(reload=True)

    # -- panels ---------------------------------------------------------------------------------

    @on(VirtualList.Highlighted, "#timeline")
    def _on_item(self, message: VirtualList.Highlighted) -> None:
        self._show_item(message.row)

    @on(VirtualList.Selected, "#turns")
    def _on_turn_selected(self, message: VirtualList.Selected) -> None:
        self.timeline_view.focus()

    @on(VirtualList.Selected, "#timeline")
    def _on_item_selected(self, message: VirtualList.Selected) -> None:
        self.query_one("#inspector").focus()

    def _show_item(self, row: TLRow | None) -> None:
        insp = self.query_one("#inspector", Panel)
        if row is None or self.timeline is None:
            insp.show(Text("nothing under the cursor", style="dim italic"))
            return
        m = self.replay
        if row.cell is not None:
            body = render_cell(row.cell, row.statement)
            insp.show(Group(m.describe_cell(row.cell.index), body) if m is not None else body)
            insp.border_title = f"Inspector · cell #{row.cell.index}"
        elif row.statement is not None and row.plan is not None:
            position = self._turn_position(row)
            body = render_statement(row.plan, row.statement, position)
            insp.show(Group(m.describe_stmt(row.plan.flow_key, row.statement.node), body) if m is not None else body)
            insp.border_title = f"Inspector · statement {position}"

    def _turn_position(self, row: TLRow) -> int:
        """The statement's number in its turn: the turn's plans laid end to end, as fork --turn,
        replay and resurrect count (the inspector and the copy toast say it)."""
        plans = self.timeline.plans if self.timeline is not None else []
        return sum(len(p.statements) for p in plans[:row.plan.index]) + row.statement.node

    def _show_turn(self, turn: Turn | None) -> None:
        info = self.query_one("#turn-info", Panel)
        if turn is None or self.detail is None:
            info.show(Text("no turn selected", style="dim italic"))
            self.query_one("#conversation", Panel).show(render_conversation(self.detail.conversation if self.detail else [], scope="all"))
            return
        info.show(render_turn_info(self.detail, turn, self.check, self.app.prices, self.timeline))
        info.border_title = f"Turn {turn.number}"
        self._show_agent_loop(turn)
        self._show_conversation()
        d = self._detail_for(turn)
        if d is not None:
            self._bottom_panel("observations", lambda: render_observations(d.observations(d.turns[turn.number - 1])))
        else:
            self._bottom_panel("observations", lambda: Text(f"reading turn {turn.number}…", style="dim italic"))

    def _show_conversation(self) -> None:
        if self.detail is None:
            return
        conv = self.query_one("#conversation", Panel)
        # The tab keeps one short name (the `c` key's "Conversation"); the scope is the panel's first
        # line, so "(all)" never pushes the Replay tab out of view.
        if self._scope == "all" or self.turn is None:
            scope = Text.assemble(("the whole conversation", "bold"), (" · a: this turn only", "dim"))
            conv.show(Group(scope, render_conversation(self.detail.conversation, scope="all")))
        else:
            msgs = self._messages.get(self.turn.number)
            if msgs is None:
                msgs = self._messages[self.turn.number] = [e.body for e in self.detail.turn_messages(self.turn)]
            scope = Text.assemble((f"turn {self.turn.number}", "bold"), (" · a: the whole conversation", "dim"))
            conv.show(Group(scope, render_conversation(msgs, scope="turn")))

    def _paint_topbar(self) -> None:
        left = Text.assemble(("flux-tui", "bold"), "  ", ("store ", "dim"), (self.app.display_name, "bold"), ("  ›  ", "dim"),
                             (self.session_id, "bold cyan"))
        right = Text()
        d = self.detail
        if self._error is not None:
            right.append("cannot read", style="bold red")
        elif d is None:
            right.append("loading…", style="dim")
        else:
            right.append(d.row.model or "–")
            if d.partial:
                count = f"{d.row.last_seq:,} events"
            else:
                count = f"{len(d.cells)} cell{'s' if len(d.cells) != 1 else ''}"
            right.append(f" · {len(d.turns)} turn{'s' if len(d.turns) != 1 else ''} · {count}", style="dim")
            lin = lineage_of(d.row)
            if lin is not None:
                right.append(f" · {lineage_mark(lin)} ← {lin.source}{lin.detail if lin.kind in ('fork', 'what-if') else ''}",
                             style="magenta")
            if self.check.interrupted is not None:
                right.append(" · ")
                right.append("⚠ interrupted", style="bold yellow")
            elif self.check.recording_pid is not None:
                right.append(" · ")
                right.append("● recording", style="bold cyan")
            if self.replay_running is not None:
                done, total = self.replay_running
                right.append(" · ")
                right.append(f"replaying {done}/{total}…" if total else "replaying…", style="bold cyan")
            elif self.replay is not None:
                right.append(" · ")
                if self.replay.faithful and self.replay.report.tape_end is not None:
                    right.append(" REPLAY ✓ reproduced · ⏸ tape ends ", style="bold reverse green")
                elif self.replay.faithful:
                    right.append(" REPLAY ✓ faithful ", style="bold reverse green")
                else:
                    right.append(" REPLAY ✗ " + ("diverged " if self.replay.report.diverged else "not faithful "),
                                 style="bold reverse red")
        self.query_one(TopBar).set(left, right, squeeze=self.app.display_name, keep_tail=True)

    def _timeline_title(self) -> None:
        if self.turn is None:
            return
        title = f"Plan & cells · turn {self.turn.number}"
        if self.turn_detail is not None and self.turn_detail.truncated:
            title += " · reading the rest of the turn…"
        if self._search is not None:
            query, matches, pos = self._search
            title += f" · /{query} {pos + 1}/{len(matches)}"
        if self.replay is not None:
            ends = self.replay.report.tape_end is not None
            title += " · replay: ✓ served  " + ("⏸ tape ends" if ends else "✗ diverged") + "  ○ unconsumed"
        self.timeline_view.border_title = Text(title)  # Text: the query is the user's, never markup

    # -- layout: responsive, resizable, zoomable -------------------------------------------------

    SPLIT_STEPS = (0, 20, 26, 34, 44, 56)  # widths of the turns column `<` / `>` step through

    def on_resize(self, event) -> None:
        self._size_classes(self.size.width, self.size.height)

    def _size_classes(self, width: int, height: int, *, update: bool = True) -> None:
        # Narrow (80-col) terminals: a slimmer turns column, and the inspector above the tabs rather
        # than beside them, so neither is squeezed to 20 columns. Short ones: a smaller turn panel.
        self.set_class(width < 110, "-narrow", update=update)
        self.set_class(width < 150, "-stacked", update=update)
        self.set_class(height < 32, "-short", update=update)

    def _left_width(self) -> int:
        w = getattr(self.app, "session_split", None)
        if w is not None:
            return w
        return 26 if self.has_class("-narrow") else 34

    def _apply_split(self) -> None:
        w = getattr(self.app, "session_split", None)
        left = self.query_one("#left")
        if w is None:
            left.styles.clear_rule("width")
            left.display = True
            return
        left.display = w > 0
        if w > 0:
            left.styles.width = w

    def action_split(self, delta: int) -> None:
        cur = self._left_width()
        steps = self.SPLIT_STEPS
        idx = min(range(len(steps)), key=lambda i: abs(steps[i] - cur))
        idx = max(0, min(len(steps) - 1, idx + delta))
        max_w = max(0, self.size.width - 40)  # the plan keeps at least 40 columns
        self.app.session_split = min(steps[idx], max_w) if steps[idx] else 0
        self._apply_split()
        if self.app.session_split == 0:
            self.notify("turns hidden — > brings them back; [ / ] still step turns", timeout=3)
            if self.focused is not None and self.query_one("#left") in self.focused.ancestors_with_self:
                self.timeline_view.focus()

    _zoomed: list | None = None

    def action_zoom(self) -> None:
        if self._zoomed is not None:
            for w in self._zoomed:
                w.display = True
            self._zoomed = None
            self._apply_split()
            return
        node = self.focused
        main = self.query_one("#session-main")
        if node is None or main not in node.ancestors:
            return
        hidden = []
        while node is not main and node.parent is not None:
            for sib in node.parent.children:
                if sib is not node and sib.display:
                    sib.display = False
                    hidden.append(sib)
            node = node.parent
        self._zoomed = hidden
        self.notify("z restores the layout", timeout=2)

    # -- search (/ n N), jump (:), copy (y Y) ----------------------------------------------------

    _search: tuple[str, list[tuple[str, int]], int] | None = None  # (query, matches, position)

    def action_search(self) -> None:
        from .ask import AskScreen

        def done(query: str | None) -> None:
            if query is None:
                return
            if not query.strip():
                self.clear_search()
                return
            self.run_search(query)

        self.app.push_screen(AskScreen("Search", "Search the session (this turn's plan, cells and conversation, "
                                       "then the other turns' cells):",
                                       "Enter searches · n/N next/previous match · Esc clears",
                                       value=self._search[0] if self._search else "", placeholder="text"), done)

    def run_search(self, query: str) -> None:
        q = query.casefold()
        matches: list[tuple[str, int]] = []
        for i, r in enumerate(self.timeline_view.rows):
            if r.kind == "statement" and r.statement is not None:
                hay = r.display or r.statement.text
            elif r.kind == "cell" and r.cell is not None:
                rec = r.cell.rec
                hay = "\n".join((rec.op, rec.input_view or "", rec.content, rec.view or ""))
            else:
                continue
            if q in hay.casefold():
                matches.append(("row", i))
        for j, line in enumerate(self.query_one("#conversation", Panel).plain_text.splitlines()):
            if q in line.casefold():
                matches.append(("conv", j))
        if self.detail is not None and self.turn is not None:
            # the other turns' recorded calls (op, input, content): n / N go there too
            for c in self.detail.cells:
                if c.turn_number == self.turn.number:
                    continue
                rec = c.rec
                if q in "\n".join((rec.op, rec.input_view or "", rec.content, rec.view or "")).casefold():
                    matches.append(("cell", c.index))
        if not matches:
            self._search = None
            self._timeline_title()
            where = f"turn {self.turn.number}" if self.turn is not None else "this session"
            self.notify(f"no match for “{query}” in {where} — / searches the turn shown", timeout=3)
            return
        self._search = (query, matches, -1)
        self._step_search(1)

    def _step_search(self, delta: int) -> None:
        assert self._search is not None
        query, matches, pos = self._search
        pos = (pos + delta) % len(matches)
        self._search = (query, matches, pos)
        kind, at = matches[pos]
        if kind == "row":
            self.timeline_view.move_cursor(at)
            self.timeline_view.focus()
        elif kind == "cell":
            self.jump_to(f"c{at}")  # another turn's cell: that turn opens on it (its rows are other rows: / again there)
        else:
            tabs = self.query_one("#bottom", BottomTabs)
            tabs.active = "tab-conversation"
            conv = self.query_one("#conversation", Panel)
            conv.scroll_to(y=max(0, at - 1), animate=False)
            conv.focus()
        self._timeline_title()
        where = {"conv": " (conversation)", "cell": f" (cell #{at}, in another turn — / searches again there)"}.get(kind, "")
        self.notify(f"“{query}”: match {pos + 1} of {len(matches)}{where}", timeout=1.5)

    def clear_search(self) -> None:
        self._search = None
        self._timeline_title()

    def action_jump(self) -> None:
        from .ask import AskScreen

        def done(text: str | None) -> None:
            if text:
                self.jump_to(text)

        self.app.push_screen(AskScreen("Jump", "Jump to:", "3 or t3 = turn 3 · s2 = statement 2 of the turn · c7 = cell #7 · "
                                       "g / G first / last", placeholder="t3, s2, c7"), done)

    def jump_to(self, text: str) -> None:
        import re

        m = re.fullmatch(r"\s*(t|turn|s|stmt|statement|c|cell|#)?\s*(\d+)\s*", text, re.IGNORECASE)
        if m is None:
            self.notify(f"cannot read “{text}” — type 3 (turn), s2 (statement) or c7 (cell)", severity="warning",
                        timeout=3)
            return
        kind = (m.group(1) or "t").lower()[0]
        n = int(m.group(2))
        tl, tv = self.turns_list, self.timeline_view
        if kind == "t":
            idx = next((i for i, t in enumerate(tl.rows) if t.number == n), None)
            if idx is None:
                self.notify(f"no turn {n} — this session has {tl.row_count}", severity="warning", timeout=3)
                return
            tl.move_cursor(idx)
            tv.focus()
        elif kind == "s":
            # Statement N of the turn, its plans laid end to end (the number the inspector, replay,
            # resurrect and fork --turn use): the turn's N-th statement, counting from 0.
            rows = tv.rows
            stmts = [i for i, r in enumerate(rows) if r.kind == "statement" and r.statement is not None]
            idx = stmts[n] if n < len(stmts) else None
            if idx is None:
                self.notify(f"no statement {n} in this turn", severity="warning", timeout=3)
                return
            tv.move_cursor(idx)
            tv.focus()
        else:
            d = self.detail
            if d is None or not (0 <= n < len(d.cells)):
                self.notify(f"no cell #{n} — this session has {len(d.cells) if d else 0} cell(s)", severity="warning",
                            timeout=3)
                return
            turn_no = d.cells[n].turn_number
            if self.turn is not None and turn_no == self.turn.number:
                idx = tv.find_row(("cell", n))
                if idx is not None:
                    tv.move_cursor(idx)
                    tv.focus()
                    return
            idx = next((i for i, t in enumerate(tl.rows) if t.number == turn_no), None)
            if idx is None:
                self.notify(f"cell #{n} belongs to no turn", severity="warning", timeout=3)
                return
            self._pending_focus = (turn_no, ("cell", n))
            tl.move_cursor(idx)
            tv.focus()

    def _copy_target(self, want_hash: bool) -> tuple[str, str] | None:
        """(text, what) for y / Y from the focused panel and the item under the cursor."""
        focused = self.focused
        fid = focused.id if focused is not None else None
        if fid == "turns":
            t = self.turns_list.current
            return (t.user_input, f"turn {t.number}'s input") if t is not None and not want_hash else None
        if fid in ("conversation", "observations", "unknown", "replay") and not want_hash:
            return self.query_one(f"#{fid}", Panel).plain_text, f"the {fid} panel"
        row = self.timeline_view.current
        if row is None:
            return None
        if row.cell is not None:
            rec = row.cell.rec
            if want_hash:
                return rec.input_hash, f"cell #{row.cell.index}'s input_hash"
            if fid == "inspector":  # what the inspector shows, as shown
                return self.query_one("#inspector", Panel).plain_text, f"the inspector's cell #{row.cell.index}"
            return rec.content, f"cell #{row.cell.index}'s content"
        if row.statement is not None:
            if want_hash:
                return row.statement.stmt_hash, f"statement {self._turn_position(row)}'s stmt_hash"
            if fid == "inspector":
                return self.query_one("#inspector", Panel).plain_text, f"the inspector's statement {self._turn_position(row)}"
            return row.display or display_statement_text(row.statement.text), f"statement {self._turn_position(row)}'s source"
        return None

    def _copy(self, want_hash: bool) -> None:
        target = self._copy_target(want_hash)
        if target is None or not target[0]:
            self.notify("nothing to copy here — move the cursor to a statement or a cell", timeout=2)
            return
        text, what = target
        self.app.copy_to_clipboard(text)
        self.notify(f"copied {what} ({len(text):,} chars)", timeout=2)

    def action_copy(self) -> None:
        self._copy(False)

    def action_copy_hash(self) -> None:
        self._copy(True)

    # -- actions --------------------------------------------------------------------------------

    def action_back(self) -> None:
        if self._zoomed is not None:
            self.action_zoom()
            return
        if self._search is not None:
            self.clear_search()
            return
        if self.replay is not None:
            self.clear_replay()
            return
        self.app.pop_screen()

    # -- replay ---------------------------------------------------------------------------------

    def action_replay(self) -> None:
        if self.detail is None or self.replay_running is not None:
            return
        self.replay_running = (0, 0)
        self._paint_topbar()
        self._refresh_bindings()
        self._run_replay(self.detail.row.id)

    @work(thread=True, exclusive=True, group="session-replay", exit_on_error=False, description="Replaying the session")
    def _run_replay(self, session_id: str) -> None:
        from flux.timemachine.replay import replay_detail

        worker = get_current_worker()
        last = [0.0]

        def progress(done: int, total: int) -> None:
            now = time.monotonic()
            if done == total or now - last[0] > 0.05:
                last[0] = now
                self.post_message(ReplayProgress(session_id, done, total))

        t0 = time.perf_counter()
        try:
            # The whole session (turns, plan attempts and the run trace), never a one-turn window.
            detail = load_session(self.app.ensure_reader(), session_id, kinds=TRACE_KINDS)
            report = replay_detail(detail, on_progress=progress)
            focus = divergence_target(report, detail)
        except (StoreError, SessionNotFound, FluxError) as e:
            self.post_message(ReplayFailed(session_id, str(e)))
            return
        if not worker.is_cancelled:
            self.post_message(ReplayFinished(session_id, report, focus, time.perf_counter() - t0))

    @on(ReplayProgress)
    def _on_replay_progress(self, message: ReplayProgress) -> None:
        if self.replay_running is not None:
            self.replay_running = (message.done, message.total)
            self._paint_topbar()

    @on(ReplayFailed)
    def _on_replay_failed(self, message: ReplayFailed) -> None:
        self.replay_running = None
        self._paint_topbar()
        self._refresh_bindings()
        self.notify(self.app.mask_path(message.error), title="Cannot replay", severity="error", timeout=8)

    @on(ReplayFinished)
    def _on_replay_finished(self, message: ReplayFinished) -> None:
        self.replay_running = None
        marks = marks_from_report(message.session_id, message.report, message.seconds)
        self.replay = marks
        self.timeline_view.set_replay(marks)
        self._timeline_title()
        self._bottom_panel("replay", lambda: render_report(marks))
        tabs = self.query_one("#bottom", BottomTabs)
        tabs.active = "tab-replay"
        tabs.get_tab("tab-replay").label = "Replay ✓" if marks.faithful else "Replay ✗"
        self._paint_topbar()
        self._refresh_bindings()
        tv = self.timeline_view
        self._show_item(tv.current)
        if message.focus is not None:
            turn_no, target = message.focus
            if self.turn is not None and self.turn.number == turn_no and self.timeline is not None:
                i = tv.find_row(target)
                if i is not None:
                    tv.move_cursor(i)
            else:
                self._pending_focus = message.focus
                tl = self.turns_list
                idx = next((i for i, t in enumerate(tl.rows) if t.number == turn_no), None)
                if idx is not None:
                    tl.move_cursor(idx)
            tv.focus()

    def clear_replay(self) -> None:
        self.replay = None
        self.timeline_view.set_replay(None)
        self._timeline_title()
        self._bottom_panel("replay", _NO_REPLAY)
        tabs = self.query_one("#bottom", BottomTabs)
        tabs.get_tab("tab-replay").label = "Replay"
        if tabs.active == "tab-replay":
            tabs.active = "tab-conversation"
        self._paint_topbar()
        self._show_item(self.timeline_view.current)
        self._refresh_bindings()

    # -- diff -----------------------------------------------------------------------------------

    def action_diff(self) -> None:
        if self.detail is None:
            return
        from .diff import ask_and_diff

        ask_and_diff(self.app, self.detail.row.id, self.detail.row.correlation_id)

    def action_fork(self) -> None:
        from .fork import start_fork

        start_fork(self)

    def action_save_case(self) -> None:
        from .cases import save_case_here

        save_case_here(self)

    def action_what_if(self) -> None:
        from .whatif import start_what_if

        start_what_if(self)

    def action_resurrect(self) -> None:
        from .resurrect import ResurrectScreen

        if self.detail is None:
            return
        if self.check.interrupted is None:
            why = f" — {self.check.reason}" if self.check.reason else ""
            self.notify(f"{self.detail.row.id} has no interrupted turn{why}; R resurrects a turn that was killed "
                        "mid-plan (marked ⚠ interrupted)", timeout=4)
            return
        self.app.push_screen(ResurrectScreen(self.detail.row.id, self.turn.number if self.turn else None))

    def _step_turn(self, delta: int) -> None:
        tl = self.turns_list
        if tl.row_count:
            tl.move_cursor(tl.cursor + delta)

    def action_next_turn(self) -> None:
        self._step_turn(1)

    def action_prev_turn(self) -> None:
        self._step_turn(-1)

    def _jump_error(self, forward: bool) -> None:
        if self.timeline is None:
            return
        positions = self.timeline.error_positions()
        tv = self.timeline_view
        if not positions:
            self.notify("no errors in this turn", timeout=2)
            return
        cur = tv.current.stop if tv.current is not None else -1
        if forward:
            nxt = next((p for p in positions if p > cur), None)
            wrapped = nxt is None
            nxt = positions[0] if nxt is None else nxt
        else:
            nxt = next((p for p in reversed(positions) if p < cur), None)
            wrapped = nxt is None
            nxt = positions[-1] if nxt is None else nxt
        if nxt == cur:
            self.notify("no other error in this turn — this is the only one", timeout=2)
            return
        row = tv.stop_row(nxt)
        if row is not None:
            tv.move_cursor(row)
            tv.focus()
        if wrapped and len(positions) > 1:
            self.notify("wrapped around", timeout=1.5)

    def action_next_error(self) -> None:
        if self._search is not None:
            self._step_search(1)  # while a search is active n/N step its matches (Esc ends it)
        else:
            self._jump_error(True)

    def action_prev_error(self) -> None:
        if self._search is not None:
            self._step_search(-1)
        else:
            self._jump_error(False)

    # -- the bottom panel's tabs -----------------------------------------------------------------

    # Every tab but the conversation gets its panel when it is first shown: four scrolling panels
    # fewer to build, style and lay out while the screen opens. What such a panel is given before
    # that (a turn's observations, the unknown events, the replay report, the loop program) is kept
    # as a function — rendered only if the tab is ever shown — and shown then.
    _LAZY_PANELS = {tab: panel for tab, _label, panel in _BOTTOM_TABS if tab != "tab-conversation"}

    def _bottom_panel(self, panel_id: str, content: "Callable[[], RenderableType]") -> None:
        """Show ``content()`` in the bottom panel ``panel_id``: now if the panel exists, else when
        its tab is first shown."""
        try:
            panel = self.query_one(f"#{panel_id}", Panel)
        except NoMatches:
            self._held_panels[panel_id] = content
            return
        panel.show(content())

    @on(BottomTabs.TabActivated, "#bottom")
    def _on_bottom_tab(self, event: BottomTabs.TabActivated) -> None:
        panel_id = self._LAZY_PANELS.get(event.tab_id)
        if panel_id is None or event.tabs.query(f"#{panel_id}"):
            return
        content = self._held_panels.pop(panel_id, None)
        event.tabs.add_panel(Panel(panel_id, content() if content is not None else "", id=panel_id))

    def action_observations(self) -> None:
        tabs = self.query_one("#bottom", BottomTabs)
        tabs.active = "tab-conversation" if tabs.active == "tab-observations" else "tab-observations"

    def _show_agent_loop(self, turn: Turn) -> None:
        """The "Loop" tab exists only for turns that record an agent-loop binding."""
        loop = self._agent_loops.get(self.app.store_dir, turn.loop_binding)
        tabs = self.query_one("#bottom", BottomTabs)
        if loop is None:
            if tabs.active == "tab-loop":
                tabs.active = "tab-conversation"
            tabs.hide_tab("tab-loop")
            return
        tabs.show_tab("tab-loop")
        self._bottom_panel("agent-loop", lambda: render_agent_loop(loop))

    def action_agent_loop(self) -> None:
        if self.turn is None or self._agent_loops.get(self.app.store_dir, self.turn.loop_binding) is None:
            self.notify("this turn records no agent-loop program", severity="information")
            return
        tabs = self.query_one("#bottom", BottomTabs)
        tabs.active = "tab-conversation" if tabs.active == "tab-loop" else "tab-loop"

    def action_conversation(self) -> None:
        self.query_one("#bottom", BottomTabs).active = "tab-conversation"

    def action_conversation_scope(self) -> None:
        self._scope = "all" if self._scope == "turn" else "turn"
        self.query_one("#bottom", BottomTabs).active = "tab-conversation"
        self._show_conversation()

    def action_unknown_events(self) -> None:
        tabs = self.query_one("#bottom", BottomTabs)
        tabs.active = "tab-conversation" if tabs.active == "tab-unknown" else "tab-unknown"

    def action_lineage(self) -> None:
        from .lineage import LineageScreen

        self.app.push_screen(LineageScreen(self.session_id))

    def action_source(self) -> None:
        d = self.detail
        if d is None:
            return
        if not d.row.correlation_id:
            self.notify(f"{d.row.id} is a root session — it was not forked, branched or spawned from another one",
                        timeout=3)
            return
        from .lineage import open_source

        open_source(self.app, d.row.correlation_id)

    def action_focus_panel(self, which: str) -> None:
        target = {
            "turns": "#turns", "timeline": "#timeline", "inspector": "#inspector",
        }.get(which)
        if target is not None:
            self.query_one(target).focus()
            return
        tabs = self.query_one("#bottom", BottomTabs)
        pane = {"tab-conversation": "#conversation", "tab-observations": "#observations", "tab-unknown": "#unknown"}
        self.query_one(pane.get(tabs.active or "tab-conversation", "#conversation")).focus()

    _DYNAMIC_ACTIONS = ("source", "next_error", "prev_error", "replay", "diff", "fork", "what_if", "resurrect")

    def footer_hidden(self, action: str) -> bool:
        """Keys the footer leaves out although they work (they only say why they cannot act)."""
        if action == "resurrect":
            return self.check.interrupted is None
        return action == "source" and (self.detail is None or not self.detail.row.correlation_id)

    def _refresh_bindings(self) -> None:
        """Refresh the footer only when an action's availability changed: every refresh recomposes
        the footer (a dozen widgets through the CSS engine), which a big session's first paint feels."""
        sig = tuple(self.check_action(a, ()) for a in self._DYNAMIC_ACTIONS) + (self.footer_hidden("source"),
                                                                              self.footer_hidden("resurrect"))
        if sig != getattr(self, "_bindings_sig", None):
            self._bindings_sig = sig
            self.refresh_bindings()

    _NEEDS_SESSION = frozenset({"prev_turn", "next_turn", "next_error", "prev_error", "observations", "conversation",
                                "conversation_scope", "unknown_events", "lineage", "source", "replay", "diff", "search",
                                "jump", "copy", "copy_hash", "split", "zoom", "focus_panel"})

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self._error is not None and action in self._NEEDS_SESSION:
            return False  # the session could not be read: offer only Back / Help / Quit
        # While the session or a turn is still being read, the keys that will act once it is are
        # shown disabled (None), not hidden (False): the footer keeps its keys and only lights them
        # up when the rows arrive — a recompose of the footer (a dozen widgets) then sat right on
        # the first paint's path, and the keys jumped.
        if action == "source":
            return self.detail is not None
        if action in ("next_error", "prev_error", "fork", "what_if"):
            return True if self.timeline is not None else (None if self._timeline_pending else False)
        if action in ("replay", "diff"):
            if self.detail is None:
                return None
            return self.replay_running is None
        if action == "resurrect":
            return self.detail is not None  # not interrupted: R says why (the footer hides it)
        return True
