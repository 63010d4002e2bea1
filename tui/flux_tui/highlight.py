"""A Flux-Lang syntax highlighter producing Rich ``Text``.

It is a scanner, not a parser: it must colour any text (including plans that do not parse), so it
never fails. It colours every construct of spec §5.4:

- statement and clause keywords (the parser's own word lists), module declarations at column 0;
- header options (``risk:``, ``every:``, ``until:``, ``backoff:``, ``delay:``, ``max:``, ``per:``,
  ``wait:``, ``when:``, ``timeout:``, ``as:``) and their older space-keyword spellings;
- symbols (``$x``, ``$9arg``), bind and arrow targets, op names before ``(`` and after ``do``,
  call labels (``path:``), built-ins (``fmt``, ``parse``, ``expr``, ``len``, ``peek``, ``thing``
  with its kind and selector);
- strings (``"…"``, ``\"\"\"…\"\"\"``, ``'…'``) with ``{sym}`` interpolation, numbers and
  durations (``500ms``, ``5s``, ``1m``), literals, ``@json``/``@effect(tag)``, operators, comments.
"""

from __future__ import annotations

import re

from rich.style import Style
from rich.text import Text

from flux.lang.parser import RESERVED, STATEMENT_KEYWORDS

__all__ = ["highlight_flux", "FLUX_KEYWORDS", "OPTION_LABELS", "MODULE_KEYWORDS", "STYLES"]

#: Module-level declarations (``parse_program``), coloured as keywords at the start of a line.
MODULE_KEYWORDS = frozenset("""
agent agent_loop channel datasource trigger journey op permissions allow deny
""".split())

#: Header option names: ``name:`` after a control header, or the older space-keyword spelling.
OPTION_LABELS = frozenset("risk every until backoff delay max per wait when timeout as".split())

#: Every word the parser reserves, plus the module layer and the ``ctx``/thing vocabulary.
FLUX_KEYWORDS = frozenset(RESERVED | STATEMENT_KEYWORDS | MODULE_KEYWORDS | {
    "purpose", "include", "exclude", "custom", "expr", "len", "flow", "goal",
})

BUILTINS = frozenset({"fmt", "parse", "expr", "len", "peek", "round", "abs", "min", "max"})
THING_WORDS = frozenset({"custom", "id", "name", "path", "query", "key", "context", "file", "person",
                         "ticket", "email", "repo", "dataset", "calendar_event", "url", "secret"})
LITERALS = frozenset({"true", "false", "null"})
_DECLARES = frozenset({"branch", "catch", "each", "ctx"})

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

_TOKEN = re.compile(
    r'(?P<comment>\#[^\n]*)'
    r'|(?P<tstring>"""(?:.|\n)*?(?:"""|\Z))'
    r'|(?P<string>"(?:\\.|[^"\\\n])*"?)'
    r"|(?P<sstring>'(?:\\.|[^'\\\n])*'?)"
    r'|(?P<duration>(?<![\w$.])\d+(?:ms|s|m)(?![\w]))'
    r'|(?P<number>(?<![\w$])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w]))'
    r'|(?P<effect>@\w+)'
    r'|(?P<symbol>\$[A-Za-z0-9_]+)'
    r'|(?P<ident>[A-Za-z_][\w.\-]*[\w]|[A-Za-z_])'
    r'|(?P<punct>->|\+=|==|!=|<=|>=|&&|\|\||[=(){}\[\],:<>+\-*/%!?.])',
)
_INTERP = re.compile(r"\{\{|\}\}|\{[A-Za-z_$][\w.\[\]\"?]*\}")
_BIND_AFTER = re.compile(r"[ \t]*(?::[ \t]*[\w<>.]+[ \t]*)?=(?!=)")
_CALL_AFTER = re.compile(r"[ \t]*\(")
_LABEL_AFTER = re.compile(r"[ \t]*:(?!:)")
_ARROW_BEFORE = re.compile(r"->[ \t]*(?:flat[ \t]+)?\$?\Z")
_LINE_START = re.compile(r"(?:^|\n)[ \t]*\Z")


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
    prev_word = ""  # the previous identifier token (for `do op`, `thing kind selector`)
    thing_left = 0  # words still owned by a `thing` reference
    while pos < n:
        m = _TOKEN.search(src, pos)
        if m is None:
            break
        kind = m.lastgroup
        s, e = m.start(), m.end()
        if kind in ("string", "tstring", "sstring"):
            _stylize_string(text, s, e, src)
        elif kind == "duration":
            text.stylize(STYLES["number"], s, e)
        elif kind == "symbol":
            before = src[max(0, s - 24):s]
            bind = _BIND_AFTER.match(src, e) or _ARROW_BEFORE.search(before) or src.startswith("+=", e)
            text.stylize(STYLES["bind"] if bind else STYLES["symbol"], s, e)
        elif kind == "ident":
            word = m.group(0)
            style = _ident_style(src, s, e, word, prev_word, thing_left)
            if style is not None:
                text.stylize(STYLES[style], s, e)
            thing_left = 2 if word == "thing" else max(0, thing_left - 1)
            prev_word = word
            pos = e if e > s else s + 1
            continue
        elif kind is not None:
            text.stylize(STYLES[kind], s, e)
        pos = e if e > s else s + 1
    return text


def _ident_style(src: str, s: int, e: int, word: str, prev_word: str, thing_left: int) -> str | None:
    line_start = _LINE_START.search(src, 0, s) is not None
    if thing_left and word in THING_WORDS:
        return "thing"
    if prev_word == "do":
        return "op"
    if prev_word in _DECLARES and not line_start and word not in FLUX_KEYWORDS:
        return "bind"  # `branch left`, `catch err`, `each item`, `ctx pack` declare a symbol
    if _CALL_AFTER.match(src, e):
        if word in BUILTINS:
            return "builtin"
        if word in STATEMENT_KEYWORDS and word != "do":
            return "keyword"  # `when (…)`, `match (…)`
        return "op"
    if word in OPTION_LABELS and not line_start and (_LABEL_AFTER.match(src, e) or word != "when"):
        return "option"
    if line_start and word in MODULE_KEYWORDS:
        return "keyword"
    if word == "peek":
        return "builtin"
    if word in LITERALS:
        return "literal"
    if word in FLUX_KEYWORDS and not _BIND_AFTER.match(src, e):
        return "keyword"
    if _BIND_AFTER.match(src, e):
        return "bind"
    if _ARROW_BEFORE.search(src[max(0, s - 24):s]):
        return "bind"
    if _LABEL_AFTER.match(src, e):
        return "label"
    return None
