"""What-if from the plan cursor (``w``): re-run the session with one thing changed — this cell's
result, every call to an op, the policy; this turn or the whole session; recorded plans or a live
re-plan — into a new linked session, then open its diff against the source at the first divergence."""

from __future__ import annotations

import json
from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Input, Label, RadioButton, RadioSet, Static, TextArea
from textual.worker import get_current_worker

from flux.errors import FluxError, StoreError

from ..fmt import failure_line, in_user_words
from ..keys import key_table
from ..widgets.editors import JsonTextArea
from .form_checks import json_problem, policy_problem, recorded_json
from .gate import preview_text, relabel
from .whatif_form import Choice, WhatIfForm
from .write_dialog import WriteDone

__all__ = ["WhatIfScreen", "WhatIfTarget", "start_what_if", "result_badge"]



@dataclass(frozen=True)
class WhatIfTarget:
    """What the cursor stands on: a cell (or a statement's first cell), or a statement that
    dispatched nothing (then only the policy question can be asked)."""

    session: str
    turn: int
    what: str  # "cell #2 run_tests", "statement 3"
    op: str | None  # the cell's op
    cell: int | None  # the cell's tape index
    recorded: str | None  # the cell's recorded content


def start_what_if(screen) -> None:
    """``w`` on a session screen: the what-if dialog for the cell (or statement) under the cursor."""
    row = screen.timeline_view.current if screen.timeline is not None else None
    if screen.detail is None or screen.turn is None or row is None or (row.cell is None and row.statement is None):
        screen.notify("put the plan cursor on a statement or a cell to ask a what-if there", severity="warning", timeout=4)
        return
    sid, turn = screen.detail.row.id, screen.turn.number
    cell = row.cell
    if cell is None and row.statement is not None and row.statement.cells:
        cell = row.statement.cells[0]
    if cell is not None:
        what = f"cell #{cell.index} {cell.op}" if row.cell is not None else f"statement {row.statement.node} · cell #{cell.index} {cell.op}"
        target = WhatIfTarget(sid, turn, what, cell.op, cell.index, cell.rec.content)
    else:
        target = WhatIfTarget(sid, turn, f"statement {row.statement.node} (dispatched nothing)", None, None, None)
    screen.app.push_screen(WhatIfScreen(target))


def result_badge(cf) -> Text:
    """The diff header's mark: ``WHAT-IF ✓ hermetic``, or what kept it from being hermetic."""
    if cf.hermetic:
        return Text(" WHAT-IF ✓ hermetic ", style="bold reverse green")
    return Text(f" WHAT-IF · {cf.badge} ", style="bold reverse yellow")


class _Setup(Message):
    def __init__(self, row: int | None = None, error: str | None = None, model: str = "mock", turns: int = 1) -> None:
        super().__init__()
        self.row, self.error, self.model, self.turns = row, error, model, turns


