"""Guards around engine read models that need the Flux-Lang parser.

``flux.model.timeline.build_timeline`` and ``flux.model.interrupted.check_interrupted`` import
``flux.lang.parse``. While a build lacks it (the parser is landing separately), the app must still
browse: these wrappers fall back to a scanner-based split of the plan into its top-level statements,
and to an interrupt check that skips the parse (flow key unknown, ledger count approximate). The
fallback is announced on screen (``degraded``), never silent.
"""

from __future__ import annotations

import re
from typing import Sequence

from flux.model.interrupted import InterruptCheck, InterruptedTurn, check_interrupted
from flux.model.listing import SessionSummary, summarize_sessions
from flux.model.session import Cell, SessionDetail, Turn
from flux.model.timeline import CursorItem, Statement, TimelinePlan, TurnTimeline, build_timeline
from flux.store.events import OpRecorded, PlanHalted, Run, StatementCompleted

# Import the parser side of the engine once, on the main thread: read models import it lazily, and
# two worker threads doing the first import at the same time can see a half-initialised module.
try:  # pragma: no cover - depends on the build
    import flux.lang  # noqa: F401
    from flux.lang import formatter as _formatter, hashes as _hashes, parse as _parse  # noqa: F401
except ImportError:
    pass

__all__ = ["safe_build_timeline", "safe_check_interrupted", "safe_summarize", "split_statements", "PARSER_MISSING"]

PARSER_MISSING = "the Flux-Lang parser is not available in this build — statements are split by layout"


def _parser_missing(e: BaseException) -> bool:
    return isinstance(e, ImportError) and ("parse" in str(e) or "formatter" in str(e) or "lang" in str(e))


# -- interrupted --------------------------------------------------------------------------------


def safe_check_interrupted(detail: SessionDetail) -> tuple[InterruptCheck, str | None]:
    """(check, degraded-note)."""
    try:
        return check_interrupted(detail.turns, detail.turn_run_trace), None
    except ImportError as e:
        if not _parser_missing(e):
            raise
    return _fallback_interrupt(detail.turns, detail.turn_run_trace), PARSER_MISSING


def _fallback_interrupt(turns: Sequence[Turn], trace) -> InterruptCheck:
    open_turn = next((t for t in reversed(turns) if not t.ended), None)
    if open_turn is None:
        return InterruptCheck()
    newest = turns[-1]
    if open_turn is not newest:
        return InterruptCheck(reason=(f"turn {open_turn.number} is interrupted, but turn {newest.number} ran and closed after it"
                                      " — needs manual recovery"), open_turn=open_turn.number)
    accepted = [p for p in open_turn.plan_attempts if p.outcome == "accepted"]
    if not accepted:
        return InterruptCheck(reason=f"turn {open_turn.number} crashed before any plan was accepted — nothing to resume",
                              open_turn=open_turn.number)
    plan = accepted[-1]
    if plan.plan_source is None:
        return InterruptCheck(reason=f"turn {open_turn.number}'s last accepted plan has no plan_source — not resumable",
                              open_turn=open_turn.number)
    completed = 0
    last_node = -1
    for ev in trace(open_turn):
        r = ev.body.event if isinstance(ev.body, Run) else None
        if isinstance(r, StatementCompleted):
            completed = completed + 1 if r.node > last_node else 1
            last_node = r.node
    return InterruptCheck(
        interrupted=InterruptedTurn(open_turn.number, open_turn.turn_id, open_turn.started_at_ms, open_turn.user_input,
                                    plan.plan_source, "", completed),
        open_turn=open_turn.number,
    )


def safe_summarize(reader, rows, prices) -> list[SessionSummary]:
    """``summarize_sessions``, falling back per session when the parser is missing."""
    try:
        return summarize_sessions(reader, rows, prices)
    except ImportError as e:
        if not _parser_missing(e):
            raise
    out = []
    for row in rows:
        try:
            out.extend(summarize_sessions(reader, [row], prices))
        except ImportError:
            from flux.model.session import load_session

            out.append(_summary_without_parser(row, prices, load_session(reader, row.id)))
    return out


def _summary_without_parser(row, prices, detail: SessionDetail) -> SessionSummary:
    from flux.model.lineage import lineage_of
    from flux.store.events import Usage

    s = SessionSummary(row=row, lineage=lineage_of(row))
    s.turns = len(detail.turns)
    s.last_outcome = detail.turns[-1].outcome if detail.turns else None
    s.interrupt = _fallback_interrupt(detail.turns, detail.turn_run_trace)
    usage = Usage()
    cost: float | None = 0.0
    for t in detail.turns:
        items = t.call_models if t.calls else ([(t.model or row.model, t.usage)] if t.usage else [])
        for model, u in items:
            usage = usage + u
            c = prices.cost(model, u) if prices is not None else None
            if c is None:
                if u.total_tokens:
                    cost = None
            elif cost is not None:
                cost += c
    s.usage, s.cost = usage, cost
    return s


