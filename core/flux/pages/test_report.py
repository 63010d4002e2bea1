"""`flux test`'s verdicts for CI: a self-contained HTML report (every scenario, its verdict, and for
a failure the golden ↔ this run comparison the kit printed) and a short Markdown summary a CI job
appends to its job summary or posts on a pull request."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .html import Scrub, esc, page

__all__ = ["render_test_report", "markdown_summary"]

_MAX_SUMMARY_ROWS = 20


def _counts(results: Sequence, orphans: Sequence[Path]) -> tuple[int, int]:
    ok = sum(1 for r in results if r.ok)
    return ok, len(results) - ok + len(orphans)


def render_test_report(results: Sequence, orphans: Sequence[Path], seconds: float, scrub: Scrub | None = None) -> str:
    """The report page of one ``flux test`` run (``results``: the verdict's ScenarioResults)."""
    scrub = scrub or Scrub()
    ok, failed = _counts(results, orphans)
    verdict = (f'<p class="ok">All {ok} scenario(s) clean.</p>' if not failed else
               f'<p class="bad">{failed} failed, {ok} clean.</p>')
    rows = []
    for i, r in enumerate(results):
        mark = '<span class="ok">✓</span>' if r.ok else '<span class="bad">✗</span>'
        link = esc(scrub(r.name)) if r.ok else f'<a href="#f{i}">{esc(scrub(r.name))}</a>'
        rows.append(f'<tr><td class="mark">{mark}</td><td>{link}</td><td>{esc(scrub(r.replay or ""))}</td>'
                    f'<td>{esc(scrub(r.check or ""))}</td><td>{esc(scrub(r.summary()))}</td>'
                    f'<td class="num">{r.seconds:.2f} s</td></tr>')
    for o in orphans:
        rows.append(f'<tr><td class="mark"><span class="bad">✗</span></td><td>{esc(scrub(str(o)))}</td><td></td><td></td>'
                    '<td>orphan golden: no scenario owns it</td><td></td></tr>')
    failures = []
    for i, r in enumerate(results):
        if r.ok:
            continue
        text = r.detail or r.error or r.summary()
        failures.append(f'<section id="f{i}"><h3>✗ {esc(scrub(r.name))}</h3>'
                        f'<p class="meta">{esc(scrub(str(r.path)))}</p>'
                        f'<p class="bad">{esc(scrub(r.summary()))}</p>'
                        f'<p class="dim">golden ↔ this run, as <code>flux test -v</code> prints it:</p>'
                        f'<pre>{esc(scrub(text))}</pre></section>')
    body = (f'<header><h1>flux test</h1><p class="meta">{len(results)} scenario(s) · {seconds:.2f} s</p>{verdict}</header>'
            '<table class="rows"><tr><th></th><th>scenario</th><th>replay</th><th>check</th><th>failure</th>'
            f'<th>time</th></tr>{"".join(rows)}</table>'
            + (f'<h2>Failures</h2>{"".join(failures)}' if failures else ""))
    return page("flux test report", body, scrub)


def _md_cell(text: str) -> str:
    one = " ".join(text.split()).replace("|", "\\|")
    return one if len(one) <= 160 else one[:159] + "…"


def markdown_summary(results: Sequence, orphans: Sequence[Path], seconds: float, *,
                     report_link: str | None = None, scrub: Scrub | None = None) -> str:
    """A few lines of Markdown: the verdict, the failures (at most 20 rows), the report's link."""
    scrub = scrub or Scrub()
    ok, failed = _counts(results, orphans)
    head = (f"### flux test: ✅ {ok} scenario(s) clean" if not failed else
            f"### flux test: ❌ {failed} failed, {ok} clean")
    lines = [head, "", f"{len(results)} scenario(s) replayed and checked offline in {seconds:.2f} s."]
    bad = [(r.name, r.summary()) for r in results if not r.ok] + [(str(o), "orphan golden: no scenario owns it")
                                                                   for o in orphans]
    if bad:
        lines += ["", "| scenario | failure |", "|---|---|"]
        lines += [f"| {_md_cell(scrub(n))} | {_md_cell(scrub(why))} |" for n, why in bad[:_MAX_SUMMARY_ROWS]]
        if len(bad) > _MAX_SUMMARY_ROWS:
            lines.append(f"| … | {len(bad) - _MAX_SUMMARY_ROWS} more failure(s) in the report |")
    if report_link:
        lines += ["", f"Full report (each failure's golden ↔ this run): [{_md_cell(report_link)}]({report_link})"]
    return "\n".join(lines) + "\n"
