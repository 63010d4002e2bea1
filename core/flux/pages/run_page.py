"""A recorded session as one self-contained HTML page a reviewer opens cold: the family tree, cost per
model, the turns with their prompts, answers, plans and the cells each statement dispatched, each cell
marked by a hermetic replay made while the page is written.

Anchors: ``#tN`` a turn, ``#tN-sK`` statement K of turn N (counted as ``flux fork --at`` counts),
``#cI`` cassette cell I.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import FluxError
from ..model.interrupted import check_interrupted
from ..model.lineage import lineage_of
from ..model.pricing import PriceTable, turn_usage_pairs
from ..model.session import Cell, SessionDetail, Turn, load_session
from ..model.timeline import build_timeline
from ..store.store import SessionRow, StoreReader
from ..timefmt import iso_ms
from ..timemachine.family import family_of
from ..timemachine.replay import replay_detail
from .html import Scrub, diff_block, esc, flux_code, looks_like_unified_diff, page, text_block

__all__ = ["render_run_page", "page_name", "family_ids"]

_MAX_SUBAGENT_DEPTH = 4
_CELL_MARKS = {"served": ("✓", "ok", "served to the replay"),
               "unconsumed": ("○", "warn", "never asked for by the replay"),
               "truncated": ("✗", "bad", "truncated: the replay refused to serve it")}
_STATUS = {"completed": ("✓", "ok"), "skipped": ("↷", "dim"), "halted": ("✗", "bad"), "dispatched": ("▸", "warn"),
           "not run": ("·", "dim")}
#: A statement's fate in the replay made for the page: (mark, class, words).
_REPLAYED = {"completed": ("✓", "ok", "replayed from tape"), "skipped": ("↷", "dim", "fast-forwarded by the replay"),
             "halted": ("✓", "warn", "halted in the replay as recorded"),
             "diverged": ("✗", "bad", "diverged in the replay")}


def page_name(session_id: str) -> str:
    """The file name a session's page has beside its family's pages."""
    return f"{session_id}.html"


def render_run_page(reader: StoreReader, session_ref: str, prices: PriceTable | None = None,
                    scrub: Scrub | None = None) -> str:
    """The page of ``session_ref`` (``s_<n>`` or ``last``). Reads only; raises the reader's
    one-line errors (``SessionNotFound``, a corrupt store)."""
    scrub = scrub or Scrub()
    detail = load_session(reader, session_ref)
    family = family_of(reader, detail.id)
    marks = _replay_marks(detail)
    body = [_header(reader, detail, marks, scrub), _family(family, detail.id, scrub), _cost(detail, prices, scrub),
            _timeline(detail, scrub), _session_body(reader, detail, scrub, depth=0, marks=marks)]
    return page(f"flux run {detail.id}", "\n".join(body), scrub)


# -- the parts --------------------------------------------------------------------------------------

def _header(reader: StoreReader, detail: SessionDetail, marks: dict[str, Any], scrub: Scrub) -> str:
    row = detail.row
    check = check_interrupted(detail.turns, detail.turn_run_trace)
    badges = []
    if check.interrupted is not None:
        badges.append(f'<span class="badge warn">⚠ interrupted · turn {check.interrupted.turn_number}</span>')
    lin = lineage_of(row)
    source = ""
    if lin is not None:
        known = _has_session(reader, lin.source)
        link = f'<a href="{esc(page_name(lin.source))}">{esc(lin.source)}</a>' if known else esc(lin.source)
        source = f'<p>{esc(lin.mark)} of {link}{esc(" " + lin.detail if lin.detail else "")}</p>'
    n_turns = len(detail.turns)
    outcomes = ", ".join(sorted({t.outcome for t in detail.turns})) or "no turns"
    return (f'<header><h1>{esc(detail.id)}{"".join(badges)}</h1>'
            f'<p class="meta">{esc(scrub(row.model or "?"))} · {n_turns} turn(s) · {esc(outcomes)} · '
            f'{len(detail.cells)} cassette cell(s) · created {esc(iso_ms(row.created_at))} · '
            f'updated {esc(iso_ms(row.updated_at))}</p>{source}{_verdict(marks, scrub)}</header>')


def _verdict(marks: dict[str, Any], scrub: Scrub) -> str:
    if not marks.get("verdict"):
        return '<p class="dim">Nothing to replay from tape.</p>'
    cls = "ok" if marks["verdict"] == "reproduced" else "bad"
    return (f'<p>Replayed from tape while this page was written (no model call, no side effect): '
            f'<span class="{cls}">{esc(scrub(marks["verdict"]))}</span></p>')


def _has_session(reader: StoreReader, session_id: str) -> bool:
    try:
        reader.resolve_session(session_id)
        return True
    except FluxError:
        return False


def _family(family: Any, here: str, scrub: Scrub) -> str:
    if len(family.nodes) <= 1 and family.missing_source is None:
        return ""
    items: list[str] = []
    depth = 0
    for node in family.nodes:
        while depth < node.depth:
            items.append('<ul class="tree">')
            depth += 1
        while depth > node.depth:
            items.append("</ul>")
            depth -= 1
        mark = f'<span class="dim">{esc(node.lineage.mark)}{esc(" " + node.lineage.detail if node.lineage.detail else "")}</span> ' \
            if node.lineage is not None else ""
        name = esc(node.id)
        link = f'<span class="here">{name}</span>' if node.id == here else f'<a href="{esc(page_name(node.id))}">{name}</a>'
        items.append(f"<li>{mark}{link} <span class=\"dim\">{esc(scrub(node.row.model or ''))}</span></li>")
    items.extend(["</ul>"] * depth)
    notes = "".join(f'<p class="dim">{esc(c)}</p>' for c in family.cut)
    if family.missing_source:
        notes += f'<p class="dim">the root names a source this store does not hold: {esc(family.missing_source)}</p>'
    return f'<section id="family"><h2>Family</h2><ul class="tree">{"".join(items)}</ul>{notes}</section>'


def _cost(detail: SessionDetail, prices: PriceTable | None, scrub: Scrub) -> str:
    per_model: dict[str, list[Any]] = {}
    for t in detail.turns:
        for model, usage in turn_usage_pairs(t, detail.row.model):
            acc = per_model.setdefault(model or "?", [None, 0])
            acc[0] = usage if acc[0] is None else acc[0] + usage
            acc[1] += 1
    if not per_model:
        return ""
    rows = []
    total: float | None = 0.0
    for model, (usage, calls) in sorted(per_model.items()):
        usd = prices.cost(model, usage) if prices is not None else None
        if usd is None:
            total = None
        elif total is not None:
            total += usd
        rows.append(f"<tr><td>{esc(scrub(model))}</td><td class=\"num\">{calls}</td>"
                    f"<td class=\"num\">{usage.input_tokens:,}</td><td class=\"num\">{usage.output_tokens:,}</td>"
                    f"<td class=\"num\">{usage.cache_read_input_tokens:,}</td>"
                    f"<td class=\"num\">{_usd(usd)}</td></tr>")
    rows.append(f'<tr><th colspan="5">total</th><td class="num">{_usd(total)}</td></tr>')
    return ('<section id="cost"><h2>Cost</h2><table><tr><th>model</th><th>calls</th><th>input</th><th>output</th>'
            f'<th>cache read</th><th>USD</th></tr>{"".join(rows)}</table></section>')


def _usd(v: float | None) -> str:
    return "unpriced" if v is None else f"${v:.4f}"


def _timeline(detail: SessionDetail, scrub: Scrub) -> str:
    if not detail.turns:
        return '<p class="dim">This session has no turns.</p>'
    rows = []
    for t in detail.turns:
        took = "" if t.ended_at_ms is None else f"{(t.ended_at_ms - t.started_at_ms) / 1000:.1f} s"
        rows.append(f'<tr><td><a href="#t{t.number}">turn {t.number}</a></td><td>{esc(iso_ms(t.started_at_ms))}</td>'
                    f'<td class="num">{esc(took)}</td><td>{_outcome(t)}</td>'
                    f'<td>{esc(_excerpt(scrub(t.user_input)))}</td></tr>')
    return ('<section id="timeline"><h2>Timeline</h2><table><tr><th>turn</th><th>started</th><th>took</th>'
            f'<th>outcome</th><th>prompt</th></tr>{"".join(rows)}</table></section>')


def _outcome(t: Turn) -> str:
    cls = {"ok": "ok", "resurrected": "ok", "pending": "warn", "cancelled": "warn"}.get(t.outcome, "bad")
    return f'<span class="{cls}">{esc(t.outcome)}</span>'


def _excerpt(text: str, n: int = 96) -> str:
    one = " ".join(text.split())
    return one if len(one) <= n else one[: n - 1] + "…"


def _session_body(reader: StoreReader, detail: SessionDetail, scrub: Scrub, *, depth: int,
                  marks: dict[str, Any] | None = None) -> str:
    marks = _replay_marks(detail) if marks is None else marks
    source_cells = _source_cells(reader, detail)
    check = check_interrupted(detail.turns, detail.turn_run_trace)
    interrupted = check.interrupted.turn_number if check.interrupted is not None else None
    prefix = "" if depth == 0 else f"{detail.id}-"
    parts = [_turn(detail, t, marks, source_cells, interrupted == t.number, scrub, prefix) for t in detail.turns]
    if depth < _MAX_SUBAGENT_DEPTH:
        for child in reader.children_of(detail.id):
            lin = lineage_of(child)
            if lin is None or lin.kind != "sub-agent":
                continue
            try:
                sub = load_session(reader, child.id)
            except FluxError as e:
                parts.append(f'<p class="bad">sub-agent {esc(child.id)}: {esc(scrub(str(e)))}</p>')
                continue
            parts.append(f'<details class="session" open id="{esc(child.id)}"><summary>↳ sub-agent '
                         f'<a href="{esc(page_name(child.id))}">{esc(child.id)}</a> '
                         f'<span class="dim">{esc(scrub(lin.detail))} · {esc(scrub(child.model or ""))}</span></summary>'
                         f'{_session_body(reader, sub, scrub, depth=depth + 1)}</details>')
    return f'<div class="session">{"".join(parts)}</div>'


def _replay_marks(detail: SessionDetail) -> dict[str, Any]:
    """What a hermetic replay says of each cell (by tape index) and statement (by flow key and
    node); empty when the session has nothing to replay."""
    try:
        report = replay_detail(detail)
    except FluxError:
        return {"cells": [], "stmts": {}, "verdict": None}
    stmts: dict[tuple[str, int], str] = {}
    for sr in report.statement_results:
        bad = any(r.status != "served" for r in sr.requests)
        stmts[(sr.plan, sr.node)] = "diverged" if bad else sr.status
    verdict = "reproduced" if report.diverged is None else f"diverged: {report.diverged}"
    return {"cells": list(report.cell_status), "stmts": stmts, "verdict": verdict}


def _source_cells(reader: StoreReader, detail: SessionDetail) -> tuple[str, set[tuple[str, str, str]]] | None:
    """For a fork or what-if child: its source's id and cells as (op, input hash, content)."""
    lin = lineage_of(detail.row)
    if lin is None or lin.kind not in ("fork", "what-if", "check"):
        return None
    try:
        src = load_session(reader, lin.source)
    except FluxError:
        return None
    return lin.source, {(c.rec.op, c.rec.input_hash, c.rec.content) for c in src.cells}


