"""Resurrect: finish a session's interrupted turn from the crash point, on the same session, with no
model call: completed statements fast-forwarded, the crash tail served from tape exactly once, a
dispatch with no cell run live through the approver, then the turn closed.

Beyond flux the tail is anchored at the resumed plan's acceptance, so a killed adaptive turn does not
repeat its last side effect (docs/cli.md, "flux resurrect"; docs/architecture.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Callable, NamedTuple, Optional

from ..agent.approver import confirm_with
from ..agent.recording import EventTee, LiveHost
from ..cassette.record import RecordingHost
from ..cassette.replay import ReplayTape, TapeFirstHost
from ..canonical import scrub_value
from ..errors import FluxError
from ..lang import ast as A
from ..lang.catalog import OpCatalog
from ..lang.hashes import stmt_hash16
from ..lang.interpreter import Interpreter, LedgerEntry, ResumeLedger
from ..lang.parser import parse
from ..model.interrupted import check_interrupted
from ..model.ledger import ledger_from_interrupted
from ..cassette.replay import TapeCell
from ..model.session import TRACE_KINDS, Turn, fold_turns
from ..store.events import (
    RUN_VARIANTS, CheckpointReached, Message, OpRecorded, PlanHalted, PlanResumed, Run, StatementCompleted, StepFailed,
    StepStarted, StepSucceeded, TurnEnded, decode_run,
)
from ..store.body_codec import field_reader
from ..store.payload_decode import SURROGATE_ESCAPE, DECODE_ERRORS
from ..store.bindings import FlowDbBindings
from ..store.lease import SessionLease, SessionLeased, lease_holder, lease_holder_on
from ..store.store import NotUTF8, SessionRow, StoreReader, StoredEvent, stored_event
from .engine import BufferedRunSink, HostBody, binder_of, catalog_for, live_effect, predict_calls, simulate_serve
from .replay_direct import direct_plan
from .serve import PlanServer, gc_paused
from .gate import LiveOp, LivePreview

__all__ = ["ResurrectPlan", "ResurrectReport", "prepare_resurrect", "plan_resurrect", "resurrect_session",
           "ResurrectCancelled", "resurrect_lines"]


class ResurrectCancelled(FluxError):
    """The user declined the side-effect gate; nothing was written."""


@dataclass
class ResurrectInput:
    """What resurrect reads of a session (:func:`read_resurrect_input`): its registry row, its turns
    (headers and plan attempts) and the run rows of its newest turn — the only one flux resurrects
    — each folded to what resurrect uses of it (:class:`TraceRow`)."""

    row: SessionRow
    turns: list[Turn]
    trace: list["TraceRow"]  # the newest turn's run rows in stream order (empty when it has ended)


class TraceRow(NamedTuple):
    """One run row of the interrupted turn: its tag and ``global_seq``; ``step`` for the step rows
    and cells, ``value`` = ``step_succeeded.output`` / the cell's ``content``; ``cell`` the tape's
    view of a cell; ``event`` the decoded row for the ledger's and the boundary's variants
    (``statement_completed``, ``plan_halted``, ``plan_resumed``, ``checkpoint_reached``)."""

    global_seq: int
    tag: str
    step: str = ""
    value: str = ""
    op: str = ""
    cell: Optional[TapeCell] = None
    event: Optional[StoredEvent] = None


@dataclass
class ResurrectPlan:
    detail: ResurrectInput
    session: str
    turn: int  # 1-based
    turn_id: int
    draft: A.DraftAst
    flow_key: str
    completed: int  # statements of the plan the ledger shows completed (flux's K)
    ledger: Optional[ResumeLedger]  # what fast-forwards (values rebuildable)
    values: dict[str, Any]
    tail: list[TapeCell]  # the crash tail served from tape
    unanchored_cells: int  # flux's field: cells of a turn with no boundary at all
    in_flight: Optional[str]  # the op dispatched with no result and no cell
    preview: Optional[LivePreview]  # None: prepare_resurrect(preview=False)
    has_boundary: bool = True
    position: Optional[int] = None  # the turn's statements completed, its plans end to end (fork --turn's count)


@dataclass
class ResurrectReport:
    session: str
    turn: int
    statements_fast_forwarded: int = 0
    ops_served_from_cassette: int = 0
    ops_run_live: int = 0
    outcome: str = "resurrected"  # resurrected | halted | suspended
    answer: str = ""
    halt: Optional[dict] = None
    diverged: Optional[str] = None
    unanchored_cells: int = 0
    unanchored_served: int = 0  # beyond flux: unanchored cells served because they matched
    completed_before: int = 0
    live_ops: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session, "turn": self.turn,
                "statements_fast_forwarded": self.statements_fast_forwarded,
                "ops_served_from_cassette": self.ops_served_from_cassette, "ops_run_live": self.ops_run_live,
                "outcome": self.outcome, "answer": self.answer, "halt": self.halt, "diverged": self.diverged,
                "unanchored_cells": self.unanchored_cells, "unanchored_served": self.unanchored_served,
                "live_ops": self.live_ops}

    def summary_line(self) -> str:
        extra = f", {self.unanchored_served} unanchored cell(s) served" if self.unanchored_served else ""
        return (f"resurrect · {self.outcome} · {self.statements_fast_forwarded} statement(s) fast-forwarded, "
                f"{self.ops_served_from_cassette} op(s) served from the cassette, {self.ops_run_live} run live{extra}")


def resurrect_lines(plan: "ResurrectPlan") -> str:
    """flux's first stderr line for a resurrect, its statements counted over the turn as the
    panel below it and `flux fork --turn` count them."""
    done = plan.completed if plan.position is None else plan.position
    head = f"resurrect · session {plan.session} · turn {plan.turn} was interrupted after {done} statement(s) — "
    if plan.preview.offline:
        return head + "finishing it offline (no model call)"
    ops = ", ".join(o.op for o in plan.preview.ops)
    return head + (f"finishing it with no model call; {len(plan.preview.ops)} op(s) run live after the "
                   f"side-effect gate ({ops})")


# ------------------------------------------------------------------------------------------------
# Reading: the newest turn's run rows, folded straight from the rows


_HEADERS = ("turn_started", "turn_ended", "plan_attempted")
_WINDOW_SQL = ("SELECT global_seq, stream, stream_seq, id, kind, ts, turn_id, payload FROM events WHERE stream = ?"
               " AND stream_seq >= ? AND kind IN (" + ",".join("?" * len(TRACE_KINDS)) + ") ORDER BY stream_seq")
_DECODED = (StatementCompleted, PlanHalted, PlanResumed, CheckpointReached)


def read_resurrect_input(reader: StoreReader, ref: str | None) -> ResurrectInput:
    """Resolve ``s_<n>``/``last`` and read what resurrect needs of it: the turn headers (an index
    search), then — only when the newest turn has no end — that turn's rows (an index range from
    its ``turn_started``), each validated as every reader validates it (``json.loads``-ed with the
    surrogate rule; a row whose fields are not already typed is decoded in full; a corrupt row is
    skipped and counted), but only the ledger's variants become objects: a step row or a cell is
    read for the few fields resurrect uses (:class:`TraceRow`). ``load_session`` decoded every
    row of the session into objects to serve the same turn."""
    row = reader.resolve_session(ref)
    header = reader.events(row.id, kinds=_HEADERS, sparse=True)
    turns = fold_turns(header)
    trace: list[TraceRow] = []
    if turns and not turns[-1].ended:
        newest = turns[-1]
        try:
            trace = _read_window(reader, row.id, newest, tolerant=False)
        except NotUTF8:  # a TEXT cell is not UTF-8: read again, that row comes back as bytes and is skipped
            trace = _read_window(reader, row.id, newest, tolerant=True)
    return ResurrectInput(row, turns, trace)


def _read_window(reader: StoreReader, sid: str, turn: Turn, *, tolerant: bool) -> list[TraceRow]:
    """The run rows at or after ``turn``'s ``turn_started`` (by stream position, then by
    ``global_seq``, the turn's window as ``SessionDetail.turn_run_trace`` cuts it). A header kind's
    row was read (and a corrupt one counted) with the headers: here it counts only when its payload
    says ``run``. Each row is validated as :func:`~flux.store.store.valid_event_row` and
    :func:`~flux.store.payload_decode.load_payload` validate it (inline, as replay's read does: the query
    proves ``stream`` and ``kind`` are text), and a well-typed step row or cell is read by its
    variant's generated :func:`~flux.store.body_codec.field_reader` — the verdict of
    :func:`~flux.store.events.run_fields_exact`, with the values."""
    out: list[TraceRow] = []
    add = out.append
    skipped = 0
    start = turn.turn_id
    loads = json.loads
    surrogate = SURROGATE_ESCAPE.search
    new = tuple.__new__
    read_started = field_reader(StepStarted, ("step", "op"))
    read_succeeded = field_reader(StepSucceeded, ("step", "output"))
    read_failed = field_reader(StepFailed, ("step",))
    read_cell = field_reader(OpRecorded, ("step", *TapeCell._fields))
    # every other variant read only for whether it is exact (the ledger's are decoded in full below)
    exact = {tag: field_reader(cls, ()) for tag, cls in RUN_VARIANTS.items()
             if cls not in _DECODED and cls not in (StepStarted, StepSucceeded, StepFailed, OpRecorded)}
    for gs, stream, sseq, eid, kind, ts, turn_id, payload in chain.from_iterable(
            reader.scan_batches(_WINDOW_SQL, (sid, turn.stream_seq, *TRACE_KINDS), tolerant=tolerant)):
        counted = kind == "run"
        if type(payload) is not str or type(sseq) is not int or type(gs) is not int:  # valid_event_row
            skipped += counted
            continue
        try:  # load_payload, inline: the same errors skip the row, the same surrogate rule
            obj = loads(payload)
        except (ValueError, TypeError, RecursionError):
            skipped += counted
            continue
        if type(obj) is not dict:
            skipped += counted
            continue
        if "\\u" in payload and surrogate(payload):
            obj = scrub_value(obj)
        k = obj.get("kind", kind)  # payload_kind, inline
        if (k if type(k) is str else kind) != "run":
            continue  # a header (read with the headers) or another kind: not a run row
        if gs < start:
            counted = False  # outside the window: load_session validated it with the session; not ours
        d = obj.get("data")
        tag = d.get("event") if type(d) is dict else None
        if type(tag) is str:
            if tag == "step_started":
                v = read_started(d)
                if v is not None:
                    if gs >= start:
                        add(new(TraceRow, (gs, tag, v[0], "", v[1], None, None)))
                    continue
            elif tag == "op_recorded":
                v = read_cell(d)
                if v is not None:
                    if gs >= start:
                        add(new(TraceRow, (gs, tag, v[0], v[4], "", new(TapeCell, v[1:]), None)))
                    continue
            elif tag == "step_succeeded":
                v = read_succeeded(d)
                if v is not None:
                    if gs >= start:
                        add(new(TraceRow, (gs, tag, v[0], v[1], "", None, None)))
                    continue
            elif tag == "step_failed":
                v = read_failed(d)
                if v is not None:
                    if gs >= start:
                        add(new(TraceRow, (gs, tag, v[0], "", "", None, None)))
                    continue
            else:
                check = exact.get(tag)
                if check is not None and check(d):
                    if gs >= start:
                        add(new(TraceRow, (gs, tag, "", "", "", None, None)))
                    continue
        try:  # a ledger row, or an odd one: decoded in full, exactly as every reader does
            ev = decode_run(d)
        except DECODE_ERRORS:
            skipped += counted
            continue
        if gs < start:
            continue
        add(_trace_row(stored_event(gs, stream, sseq, eid, kind, ts, turn_id, Run(event=ev))))
    if skipped:
        reader.skipped_rows += skipped
    return out


def _trace_row(e: StoredEvent) -> TraceRow:
    """A decoded run event as a :class:`TraceRow`."""
    r = e.body.event
    gs, tag = e.global_seq, r.TAG
    if isinstance(r, StepStarted):
        return TraceRow(gs, tag, r.step, op=r.op)
    if isinstance(r, StepSucceeded):
        return TraceRow(gs, tag, r.step, r.output)
    if isinstance(r, StepFailed):
        return TraceRow(gs, tag, r.step)
    if isinstance(r, OpRecorded):
        return TraceRow(gs, tag, r.step, r.content, cell=TapeCell.of(r))
    return TraceRow(gs, tag, event=e if isinstance(r, _DECODED) else None)


#: Whether a host plan (replay's direct path: :func:`~flux.timemachine.replay_direct.direct_plan`) is
#: read without the parser and run by :meth:`DirectRunner.run_resume`; False: every plan parsed and
#: interpreted, as before (the differential test's reference).
_DIRECT = True


def _parse_plan(source: Any) -> tuple[A.DraftAst, str]:
    """``(draft, flow_key)`` of the interrupted turn's plan as ``parse_stored_plan`` gives them —
    for a host plan the direct path recognises, its statements' AST nodes built only when asked
    for (:class:`~flux.timemachine.engine.HostBody`: the same key and statements, no parse)."""
    from ..model.stored_plan import parse_stored_plan

    if _DIRECT:
        dp = direct_plan(source)
        if dp is not None:
            return A.DraftAst(body=HostBody(dp)), dp.flow_key
    return parse_stored_plan(source)


def prepare_resurrect(reader: StoreReader, session: str, *, catalog: OpCatalog | None = None,
                      workspace: str | None = None, preview: bool = True) -> Optional[ResurrectPlan]:
    """Validate and preview a resurrect; ``None`` when no turn is interrupted. A turn flux would not
    flag (needs manual recovery, no accepted plan, unparsable plan) is a one-line error.
    ``preview=False`` leaves ``plan.preview`` None: the gate's static prediction of every remaining
    call is skipped (:func:`resurrect_session` asks for it only when someone will read it — a
    ``confirm`` or ``on_plan`` callback); everything else, errors included, is the same."""
    detail = read_resurrect_input(reader, session)
    sid = detail.row.id
    trace = detail.trace
    ledger_rows = [e.event for e in trace if e.event is not None]  # all the check and the ledger read
    check = check_interrupted(detail.turns, lambda turn: ledger_rows, parse_plan=_parse_plan,
                              recording_pid=lambda: lease_holder(reader.dir, sid))
    if check.recording_pid is not None:  # a live process is recording that turn: it is not interrupted
        elsewhere = lease_holder_on(reader.dir, sid) if check.recording_pid == 0 else None
        if elsewhere is not None and not elsewhere.is_here():  # a writer on another machine: named there
            raise SessionLeased(sid, elsewhere.pid, elsewhere.host)
        raise SessionLeased(sid, check.recording_pid)
    if check.interrupted is None:
        if check.reason is not None:
            raise FluxError(f"session {sid} cannot be resurrected: {check.reason}")
        return None
    it = check.interrupted
    turn = detail.turns[it.turn_number - 1]
    assert turn is detail.turns[-1]  # flux resurrects only the newest turn: the one read in full
    draft = it.draft if it.draft is not None else parse(it.plan_source)
    key = it.flow_key
    anchor = turn.accepted_plans[-1].global_seq
    # One pass over the turn's rows: those after the anchor (in order), the value ids of the dead
    # process rebuilt from their cells (step_succeeded.output → the cell's content), the steps
    # left open (a step_started with no result row and no cell), the turn's cells and whether it
    # wrote any statement boundary.
    after: list[TraceRow] = []
    values: dict[str, Any] = {}
    pending: dict[str, str] = {}
    open_steps: dict[str, str] = {}
    turn_cells: list[TraceRow] = []
    has_boundary = False
    for e in trace:
        tag = e.tag
        if e.cell is not None:
            turn_cells.append(e)
        elif tag == "statement_completed" or tag == "plan_halted":
            has_boundary = True
        if e.global_seq > anchor:
            after.append(e)
            if tag == "op_recorded":
                pending[e.step] = e.value
                open_steps.pop(e.step, None)
            elif tag == "step_succeeded":
                if e.step in pending:
                    values[e.value] = pending.pop(e.step)
                open_steps.pop(e.step, None)
            elif tag == "step_started":
                open_steps[e.step] = e.op
            elif tag == "step_failed":
                open_steps.pop(e.step, None)
    # a resurrect that was itself killed wrote its fast-forward's skipped rows, then plan_resumed:
    # kept (flux clears them), so this one fast-forwards over them as well instead of re-running
    # the plan from the top — which replay would read as a second execution of spent cells
    full = ledger_from_interrupted(ledger_rows, key, across_resumes=True)
    kept: list[LedgerEntry] = []
    if full is not None:
        body = draft.body
        stmts = body.statements if type(body) is HostBody else None  # a host plan: its statements, no AST
        for i in range(len(body)):
            if stmts is not None:
                st = stmts[i]
                h, binder = st.stmt, st.name
            else:
                node = body[i]
                if isinstance(node, Interpreter.PASS_THROUGH):
                    continue
                h, binder = stmt_hash16(node), binder_of(node)
            entry = full.entry(i)
            if entry is None or entry.stmt != h:
                break
            if entry.value is not None and binder is not None and entry.value not in values:
                break  # cannot re-bind: re-execute from here, served from tape
            kept.append(entry)
    ledger = ResumeLedger(key, kept, full.checkpoint if full else None) if kept else None
    boundary = anchor
    if kept:
        last = kept[-1].node
        for e in after:
            r = e.event.body.event if e.event is not None else None
            if isinstance(r, StatementCompleted) and r.plan == key and r.node == last:
                boundary = e.global_seq
    tail = [e.cell for e in turn_cells if e.global_seq > boundary]
    unanchored = 0 if has_boundary else len(turn_cells)
    # the op in flight: a step_started after the anchor with no result row and no cell
    in_flight = next(iter(reversed(list(open_steps.values()))), None)

    start = 0
    if ledger is not None:
        start = max((e.node for e in kept), default=-1) + 1
        if ledger.checkpoint is not None:
            start = max(start, ledger.checkpoint + 1)
    if not preview:
        return ResurrectPlan(detail, sid, turn.number, turn.turn_id, draft, key, it.completed, ledger, values, tail,
                             unanchored, in_flight, None, has_boundary, it.position)
    tape = ReplayTape(tail)
    rest = len(draft.body[start:]) if type(draft.body) is not HostBody else max(0, len(draft.body) - start)
    served, misses = _simulate_rest(tape, draft.body, start, catalog)
    ops = tuple(LiveOp(m.op, live_effect(catalog, m.op), m.detail, workspace,
                       "in flight" if m.op == in_flight else "tail") for m in misses)
    before = it.position - it.completed  # the turn's statements counted as fork --turn counts them
    notes = [f"interrupted at statement {it.position} of {before + len(draft.body)} of the turn"
             + (" (killed mid-dispatch)" if in_flight else "")]
    if kept:
        notes.append(f"✓ {len(kept)} statement(s) fast-forwarded")
    if served:
        notes.append(f"✓ {served} cell(s) served from tape (recorded before the kill)")
    for o in ops:
        notes.append(f"↻ {o.op} ({o.effect}) has no cell → runs again" + (" (it was in flight)" if o.why == "in flight" else ""))
    notes.append("· no model call")
    preview = LivePreview("resurrect", sid, not ops, ops, None, len(kept), 0, rest, served, workspace,
                          tuple(notes), f"resurrect {sid} · turn {turn.number}",
                          {"turn": turn.number, "completed": it.completed, "in_flight": in_flight})
    return ResurrectPlan(detail, sid, turn.number, turn.turn_id, draft, key, it.completed, ledger, values, tail,
                         unanchored, in_flight, preview, has_boundary, it.position)


def _simulate_rest(tape: ReplayTape, body: Any, start: int, catalog: OpCatalog | None) -> tuple[int, list]:
    """``simulate_serve(tape, predict_calls(body[start:], catalog))`` — the gate's prediction of what
    the crash tail serves and what goes live. A host plan's statement whose argument holds no
    placeholder is predicted from its statement (its input is the argument, its hash known): a hit
    is taken without building its AST; any other statement, and a miss, goes the general way."""
    if type(body) is not HostBody:
        return simulate_serve(tape, predict_calls(body[start:], catalog))
    served, misses = 0, []
    stmts = body.statements
    for i in range(start, len(stmts)):
        st = stmts[i]
        if st.value is None:  # static: predict_calls gives (op, st.arg) — the same hash, the same cell
            j = tape.find(st.op, st.input_hash)
            if j is not None and not tape.cells[j].truncated:
                tape.take(st.op, st.input_hash, j)
                served += 1
                continue
        s, m = simulate_serve(tape, predict_calls((body[i],), catalog))
        served += s
        misses += m
    return served, misses


def plan_resurrect(reader: StoreReader, session: str, **kw: Any) -> Optional[LivePreview]:
    """The gate's preview of a resurrect, ``None`` when nothing is interrupted."""
    p = prepare_resurrect(reader, session, **kw)
    return p.preview if p is not None else None


