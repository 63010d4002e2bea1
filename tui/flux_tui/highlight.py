"""Flux-Lang highlighting as Rich ``Text``: the core scanner's roles (:mod:`flux.lang.highlight`)
in the app's colours."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text

from flux.lang.highlight import FLUX_KEYWORDS, MODULE_KEYWORDS, OPTION_LABELS, highlight_spans

__all__ = ["highlight_flux", "FLUX_KEYWORDS", "OPTION_LABELS", "MODULE_KEYWORDS", "STYLES"]

# Calm colours that read on dark and light backgrounds alike (Nord-ish).
STYLES = {
    "keyword": Style(color="#b48ead", bold=True),
    "option": Style(color="#b48ead", italic=True),
    "op": Style(color="#88c0d0"),
    "builtin": Style(color="#8fbcbb", bold=True),
    "label": Style(color="#81a1c1"),
    "bind": Style(color="#ebcb8b", bold=True),
    "symbol": Style(color="#ebcb8b"),
    "string": Style(color="#a3be8c"),
    "interp": Style(color="#ebcb8b"),
    "number": Style(color="#d08770"),
    "literal": Style(color="#d08770"),
    "comment": Style(color="#7b88a1", italic=True),
    "punct": Style(color="#8fa1b3"),
    "effect": Style(color="#bf616a"),
    "thing": Style(color="#8fbcbb", italic=True),
}


def highlight_flux(src: str) -> Text:
    """Flux-Lang text → Rich ``Text`` with spans (never raises)."""
    text = Text(src, no_wrap=True, end="")
    for start, end, role in highlight_spans(src):
        text.stylize(STYLES[role], start, end)
    return text
