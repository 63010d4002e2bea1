"""Renderers for the session screen's panels: Rich renderables built from engine read models.

Each function takes model objects and returns one renderable; the panels show it in a single
``Static`` (never one widget per event). Long payloads are capped with a visible note.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from rich.console import Group, RenderableType
from rich.json import JSON
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from flux.timemachine.replay_direct import statements_before_last_plan
from flux.model.interrupted import InterruptCheck
from flux.model.pricing import session_spend, turn_spend
from flux.model.wording import outcome_text
from flux.model.session import Cell, SessionDetail, Turn, turn_index_of
from flux.model.timeline import Statement, TimelinePlan, TurnTimeline
from flux.store.events import Compacted, Message, Observation, Run, UnknownEvent, UnknownRun

from .fmt import fmt_cost, fmt_duration, fmt_usage, in_user_words, iso_ms, one_line, outcome_style
from .highlight import highlight_flux

__all__ = [
    "MAX_CHARS", "capped", "display_statement_text", "render_cell", "render_statement", "render_turn_info",
    "render_conversation", "render_observations", "render_unknown", "turn_messages", "interrupt_line",
]

MAX_CHARS = 20_000
MAX_MESSAGES = 400
MAX_ROWS = 2_000


def capped(s: str, limit: int = MAX_CHARS) -> tuple[str, int]:
    """(text, hidden chars)."""
    if len(s) <= limit:
        return s, 0
    return s[:limit], len(s) - limit


def _more(hidden: int) -> Text:
    return Text(f"… {hidden:,} more characters not shown", style="dim italic")


def display_statement_text(text: str) -> str:
    """A statement's canonical text without the one-statement ``flow`` wrapper the formatter adds."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[0].strip().startswith("flow") and all(not l or l.startswith("  ") for l in lines[1:]):
        return "\n".join(l[2:] for l in lines[1:]).rstrip()
    if len(lines) > 1 and lines[0].strip() == "flow":
        # The wrapper around a statement whose multi-line string literal has lines at column 0.
        return "\n".join(l[2:] if l.startswith("  ") else l for l in lines[1:]).rstrip()
    return text.strip()


def _json(raw: str) -> JSON:
    """Pretty JSON that folds its long lines (Rich's JSON is no_wrap and crops them silently); with
    wrapping off (W) the panel keeps lines whole and scrolls sideways instead."""
    j = JSON(raw, indent=2)
    j.text.no_wrap = False
    j.text.overflow = "fold"
    return j


def _kv(table: Table, key: str, value: RenderableType | str, style: str = "") -> None:
    table.add_row(Text(key, style="dim"), value if not isinstance(value, str) else Text(value, style=style))


def _grid() -> Table:
    t = Table.grid(padding=(0, 1))
    t.add_column(no_wrap=True)
    t.add_column(overflow="fold")
    return t


def _indent(renderable: RenderableType, n: int = 2) -> RenderableType:
    return Padding(renderable, (0, 0, 0, n))


def _flag(on: bool, label: str, style: str) -> Text:
    return Text(f"● {label}", style=style) if on else Text(f"○ {label}", style="dim")


# -- inspector --------------------------------------------------------------------------------


def _json_or_text(raw: str | None, truncated: bool) -> RenderableType:
    if raw is None:
        return Text("–", style="dim")
    text, hidden = capped(raw)
    if not truncated and not hidden:
        try:
            json.loads(raw)
            return _json(raw)
        except (ValueError, TypeError):
            pass
    body = Text(text)
    if truncated:
        body = Text.assemble(body, "\n", ("(truncated by the recorder — raw text shown)", "yellow italic"))
    if hidden:
        body = Text.assemble(body, "\n", _more(hidden))
    return body


