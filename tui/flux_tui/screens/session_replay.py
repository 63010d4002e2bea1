"""Replaying the session on its screen (``r``): the hermetic replay in a worker with its progress in
the header, then its marks on the plan, the inspector and the Replay tab, the cursor on the first
divergence; the marks clear with Esc and the replay runs again when the session changes under it."""

from __future__ import annotations

import time

from rich.text import Text
from textual import on, work
from textual.screen import Screen
from textual.worker import get_current_worker

from flux.errors import FluxError, SessionNotFound, StoreError
from flux.model.session import TRACE_KINDS, load_session
from flux.timemachine.replay import replay_detail

from ..messages import ReplayFailed, ReplayFinished, ReplayProgress
from ..replay_marks import ReplayMarks, divergence_target, marks_from_report, render_report

__all__ = ["SessionReplay", "no_replay"]

def no_replay() -> Text:
    """The Replay tab before any replay."""
    return Text("no replay yet — r replays the session from its cassette", style="dim italic")


class SessionReplay(Screen):
    """The session screen's replay: ``replay_running`` (done, total) while it runs, ``replay`` (the
    marks) once shown; the screen provides ``detail``, ``turn``, ``timeline``, ``timeline_view``,
    ``tabs`` and its painters."""

    replay: ReplayMarks | None = None
    replay_running: tuple[int, int] | None = None

    def action_replay(self) -> None:
        if self.detail is None or self.replay_running is not None:
            return
        self.replay_running = (0, 0)
        self._paint_topbar()
        self._refresh_bindings()
        self._run_replay(self.detail.row.id)

    @work(thread=True, exclusive=True, group="session-replay", exit_on_error=False, description="Replaying the session")
    def _run_replay(self, session_id: str) -> None:
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
        self._show_replay(marks)
        tv = self.timeline_view
        if message.focus is not None:
            turn_no, target = message.focus
            if self.turn is not None and self.turn.number == turn_no and self.timeline is not None:
                i = tv.find_row(target)
                if i is not None:
                    tv.move_cursor(i)
            else:
                self._pending_focus = message.focus
                self._select_turn(turn_no)
            tv.focus()

    def _show_replay(self, marks: ReplayMarks | None) -> None:
        """The marks of a replay (None: cleared) on the plan, the inspector, the Replay tab and the header."""
        self.replay = marks
        self.timeline_view.set_replay(marks)
        self._timeline_title()
        tabs = self.tabs
        if marks is not None:
            tabs.show_in("replay", lambda: render_report(marks))
            tabs.active = "tab-replay"
            tabs.set_label("tab-replay", "Replay ✓" if marks.faithful else "Replay ✗")
        else:
            tabs.show_in("replay", no_replay)
            tabs.set_label("tab-replay", "Replay")
            if tabs.active == "tab-replay":
                tabs.active = "tab-conversation"
        self._paint_topbar()
        self._refresh_bindings()
        self._show_item(self.timeline_view.current)

    def clear_replay(self) -> None:
        self._show_replay(None)

    def _replay_again(self) -> None:
        """The session changed under a replay (a resurrect, a writer appending): its marks, badge and
        report describe a recording that is no longer the store's — replay what is there now."""
        self.workers.cancel_group(self, "session-replay")
        self.replay_running = None
        self.clear_replay()
        self.action_replay()
