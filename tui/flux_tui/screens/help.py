"""Help: what the focused panel shows, then every key that works right now (panel, screen, app)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widget import Widget
from textual.widgets import Input, Static, TextArea

from ..help import APP_HELP, HELP
from ..keys import key_table

__all__ = ["HelpScreen", "topic_for"]

_BY_ID = {"filter": "filter", "notice": "notice", "session-notice": "notice"}


def reflow(text: str) -> str:
    """Join hard-wrapped lines into paragraphs (blank lines separate them)."""
    return "\n\n".join(" ".join(p.split()) for p in text.split("\n\n"))


def topic_for(widget: Widget | None, screen: Screen) -> str:
    node = widget
    while node is not None and node is not screen.app:
        if node.id in _BY_ID:
            return _BY_ID[node.id]
        topic = getattr(node, "HELP_TOPIC", None)
        if isinstance(topic, str) and topic in HELP:
            return topic
        node = node.parent  # type: ignore[assignment]
    return getattr(screen, "HELP_TOPIC", "sessions")


def _bindings_table(screen: Screen, width: int = 120) -> Table:
    # Under 110 columns the binding id goes under the description, so "what it does" keeps room.
    narrow = width < 110
    t = Table(box=None, padding=(0, 2, 0, 0), expand=True, show_header=True, header_style="dim bold")
    t.add_column("key", no_wrap=True, style="bold cyan", min_width=8 if narrow else 12)
    t.add_column("action", no_wrap=True)
    t.add_column("what it does" + (" · id" if narrow else ""), overflow="fold", style="dim", ratio=1)
    if not narrow:
        t.add_column("id", no_wrap=True, style="dim")
    rows: dict[tuple[int, str], list] = {}
    order: list[tuple[int, str]] = []
    editing = False
    for key, active in screen.active_bindings.items():
        b = active.binding
        if b.system or b.action == "command_palette":
            continue
        if b.id is None and isinstance(active.node, (Input, TextArea)):
            editing = True  # a text field's own cursor and editing keys: one row below, not thirty
            continue
        ident = (id(active.node), b.action)
        if ident not in rows:
            rows[ident] = [[], b, active]
            order.append(ident)
        rows[ident][0].append(screen.app.get_key_display(Binding(key, "")))
    order.sort(key=lambda ident: rows[ident][1].id is None)
    for ident in order:
        keys, b, active = rows[ident]
        desc = b.description or b.action
        style = "" if active.enabled else "dim strike"
        # Text cells, never str: Rich reads a str cell as markup, and key hints like "[" or "[n]" are not.
        what = Text(b.tooltip or active.tooltip or "")
        if narrow:
            what.append(f"\n{b.id or ''}", style="italic")
        t.add_row(Text(" ".join(dict.fromkeys(keys))), Text(desc, style=style), what,
                  *(() if narrow else (Text(b.id or ""),)))
    if editing:
        t.add_row(Text("…"), Text("Edit text"), Text("In a text field: the usual editing keys — arrows, Home/End, "
                                                     "Ctrl+←/→ by word, Ctrl+A/E, PgUp/PgDn, Ctrl+Z undo"),
                  *(() if narrow else (Text(""),)))
    t.add_row(Text("ctrl+p"), Text("Commands"), Text("Command palette: every action on this screen by name"),
              *(() if narrow else (Text("app.palette"),)))
    return t


class HelpScreen(ModalScreen[None]):
    """F1 / ?: the focused panel's help and every key that works here."""

    CSS_PATH = "help.tcss"
    HELP_TOPIC = "help"

    BINDINGS = key_table("help", """
        # keys                     id     action label
        escape,q,f1,question_mark  close  close  Close
            Close the help
    """)

    def __init__(self, topic: str, screen: Screen) -> None:
        super().__init__()
        self.topic = topic
        self._for = screen
        title, body = HELP.get(topic, ("", ""))
        self._title = title
        self._body = Group(
            Text(title, style="bold"),
            Text(reflow(body)),
            Text(""),
            Text("Keys", style="bold"),
            _bindings_table(screen, screen.app.size.width),
            Text(""),
            Text("About", style="bold"),
            Text(reflow(APP_HELP), style="dim"),
        )

    @classmethod
    def for_screen(cls, screen: Screen) -> "HelpScreen":
        return cls(topic_for(screen.focused, screen), screen)

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            with VerticalScroll(id="help-scroll"):
                yield Static(self._body, id="help-body")

    def on_mount(self) -> None:
        self.query_one("#help-box").border_title = Text(f"Help · {self._title}")
        self.query_one("#help-box").border_subtitle = "Esc closes"
        self.query_one("#help-scroll").focus()

    def action_close(self) -> None:
        self.dismiss(None)