def _turn(detail: SessionDetail, t: Turn, marks: dict[str, Any], source_cells: Any, interrupted: bool, scrub: Scrub,
          prefix: str) -> str:
    tid = f"{prefix}t{t.number}"
    flag = ' <span class="badge warn">⚠ interrupted</span>' if interrupted else ""
    took = "" if t.ended_at_ms is None else f" · took {(t.ended_at_ms - t.started_at_ms) / 1000:.1f} s"
    out = [f'<section class="turn" id="{esc(tid)}"><h2><a class="anchor" href="#{esc(tid)}">#</a>'
           f'Turn {t.number} · {_outcome(t)}{flag}</h2>'
           f'<p class="meta">{esc(scrub(t.model or detail.row.model or ""))} · started {esc(iso_ms(t.started_at_ms))}'
           f'{esc(took)} · {t.iterations} iteration(s)</p>',
           "<h3>Prompt</h3>", text_block(t.user_input, scrub)]
    try:
        timeline = build_timeline(detail, t)
    except FluxError as e:
        out.append(f'<p class="bad">{esc(scrub(str(e)))}</p>')
        timeline = None
    if timeline is not None:
        k = 0
        for plan in timeline.plans:
            out.append(f'<h3>Plan {plan.index + 1} <span class="dim">{esc(plan.attempt.outcome)}'
                       f'{esc(" · " + plan.flow_key if plan.flow_key else "")}</span></h3>')
            if plan.parse_error:
                out.append(f'<p class="bad">the plan does not parse: {esc(scrub(plan.parse_error))}</p>')
                if plan.attempt.plan_source:
                    out.append(text_block(plan.attempt.plan_source, scrub))
            for st in plan.statements:
                sid = f"{tid}-s{k}"
                replay = marks["stmts"].get((plan.flow_key or "", st.node))
                mark, cls = _STATUS.get(st.status, ("·", "dim"))
                extra = ""
                if replay in _REPLAYED:
                    rm, rcls, rwords = _REPLAYED[replay]
                    extra = f' · <span class="{rcls}">{rm} {esc(rwords)}</span>'
                halt = f'<p class="bad">{esc(scrub(st.halt_kind or ""))}: {esc(scrub(st.halt_error or ""))}</p>' \
                    if st.status == "halted" else ""
                cells = "".join(_cell(c, marks, source_cells, scrub) for c in st.cells)
                out.append(f'<div class="stmt {esc(st.status.replace(" ", "-"))}" id="{esc(sid)}">'
                           f'<a class="anchor" href="#{esc(sid)}">statement {k}</a>'
                           f'<span class="{cls}">{mark} {esc(st.status)}</span>{extra}'
                           f'<pre>{flux_code(st.text, scrub)}</pre>{halt}{cells}</div>')
                k += 1
        if timeline.loose_cells:
            out.append("<h3>Cells outside any plan</h3>")
            out.extend(_cell(c, marks, source_cells, scrub) for c in timeline.loose_cells)
    if t.answer:
        out.extend(["<h3>Answer</h3>", text_block(t.answer, scrub)])
    out.append("</section>")
    return "".join(out)


