"""Resurrect reads its session through ``read_resurrect_input`` (the turn headers, then only the
newest turn's rows, folded straight from them) instead of ``load_session``: a differential test
against the previous implementation — kept here verbatim as the reference — on the demo, a
benchmark-shaped turn and stores corrupted by hypothesis."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.cassette.replay import ReplayTape, TapeCell
from flux.errors import FluxError
from flux.lang.catalog import OpCatalog
from flux.lang.hashes import flow_key, stmt_hash16
from flux.lang.interpreter import Interpreter, LedgerEntry, ResumeLedger
from flux.lang.parser import parse
from flux.model.interrupted import check_interrupted
from flux.model.ledger import ledger_from_interrupted
from flux.model.session import TRACE_KINDS, load_session
from flux.store import (
    Message, PlanAttempted, StatementCompleted, StepStarted, StepSucceeded, StoreReader, StoreWriter, TurnEnded,
)
from flux.store.events import (
    RUN_VARIANTS, ApprovalGranted, Awaiting, ApprovalRequested, CheckpointReached, OpRecorded, PlanHalted, Run, StepFailed,
    decode_run, run_fields_exact,
)
from flux.store.payload_decode import DECODE_ERRORS, PayloadError, load_payload, payload_kind
from flux.store.store import stored_event, valid_event_row
from flux.timemachine import resurrect as res_mod
from flux.timemachine.resurrect import _DECODED, _WINDOW_SQL, TraceRow, _trace_row, read_resurrect_input
from flux.timemachine.engine import binder_of, live_effect, plan_ast, predict_calls, simulate_serve
from flux.timemachine.replay_direct import statements_before_last_plan
from flux.timemachine.gate import LiveOp, LivePreview
from flux.timemachine.resurrect import ResurrectPlan, prepare_resurrect
from tests.core.test_replay_fastpath import _FIELD_VALUES, _PAYLOAD_TEXTS
from tests.helpers import cell, write_turn


# The window read before it took field readers (res6): the row by row validation it replaced —
# valid_event_row, load_payload, payload_kind, run_fields_exact — kept verbatim as the reference.
def _read_window_previous(reader: StoreReader, sid: str, turn: Turn, *, tolerant: bool) -> list[TraceRow]:
    """The run rows at or after ``turn``'s ``turn_started`` (by stream position, then by
    ``global_seq``, the turn's window as ``SessionDetail.turn_run_trace`` cuts it). A header kind's
    row was read (and a corrupt one counted) with the headers: here it counts only when its payload
    says ``run``."""
    out: list[TraceRow] = []
    skipped = 0
    start = turn.turn_id
    for gs, stream, sseq, eid, kind, ts, turn_id, payload in reader.scan(_WINDOW_SQL, (sid, turn.stream_seq, *TRACE_KINDS),
                                                                        tolerant=tolerant):
        counted = kind == "run"
        if not valid_event_row(gs, stream, sseq, kind, payload):
            skipped += counted
            continue
        try:
            obj = load_payload(payload)
        except PayloadError:
            skipped += counted
            continue
        if payload_kind(kind, obj) != "run":
            continue  # a header (read with the headers) or another kind: not a run row
        if gs < start:
            counted = False  # outside the window: load_session validated it with the session; not ours
        d = obj.get("data")
        tag = d.get("event") if type(d) is dict else None
        cls = RUN_VARIANTS.get(tag) if type(tag) is str else None
        if cls is not None and cls not in _DECODED and run_fields_exact(cls, d):
            if gs < start:
                continue
            if cls is StepStarted:
                out.append(TraceRow(gs, tag, d.get("step", ""), op=d.get("op", "")))
            elif cls is StepSucceeded:
                out.append(TraceRow(gs, tag, d.get("step", ""), d.get("output", "")))
            elif cls is StepFailed:
                out.append(TraceRow(gs, tag, d.get("step", "")))
            elif cls is OpRecorded:  # OpRecorded's defaults where a field is absent
                content = d.get("content", "")
                out.append(TraceRow(gs, tag, d.get("step", ""), content, cell=TapeCell(
                    d.get("op", ""), d.get("input_hash", ""), d.get("input_hash_redacted"), content, d.get("view"),
                    d.get("is_error", False), d.get("denied", False), d.get("truncated", False))))
            else:
                out.append(TraceRow(gs, tag))
            continue
        try:  # a ledger row, or an odd one: decoded in full, exactly as every reader does
            ev = decode_run(d)
        except DECODE_ERRORS:
            skipped += counted
            continue
        if gs < start:
            continue
        out.append(_trace_row(stored_event(gs, stream, sseq, eid, kind, ts, turn_id, Run(event=ev))))
    if skipped:
        reader.skipped_rows += skipped
    return out


def _values_from_trace_reference(trace: list) -> dict[str, Any]:
    values: dict[str, Any] = {}
    pending: dict[str, str] = {}
    for e in trace:
        r = e.body.event
        if isinstance(r, OpRecorded):
            pending[r.step] = r.content
        elif isinstance(r, StepSucceeded) and r.step in pending:
            values[r.output] = pending.pop(r.step)
    return values


def prepare_resurrect_reference(reader: StoreReader, session: str, *, catalog: OpCatalog | None = None,
                                workspace: str | None = None) -> Optional[ResurrectPlan]:
    """``prepare_resurrect`` as it was before the lean read (on ``load_session``), verbatim."""
    detail = load_session(reader, session, kinds=TRACE_KINDS)
    sid = detail.id
    check = check_interrupted(detail.turns, detail.turn_run_trace)
    if check.interrupted is None:
        if check.reason is not None:
            raise FluxError(f"session {sid} cannot be resurrected: {check.reason}")
        return None
    it = check.interrupted
    turn = detail.turns[it.turn_number - 1]
    draft = it.draft if it.draft is not None else parse(it.plan_source)
    key = it.flow_key
    trace = detail.turn_run_trace(turn)
    anchor = turn.accepted_plans[-1].global_seq
    after = [e for e in trace if e.global_seq > anchor]
    full = ledger_from_interrupted(trace, key)
    values = _values_from_trace_reference(after)
    kept: list[LedgerEntry] = []
    if full is not None:
        for i, node in enumerate(draft.body):
            if isinstance(node, Interpreter.PASS_THROUGH):
                continue
            entry = full.entry(i)
            if entry is None or entry.stmt != stmt_hash16(node):
                break
            if entry.value is not None and binder_of(node) is not None and entry.value not in values:
                break  # cannot re-bind: re-execute from here, served from tape
            kept.append(entry)
    ledger = ResumeLedger(key, kept, full.checkpoint if full else None) if kept else None
    boundary = anchor
    if kept:
        last = kept[-1].node
        for e in after:
            r = e.body.event
            if isinstance(r, StatementCompleted) and r.plan == key and r.node == last:
                boundary = e.global_seq
    has_boundary = any(isinstance(e.body.event, (StatementCompleted, PlanHalted)) for e in trace)
    turn_cells = detail.turn_cells(turn)
    tail = [c for c in turn_cells if c.global_seq > boundary]
    unanchored = 0 if has_boundary else len(turn_cells)
    open_steps: dict[str, str] = {}
    for e in after:
        r = e.body.event
        if isinstance(r, StepStarted):
            open_steps[r.step] = r.op
        elif isinstance(r, (StepSucceeded, StepFailed, OpRecorded)):
            open_steps.pop(r.step, None)
    in_flight = next(iter(reversed(list(open_steps.values()))), None)

    start = 0
    if ledger is not None:
        start = max((e.node for e in kept), default=-1) + 1
        if ledger.checkpoint is not None:
            start = max(start, ledger.checkpoint + 1)
    rest = list(draft.body[start:])
    tape = ReplayTape(tail)
    served, misses = simulate_serve(tape, predict_calls(rest, catalog))
    ops = tuple(LiveOp(m.op, live_effect(catalog, m.op), m.detail, workspace,
                       "in flight" if m.op == in_flight else "tail") for m in misses)
    before = statements_before_last_plan(turn)
    notes = [f"interrupted at statement {before + it.completed} of {before + len(draft.body)} of the turn"
             + (" (killed mid-dispatch)" if in_flight else "")]
    if kept:
        notes.append(f"✓ {len(kept)} statement(s) fast-forwarded")
    if served:
        notes.append(f"✓ {served} cell(s) served from tape (recorded before the kill)")
    for o in ops:
        notes.append(f"↻ {o.op} ({o.effect}) has no cell → runs again" + (" (it was in flight)" if o.why == "in flight" else ""))
    notes.append("· no model call")
    preview = LivePreview("resurrect", sid, not ops, ops, None, len(kept), 0, len(rest), served, workspace,
                          tuple(notes), f"resurrect {sid} · turn {turn.number}",
                          {"turn": turn.number, "completed": it.completed, "in_flight": in_flight})
    return ResurrectPlan(detail, sid, turn.number, turn.turn_id, draft, key, it.completed, ledger, values, tail,
                         unanchored, in_flight, preview, has_boundary)


def _facts(fn) -> tuple:
    """What a resurrect plan decides (or the one-line error), comparable across the two reads."""
    try:
        p = fn()
    except FluxError as e:
        return ("error", type(e).__name__, str(e))
    if p is None:
        return ("none",)
    ledger = (p.ledger.plan, p.ledger.completed, p.ledger.checkpoint) if p.ledger is not None else None
    return (p.session, p.turn, p.turn_id, plan_ast(p.draft), p.flow_key, p.completed, ledger, p.values,
            [TapeCell.of(getattr(c, "rec", c)) for c in p.tail], p.unanchored_cells, p.in_flight, p.preview,
            p.has_boundary, p.detail.row)


def _same(store: Path, sid: str = "s_1", **kw) -> tuple:
    with StoreReader(store) as old, StoreReader(store) as new, StoreReader(store) as lean:
        a = _facts(lambda: prepare_resurrect_reference(old, sid, **kw))
        b = _facts(lambda: prepare_resurrect(new, sid, **kw))
        c = _facts(lambda: prepare_resurrect(lean, sid, preview=False, **kw))
    assert b == a
    # without the gate's preview (resurrect_session with no confirm/on_plan): the same plan, or the same error
    assert c == (b[:11] + (None,) + b[12:] if len(b) > 11 else b)
    return b


def test_the_demo_interrupted_flow_plans_the_same(demo: Path) -> None:
    facts = _same(demo, "s_9")
    assert facts[0] == "s_9" and facts[10] is not None  # an op was in flight
    for sid in ("s_1", "s_5"):  # sessions with nothing to resurrect, or refused: the same answer
        _same(demo, sid)


def test_generated_interrupted_sessions_plan_the_same(tmp_path: Path) -> None:
    """The sessions of the resurrect differential (killed anywhere, halted, diverged, redacted,
    resumable or not, canonical host plans or not): every plan the same as the reference's."""
    import random

    from tests.core.test_resurrect_differential import _session

    with StoreWriter(tmp_path / "s") as w:
        sids = [_session(w, random.Random(seed)) for seed in range(40)]
    for sid in sids:
        _same(tmp_path / "s", sid)


