"""The base of the write dialogs that re-plan as the user types (fork, what-if): every change
forgets the preview and checks the form at once; after a short pause a worker plans the write
(nothing is written) and only the newest change's answer is shown."""

from __future__ import annotations

from typing import Any, Callable

from rich.text import Text
from textual import on
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Input, TextArea
from textual.worker import get_current_worker

from flux.errors import FluxError, StoreError

from .write_dialog import WriteDialog

__all__ = ["PreviewDialog", "Planned", "DEBOUNCE_S"]

DEBOUNCE_S = 0.25


class Planned(Message):
    """The planning worker's answer to change number ``serial``: a ``preview``, or the ``error``."""

    def __init__(self, serial: int, preview: Any = None, error: str | None = None) -> None:
        super().__init__()
        self.serial, self.preview, self.error = serial, preview, error


class PreviewDialog(WriteDialog):
    """Subclasses say what the form gets wrong (:meth:`local_problem`), what the planner needs
    (:meth:`plan_request`, read when the pause ends), plan it in a worker (:meth:`plan`, which calls
    :meth:`post_plan`) and draw the result (:meth:`show_state`). They set ``_ready`` once the form
    is filled in; until then no change plans anything."""

    preview: Any = None
    problem: str | None = "reading the session…"

    def __init__(self) -> None:
        super().__init__()
        self._serial = 0
        self._timer: Timer | None = None
        self._ready = False

    # -- the subclass's part --------------------------------------------------------------------

    def local_problem(self) -> str | None:
        """What the dialog can say at once, before the engine's check (one line), else None."""
        return None

    def plan_request(self) -> tuple:
        """The arguments :meth:`plan` takes after the change's serial number."""
        return ()

    def plan(self, serial: int, *request: Any) -> None:
        """Plan the write in a worker and :meth:`post_plan` the answer."""
        raise NotImplementedError

    def show_state(self) -> None:
        """Draw ``problem`` / ``preview``: the form's status line, the preview panel, the run button."""

    # -- the shared part ------------------------------------------------------------------------

    @on(TextArea.Changed)
    @on(Input.Changed)
    def _on_edit(self, event) -> None:
        self.changed()

    def changed(self) -> None:
        """The form changed: forget the preview, check the form, and plan again after a pause."""
        if not self._ready or self.running:
            return
        self._serial += 1
        self.preview = None
        self.problem = self.local_problem()
        self.show_state()
        if self.problem is not None:
            return
        if self._timer is not None:
            self._timer.stop()
        serial = self._serial
        self._timer = self.set_timer(DEBOUNCE_S, lambda: self.plan(serial, *self.plan_request()))

    def post_plan(self, serial: int, compute: Callable[[], Any]) -> None:
        """From the planning worker: post ``compute()`` (the preview) or its one-line error as the
        answer to change ``serial`` — nothing when the worker was cancelled meanwhile."""
        try:
            preview = compute()
        except (StoreError, FluxError) as e:
            self.post_message(Planned(serial, error=self.app.mask_path(str(e))))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(Planned(serial, preview))

    def problem_or_checking(self, *, noun: str, verb: str, shown_above: bool) -> Text | None:
        """What the preview panel says while there is no preview to show: the problem (or that it
        is the one the form shows above), else that the check runs; None once there is a preview."""
        if self.problem is not None:
            if shown_above:
                return Text(f"✗ nothing can be {verb} until the problem above is fixed", style="red")
            return Text.assemble(("✗ ", "bold red"), (self.problem, "red"),
                                 (f"\nnothing can be {verb} until this is fixed", "dim"))
        if self.preview is None:
            return Text(f"checking what the {noun} would do…", style="dim italic")
        return None

    @on(Planned)
    def _on_planned(self, message: Planned) -> None:
        if message.serial != self._serial:
            return  # an older text's answer
        self.preview = message.preview
        self.problem = message.error
        self.show_state()