# -- timeline -----------------------------------------------------------------------------------


def safe_build_timeline(detail: SessionDetail, turn: Turn) -> tuple[TurnTimeline, str | None]:
    try:
        return build_timeline(detail, turn), None
    except ImportError as e:
        if not _parser_missing(e):
            raise
    return _fallback_timeline(detail, turn), PARSER_MISSING


_OPEN = "([{"
_CLOSE = ")]}"
_CALL = re.compile(r"(?<![\w$.])([A-Za-z_][\w.]*)\s*\(")
_NOT_OPS = frozenset({"when", "unless", "each", "match", "repeat", "loop", "for", "parse", "fmt"})


def split_statements(source: str) -> list[str]:
    """Top-level statements of a ``flow`` by layout: lines at the body's indent start one, unless
    a bracket or a string is open. The header line (``flow …``) is dropped."""
    lines = source.split("\n")
    body_start = 0
    for i, line in enumerate(lines):
        if line.strip() and not line.startswith((" ", "\t")):
            if line.lstrip().startswith("flow") or line.lstrip().startswith("goal"):
                body_start = i + 1
                continue
        break
    body = lines[body_start:]
    indent = None
    for line in body:
        if line.strip():
            indent = len(line) - len(line.lstrip(" "))
            break
    if indent is None:
        return []
    stmts: list[list[str]] = []
    depth = 0
    in_triple = False
    for line in body:
        cur = len(line) - len(line.lstrip(" "))
        starts = (depth == 0 and not in_triple and line.strip() and cur <= indent and not line.strip().startswith("#"))
        if starts or not stmts:
            stmts.append([])
        stmts[-1].append(line[indent:] if line[:indent].strip() == "" else line.lstrip())
        i = 0
        in_str = False
        while i < len(line):
            if in_triple:
                if line.startswith('"""', i):
                    in_triple = False
                    i += 3
                    continue
            elif in_str:
                if line[i] == "\\":
                    i += 2
                    continue
                if line[i] == '"':
                    in_str = False
            elif line.startswith('"""', i):
                in_triple = True
                i += 3
                continue
            elif line[i] == '"':
                in_str = True
            elif line[i] == "#":
                break
            elif line[i] in _OPEN:
                depth += 1
            elif line[i] in _CLOSE:
                depth = max(0, depth - 1)
            i += 1
    return ["\n".join(s).rstrip() for s in stmts if "\n".join(s).strip()]


def _fallback_timeline(detail: SessionDetail, turn: Turn) -> TurnTimeline:
    plans: list[TimelinePlan] = []
    by_attempt = {p.global_seq: p for p in turn.accepted_plans}
    loose: list[Cell] = []
    cell_by_seq = {c.global_seq: c for c in detail.turn_cells(turn)}
    cursor: dict[int, int] = {}
    pending: list[Cell] = []
    for ev in detail.turn_events(turn):
        if ev.global_seq in by_attempt:
            attempt = by_attempt[ev.global_seq]
            stmts = []
            for i, text in enumerate(split_statements(attempt.plan_source or "")):
                ops = tuple(m.group(1) for m in _CALL.finditer(text) if m.group(1) not in _NOT_OPS)
                stmts.append(Statement(len(plans), i, text, "", ops))
            plans.append(TimelinePlan(len(plans), attempt, None, stmts))
            continue
        r = ev.body.event if isinstance(ev.body, Run) else None
        if isinstance(r, OpRecorded):
            cell = cell_by_seq.get(ev.global_seq)
            if cell is not None:
                pending.append(cell)
            continue
        if isinstance(r, (StatementCompleted, PlanHalted)) and plans:
            tp = plans[-1]
            if 0 <= r.node < len(tp.statements):
                st = tp.statements[r.node]
                st.cells.extend(pending)
                pending = []
                if isinstance(r, PlanHalted):
                    st.status, st.halt_kind, st.halt_error = "halted", r.kind, r.error
                else:
                    st.status = "skipped" if r.skipped else "completed"
                cursor[tp.index] = r.node
    for cell in pending:
        if not plans or not plans[-1].statements:
            loose.append(cell)
            continue
        tp = plans[-1]
        start = cursor.get(tp.index, 0)
        order = list(range(start, len(tp.statements))) + list(range(0, start))
        si = next((i for i in order if cell.op in tp.statements[i].ops), start)
        st = tp.statements[min(si, len(tp.statements) - 1)]
        st.cells.append(cell)
        cursor[tp.index] = si
        if st.status == "not run":
            st.status = "completed" if turn.ended else "dispatched"
    items: list[CursorItem] = [CursorItem(-1, -1, c) for c in loose]
    for tp in plans:
        for si, st in enumerate(tp.statements):
            items.append(CursorItem(tp.index, si))
            items.extend(CursorItem(tp.index, si, c) for c in st.cells)
    return TurnTimeline(turn, plans, loose, items)