def render_cell(cell: Cell, statement: Statement | None = None) -> RenderableType:
    r = cell.rec
    head = Text.assemble(("cell ", "dim"), (f"#{cell.index}", "bold"), ("  ", ""), (r.op, "bold cyan"))
    if cell.flagged_error:
        head.append("  ✗ " + ("denied" if r.denied else "error"), style="bold red")
    else:
        head.append("  ✓", style="green")
    flags = Table.grid(padding=(0, 2))
    flags.add_column(no_wrap=True)
    flags.add_column(no_wrap=True)
    flags.add_row(_flag(r.is_error, "is_error", "bold red"), _flag(r.denied, "denied", "bold red"))
    flags.add_row(_flag(r.redacted, "redacted", "bold magenta"), _flag(r.truncated, "truncated", "bold yellow"))
    meta = _grid()
    _kv(meta, "step", r.step or "–")
    _kv(meta, "seq", str(r.seq))
    _kv(meta, "ts", iso_ms(cell.ts))
    if cell.turn_number is not None:
        _kv(meta, "turn", str(cell.turn_number))
    if statement is not None:
        _kv(meta, "stmt", f"plan {statement.plan_index + 1} · node {statement.node}")
    hashes: list[RenderableType] = [Text("input_hash", style="dim"), _indent(Text(r.input_hash or "–", overflow="fold"))]
    if r.input_hash_redacted:
        hashes += [Text("input_hash_redacted", style="dim"),
                   _indent(Text(r.input_hash_redacted, style="magenta", overflow="fold"))]
    parts: list[RenderableType] = [head, flags, meta, *hashes, Text("")]
    parts.append(Text.assemble(("input", "bold"), ("  (input_view, truncated)" if r.input_view_truncated else "", "yellow")))
    parts.append(_json_or_text(r.input_view, r.input_view_truncated))
    parts.append(Text(""))
    content, hidden = capped(in_user_words(r.content))
    parts.append(Text.assemble(("content", "bold"), ("  (truncated by the recorder)" if r.truncated else "", "yellow")))
    parts.append(Text(content, style="red" if cell.flagged_error else "") if content else Text("(empty)", style="dim"))
    if hidden:
        parts.append(_more(hidden))
    if r.view is not None:
        parts.append(Text(""))
        parts.append(Text("view", style="bold"))
        view, vhidden = capped(r.view)
        parts.append(Text(view))
        if vhidden:
            parts.append(_more(vhidden))
    return Group(*parts)


_STATUS = {
    "completed": ("✓", "green"),
    "skipped": ("↷", "dim"),
    "halted": ("✗", "bold red"),
    "dispatched": ("▸", "yellow"),
    "not run": ("·", "dim"),
}


def statement_marker(st: Statement) -> tuple[str, str]:
    if st.status != "halted" and st.has_error:
        return "✗", "bold red"
    return _STATUS.get(st.status, ("?", "dim"))


def render_statement(tp: TimelinePlan, st: Statement, position: int | None = None) -> RenderableType:
    """``position``: the statement's number in its turn, the turn's plans laid end to end (what
    `flux fork --turn T --at N`, replay and resurrect call it); its node inside the plan is shown too."""
    mark, style = statement_marker(st)
    number = st.node if position is None else position
    head = Text.assemble(("statement ", "dim"), (f"{number}", "bold"), ("  ", ""), (f"{mark} {st.status}", style))
    meta = _grid()
    a = tp.attempt
    node = f" · node {st.node}" if number != st.node else ""
    _kv(meta, "plan", f"{tp.index + 1} · attempt step {a.step}" + (f" · {a.phase}" if a.phase else "") + node)
    _kv(meta, "flow_key", tp.flow_key or "–")
    _kv(meta, "stmt_hash", st.stmt_hash or "–")
    _kv(meta, "ops", ", ".join(st.ops) or "–")
    _kv(meta, "cells", str(len(st.cells)))
    errors = sum(1 for c in st.cells if c.flagged_error)
    if errors:
        _kv(meta, "errors", f"{errors} cell(s) with is_error/denied", "bold red")
    if st.status == "halted":
        _kv(meta, "halt", f"{st.halt_kind or 'runtime'}: {in_user_words(st.halt_error or '')}", "bold red")
    if a.fingerprint:
        _kv(meta, "fingerprint", a.fingerprint)
    code = highlight_flux(display_statement_text(st.text))
    code.no_wrap = False
    code.overflow = "fold"
    code.end = "\n"
    return Group(head, meta, Text(""), Text("source", style="bold"), code)


# -- turn info --------------------------------------------------------------------------------


def interrupt_line(check: InterruptCheck, turn: Turn) -> Text | None:
    it = check.interrupted
    if it is not None and it.turn_number == turn.number:
        # counted over the turn's plans laid end to end, as replay, resurrect and fork --turn count
        at = statements_before_last_plan(turn) + it.completed
        return Text(f"⚠ interrupted at statement {at} — R resurrects turn {turn.number}", style="bold yellow")
    if check.recording_pid is not None and check.open_turn == turn.number:
        return Text(f"● recording — {check.reason}", style="bold cyan")
    if check.reason and check.open_turn == turn.number:
        return Text(f"⚠ {check.reason}", style="yellow")
    return None


