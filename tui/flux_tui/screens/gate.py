"""The side-effect gate: before anything runs live, say exactly what would — each op with its effect
and workspace, the model a re-plan calls, what a policy denies — and wait for an explicit ``y``."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from flux.agent.registry import model_effect
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from ..keys import key_table

__all__ = ["GateScreen", "preview_text", "EFFECT_STYLES", "live_summary", "relabel"]

EFFECT_STYLES = {"write": "bold red", "exec": "bold red", "network": "bold yellow", "none": "green", "offline": "green"}
OFFLINE = "offline: no model call, no side effect"


def relabel(button: Button, label: str) -> None:
    """Set a dialog's run button to ``label`` ("Fork" / "Fork and run live…"): a button is as wide
    as its label, so a new label needs a new layout."""
    if str(button.label) != label:
        button.label = label
        button.refresh(layout=True)


def live_summary(preview) -> Text:
    """One line: ``offline: …`` or ``runs live: edit (write) · bash (exec) · model … (network)``."""
    if preview.offline:
        return Text(OFFLINE, style="green")
    t = Text("runs live: ", style="bold yellow")
    seen: set[tuple[str, str]] = set()
    first = True
    for o in preview.ops:
        if (o.op, o.effect) in seen:
            continue
        seen.add((o.op, o.effect))
        if not first:
            t.append(" · ", style="dim")
        first = False
        t.append(o.op, style="bold")
        t.append(f" ({o.effect})", style=EFFECT_STYLES.get(o.effect, ""))
    if preview.model:
        if not first:
            t.append(" · ", style="dim")
        effect = model_effect(preview.model)
        t.append(f"model {preview.model}", style="bold")
        t.append(f" ({effect})", style=EFFECT_STYLES[effect])
    return t


def preview_text(preview, *, width: int | None = None) -> Text:
    """The preview's prefix / tail / notes lines and the live summary, for a dialog's body."""
    t = Text()
    if preview.prefix_statements or preview.prefix_cells:
        t.append("prefix  ", style="dim")
        t.append(f"{preview.prefix_statements} statement(s) from tape: {preview.prefix_cells} cell(s) served, "
                 "no model call, no side effect\n")
    if preview.tail_statements or preview.tail_served:
        t.append("tail    ", style="dim")
        t.append(f"{preview.tail_statements} statement(s): {preview.tail_served} dispatch(es) served from tape\n")
    t.append("live    ", style="dim")
    t.append_text(live_summary(preview))
    if preview.workspace and not preview.offline:
        t.append("   workspace ", style="dim")
        t.append(preview.workspace, style="bold")
    return t


def _ops_table(preview) -> Table:
    table = Table(box=None, show_header=True, header_style="dim", padding=(0, 3, 0, 0), expand=False)
    table.add_column("op", no_wrap=True, style="bold")
    table.add_column("effect", no_wrap=True)
    table.add_column("input", overflow="fold")
    table.add_column("why", no_wrap=True, style="dim")
    for o in preview.ops:
        eff = Text(o.effect, style=EFFECT_STYLES.get(o.effect, ""))
        detail = Text(o.detail)
        if o.denied:
            detail.append(f"  denied by policy: {o.denied}", style="bold magenta")
        table.add_row(o.op, eff, detail, o.why)
    if preview.model:
        effect = model_effect(preview.model)
        table.add_row("model", Text(effect, style=EFFECT_STYLES[effect]), Text(preview.model), "re-plan")
    return table


class GateScreen(ModalScreen[bool]):
    """``y`` runs live, ``n`` / Esc cancels (nothing is written)."""

    HELP_TOPIC = "gate"
    CSS_PATH = ["dialog.tcss", "gate.tcss"]

    BINDINGS = key_table("gate", """
        # keys    id       action    label
        y         confirm  confirm   Run live
            Run it live: dispatch these ops for real
        n,escape  cancel   cancel    Cancel
            Go back: nothing runs, nothing is written
        f1        help     app.help  Help
            Explain this dialog and list its keys
    """)

    def __init__(self, preview, *, recorded_in: str = "") -> None:
        super().__init__()
        self.preview = preview
        self.recorded_in = recorded_in

    def compose(self) -> ComposeResult:
        p = self.preview
        with Vertical(id="gate-box", classes="tm-box"):
            head = Text()
            if p.title:
                head.append(p.title + "\n", style="bold")
            head.append("This will dispatch, for real:", style="bold yellow")
            yield Static(head, id="gate-head")
            yield Static(_ops_table(p), id="gate-ops")
            foot = Text()
            if p.workspace:
                foot.append("workspace ", style="dim")
                foot.append(p.workspace, style="bold")
                foot.append(" — writes and commands act on it\n", style="dim")
            foot.append(f"Recorded as cassette cells in {self.recorded_in}." if self.recorded_in
                        else "Every live dispatch is recorded as a cassette cell.", style="dim")
            if any(o.denied for o in p.ops):
                foot.append("\nOps denied by the policy are refused when they are dispatched (recorded as denied).",
                            style="magenta")
            yield Static(foot, id="gate-foot")
            with Horizontal(classes="tm-buttons"):
                yield Button("y  Run live", id="gate-yes", variant="warning", compact=True)
                yield Button("n  Cancel", id="gate-no", compact=True)

    def on_mount(self) -> None:
        self.query_one("#gate-box").border_title = "Going live"
        self.query_one("#gate-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "gate-yes")

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)