@gc_paused()  # a resurrect allocates acyclic rows and values: the cyclic collector only slows it (as replay)
def resurrect_session(client: Any, session: str, *, confirm: Callable[[LivePreview], bool] | None = None,
                      on_plan: Callable[[Any], None] | None = None,
                      plan: Optional[ResurrectPlan] = None, toolbox: Any = None) -> Optional[ResurrectReport]:
    """Resurrect ``session``'s interrupted turn (docs/cli.md, "flux resurrect"); ``None`` if none is.
    ``plan``: a :func:`prepare_resurrect` result for it (the CLI showed its gate already), so the
    session is not loaded and checked twice. ``toolbox``: the live ops to run with instead of the
    client's (the automatic resurrect passes the store's recorded toolbox)."""
    if toolbox is None:
        toolbox = client.toolbox
    if plan is None:
        reader = StoreReader(client.store_dir)
        try:
            plan = prepare_resurrect(reader, session, catalog=toolbox.catalog(),
                                     workspace=str(client.workspace),
                                     preview=confirm is not None or on_plan is not None)
        finally:
            reader.close()
    if plan is None:
        return None
    with SessionLease.acquire(client.store_dir, plan.session):  # no other writer while the turn is finished
        _check_still_open(client.writer, plan)
        return _resurrect_leased(client, plan, confirm=confirm, on_plan=on_plan, toolbox=toolbox)