def test_the_fixture_plans_the_same(fixture_store: Path) -> None:
    _same(fixture_store, "s_1")


def test_a_benchmark_shaped_turn_plans_the_same(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from bench_timemachine_write import write_interrupted

    with StoreWriter(tmp_path / "s") as w:
        sid = write_interrupted(w, 40)
    facts = _same(tmp_path / "s", sid)
    assert len(facts[8]) == 40 and facts[9] == 40  # every cell is unanchored crash tail


# ---- on corrupted stores ---------------------------------------------------------------------------


def _write_ledgered(w: StoreWriter, sid: str, tid: int, paths: list[str], *, crash_at: int | None = None) -> None:
    body = "".join(f'  s{k} = write({{"path":"{p}","body":"x"}})\n' for k, p in enumerate(paths))
    draft = parse("flow\n" + body)
    key = flow_key(draft.name, draft.body)
    w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source="flow\n" + body), turn_id=tid)
    for k, (node, p) in enumerate(zip(draft.body, paths)):
        inp = {"body": "x", "path": p}
        c = cell("write", inp, "ok")
        step = c.event.step
        w.append(sid, Run(StepStarted(step=step, op="write", input_hash=c.event.input_hash)))
        if crash_at is not None and k == crash_at:
            return  # killed mid-dispatch: no cell, no result
        w.append(sid, c)
        w.append(sid, Run(StepSucceeded(step=step, output=f"v_{tid}_{k}")))
        if crash_at is None or k < crash_at - 1:  # the statement before the crash completed its op only
            w.append(sid, Run(StatementCompleted(plan=key, node=k, stmt=stmt_hash16(node), value=f"v_{tid}_{k}")))