class _Stage(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class WhatIfScreen(WhatIfForm):
    """The what-if dialog; dismisses with the counterfactual session's id once written."""

    HELP_TOPIC = "what-if"
    BUSY, REFUSED, RECORDED_IN = "the what-if is being written", "no what-if", "the new what-if session"
    CSS_PATH = ["dialog.tcss", "whatif.tcss"]
    BUTTON_ACTIONS = {"whatif-run": "run", "whatif-cancel": "cancel"}

    BINDINGS = key_table("whatif", """
        # keys  id         action           label
        escape  cancel     cancel           Cancel
            Close the dialog: nothing is written
        ctrl+r  run        run              Run
            Run the what-if now (through the side-effect gate when something would run live)
        f2      next_kind  next_kind        Next question
            Cycle the question: this cell returned, every call to this op returned, the policy were
        f3      off_tape   toggle_off_tape  Off tape
            Off tape (a dispatch with no recorded cell): halt there, or go live through the gate
        f4      scope      toggle_scope     Scope
            Re-run the whole session, or this turn only (flux what-if --turn N)
        f5      replan     toggle_replan    Re-plan
            Re-run the recorded plans, or re-plan the turn with a live model call (-m MODEL)
        f1      help       app.help         Help
            Explain this dialog and list its keys
    """)

    def __init__(self, target: WhatIfTarget) -> None:
        super().__init__()
        self.target = target
        self.kind = "cell" if target.cell is not None else "policy"
        self.off_tape = "halt"
        self.scope = "session"  # or "turn": this turn only (--turn N)
        self.replan = False  # a live model turn re-drives the turn (-m MODEL / --instructions)
        self.turns = 1  # how many turns the session has (a whole-session re-plan re-drives the last)
        self.row: int | None = None  # the diff row substitute_at names (the cell question)
        self.running = False

    # -- layout ---------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        from flux.agent.client import DEFAULT_INSTRUCTIONS

        from ..writes import default_workspace

        t = self.target
        op = t.op or "this op"
        with Vertical(id="whatif-box", classes="tm-box"):
            yield Static(id="whatif-where")
            with RadioSet(id="whatif-kind"):
                yield Choice("this cell returned", id="kind-cell", value=self.kind == "cell",
                                  disabled=t.cell is None)
                yield Choice(f"every {op} call returned", id="kind-op", disabled=t.op is None)
                yield Choice("the policy were", id="kind-policy", value=self.kind == "policy")
            yield Label("returned (JSON; a string is the raw text) · F7 selects it all", classes="tm-label",
                        id="whatif-value-label")
            yield JsonTextArea(recorded_json(t.recorded), id="whatif-value", compact=True)
            with Horizontal(classes="tm-row", id="whatif-policy-row"):
                yield Label("policy file ", classes="tm-label")
                yield Input("", id="whatif-policy", placeholder="path to a TOML/JSON policy (allow, deny, ask, default)",
                            compact=True)
            yield Static(id="whatif-status", classes="tm-status")
            with Horizontal(classes="tm-row"):
                yield Label("off tape   ", classes="tm-label")
                with RadioSet(id="whatif-offtape"):
                    yield Choice("halt", id="offtape-halt", value=True)
                    yield Choice("go live (through the gate)", id="offtape-live")
            with Horizontal(classes="tm-row"):
                yield Label("scope      ", classes="tm-label")
                with RadioSet(id="whatif-scope", classes="tm-choice"):
                    yield Choice("whole session", id="scope-session", value=True)
                    yield Choice(f"turn {t.turn} only", id="scope-turn")
            with Horizontal(classes="tm-row"):
                yield Label("re-plan    ", classes="tm-label")
                with RadioSet(id="whatif-replan", classes="tm-choice"):
                    yield Choice("no: the recorded plans", id="replan-off", value=True)
                    yield Choice("a live model turn", id="replan-on")
            with Vertical(id="whatif-replan-fields"):
                with Horizontal(classes="tm-row"):
                    yield Label("model      ", classes="tm-label")
                    yield Input("", id="whatif-model", placeholder="provider:model, e.g. mock", compact=True)
                yield Label("instructions (the re-planned turn's system prompt)", classes="tm-label")
                yield TextArea(DEFAULT_INSTRUCTIONS, id="whatif-instructions", soft_wrap=True, tab_behavior="focus",
                               compact=True)
            with Horizontal(classes="tm-row"):
                yield Label("workspace ", classes="tm-label")
                yield Input(default_workspace(self.app.store_dir), id="whatif-workspace",
                            placeholder="directory live ops act on", compact=True)
            yield Static(id="whatif-preview")
            yield Static(id="whatif-progress")
            with Horizontal(classes="tm-buttons"):
                yield Button("Run", id="whatif-run", variant="primary", disabled=True, compact=True)
                yield Button("Cancel", id="whatif-cancel", compact=True)

    def on_mount(self) -> None:
        t = self.target
        box = self.query_one("#whatif-box")
        box.border_title = f"What if… {t.session} · {t.what}"
        box.border_subtitle = "F2 question · F3 off tape · F4 scope · F5 re-plan · Ctrl+R run · Esc"
        self.query_one("#whatif-progress", Static).display = False
        self._describe()
        self._show_kind()
        self._setup()

    def on_resize(self, event) -> None:
        """A short terminal: no blank lines between the rows, one-line editors, so Run stays on screen."""
        short = self.size.height < 32
        self.set_class(short, "-short")
        self.query_one("#whatif-value").styles.height = 1 if short else 3
        self.query_one("#whatif-instructions").styles.height = 2 if short else 3

    # -- setup: which diff row the cell is --------------------------------------------------------

    @work(thread=True, exclusive=True, group="whatif-setup", exit_on_error=False, description="Reading the session")
    def _setup(self) -> None:
        from flux.model.session import TRACE_KINDS, load_session
        from flux.timemachine.cursor import row_of_cell

        t = self.target
        try:
            detail = load_session(self.app.ensure_reader(), t.session, kinds=TRACE_KINDS)
            if not detail.cells:
                raise FluxError(f"session {detail.id} cannot be asked a what-if: no cassette cells recorded — the "
                                "world cannot be frozen")
            row = row_of_cell(detail, t.cell) if t.cell is not None else None
        except (StoreError, FluxError) as e:
            self.post_message(_Setup(error=self.app.mask_path(str(e))))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(_Setup(row, model=detail.row.model or "mock", turns=max(1, len(detail.turns))))

    @on(_Setup)
    def _on_setup(self, message: _Setup) -> None:
        if message.error is not None:
            self.problem = message.error
            self._paint(None)
            return
        self.row = message.row
        self.turns = message.turns
        self.query_one("#whatif-model", Input).value = message.model
        self._describe()
        if self.row is None and self.kind == "cell":
            # Not the first cell of its statement: substitute_at cannot name it; every call to its op can.
            self.kind = "op"
        self.query_one("#kind-cell", RadioButton).disabled = self.row is None
        self._ready = True
        self._show_kind()
        self.query_one("#whatif-value" if self.kind != "policy" else "#whatif-policy").focus()
        self.changed()

    # -- validation and preview -----------------------------------------------------------------

    def local_problem(self) -> str | None:
        if not self._ready:
            return self.problem
        if self.kind in ("cell", "op"):
            p = json_problem(self.query_one("#whatif-value", JsonTextArea).text)
            if p:
                return f"not JSON: {p}"
        else:
            p = policy_problem(self.query_one("#whatif-policy", Input).value)
            if p:
                return p
        if self.replan and not self._model():
            return "type the model that re-plans the turn (provider:model, e.g. mock)"
        return None

    def _model(self) -> str:
        return self.query_one("#whatif-model", Input).value.strip()

    def _same_as_recorded(self) -> bool:
        try:
            value = json.loads(self.query_one("#whatif-value", JsonTextArea).text)
        except ValueError:
            return False
        return self.target.recorded is not None and value == self.target.recorded

    def show_state(self) -> None:
        self._paint(self.preview)

    def plan_request(self) -> tuple:
        return self.spec(), self._workspace()

    def _workspace(self) -> str:
        return self.query_one("#whatif-workspace", Input).value.strip()

    def spec(self):
        """The what-if the dialog describes, as the engine's :class:`~flux.timemachine.WhatIfSpec`."""
        from flux.agent.client import DEFAULT_INSTRUCTIONS
        from flux.timemachine import WhatIfSpec

        spec = WhatIfSpec(off_tape=self.off_tape, turn=self.target.turn if self.scope == "turn" else None)
        if self.replan:
            spec.model = self._model()
            text = self.query_one("#whatif-instructions", TextArea).text
            spec.instructions = text if text.strip() and text != DEFAULT_INSTRUCTIONS else None
        if self.kind == "cell" and self.row is not None:
            spec.substitute_at = {self.row: json.loads(self.query_one("#whatif-value", JsonTextArea).text)}
        elif self.kind == "op" and self.target.op is not None:
            spec.substitute = {self.target.op: json.loads(self.query_one("#whatif-value", JsonTextArea).text)}
        elif self.kind == "policy":
            spec.policy = self.query_one("#whatif-policy", Input).value.strip()
        return spec

    @work(thread=True, exclusive=True, group="whatif-plan", exit_on_error=False, description="Checking the what-if")
    def plan(self, serial: int, spec, workspace: str) -> None:
        from flux.timemachine import plan_what_if

        from ..writes import check_model, op_catalog, refuse_unimplemented

        def preview():
            if spec.replan:
                check_model(spec.model)  # a model without a key: one line now, not after the gate
            catalog = op_catalog(workspace, self.app.store_dir)
            found = plan_what_if(self.app.ensure_reader(), self.target.session, spec, catalog=catalog,
                                 workspace=workspace, model=spec.model)
            if spec.policy:
                from flux.agent.approver import load_policy

                found = found.with_policy(load_policy(spec.policy))
            refuse_unimplemented(found, catalog)
            return found

        self.post_plan(serial, preview)

    def _paint(self, preview) -> None:
        status = Text()
        if self._ready and self.kind in ("cell", "op"):
            bad = (self.problem or "").startswith("not JSON")
            status.append("JSON ✗" if bad else "JSON ✓", style="bold red" if bad else "green")
            if not bad and self.kind == "cell" and not self.replan and self._same_as_recorded():
                status.append(" · same as recorded: change it to ask a what-if", style="dim")
        elif self._ready:
            bad = self.problem is not None and preview is None and self.preview is None and \
                self.local_problem() is not None
            status.append("policy ✗" if bad else "policy ✓", style="bold red" if bad else "green")
        if self._ready and self.replan and not self._model():
            status.append("  model ✗", style="bold red")
        if self.problem is not None and self._ready and self.local_problem() is not None:
            status.append("  " + self.problem, style="red")
        self.query_one("#whatif-status", Static).update(status)
        panel = self.query_one("#whatif-preview", Static)
        waiting = self.problem_or_checking(noun="what-if", verb="run",
                                           shown_above=self._ready and self.local_problem() is not None)
        if waiting is not None:
            panel.update(waiting)
        else:
            body = Text()
            for note in preview.notes:
                body.append(note + "\n", style="dim")
            body.append_text(preview_text(preview))
            if not preview.offline:
                effects = ", ".join(e for e in preview.effects if e != "none")
                what = ([f"a live model call ({preview.model})"] if preview.model else []) + \
                    ([f"off-tape dispatches that may {effects}"] if preview.ops and effects else [])
                body.append(f"\n⚠ {' and '.join(what) or 'live dispatches'} — you confirm at the gate first",
                            style="bold yellow")
            panel.update(body)
        btn = self.query_one("#whatif-run", Button)
        btn.disabled = not self.check_action("run", ())
        relabel(btn, "Run live…" if (preview is not None and not preview.offline) else "Run")
        self.refresh_bindings()

    # -- running --------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "run":
            return self.problem is None and self.preview is not None and not self.running
        if action in ("next_kind", "toggle_off_tape", "toggle_scope", "toggle_replan"):
            return not self.running
        return True

    def action_run(self) -> None:
        if not self.check_action("run", ()):
            return
        preview, spec, workspace = self.preview, self.spec(), self._workspace()
        self.through_the_gate(preview, lambda live: self._start(preview, spec, workspace, live=live))

    def _start(self, preview, spec, workspace: str, *, live: bool) -> None:
        self.running = True
        self.query_one("#whatif-run", Button).disabled = True
        self.refresh_bindings()
        progress = self.query_one("#whatif-progress", Static)
        progress.display = True
        progress.update(Text("re-planning the turn with a live model call…" if spec.replan else
                             "re-running the session from its recording…", style="bold cyan"))
        self._run(preview, spec, workspace, live)

    @work(thread=True, exclusive=True, group="whatif-run", exit_on_error=False, description="Running the what-if")
    def _run(self, confirmed, spec, workspace: str, live: bool) -> None:
        from flux.timemachine import run_what_if

        from ..writes import within_gate

        def what_if(client):
            # The run re-plans the what-if; it may only go live within what the user confirmed.
            return run_what_if(client, self.target.session, spec, confirm=within_gate(confirmed, live))

        def diff(cf):
            self.post_message(_Stage(f"written {cf.session} · diffing it against {cf.source}…"))
            return cf.diff()

        self.write(what_if, workspace=workspace, live=live, model=spec.model if spec.replan else None, then=diff)

    @on(_Stage)
    def _on_stage(self, message: _Stage) -> None:
        self.query_one("#whatif-progress", Static).update(Text(message.text, style="bold cyan"))

    @on(WriteDone)
    def _on_done(self, message: WriteDone) -> None:
        self.running = False
        if message.error is not None:
            self.query_one("#whatif-progress", Static).update(failure_line(message.error, "no what-if"))
            self._paint(self.preview)
            return
        from .diff import DiffScreen

        cf, diff = message.result, message.extra
        self.dismiss(cf.session)
        self.app.check_store_now()
        self.app.last_diffed = cf.source
        self.app.push_screen(DiffScreen(cf.source, cf.session, diff=diff, badge=result_badge(cf)))
        fd = cf.first_divergence()
        where = f"first divergence at row {fd.node} ({fd.kind})" if fd else "no divergence: the same run"
        toast = f"what-if {cf.session} ← {cf.source} · {cf.badge} · {where}"
        if cf.latched:
            toast += f" · {in_user_words(cf.latched)}"  # the badge already says it halted off tape
        self.app.notify(toast, severity="warning" if cf.latched else "information", timeout=8)