def _check_still_open(writer: Any, plan: ResurrectPlan) -> None:
    """The turn the plan was prepared for is still the session's open newest turn: another process
    may have finished it (or started a turn after it) between the read and taking the lease."""
    conn = writer.conn
    ended = conn.execute("SELECT 1 FROM events WHERE stream = ? AND turn_id = ? AND kind = 'turn_ended' LIMIT 1",
                         (plan.session, plan.turn_id)).fetchone()
    newer = conn.execute("SELECT 1 FROM events WHERE stream = ? AND kind = 'turn_started' AND global_seq > ? LIMIT 1",
                         (plan.session, plan.turn_id)).fetchone()
    if ended is not None or newer is not None:
        raise FluxError(f"{plan.session}'s turn {plan.turn} was finished by another process meanwhile — "
                        f"nothing to resurrect (see `flux show {plan.session}`)")


def _resurrect_leased(client: Any, plan: ResurrectPlan, *, confirm: Callable[[LivePreview], bool] | None,
                      on_plan: Callable[[Any], None] | None, toolbox: Any) -> ResurrectReport:

    if on_plan is not None:
        on_plan(plan)
    if confirm is not None and plan.preview is None:  # a plan= prepared without its preview: the gate needs it
        raise ValueError("resurrect_session: confirm= needs a plan prepared with its preview")
    if confirm is not None and plan.preview.needs_confirm and not confirm(plan.preview):
        raise ResurrectCancelled("resurrect cancelled at the side-effect gate — nothing was written")
    w, red = client.writer, client.redactor
    tape = ReplayTape(plan.tail)
    # A hit is served from the tail exactly once and not recorded again (its cell is in the turn
    # already: flux's Resume scope records only the misses); a miss runs live and is recorded.
    # The re-executed run's rows wait in memory and land in a few transactions — a crash loses
    # nothing a second resurrect would not serve again — except around a live op, which keeps
    # the in-flight marker: everything pending (its step_started included) is on disk before it
    # dispatches, and its cell as soon as it is recorded.
    sink = BufferedRunSink(w, plan.session, red, client.cap, durable=lambda ev: ev.get("event") == "op_recorded")
    tee = EventTee(sink)
    live = LiveHost(toolbox, client.approver, client._timer, before_dispatch=lambda op: sink.flush(),
                     concurrent=getattr(client, "concurrent_ops", True))
    host = TapeFirstHost(tape, RecordingHost(live, tee, red, client.cap, enabled=client.cassette))
    interp = Interpreter(catalog_for(toolbox.catalog()), host, tee, approver=confirm_with(client.approver),
                         values=dict(plan.values), run_id=plan.session,
                         # the same session: a fast-forwarded `parallel` rebinds its branch names here
                         session=FlowDbBindings(client.store_dir, plan.session, now=w.now))
    try:
        report = _resurrect_run(plan, interp, tee, host, live, tape)
    finally:
        sink.flush()
    answer = report.answer
    w.append(plan.session, TurnEnded(outcome=report.outcome, iterations=live.dispatches + host.served,
                                     answer=red.redact(answer)), turn_id=plan.turn_id)
    w.append(plan.session, Message(role="assistant", content=red.redact_value(
        [{"type": "text", "text": answer.strip() or "(resurrected: no answer)"}])))
    return report


