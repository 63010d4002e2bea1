"""The building blocks of the review pages: escaping, the page shell with its inline style (light
and dark by the reader's colour scheme), highlighted Flux-Lang, unified-diff blocks, and the
export-time scrub every shown string goes through.

A page is one static file: inline CSS, no script, no reference to anything outside itself.
"""

from __future__ import annotations

import html
import os
from typing import Iterable, Mapping

from ..cassette.redactor import Redactor, secret_name
from ..lang.highlight import highlight_spans

__all__ = ["Scrub", "esc", "page", "flux_code", "text_block", "diff_block", "looks_like_unified_diff", "attrs"]


class Scrub:
    """Every string a page shows passes here first: the redactor's shape passes, plus the values of
    this environment's secret-named variables — a second pass over text the recorder already
    redacted (a prompt or an answer is stored as the user typed it)."""

    def __init__(self, env: Mapping[str, str] | None = None):
        env = os.environ if env is None else env
        self._redactor = Redactor([v for k, v in env.items() if secret_name(k) and v])

    def __call__(self, text: object) -> str:
        return self._redactor.redact(text if isinstance(text, str) else str(text))


def esc(text: str) -> str:
    return html.escape(text, quote=True)


def attrs(**values: str | None) -> str:
    """``key="value"`` pairs (``class_`` for ``class``), skipping ``None``."""
    return "".join(f' {k.rstrip("_")}="{esc(v)}"' for k, v in values.items() if v is not None)


def flux_code(src: str, scrub: Scrub) -> str:
    """Flux-Lang as ``<code>`` with one ``<span class="fl-ROLE">`` per highlighted token (the same
    scanner as the app's). The text is scrubbed first, so spans are computed on what is shown."""
    text = scrub(src)
    out: list[str] = []
    pos = 0
    for start, end, role in _flat(highlight_spans(text)):
        if start > pos:
            out.append(esc(text[pos:start]))
        out.append(f'<span class="fl-{role}">{esc(text[start:end])}</span>')
        pos = end
    out.append(esc(text[pos:]))
    return '<code class="flux">' + "".join(out) + "</code>"


