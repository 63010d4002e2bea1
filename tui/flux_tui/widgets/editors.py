"""Editors for the time machine's dialogs: a Flux-Lang ``TextArea`` coloured by the app's
highlighter (:mod:`flux_tui.highlight`) and a JSON ``TextArea`` coloured by Rich's JSON
highlighter. Both colour line by line (``get_line`` is TextArea's styling hook), so an edit costs
one line's scan, and neither needs a tree-sitter grammar."""

from __future__ import annotations

from functools import lru_cache

from rich.highlighter import JSONHighlighter
from rich.text import Text
from textual.widgets import TextArea

from ..highlight import highlight_flux

__all__ = ["FluxTextArea", "JsonTextArea"]

_JSON = JSONHighlighter()


@lru_cache(maxsize=4096)
def _flux_line(line: str) -> Text:
    return highlight_flux(line)


@lru_cache(maxsize=4096)
def _json_line(line: str) -> Text:
    t = Text(line, end="", no_wrap=True)
    _JSON.highlight(t)
    return t


class FluxTextArea(TextArea):
    """A Flux-Lang editor (soft tabs of two spaces, as the canonical formatter indents)."""

    def __init__(self, text: str = "", **kw) -> None:
        super().__init__(text, soft_wrap=False, tab_behavior="indent", show_line_numbers=True, **kw)
        self.indent_width = 2

    def get_line(self, line_index: int) -> Text:
        return _flux_line(self.document.get_line(line_index)).copy()


class JsonTextArea(TextArea):
    """A JSON value editor."""

    def __init__(self, text: str = "", **kw) -> None:
        super().__init__(text, soft_wrap=True, tab_behavior="focus", show_line_numbers=False, **kw)

    def get_line(self, line_index: int) -> Text:
        return _json_line(self.document.get_line(line_index)).copy()
