"""Two runs' trajectory diff as one self-contained HTML page: the aligned rows side by side, styled as
in the app (``=`` same statement and outputs, ``~`` the plan diverges, ``≠`` same statement,
different world), the first divergence marked and linked from the top, and under each differing
row what changed (JSON structure or lines). Anchors: ``#rN`` row N, ``#first`` the first
divergence."""

from __future__ import annotations

from ..timemachine.diff import RunDiff, payload_diff
from .html import Scrub, esc, flux_code, page
from .run_page import page_name

__all__ = ["render_diff_page"]

_MARK = {"same": "=", "plan": "~", "output": "≠"}
_WORDS = {"same": "same statement, same outputs", "plan": "the plan diverges: the agent did something else",
          "output": "same statement, different world: a recorded output differs"}


def render_diff_page(d: RunDiff, scrub: Scrub | None = None, *, a_label: str | None = None,
                     b_label: str | None = None) -> str:
    """The page of ``d`` (from :func:`flux.timemachine.diff.run_diff`). ``a_label``/``b_label`` say
    where each side comes from (a store path for a cross-store diff); they default to the ids."""
    scrub = scrub or Scrub()
    a_label = a_label or d.a
    b_label = b_label or d.b
    fd = d.first_divergence
    if d.identical:
        verdict = f'<p class="ok">The runs are identical ({len(d.rows)} row(s)).</p>'
    else:
        verdict = (f'<p class="bad">The runs differ: {esc(d.summary_line())}. '
                   f'<a href="#first">Go to the first divergence (row {fd}).</a></p>')
    rows = [_row(d, r, r.index == fd, scrub) for r in d.rows]
    empty = '' if d.rows else '<p class="dim">Neither run has statement rows or cassette cells: there was nothing to compare.</p>'
    body = (f'<header><h1>diff <a href="{esc(page_name(d.a))}">{esc(d.a)}</a> ↔ '
            f'<a href="{esc(page_name(d.b))}">{esc(d.b)}</a></h1>'
            f'<p class="meta">A: {esc(scrub(a_label))} · B: {esc(scrub(b_label))} · aligned '
            f'{"as a sequence" if d.sequence_aligned else "by position"} · '
            f'{"cassette cells" if d.cell_rows else "statements"}</p>{verdict}'
            '<p class="dim">= same statement and outputs · ~ the plan diverges · ≠ same statement, different world</p>'
            '</header>'
            '<table class="rows"><tr><th></th><th>row</th><th class="side">A</th><th class="side">B</th></tr>'
            f'{"".join(rows)}</table>{empty}')
    return page(f"diff {d.a} ↔ {d.b}", body, scrub)


def _row(d: RunDiff, r, first: bool, scrub: Scrub) -> str:
    ids = f' id="r{r.index}"' if not first else f' id="first"'
    anchor = f'<a class="anchor" href="#r{r.index}" id="r{r.index}">{r.index}</a>' if first else \
        f'<a class="anchor" href="#r{r.index}">{r.index}</a>'
    if r.kind == "same":
        a = b = _stmt(d, r.stmt, scrub)
    elif r.kind == "plan":
        a = _stmt(d, r.a_stmt, scrub) if r.a_stmt else '<span class="dim">(no statement)</span>'
        b = _stmt(d, r.b_stmt, scrub) if r.b_stmt else '<span class="dim">(no statement)</span>'
    else:
        stmt = _stmt(d, r.stmt, scrub)
        a = f'{stmt}<p class="dim">op <strong>{esc(scrub(r.op or ""))}</strong> returned</p><pre>{esc(scrub(r.a or ""))}</pre>'
        b = f'{stmt}<p class="dim">op <strong>{esc(scrub(r.op or ""))}</strong> returned</p><pre>{esc(scrub(r.b or ""))}</pre>'
    explain = ""
    if r.kind != "same":
        lines = payload_diff(d, r).lines
        if lines:
            explain = (f'<tr class="{r.kind} explain"><td></td><td></td><td colspan="2"><details><summary>what changed'
                       f'</summary><pre>{esc(scrub(chr(10).join(lines)))}</pre></details></td></tr>')
    cls = r.kind + (" first" if first else "")
    title = esc(_WORDS[r.kind])
    return (f'<tr class="{cls} row"{ids}><td class="mark" title="{title}">{_MARK[r.kind]}</td><td>{anchor}</td>'
            f'<td class="side">{a}</td><td class="side">{b}</td></tr>{explain}')


def _stmt(d: RunDiff, stmt: str | None, scrub: Scrub) -> str:
    """A row's statement, highlighted; in a cell-row diff the cell's label (op and input), plain."""
    text = d.sources.get(stmt or "") or d.text(stmt)
    if d.cell_rows:
        return f"<pre>{esc(scrub(text))}</pre>"
    return f"<pre>{flux_code(text, scrub)}</pre>"