def render_turn_info(detail: SessionDetail, turn: Turn, check: InterruptCheck, prices,
                     timeline: TurnTimeline | None) -> RenderableType:
    head = Text.assemble((f"turn {turn.number}", "bold"), (f" of {len(detail.turns)}", "dim"), "  ",
                         (outcome_text(turn.outcome), outcome_style(turn.outcome)))
    if turn.iterations:
        head.append(f" · {turn.iterations} iteration{'s' if turn.iterations != 1 else ''}", style="dim")
    parts: list[RenderableType] = [head]
    line = interrupt_line(check, turn)
    if line is not None:
        parts.append(line)
    meta = _grid()
    took = (turn.ended_at_ms - turn.started_at_ms) if turn.ended_at_ms is not None else None
    _kv(meta, "started", iso_ms(turn.started_at_ms).replace("T", " ")[:19] + "Z")
    _kv(meta, "took", fmt_duration(took) if took is not None else "never ended", "" if took is not None else "yellow")
    _kv(meta, "model", turn.model or detail.row.model)
    _kv(meta, "input", one_line(turn.user_input, 90) or "–")
    if turn.ended:
        _kv(meta, "answer", one_line(turn.answer, 90) or "–")
    if timeline is not None:
        stmts = sum(len(p.statements) for p in timeline.plans)
        cells = sum(1 for it in timeline.items if it.cell is not None)
        errs = len(timeline.error_positions())
        _kv(meta, "plans", f"{len(timeline.plans)} · {stmts} stmt · {cells} cell" + (f" · {errs} err" if errs else ""),
            "bold red" if errs else "")
    u = turn.effective_usage
    _kv(meta, "usage", fmt_usage(u))
    if turn.calls:
        models = sorted({_as_text(m) for m, _ in turn.call_models})
        _kv(meta, "calls", f"{turn.calls}" + (f" · {', '.join(models)}" if models else " · no usage reported"))
    tc = turn_spend(prices, turn, detail.row.model).usd
    _kv(meta, "cost", fmt_cost(tc, unknown="unknown (no price)"), "dim" if tc is None else "")
    whole = session_spend(prices, detail.turns, detail.row.model)
    su = whole.usage
    _kv(meta, "session", f"{fmt_cost(whole.usd, unknown='unknown')} · {fmt_usage(su)}")
    parts.append(meta)
    return Group(*parts)


# -- conversation -------------------------------------------------------------------------------


def turn_messages(detail: SessionDetail) -> dict[int, list[Message | Compacted]]:
    """Messages (and compactions) by turn number, by position: a user message written right before a
    ``turn_started`` belongs to that turn; anything else to the turn whose window holds it (0: before
    the first turn)."""
    out: dict[int, list[Message | Compacted]] = {}
    events = detail.events
    for i, ev in enumerate(events):
        if not isinstance(ev.body, (Message, Compacted)):
            continue
        nxt = events[i + 1] if i + 1 < len(events) else None
        if nxt is not None and nxt.kind == "turn_started" and isinstance(ev.body, Message):
            ti = turn_index_of(detail.turns, nxt.global_seq)
        else:
            ti = turn_index_of(detail.turns, ev.global_seq)
        out.setdefault(ti + 1 if ti is not None else 0, []).append(ev.body)
    return out


def _block_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for b in value:
            if isinstance(b, dict) and b.get("type") == "text":
                parts.append(str(b.get("text", "")))
            elif isinstance(b, dict) and b.get("type") == "image":
                parts.append("[image]")
            else:
                parts.append(json.dumps(b, ensure_ascii=False))
        return "\n".join(parts)
    return json.dumps(value, ensure_ascii=False, indent=2)