@pytest.fixture(scope="module")
def resurrect_base(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("resurrect-diff") / "store"
    with StoreWriter(d) as w:
        sid = w.create_session("mock")
        tid = write_turn(w, sid, "one", end=None)
        _write_ledgered(w, sid, tid, ["a", "b"])
        w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
        w.append(sid, Message.text("user", "two"))
        tid = w.begin_turn(sid, "two", "mock")
        _write_ledgered(w, sid, tid, ["c", "d", "e", "f", "g"], crash_at=3)
        # rows of other variants in the window (read only for whether they decode), a failed step, a checkpoint
        w.append(sid, Run(ApprovalRequested(step="step_z", effects=["write"])))
        w.append(sid, Run(ApprovalGranted(step="step_z")))
        w.append(sid, Run(StepFailed(step="step_q", error="boom")))
        w.append(sid, Run(CheckpointReached(flow_key="h:0", label="cp", node=1)))
        w.append(sid, Run(Awaiting(run="r", node=1)))
    return d


def _mutate(store: Path, data) -> None:
    """Hostile rows (as tests/core/test_replay_fastpath.py corrupts them). A header row's kind
    column is left alone: both reads find turn headers by that column (as ``load_session(turn=N)``
    does), and the full load would take a header relabelled ``run`` by its payload."""
    con = sqlite3.connect(store / "events.db", isolation_level=None)
    try:
        rows = con.execute("SELECT global_seq, kind, payload FROM events ORDER BY global_seq").fetchall()
        for _ in range(data.draw(st.integers(1, 3), label="mutations")):
            gs, kind, payload = data.draw(st.sampled_from(rows), label="row")
            how = data.draw(st.sampled_from(["field", "text", "kind", "utf8", "blob", "surrogate", "later"]), label="how")
            if how == "field":
                obj = json.loads(payload)
                d = obj.get("data")
                if not isinstance(d, dict) or not d:
                    continue
                d[data.draw(st.sampled_from(sorted(d)), label="field")] = data.draw(_FIELD_VALUES, label="value")
                con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (json.dumps(obj), gs))
            elif how == "text":
                con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (data.draw(_PAYLOAD_TEXTS), gs))
            elif how == "kind" and kind == "run":
                con.execute("UPDATE events SET kind = ? WHERE global_seq = ?",
                            (data.draw(st.sampled_from(["turn_started", "plan_attempted", "message", "weird"])), gs))
            elif how == "utf8":
                con.execute("UPDATE events SET payload = CAST(? AS TEXT) WHERE global_seq = ?",
                            (payload.encode()[:20] + b"\xff\xfe" + payload.encode()[20:], gs))
            elif how == "blob":
                con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (payload.encode(), gs))
            elif how == "surrogate":  # a string field spelled with a lone surrogate escape (the one rule on read)
                obj = json.loads(payload)
                d = obj.get("data")
                keys = sorted(k for k, v in d.items() if isinstance(v, str)) if isinstance(d, dict) else []
                if keys:
                    k = data.draw(st.sampled_from(keys), label="field")
                    d[k] = d[k] + "\udc80"
                    con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (json.dumps(obj), gs))
            elif how == "later":  # an earlier row moved after the newest turn's start by its stream position
                con.execute("UPDATE events SET stream_seq = stream_seq + 1000 WHERE global_seq = ?", (gs,))
    finally:
        con.close()


