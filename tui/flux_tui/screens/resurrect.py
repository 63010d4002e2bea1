"""Resurrect the interrupted turn (``R``) from the crash point, as flux does: the plan first — where
the turn stopped, what fast-forwards, which cells the crash tail serves, which op (if any) has no
cell and runs again — then ``y`` (through the side-effect gate when something would run live), then
the same panel becomes the report (outcome, fast-forwarded / served / live counts, divergence) and
the session's markers update in place. Resurrect writes to the same session; nothing is written
before ``y``.
"""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Input, Label, Static
from textual.worker import get_current_worker

from flux.errors import FluxError, StoreError

from ..fmt import failure_line
from ..keys import key_table
from .gate import EFFECT_STYLES, relabel
from .write_dialog import WriteDialog, WriteDone

__all__ = ["ResurrectScreen", "report_text", "plan_text"]


class _Planned(Message):
    def __init__(self, plan=None, error: str | None = None, nothing: bool = False) -> None:
        super().__init__()
        self.plan, self.error, self.nothing = plan, error, nothing


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def plan_text(plan) -> Text:
    """What a resurrect will do, from the engine's plan and preview: where the turn stopped, then
    one sentence — what is fast-forwarded, what tape serves, what runs live and why."""
    p = plan.preview
    t = Text()
    if p.notes:
        t.append(p.notes[0] + "\n", style="bold")  # "interrupted at statement K of N of the turn …"
    t.append("Resurrect finishes it from the turn's own plan, with no model call: ")
    t.append(f"{_count(p.prefix_statements, 'statement')} fast-forwarded, ", style="green")
    t.append(f"{_count(p.tail_served, 'cell')} served from tape", style="green")
    if not p.ops:
        t.append(" — nothing runs live, no side effect.\n", style="green")
    else:
        t.append(f", and {_count(len(p.ops), 'op')} run live because the recording holds no result for them: ")
        for i, o in enumerate(p.ops):
            if i:
                t.append(" · ", style="dim")
            t.append(o.op, style="bold yellow")
            why = "in flight when the process died" if o.why == "in flight" else "not reached before the kill"
            t.append(f" ({o.effect}; {why})", style=EFFECT_STYLES.get(o.effect, ""))
        t.append(".\n")
    if plan.unanchored_cells:
        t.append(f"the turn wrote no statement boundary: {plan.unanchored_cells} cell(s) are matched to the resumed "
                 "dispatches by step and input\n", style="dim")
    return t


def report_text(report) -> Text:
    """The report the resurrect returned (flux's fields, plus the unanchored cells served), as one
    sentence under its outcome."""
    t = Text()
    ok = report.outcome == "resurrected" and not report.diverged
    t.append(f"{report.outcome}", style="bold green" if ok else "bold red")
    t.append(f" · session {report.session} · turn {report.turn}\n", style="")
    t.append(f"{_count(report.statements_fast_forwarded, 'statement')} fast-forwarded, ", style="green")
    t.append(f"{_count(report.ops_served_from_cassette, 'op')} served from the cassette", style="green")
    if report.unanchored_served:
        t.append(f" ({report.unanchored_served} unanchored)", style="green")
    live = report.ops_run_live
    if live:
        names = f" ({', '.join(report.live_ops)})" if report.live_ops else ""
        t.append(f" and {live} run live{names}", style="bold yellow")
        t.append(" — the recording held no result for them; no model call.\n")
    else:
        t.append(" — nothing ran live; no model call.\n", style="green")
    if report.diverged:
        t.append("diverged: ", style="bold red")
        t.append(report.diverged + "\n", style="red")
    if report.halt:
        t.append(f"halted: {report.halt.get('error', '')}\n", style="red")
    if report.answer:
        t.append("answer  ", style="dim")
        t.append(report.answer.strip()[:400])
    return t


