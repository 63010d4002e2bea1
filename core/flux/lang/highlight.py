"""Flux-Lang syntax roles for highlighting: a scanner, not a parser, so it colours any text (plans
that do not parse included) and never fails. Front ends map each role to a colour; the roles are
listed in docs/flux-lang.md.
"""

from __future__ import annotations

import re

from .parser import RESERVED, STATEMENT_KEYWORDS

__all__ = ["highlight_spans", "Span", "ROLES", "FLUX_KEYWORDS", "OPTION_LABELS", "MODULE_KEYWORDS"]

Span = tuple[int, int, str]  # (start, end, role)

ROLES = ("keyword", "option", "op", "builtin", "label", "bind", "symbol", "string", "interp", "number",
         "literal", "comment", "punct", "effect", "thing")

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
#: an interpolation inside a string (``{sym}``, ``{a.b[0]}``; not the ``{{``/``}}`` escapes)
_INTERP = re.compile(r"\{\{|\}\}|\{[A-Za-z_$][\w.\[\]\"?]*\}")
# What follows or precedes a word and so gives it its role:
#: ``= …`` (perhaps after ``: Type``) — the word is bound
_BIND_AFTER = re.compile(r"[ \t]*(?::[ \t]*[\w<>.]+[ \t]*)?=(?!=)")
#: ``(`` — the word is an op called
_CALL_AFTER = re.compile(r"[ \t]*\(")
#: ``:`` — the word labels an argument or an option
_LABEL_AFTER = re.compile(r"[ \t]*:(?!:)")
#: ``->`` (perhaps ``-> flat``) before it — the word is an arrow's target
_ARROW_BEFORE = re.compile(r"->[ \t]*(?:flat[ \t]+)?\$?\Z")
#: only blanks since the line began — the word starts a line
_LINE_START = re.compile(r"(?:^|\n)[ \t]*\Z")


def _string_spans(out: list[Span], start: int, end: int, src: str) -> None:
    out.append((start, end, "string"))
    for m in _INTERP.finditer(src, start, end):
        if m.group(0) not in ("{{", "}}"):
            out.append((m.start(), m.end(), "interp"))


def highlight_spans(src: str) -> list[Span]:
    """Flux-Lang text → ``(start, end, role)`` spans in text order (never raises). A later span
    may lie inside an earlier one (a ``{sym}`` inside its string): apply them in order."""
    out: list[Span] = []
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
            _string_spans(out, s, e, src)
        elif kind == "duration":
            out.append((s, e, "number"))
        elif kind == "symbol":
            before = src[max(0, s - 24):s]
            bind = _BIND_AFTER.match(src, e) or _ARROW_BEFORE.search(before) or src.startswith("+=", e)
            out.append((s, e, "bind" if bind else "symbol"))
        elif kind == "ident":
            word = m.group(0)
            style = _ident_style(src, s, e, word, prev_word, thing_left)
            if style is not None:
                out.append((s, e, style))
            thing_left = 2 if word == "thing" else max(0, thing_left - 1)
            prev_word = word
            pos = e if e > s else s + 1
            continue
        elif kind is not None:
            out.append((s, e, kind))
        pos = e if e > s else s + 1
    return out


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