def _cell(c: Cell, marks: dict[str, Any], source_cells: Any, scrub: Scrub) -> str:
    r = c.rec
    err = c.flagged_error
    state = f'<span class="bad">✗ {"denied" if r.denied else "error"}</span>' if err else '<span class="ok">ok</span>'
    status = marks["cells"][c.index] if c.index < len(marks["cells"]) else None
    replay = ""
    if status in _CELL_MARKS:
        m, cls, what = _CELL_MARKS[status]
        replay = f' · <span class="{cls}" title="{esc(what)}">{m} {esc(status)} in the replay</span>'
    origin = ""
    if source_cells is not None:
        source, cells = source_cells
        origin = f' · <span class="dim">from {esc(source)}\'s tape</span>' \
            if (r.op, r.input_hash, r.content) in cells else ' · <span class="warn">ran live</span>'
    flags = " ".join(f'<span class="badge">{name}</span>' for name, on in
                     (("redacted", r.redacted), ("truncated", r.truncated)) if on)
    body = []
    if r.input_view is not None:
        body += ["<h4>input</h4>", f"<pre>{esc(scrub(_pretty(r.input_view)))}</pre>"]
    body += ["<h4>content</h4>", text_block(r.content, scrub) if r.content else '<p class="dim">(empty)</p>']
    if r.view is not None:
        body += ["<h4>view</h4>", diff_block(r.view, scrub) if looks_like_unified_diff(r.view) else text_block(r.view, scrub)]
    return (f'<details class="cell{" error" if err else ""}" id="c{c.index}"><summary>'
            f'<a class="anchor" href="#c{c.index}">cell {c.index}</a><strong>{esc(scrub(r.op))}</strong> · {state}'
            f'{replay}{origin} {flags}</summary>{"".join(body)}</details>')


def _pretty(raw: str) -> str:
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):
        return raw


def family_ids(reader: StoreReader, session_ref: str) -> list[SessionRow]:
    """Every session of ``session_ref``'s family, root first: what ``--family`` writes a page for."""
    return [n.row for n in family_of(reader, session_ref).nodes]
