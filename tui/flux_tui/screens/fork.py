"""Fork at the statement under the plan cursor (``f``): inject a value, edit the plan or re-plan;
see what the fork would do (re-planned as you type), confirm at the gate when it goes live, and
land on the child, one key (``d``) from its diff against the source."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Input, Label, Static, TabbedContent, TabPane, TextArea
from textual.worker import get_current_worker

from flux.errors import FluxError, StoreError

from ..fmt import failure_line
from ..keys import key_table
from ..widgets.editors import FluxTextArea, JsonTextArea
from .form_checks import flux_problem, json_problem, recorded_json
from .gate import preview_text, relabel
from .preview_dialog import PreviewDialog
from .write_dialog import WriteDone

__all__ = ["ForkScreen", "ForkTarget", "start_fork"]

MODES = ("inject", "edit", "replan")
MODE_LABELS = {"inject": "Inject", "edit": "Edit plan", "replan": "Re-plan"}


@dataclass(frozen=True)
class ForkTarget:
    """The statement under the cursor, as the session screen shows it."""

    session: str
    turn: int
    flow_key: str | None
    node: int
    text: str  # the statement, one line
    recorded: str | None  # the first cell's content (None: the statement dispatched nothing)


def start_fork(screen) -> None:
    """``f`` on a session screen: the fork dialog for the statement (or the cell's statement) under
    the plan cursor."""
    row = screen.timeline_view.current if screen.timeline is not None else None
    stmt = getattr(row, "statement", None)
    plan = getattr(row, "plan", None)
    if screen.detail is None or screen.turn is None or stmt is None or plan is None:
        screen.notify("put the plan cursor on a statement to fork there", severity="warning", timeout=4)
        return
    recorded = stmt.cells[0].rec.content if stmt.cells else None
    target = ForkTarget(screen.detail.row.id, screen.turn.number, plan.flow_key, stmt.node,
                        " ⏎ ".join(line.strip() for line in stmt.text.splitlines() if line.strip()), recorded)
    screen.app.push_screen(ForkScreen(target))


# -- messages from the workers --------------------------------------------------------------------


class _Setup(Message):
    def __init__(self, position=None, tail: str = "", task: str | None = None, model: str = "", prompt: str = "",
                 error: str | None = None) -> None:
        super().__init__()
        self.position, self.tail, self.task, self.model, self.prompt, self.error = position, tail, task, model, prompt, error


class _Progress(Message):
    def __init__(self, stage: str, done: int, total: int) -> None:
        super().__init__()
        self.stage, self.done, self.total = stage, done, total


class ForkScreen(PreviewDialog):
    """The fork dialog; dismisses with the child's id once the fork has been written."""

    HELP_TOPIC = "fork"
    BUSY, REFUSED, RECORDED_IN = "the fork is being written", "not forked", "the new fork session"
    CSS_PATH = ["dialog.tcss", "fork.tcss"]
    BUTTON_ACTIONS = {"fork-run": "run", "fork-cancel": "cancel"}

    BINDINGS = key_table("fork", """
        # keys  id         action     label
        escape  cancel     cancel     Cancel
            Close the dialog: nothing is written
        ctrl+r  run        run        Fork
            Fork now (through the side-effect gate when something would run live)
        f2      next_mode  next_mode  Next mode
            Cycle the mode: inject, edit plan, re-plan
        f1      help       app.help   Help
            Explain this dialog and list its keys
    """)

    def __init__(self, target: ForkTarget) -> None:
        super().__init__()
        self.target = target
        self.position = None
        self.running: tuple[str, int, int] | None = None

    # -- layout ---------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        t = self.target
        with Vertical(id="fork-box", classes="tm-box"):
            yield Static(id="fork-where")
            with TabbedContent(id="fork-modes", initial="mode-inject"):
                with TabPane(MODE_LABELS["inject"], id="mode-inject"):
                    yield Static(id="inject-recorded")
                    yield Label("inject value (JSON)", classes="tm-label")
                    yield JsonTextArea(recorded_json(t.recorded), id="inject-value", compact=True)
                    yield Static(id="inject-status", classes="tm-status")
                with TabPane(MODE_LABELS["edit"], id="mode-edit"):
                    yield Label("the plan from this statement on (Flux-Lang)", classes="tm-label")
                    yield FluxTextArea("", id="edit-plan", compact=True)
                    yield Static(id="edit-status", classes="tm-status")
                with TabPane(MODE_LABELS["replan"], id="mode-replan"):
                    yield Label("prompt for the re-planned turn", classes="tm-label")
                    yield TextArea("", id="replan-prompt", soft_wrap=True, tab_behavior="focus", compact=True)
                    with Horizontal(classes="tm-row"):
                        yield Label("model ", classes="tm-label")
                        yield Input("", id="replan-model", placeholder="provider:model, e.g. mock", compact=True)
            with Horizontal(classes="tm-row"):
                yield Label("workspace ", classes="tm-label")
                yield Input(self._workspace_default(), id="fork-workspace", placeholder="directory live ops act on", compact=True)
            yield Static(id="fork-preview")
            yield Static(id="fork-progress")
            with Horizontal(classes="tm-buttons"):
                yield Button("Fork", id="fork-run", variant="primary", disabled=True, compact=True)
                yield Button("Cancel", id="fork-cancel", compact=True)

    def _workspace_default(self) -> str:
        from ..writes import default_workspace

        return default_workspace(self.app.store_dir)

    def on_mount(self) -> None:
        t = self.target
        self.query_one("#fork-box").border_title = f"Fork {t.session} at this statement"
        self.query_one("#fork-box").border_subtitle = "F2 mode · Ctrl+R fork · Esc cancel"
        where = Text()
        where.append("statement  ", style="dim")
        where.append(t.text[:200], style="bold")
        where.append(f"\nturn {t.turn} · node {t.node}", style="dim")
        self.query_one("#fork-where", Static).update(where)
        rec = Text()
        rec.append("recorded   ", style="dim")
        rec.append((t.recorded if t.recorded is not None else "(no recorded result)").replace("\n", " ⏎ ")[:300])
        self.query_one("#inject-recorded", Static).update(rec)
        self.query_one("#fork-progress", Static).display = False
        self._paint_status()
        self._setup()

    def on_resize(self, event) -> None:
        """Editors give up lines first on a short terminal, so the buttons stay on screen."""
        spare = self.size.height - 22
        self.query_one("#edit-plan").styles.height = max(3, min(12, spare + 3))
        self.query_one("#inject-value").styles.height = max(2, min(4, spare + 2))
        self.query_one("#replan-prompt").styles.height = max(2, min(4, spare + 2))

    # -- setup: the position, the edit text, the defaults ---------------------------------------

    @work(thread=True, exclusive=True, group="fork-setup", exit_on_error=False, description="Reading the session to fork")
    def _setup(self) -> None:
        from flux.model.session import TRACE_KINDS, load_session
        from flux.timemachine import default_prompt
        from flux.timemachine.cursor import position_at, tail_text

        t = self.target
        try:
            reader = self.app.ensure_reader()
            detail = load_session(reader, t.session, kinds=TRACE_KINDS)
            if not detail.cells:
                raise FluxError(f"session {detail.id} is not forkable: no cassette cells recorded — the prefix "
                                "could not come from tape")
            pos = position_at(detail, t.turn, t.flow_key, t.node)
            tail = tail_text(detail, pos)
            task = detail.turns[pos.turn - 1].user_input if pos.turn and pos.turn <= len(detail.turns) else None
            model = detail.row.model or "mock"
        except (StoreError, FluxError) as e:
            self.post_message(_Setup(error=self.app.mask_path(str(e))))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(_Setup(pos, tail, task, model, default_prompt(task)))

    @on(_Setup)
    def _on_setup(self, message: _Setup) -> None:
        if message.error is not None:
            self.problem = message.error
            self._paint_preview()
            self._paint_status()
            return
        self.position = message.position
        pos = message.position
        self.query_one("#fork-box").border_title = f"Fork {self.target.session} at statement {pos.index}"
        self.query_one("#edit-plan", FluxTextArea).load_text(message.tail)
        self.query_one("#replan-prompt", TextArea).load_text(message.prompt)
        self.query_one("#replan-model", Input).value = message.model
        where = Text()
        where.append(f"statement {pos.index}  ", style="dim")
        where.append(pos.text[:200], style="bold")
        where.append(f"\nturn {pos.turn} · execution {pos.execution + 1} · node {pos.node}", style="dim")
        if pos.binder is None:
            where.append(" · not a bind: inject needs `name = …`", style="yellow")
        self.query_one("#fork-where", Static).update(where)
        # inject where it can, else edit (flux's default is re-plan: one Tab away)
        self.mode = "inject" if pos.binder is not None else "edit"
        self.query_one("#fork-modes", TabbedContent).active = f"mode-{self.mode}"
        self._ready = True
        self._focus_editor()
        self.changed()

    # -- mode, validation and preview ----------------------------------------------------------

    mode = "inject"

    @on(TabbedContent.TabActivated, "#fork-modes")
    def _on_mode(self, event: TabbedContent.TabActivated) -> None:
        pane = event.pane.id or "mode-inject"
        self.mode = pane.removeprefix("mode-")
        self.changed()

    def action_next_mode(self) -> None:
        i = MODES.index(self.mode)
        self.mode = MODES[(i + 1) % len(MODES)]
        self.query_one("#fork-modes", TabbedContent).active = f"mode-{self.mode}"
        self._focus_editor()
        self.changed()

    def _focus_editor(self) -> None:
        target = {"inject": "#inject-value", "edit": "#edit-plan", "replan": "#replan-prompt"}[self.mode]
        self.query_one(target).focus()

    def local_problem(self) -> str | None:
        """What the dialog can say at once, before the engine's check: JSON / parse errors."""
        if self.position is None:
            return self.problem
        if self.mode == "inject":
            if self.position.binder is None:
                return (f"statement {self.position.index} is not a bind (name = …): inject puts a value in a binder — "
                        "use Edit plan to change any other statement")
            p = json_problem(self.query_one("#inject-value", JsonTextArea).text)
            return f"not JSON: {p}" if p else None
        if self.mode == "edit":
            text = self.query_one("#edit-plan", FluxTextArea).text
            if not text.strip():
                return "the plan is empty — write the statements to run from the fork point"
            p = flux_problem(text)
            return f"does not parse: {p}" if p else None
        if not self.query_one("#replan-model", Input).value.strip():
            return "type the model the re-planned turn calls (e.g. mock)"
        return None

    def show_state(self) -> None:
        self._paint_status()
        self._paint_preview()

    def plan_request(self) -> tuple[str, Any, str, str]:
        ws = self.query_one("#fork-workspace", Input).value.strip()
        model = self.query_one("#replan-model", Input).value.strip()
        if self.mode == "inject":
            return "inject", json.loads(self.query_one("#inject-value", JsonTextArea).text), ws, model
        if self.mode == "edit":
            return "edit", self.query_one("#edit-plan", FluxTextArea).text, ws, model
        return "replan", self.query_one("#replan-prompt", TextArea).text, ws, model

    @work(thread=True, exclusive=True, group="fork-plan", exit_on_error=False, description="Checking the fork")
    def plan(self, serial: int, mode: str, payload: Any, workspace: str, model: str) -> None:
        from flux.timemachine import plan_fork

        from ..writes import check_model, op_catalog, refuse_unimplemented

        def preview():
            if mode == "replan":
                check_model(model)  # a model without a key: one line now, not after the gate
            reader = self.app.ensure_reader()
            kw = {"inject": payload} if mode == "inject" else ({"edit": payload} if mode == "edit" else {"prompt": payload})
            catalog = op_catalog(workspace, self.app.store_dir)
            found = plan_fork(reader, self.target.session, self.position.index, mode=mode, catalog=catalog,
                              model=model or None, workspace=workspace, **kw)
            refuse_unimplemented(found, catalog)
            return found

        self.post_plan(serial, preview)

    def _paint_status(self) -> None:
        ok = self.problem is None
        checking = ok and self.preview is None
        status = Text()
        if self.mode == "inject":
            status.append("JSON ✓" if ok or not (self.problem or "").startswith("not JSON") else "JSON ✗",
                          style="green" if ok else "bold red")
        elif self.mode == "edit":
            if ok and not checking:
                status.append("✓ parses and passes analysis", style="green")
            elif checking:
                status.append("✓ parses · checking against the catalog…", style="dim")
            else:
                status.append("✗ ", style="bold red")
        if self.problem is not None and self.mode in ("inject", "edit"):
            status.append("  " + self.problem, style="red")
        target = "#inject-status" if self.mode == "inject" else "#edit-status"
        if self.mode in ("inject", "edit"):
            self.query_one(target, Static).update(status)
        btn = self.query_one("#fork-run", Button)
        btn.disabled = not ok or checking or self.running is not None
        relabel(btn, "Fork and run live…" if (self.preview is not None and not self.preview.offline) else "Fork")
        self.refresh_bindings()

    def _paint_preview(self) -> None:
        panel = self.query_one("#fork-preview", Static)
        waiting = self.problem_or_checking(noun="fork", verb="written", shown_above=self.mode in ("inject", "edit"))
        if waiting is not None:
            panel.update(waiting)
            return
        preview = self.preview
        body = preview_text(preview)
        if not preview.offline:
            effects = ", ".join(e for e in preview.effects if e != "none") or "network"
            body.append(f"\n⚠ the live part may {effects} — you confirm at the gate first", style="bold yellow")
        panel.update(body)

    # -- running --------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "run":
            return self.problem is None and self.preview is not None and self.running is None
        if action == "next_mode":
            return self.running is None
        return True

    def action_run(self) -> None:
        if not self.check_action("run", ()):
            return
        preview, request = self.preview, self.plan_request()
        self.through_the_gate(preview, lambda live: self._start(preview, request, live=live))

    def _start(self, preview, request, *, live: bool) -> None:
        self.running = ("prefix", 0, 0)
        self._paint_status()
        progress = self.query_one("#fork-progress", Static)
        progress.display = True
        progress.update(Text("writing the fork…", style="bold cyan"))
        self._run(preview, request, live)

    @work(thread=True, exclusive=True, group="fork-run", exit_on_error=False, description="Forking the session")
    def _run(self, confirmed, request, live: bool) -> None:
        from flux.timemachine import fork_session

        from ..writes import within_gate

        mode, payload, workspace, model = request
        kw = {"inject": payload} if mode == "inject" else ({"edit": payload} if mode == "edit" else {"prompt": payload})

        def progress(stage: str, done: int, total: int) -> None:
            self.post_message(_Progress(stage, done, total))

        def fork(client):
            # The run re-plans the fork; it may only go live within what the user confirmed.
            return fork_session(client, self.target.session, self.position.index, mode=mode,
                                confirm=within_gate(confirmed, live), on_progress=progress, **kw)

        self.write(fork, workspace=workspace, live=live, model=model if mode == "replan" else None)

    @on(_Progress)
    def _on_progress(self, message: _Progress) -> None:
        self.running = (message.stage, message.done, message.total)
        what = "replaying prefix" if message.stage == "prefix" else "running tail"
        self.query_one("#fork-progress", Static).update(Text(f"{what} {message.done}/{message.total}…", style="bold cyan"))

    @on(WriteDone)
    def _on_done(self, message: WriteDone) -> None:
        self.running = None
        if message.error is not None:
            self.problem = None
            self.query_one("#fork-progress", Static).update(failure_line(message.error, "not forked"))
            self._paint_status()
            return
        r = message.result
        self.dismiss(r.session)
        self.app.check_store_now()
        self.app.open_child(r.session, r.source,
                            f"forked {r.session} ← {r.source}@{r.at} · d diffs against the source"
                            + ("" if r.halted is None else f" · the tail halted: {r.halted}"),
                            warning=r.halted is not None)
