"""A small Flux-Lang syntax highlighter producing Rich ``Text``.

It is a scanner, not a parser: it must colour any text (including plans that do not parse), so it
never fails. Recognised: keywords, ``$sym`` and bare binds before `` = ``, op names before ``(``,
strings (``"…"`` and ``\"\"\"…\"\"\"``, with ``{sym}`` interpolation), numbers, literals, comments.
"""

from __future__ import annotations

import re

from rich.style import Style
from rich.text import Text

__all__ = ["highlight_flux", "FLUX_KEYWORDS", "STYLES"]

FLUX_KEYWORDS = frozenset("""
flow when else unless each parallel branch race try catch retry saga step undo confirm once checkpoint
return match case default route fallback repeat until loop for in seq pipe timeout budget throttle
debounce assert verify contains with_tools await scope finally memo peek thing ctx as risk permissions
agent channel datasource trigger journey op description idempotency effects limits expose view fmt
parse and or not flat goal
""".split())

LITERALS = frozenset({"true", "false", "null", "none"})

# Calm colours that read on dark and light backgrounds alike (Nord-ish).
STYLES = {
    "keyword": Style(color="#b48ead", bold=True),
    "op": Style(color="#88c0d0"),
    "bind": Style(color="#ebcb8b"),
    "symbol": Style(color="#ebcb8b"),
    "string": Style(color="#a3be8c"),
    "interp": Style(color="#ebcb8b"),
    "number": Style(color="#d08770"),
    "literal": Style(color="#d08770"),
    "comment": Style(color="#7b88a1", italic=True),
    "punct": Style(color="#8fa1b3"),
    "effect": Style(color="#bf616a"),
}

_TOKEN = re.compile(
    r'(?P<comment>\#[^\n]*)'
    r'|(?P<tstring>"""(?:.|\n)*?(?:"""|\Z))'
    r'|(?P<string>"(?:\\.|[^"\\\n])*"?)'
    r'|(?P<number>(?<![\w$])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?!\w))'
    r'|(?P<effect>@\w+)'
    r'|(?P<symbol>\$[A-Za-z_][\w]*)'
    r'|(?P<ident>[A-Za-z_][\w.\-]*[\w]|[A-Za-z_])'
    r'|(?P<punct>->|==|!=|<=|>=|&&|\|\||[=(){}\[\],:<>+\-*/!?])',
)
_INTERP = re.compile(r"\{\{|\}\}|\{[A-Za-z_$][\w.\[\]\"?]*\}")
_BIND_AFTER = re.compile(r"\s*=(?!=)")
_CALL_AFTER = re.compile(r"\s*\(")


def _stylize_string(text: Text, start: int, end: int, src: str) -> None:
    text.stylize(STYLES["string"], start, end)
    for m in _INTERP.finditer(src, start, end):
        if m.group(0) not in ("{{", "}}"):
            text.stylize(STYLES["interp"], m.start(), m.end())


def highlight_flux(src: str) -> Text:
    """Flux-Lang text → Rich ``Text`` with spans (never raises)."""
    text = Text(src, no_wrap=True, end="")
    pos = 0
    n = len(src)
    while pos < n:
        m = _TOKEN.search(src, pos)
        if m is None:
            break
        kind = m.lastgroup
        s, e = m.start(), m.end()
        if kind in ("string", "tstring"):
            _stylize_string(text, s, e, src)
        elif kind == "symbol":
            style = STYLES["bind"] if _BIND_AFTER.match(src, e) else STYLES["symbol"]
            text.stylize(style, s, e)
        elif kind == "ident":
            word = m.group(0)
            if _CALL_AFTER.match(src, e) and word not in ("when", "unless", "each", "match", "repeat", "loop", "for"):
                text.stylize(STYLES["op"], s, e)
            elif word in FLUX_KEYWORDS:
                text.stylize(STYLES["keyword"], s, e)
            elif word in LITERALS:
                text.stylize(STYLES["literal"], s, e)
            elif _BIND_AFTER.match(src, e):
                text.stylize(STYLES["bind"], s, e)
        elif kind is not None:
            text.stylize(STYLES[kind], s, e)
        pos = e if e > s else s + 1
    return text
