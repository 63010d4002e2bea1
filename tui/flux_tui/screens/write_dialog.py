"""The base of the time machine's dialogs that write (fork, what-if, resurrect): the side-effect
gate before anything live, the write in a worker thread through the app's store writer, its result
posted back as :class:`WriteDone`, and a close that refuses while the write is under way."""

from __future__ import annotations

from typing import Any, Callable

from textual.message import Message
from textual.screen import ModalScreen

from flux.errors import FluxError, StoreError

from ..messages import ReportsWorkerFailures
from ..writes import run_write
from .buttons import ButtonActions
from .gate import GateScreen

__all__ = ["WriteDialog", "WriteDone"]


class WriteDone(Message):
    """The write finished: its ``result`` (and what the dialog computed from it, ``extra``), or the
    one-line ``error`` that stopped it before anything was written."""

    def __init__(self, result: Any = None, error: str | None = None, extra: Any = None) -> None:
        super().__init__()
        self.result, self.error, self.extra = result, error, extra


class WriteDialog(ButtonActions, ReportsWorkerFailures, ModalScreen):
    """Subclasses name what they write: ``BUSY`` ("the fork is being written"), ``REFUSED`` ("not
    forked"), ``RECORDED_IN`` ("the new fork session"), which buttons run which action
(``BUTTON_ACTIONS``) — and set ``running`` while a write runs."""

    BUSY = "the write is under way"
    REFUSED = "nothing written"
    RECORDED_IN = "the session"
    running: Any = None

    def through_the_gate(self, preview, start: Callable[[bool], None]) -> None:
        """``start(live=False)`` at once when ``preview`` is offline; else the gate first, and
        ``start(live=True)`` only after its ``y``."""
        if preview.offline:
            start(False)
            return

        def answered(yes: bool | None) -> None:
            if yes:
                start(True)
            else:
                self.notify(f"{self.REFUSED}: nothing ran, nothing was written", timeout=3)

        self.app.push_screen(GateScreen(preview, recorded_in=self.RECORDED_IN), answered)

    def write(self, action: Callable[[Any], Any], *, workspace: str | None, live: bool, model: str | None = None,
              then: Callable[[Any], Any] | None = None) -> None:
        """Run ``action(client)`` through the app's writer (call it from the dialog's worker) and
        post :class:`WriteDone`; ``then(result)`` computes the dialog's ``extra`` (a diff, …)."""
        try:
            result = run_write(self.app, action, workspace=workspace, live=live, model=model)
            extra = then(result) if then is not None else None
        except (StoreError, FluxError) as e:
            self.post_message(WriteDone(error=self.app.mask_path(str(e))))
            return
        self.post_message(WriteDone(result, extra=extra))

    def closing_value(self) -> Any:
        """What the dialog dismisses with when it is closed."""
        return None

    def action_cancel(self) -> None:
        if self.running:
            self.notify(f"{self.BUSY} — wait for it to finish", severity="warning", timeout=3)
            return
        self.dismiss(self.closing_value())