def test_the_base_store_is_an_interrupted_turn_with_a_ledger_a_tail_and_an_op_in_flight(resurrect_base) -> None:
    facts = _same(resurrect_base)
    assert facts[1] == 2 and facts[5] == 2 and len(facts[8]) == 1 and facts[10] == "write"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_lean_read_plans_what_the_full_load_planned_on_corrupted_rows(resurrect_base, tmp_path_factory, data):
    store = tmp_path_factory.mktemp("v") / "store"
    shutil.copytree(resurrect_base, store)
    _mutate(store, data)
    if _a_header_kind_disagrees(store) or _stream_order_disagrees(store):
        # A row whose kind column and payload disagree about being a turn header (``run`` in the
        # column, ``"kind":"turn_started"`` in the payload): the lean read finds headers by the
        # column, as ``load_session(turn=N)`` and the sessions list do; the full load decodes the
        # payload and counts one more turn. Or a row moved in stream order past rows appended
        # after it (its stream_seq no longer follows global_seq): the lean read cuts the turn's
        # window by stream position, the full load by global_seq, so they may see different rows.
        # Documented differences: both must still answer with a plan or a one-line FluxError,
        # never a traceback.
        with StoreReader(store) as old, StoreReader(store) as new:
            for facts in (_facts(lambda: prepare_resurrect_reference(old, "s_1")),
                          _facts(lambda: prepare_resurrect(new, "s_1"))):
                assert facts[0] in ("error", "none", "s_1")
        return
    _same(store)


def _stream_order_disagrees(store: Path, sid: str = "s_1") -> bool:
    """A turn header whose stream position and global position put different rows before it."""
    con = sqlite3.connect(store / "events.db")
    try:
        rows = con.execute("SELECT global_seq, kind FROM events WHERE stream = ? ORDER BY stream_seq", (sid,)).fetchall()
    finally:
        con.close()
    for i, (gs, kind) in enumerate(rows):
        if kind == "turn_started" and {g for g, _ in rows[:i]} != {g for g, _ in rows if g < gs}:
            return True
    return False


