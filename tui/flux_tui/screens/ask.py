"""A one-line question: the session screen's `/` search and `:` jump prompts."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label

from ..keys import key_table

__all__ = ["AskScreen"]


class AskScreen(ModalScreen[str | None]):
    """Ask for one line; dismiss with the text (Enter) or None (Esc)."""

    HELP_TOPIC = "ask"

    BINDINGS = key_table("ask", """
        # keys  id      action  label
        escape  cancel  cancel  Cancel
            Close without doing anything
    """)

    DEFAULT_CSS = """
    AskScreen { align: center middle; background: $background 60%; }
    #ask-box { width: 64; max-width: 95%; height: auto; border: round $accent; background: $surface; padding: 0 1; }
    #ask-input { margin: 1 0 0 0; }
    """

    def __init__(self, title: str, question: str, hint: str, *, value: str = "", placeholder: str = "") -> None:
        super().__init__()
        self.title_text = title
        self.question = question
        self.hint = hint
        self.value = value
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="ask-box"):
            yield Label(Text(self.question))
            yield Input(value=self.value, placeholder=self.placeholder, id="ask-input")
            yield Label(Text(self.hint, style="dim"), id="ask-hint")

    def on_mount(self) -> None:
        self.query_one("#ask-box").border_title = Text(self.title_text)
        self.query_one("#ask-input", Input).focus()

    @on(Input.Submitted, "#ask-input")
    def _submit(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)