def _resurrect_run(plan: ResurrectPlan, interp: Interpreter, tee: EventTee, host: TapeFirstHost, live: Any,
                   tape: ReplayTape) -> ResurrectReport:
    report = ResurrectReport(plan.session, plan.turn, unanchored_cells=plan.unanchored_cells,
                             completed_before=plan.completed)
    outcome, answer = "resurrected", ""
    try:
        # a turn with no statement boundary (an adaptive turn's host plans) stays ledger-less, so the
        # session still replays by its acceptance order
        resumable = plan.has_boundary or plan.ledger is not None
        server = PlanServer(interp)
        halted = server.run(plan.draft, plan.ledger, resumable=resumable, flow_key=plan.flow_key)
        v = server.value
        if halted is not None and halted.kind == "awaiting":
            outcome, answer = "suspended", halted.error
        elif halted is not None:
            outcome = "halted"
            answer = f"The resumed flow halted — {halted.error}"
            report.halt = {"kind": halted.kind, "error": halted.error, "node": halted.node,
                           "op": halted.op}
        else:
            answer = (v if isinstance(v, str) else __import__("json").dumps(v, ensure_ascii=False)) if v is not None else ""
    except KeyboardInterrupt:
        raise
    report.statements_fast_forwarded = next(
        (int(ev.get("skipped", 0)) for ev in reversed(tee.events) if ev.get("event") == "plan_resumed"), 0)
    report.ops_served_from_cassette = host.served
    report.ops_run_live = len(host.live_ops)
    report.live_ops = list(host.live_ops)
    if plan.unanchored_cells:
        report.unanchored_served = host.served
    if not answer:
        answer = (f"Resumed the interrupted turn: {report.statements_fast_forwarded} statement(s) fast-forwarded, "
                  f"{report.ops_served_from_cassette} op(s) served from the cassette, {report.ops_run_live} run live.")
    report.outcome, report.answer = outcome, answer
    left = len(tape.unconsumed)
    if tape.diverged is not None:
        report.diverged = tape.diverged
    elif left:
        report.diverged = (f"{left} crash-tail cell(s) of turn {plan.turn} were never re-consumed — the resumed "
                           "plan dispatched something else than the recording")
    return report