class ResurrectScreen(WriteDialog):
    """The resurrect plan, then (after ``y``) its report."""

    HELP_TOPIC = "resurrect"
    BUSY, REFUSED, RECORDED_IN = "the turn is being resurrected", "not resurrected", "the same session"
    CSS_PATH = "dialog.tcss"
    BUTTON_ACTIONS = {"resurrect-yes": "confirm", "resurrect-no": "cancel"}

    BINDINGS = key_table("resurrect", """
        # keys    id       action    label
        y         confirm  confirm   Resurrect
            Finish the interrupted turn now (through the side-effect gate if anything runs live)
        n,escape  close    cancel    Close
            Close: before y nothing is written
        f1        help     app.help  Help
            Explain this dialog and list its keys
    """)

    def __init__(self, session_id: str, turn: int | None = None) -> None:
        super().__init__()
        self.session_id = session_id
        self.cursor_turn = turn
        self.plan = None
        self.report = None
        self.running = False
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        from ..writes import default_workspace

        with Vertical(id="resurrect-box", classes="tm-box"):
            yield Static(Text("reading the interrupted turn…", style="dim italic"), id="resurrect-body")
            with Horizontal(classes="tm-row", id="resurrect-ws-row"):
                yield Label("workspace ", classes="tm-label")
                yield Input(default_workspace(self.app.store_dir), id="resurrect-workspace", compact=True,
                            placeholder="directory an op that runs again acts on")
            with Horizontal(classes="tm-buttons"):
                yield Button("y  Resurrect", id="resurrect-yes", variant="primary", compact=True, disabled=True)
                yield Button("n  Cancel", id="resurrect-no", compact=True)

    def on_mount(self) -> None:
        box = self.query_one("#resurrect-box")
        box.border_title = f"Resurrect {self.session_id}"
        box.border_subtitle = "y resurrect · n/Esc cancel · Tab workspace"
        self.query_one("#resurrect-no", Button).focus()
        self._plan(self.query_one("#resurrect-workspace", Input).value)

    @on(Input.Submitted, "#resurrect-workspace")
    def _workspace(self, event: Input.Submitted) -> None:
        if self.report is None and not self.running:
            self._plan(event.value)

    @work(thread=True, exclusive=True, group="resurrect-plan", exit_on_error=False, description="Reading the interrupted turn")
    def _plan(self, workspace: str) -> None:
        from flux.timemachine import prepare_resurrect

        from ..writes import op_catalog, refuse_unimplemented

        try:
            reader = self.app.ensure_reader()
            catalog = op_catalog(workspace, self.app.store_dir)
            plan = prepare_resurrect(reader, self.session_id, catalog=catalog, workspace=workspace)
            if plan is not None:
                refuse_unimplemented(plan.preview, catalog)
        except (StoreError, FluxError) as e:
            self.post_message(_Planned(error=self.app.mask_path(str(e))))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(_Planned(plan, nothing=plan is None))

    @on(_Planned)
    def _on_planned(self, message: _Planned) -> None:
        body = self.query_one("#resurrect-body", Static)
        yes = self.query_one("#resurrect-yes", Button)
        self.plan = message.plan
        self.error = message.error
        if message.error is not None:
            body.update(failure_line(message.error))
            yes.disabled = True
        elif message.nothing:
            body.update(Text(f"nothing to resurrect: no turn of {self.session_id} is interrupted", style="dim"))
            yes.disabled = True
        else:
            p = message.plan
            box = self.query_one("#resurrect-box")
            box.border_title = f"Resurrect {p.session} · turn {p.turn}"
            t = Text()
            if self.cursor_turn is not None and self.cursor_turn != p.turn:
                t.append(f"(turn {p.turn} is the interrupted one; the cursor is on turn {self.cursor_turn})\n", style="dim")
            t.append_text(plan_text(p))
            t.append("\nwrites to ", style="dim")
            t.append(p.session, style="bold")
            t.append(": the turn's remaining events, turn_ended and the answer", style="dim")
            body.update(t)
            yes.disabled = False
            relabel(yes, "y  Resurrect" if p.preview.offline else "y  Resurrect (runs live)…")
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "confirm":
            return self.plan is not None and self.report is None and not self.running
        return True

    def action_confirm(self) -> None:
        if not self.check_action("confirm", ()):
            return
        preview = self.plan.preview
        workspace = self.query_one("#resurrect-workspace", Input).value
        self.through_the_gate(preview, lambda live: self._start(preview, workspace, live=live))

    def _start(self, preview, workspace: str, *, live: bool) -> None:
        self.running = True
        self.query_one("#resurrect-yes", Button).disabled = True
        self.query_one("#resurrect-body", Static).update(Text("resurrecting…", style="bold cyan"))
        self.refresh_bindings()
        self._run(preview, workspace, live)

    @work(thread=True, exclusive=True, group="resurrect-run", exit_on_error=False, description="Resurrecting the turn")
    def _run(self, confirmed, workspace: str, live: bool) -> None:
        from flux.timemachine import resurrect_session

        from ..writes import within_gate

        def resurrect(client):
            return resurrect_session(client, self.session_id, confirm=within_gate(confirmed, live))

        self.write(resurrect, workspace=workspace, live=live)

    @on(WriteDone)
    def _on_done(self, message: WriteDone) -> None:
        self.running = False
        body = self.query_one("#resurrect-body", Static)
        self.query_one("#resurrect-ws-row").display = False
        yes = self.query_one("#resurrect-yes", Button)
        yes.display = False
        no = self.query_one("#resurrect-no", Button)
        no.label = "Close"
        no.focus()
        self.query_one("#resurrect-box").border_subtitle = "Esc closes"
        if message.error is not None:
            body.update(failure_line(message.error, "not resurrected"))
        elif message.result is None:
            body.update(Text("nothing was interrupted any more (another process finished the turn)", style="dim"))
        else:
            self.report = message.result
            self.query_one("#resurrect-box").border_title = f"Resurrected {message.result.session} · turn {message.result.turn}"
            body.update(report_text(message.result))
            self.app.check_store_now()  # the session screen re-reads: the turn's markers update
        self.refresh_bindings()

    def closing_value(self):
        return self.report