def _a_header_kind_disagrees(store: Path) -> bool:
    from flux.store.payload_decode import PayloadError, load_payload, payload_kind

    con = sqlite3.connect(store / "events.db")
    con.text_factory = bytes  # a mutation may have written bad UTF-8 as TEXT
    try:
        for kind, payload in con.execute("SELECT kind, payload FROM events"):
            try:
                kind, payload = kind.decode(), payload.decode()
            except (AttributeError, UnicodeDecodeError):
                continue
            try:
                decoded = payload_kind(kind, load_payload(payload))
            except PayloadError:
                continue
            if decoded != kind and "turn_started" in (decoded, kind):
                return True
    finally:
        con.close()
    return False


def _same_window(store: Path, monkeypatch) -> tuple:
    got = []
    for side in ("previous", "new"):
        with StoreReader(store) as r, monkeypatch.context() as m:
            if side == "previous":
                m.setattr(res_mod, "_read_window", _read_window_previous)
            try:
                inp = read_resurrect_input(r, "s_1")
                got.append((inp.trace, inp.turns, r.skipped_rows))
            except FluxError as e:
                got.append(("error", str(e)))
    assert got[0] == got[1]
    return got[1]


# (which row: its tag and 0 = the turn's first / -1 = its last of them, in turn 1 or 2; what is done to it)
_WINDOW_CASES = [
    ("step_started", 2, -1, "field", "step", "x\udc80"),  # a lone surrogate escape: scrubbed on read (the one rule)
    ("op_recorded", 2, -1, "field", "content", "\ud83d tail"),
    ("step_succeeded", 2, -1, "field", "output", "v\udfff"),
    ("op_recorded", 2, 0, "field", "truncated", True),
    ("op_recorded", 2, 0, "field", "is_error", "yes"),  # not its type: decoded in full (coerced or skipped)
    ("approval_granted", 2, 0, "field", "step", 7),
    ("approval_requested", 2, 0, "field", "effects", "write"),
    ("awaiting", 2, 0, "field", "node", float("inf")),  # … that decoding refuses: skipped and counted
    ("step_failed", 2, 0, "field", "error", 1.5),
    ("step_started", 2, 0, "text", None, "[]"),  # not an object: skipped and counted
    ("op_recorded", 2, 0, "text", None, "{"),
    ("step_succeeded", 1, 0, "later", None, None),  # turn 1's rows moved after turn 2's start by stream position
    ("op_recorded", 1, -1, "later", None, None),
    ("op_recorded", 1, 0, "later", "seq", float("inf")),  # … and refused by decoding: not counted (not the window's)
    ("statement_completed", 1, 0, "later", None, None),  # a ledger row (decoded in full): not the window's
]


@pytest.mark.parametrize("tag,turn,which,how,key,value", _WINDOW_CASES)
def test_the_window_read_equals_the_previous_read_on_a_hostile_row(resurrect_base, tmp_path, monkeypatch, tag, turn,
                                                                   which, how, key, value):
    store = tmp_path / "store"
    shutil.copytree(resurrect_base, store)
    con = sqlite3.connect(store / "events.db", isolation_level=None)
    try:
        starts = [gs for (gs,) in con.execute("SELECT global_seq FROM events WHERE kind = 'turn_started' ORDER BY global_seq")]
        lo, hi = (starts[0], starts[1]) if turn == 1 else (starts[1], 10 ** 9)
        rows = [(gs, p) for gs, p in con.execute("SELECT global_seq, payload FROM events WHERE kind = 'run' AND"
                                                  " global_seq > ? AND global_seq < ? ORDER BY global_seq", (lo, hi))
                if json.loads(p)["data"]["event"] == tag]
        gs, payload = rows[which]
        if how == "field" or key is not None:
            obj = json.loads(payload)
            obj["data"][key] = value
            payload = json.dumps(obj)
        elif how == "later":
            con.execute("UPDATE events SET stream_seq = stream_seq + 1000 WHERE global_seq = ?", (gs,))
        if value is not None and key is None:
            payload = value
        con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (payload, gs))
    finally:
        con.close()
    _same_window(store, monkeypatch)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_window_read_equals_the_previous_read_on_corrupted_rows(resurrect_base, tmp_path_factory, monkeypatch,
                                                                    data):
    """The newest turn's window, read with field readers, against the row by row read it replaced:
    the same trace rows (values, cells, decoded ledger rows) and the same count of skipped rows."""
    store = tmp_path_factory.mktemp("w") / "store"
    shutil.copytree(resurrect_base, store)
    _mutate(store, data)
    _same_window(store, monkeypatch)