def _render_block(block: Any) -> RenderableType:
    if not isinstance(block, dict):
        return Text(str(block))
    kind = block.get("type")
    if kind == "text":
        text, hidden = capped(str(block.get("text", "")), 4000)
        return Group(Text(text), _more(hidden)) if hidden else Text(text)
    if kind == "thinking":
        text, _ = capped(str(block.get("thinking", "")), 600)
        return Text.assemble(("thinking ", "dim bold"), (text, "dim italic"))
    if kind == "redacted_thinking":
        return Text("(redacted thinking)", style="dim italic")
    if kind == "tool_use":
        raw = json.dumps(block.get("input"), ensure_ascii=False, indent=2)
        body, hidden = capped(raw, 3000)
        content: RenderableType = _json(raw) if not hidden else Group(Text(body), _more(hidden))
        return Panel(content, title=Text.assemble(("tool_use ", "dim"), (str(block.get("name", "?")), "bold cyan")),
                     title_align="left", subtitle=Text(str(block.get("id", "")), style="dim"), subtitle_align="right",
                     border_style="cyan", padding=(0, 1), expand=False)
    if kind == "tool_result":
        err = bool(block.get("is_error"))
        body, hidden = capped(_block_text(block.get("content")), 3000)
        inner: RenderableType = Text(body or "(empty)", style="red" if err else "")
        if hidden:
            inner = Group(inner, _more(hidden))
        title = Text.assemble(("tool_result", "dim"), (" error" if err else "", "bold red"))
        return Panel(inner, title=title, title_align="left", subtitle=Text(str(block.get("tool_use_id", "")), style="dim"),
                     subtitle_align="right", border_style="red" if err else "green", padding=(0, 1), expand=False)
    if kind == "image":
        src = block.get("source") or {}
        return Text(f"[image {src.get('media_type') or src.get('url') or ''}]", style="dim")
    return Text(json.dumps(block, ensure_ascii=False)[:400], style="dim")


_ROLE_STYLE = {"user": "bold cyan", "assistant": "bold green", "system": "bold magenta"}


def render_conversation(items: Sequence[Message | Compacted], *, scope: str) -> RenderableType:
    if not items:
        return Text(f"no messages {'in this turn' if scope == 'turn' else 'in this session'}", style="dim italic")
    parts: list[RenderableType] = []
    shown = items
    if len(items) > MAX_MESSAGES:
        shown = items[-MAX_MESSAGES:]
        parts.append(Text(f"… {len(items) - MAX_MESSAGES} earlier messages not shown", style="dim italic"))
    for m in shown:
        if isinstance(m, Compacted):
            parts.append(Text(f"◇ context compacted ({len(m.messages)} messages kept)", style="dim italic"))
            continue
        parts.append(Text(m.role, style=_ROLE_STYLE.get(m.role, "bold")))
        for block in m.content:
            parts.append(_render_block(block))
        parts.append(Text(""))
    return Group(*parts)


# -- observations / unknown events ----------------------------------------------------------------


def _compact(data: Any, limit: int = 240) -> str:
    try:
        s = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        s = repr(data)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _as_text(value: Any) -> str:
    """A recorded field the format says is a string, shown as text even when it is not one."""
    return value if isinstance(value, str) else ("" if value is None else _compact(value, 200))


def render_observations(obs: Sequence[tuple[Any, Observation]]) -> RenderableType:
    if not obs:
        return Text("no observations recorded for this turn", style="dim italic")
    parts: list[RenderableType] = [
        Text(f"{len(obs)} observation(s), flushed after the turn (their ts is the flush time)", style="dim italic")]
    for ev, o in obs[:MAX_ROWS]:
        # kind and phase as text whatever a hostile store holds (a number, a list, null)
        parts.append(Text.assemble((f"#{ev.stream_seq} ", "dim"), (_as_text(o.kind), "cyan"),
                                   (f"  {_as_text(o.phase)}", "dim")))
        parts.append(_indent(Text(_compact(o.data, 600), style="dim", overflow="fold")))
    if len(obs) > MAX_ROWS:
        parts.append(Text(f"… {len(obs) - MAX_ROWS} more", style="dim italic"))
    return Group(*parts)


def render_unknown(detail: SessionDetail, events: Sequence | None = None) -> RenderableType:
    events = detail.unknown_events if events is None else events
    if not events:
        return Text("every event in this session is of a kind this reader knows", style="dim italic")
    parts: list[RenderableType] = []
    for ev in events[:MAX_ROWS]:
        b = ev.body
        if isinstance(b, UnknownEvent):
            kind, data = b.kind or ev.kind, b.data
        elif isinstance(b, Run) and isinstance(b.event, UnknownRun):
            kind, data = f"run/{b.event.event or '?'}", b.event.data
        else:
            kind, data = ev.kind, None
        ti = turn_index_of(detail.turns, ev.global_seq)
        parts.append(Text.assemble((f"#{ev.stream_seq} ", "dim"), (kind, "yellow"),
                                   (f"  turn {ti + 1}" if ti is not None else "  before any turn", "dim")))
        parts.append(_indent(Text(_compact(data, 800), overflow="fold")))
    note = Text(f"{len(events)} event(s) of kinds this reader does not know (a newer writer?) — shown, not hidden",
                style="yellow")
    return Group(note, *parts)