def _flat(spans: Iterable[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Nested spans (an interpolation inside its string) as a flat, ordered, non-overlapping list:
    the inner span wins where it lies."""
    flat: list[tuple[int, int, str]] = []
    for start, end, role in spans:
        if flat and start < flat[-1][1]:  # inside the previous span: split it around this one
            ps, pe, prole = flat.pop()
            if ps < start:
                flat.append((ps, start, prole))
            flat.append((start, min(end, pe), role))
            if min(end, pe) < pe:
                flat.append((min(end, pe), pe, prole))
            continue
        if end > start:
            flat.append((start, end, role))
    return flat


def text_block(text: str, scrub: Scrub, *, class_: str = "text") -> str:
    return f'<pre class="{class_}">{esc(scrub(text))}</pre>'


def looks_like_unified_diff(text: str) -> bool:
    lines = text.splitlines()
    return any(line.startswith("@@") for line in lines) and any(line[:1] in "+-" for line in lines)


def diff_block(text: str, scrub: Scrub) -> str:
    """A unified diff, one styled line each. Each line's content is scrubbed without its ``+``/``-``
    marker, so a credential right after the marker still stands at a token boundary."""
    rows = []
    for line in text.splitlines():
        if line.startswith(("+++", "---")):
            cls, body = "d-head", scrub(line)
        elif line.startswith("@@"):
            cls, body = "d-hunk", scrub(line)
        elif line[:1] in ("+", "-", " "):
            cls = {"+": "d-add", "-": "d-del", " ": "d-ctx"}[line[0]]
            body = line[0] + scrub(line[1:])
        else:
            cls, body = "d-ctx", scrub(line)
        rows.append(f'<span class="{cls}">{esc(body)}</span>')
    return '<pre class="diff">' + "\n".join(rows) + "</pre>"


_STYLE = """
:root { color-scheme: light dark; --bg: #fbfbfa; --fg: #1f2328; --dim: #656d76; --line: #d8dee4;
  --panel: #f2f4f6; --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --link: #0550ae;
  --add: #dafbe1; --del: #ffebe9; --hunk: #ddf4ff;
  --kw: #8250df; --op: #0a6a86; --bind: #953800; --str: #116329; --num: #a0480b; --com: #6e7781; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0d1117; --fg: #e6edf3; --dim: #8d96a0; --line: #30363d; --panel: #161b22;
    --ok: #3fb950; --bad: #f85149; --warn: #d29922; --link: #58a6ff;
    --add: #12361f; --del: #3d1517; --hunk: #0c2d4a;
    --kw: #d2a8ff; --op: #79c0ff; --bind: #ffa657; --str: #7ee787; --num: #f0883e; --com: #8b949e; } }
* { box-sizing: border-box; }
body { margin: 0 auto; max-width: 72rem; padding: 1.5rem; background: var(--bg); color: var(--fg);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; }
a { color: var(--link); }
h1 { font-size: 1.6rem; margin: 0 0 .25rem; } h2 { font-size: 1.25rem; margin: 2rem 0 .5rem; }
h3 { font-size: 1.05rem; margin: 1.25rem 0 .5rem; }
.meta, .dim { color: var(--dim); }
pre, code { font: 13px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: .6rem .8rem;
  overflow-x: auto; white-space: pre-wrap; word-break: break-word; margin: .4rem 0; }
table { border-collapse: collapse; margin: .5rem 0; }
th, td { border: 1px solid var(--line); padding: .25rem .6rem; text-align: left; vertical-align: top; }
th { background: var(--panel); }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.badge { display: inline-block; border: 1px solid currentColor; border-radius: 999px; padding: 0 .5rem;
  font-size: .8rem; margin-left: .4rem; }
.ok { color: var(--ok); } .bad { color: var(--bad); } .warn { color: var(--warn); }
.turn { border-top: 2px solid var(--line); margin-top: 2rem; }
.stmt { border-left: 3px solid var(--line); padding: .1rem 0 .1rem .75rem; margin: .6rem 0; }
.stmt:target, .cell:target, .row:target { outline: 2px solid var(--link); outline-offset: 2px; }
.stmt.halted, .stmt.diverged { border-left-color: var(--bad); }
.anchor { text-decoration: none; color: var(--dim); font-size: .85rem; margin-right: .4rem; }
details { margin: .3rem 0; } summary { cursor: pointer; }
.cell { border: 1px solid var(--line); border-radius: 6px; padding: .2rem .6rem; margin: .35rem 0 .35rem 1rem; }
.cell.error { border-color: var(--bad); }
.session .session { margin-left: 1.5rem; border-left: 3px solid var(--line); padding-left: .75rem; }
ul.tree { list-style: none; padding-left: 1.25rem; } ul.tree li { margin: .15rem 0; }
.here { font-weight: 600; }
pre.diff { padding: 0; } pre.diff span { display: block; padding: 0 .8rem; }
.d-add { background: var(--add); } .d-del { background: var(--del); } .d-hunk { background: var(--hunk); color: var(--dim); }
.d-head { color: var(--dim); font-weight: 600; }
code.flux { white-space: pre-wrap; }
.fl-keyword { color: var(--kw); font-weight: 600; } .fl-option { color: var(--kw); font-style: italic; }
.fl-op { color: var(--op); } .fl-builtin { color: var(--op); font-weight: 600; } .fl-label { color: var(--op); }
.fl-bind { color: var(--bind); font-weight: 600; } .fl-symbol { color: var(--bind); }
.fl-string { color: var(--str); } .fl-interp { color: var(--bind); } .fl-number, .fl-literal { color: var(--num); }
.fl-comment { color: var(--com); font-style: italic; } .fl-punct { color: var(--dim); }
.fl-effect { color: var(--bad); } .fl-thing { color: var(--op); font-style: italic; }
table.rows td.mark { font-weight: 700; text-align: center; width: 2rem; }
tr.same td.mark { color: var(--ok); } tr.output td.mark { color: var(--warn); } tr.plan td.mark { color: var(--bad); }
tr.first td { box-shadow: inset 0 2px 0 var(--bad); }
table.rows td.side { width: 45%; }
footer { margin-top: 3rem; color: var(--dim); font-size: .85rem; }
"""


def page(title: str, body: str, scrub: Scrub) -> str:
    """The whole document around ``body`` (already escaped HTML)."""
    return ("<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<meta name=\"color-scheme\" content=\"light dark\">\n"
            f"<title>{esc(scrub(title))}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n{body}\n"
            "<footer>Written by flux-tui from a recorded store; every string passed the redactor again when the "
            "page was made.</footer>\n</body>\n</html>\n")
