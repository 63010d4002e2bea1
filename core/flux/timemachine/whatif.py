"""What-if: re-run a recorded session with one thing changed into a new linked session, and compare.

A substitution or a policy re-runs every execution under the frozen tape (a miss halts, or goes live
through the approver); a re-plan (``.model``, ``.instructions``) replays the earlier turns and re-drives
the target turn live. Every dispatch is recorded on the child, so ``flux diff`` compares like with like;
:func:`what_if_over` is the sweep. The rules are in docs/cli.md ("flux what-if").
"""

from __future__ import annotations

import os
import sqlite3
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..agent.recording import EventTee, LiveHost, Recorder
from ..cassette.record import RecordingHost
from ..cassette.replay import FrozenHost, ReplayHost, ReplayTape
from ..errors import AssertionFailed, FluxError
from ..lang.interpreter import Interpreter, ResumeLedger
from ..model.session import TRACE_KINDS, SessionDetail, load_session
from ..model.surfaces import cell_trajectory, side_by_side
from ..store.events import Compacted, OpRecorded, PlanHalted, Run, StatementCompleted, TurnEnded
from ..store.lease import SessionLease
from ..store.store import StoreReader, store_error
from .engine import (
    writes_ledger, MemorySink, NotForkable, catalog_for, executions_of, flush_events, live_effect, predict_calls,
    simulate_serve,
)
from .conversation import conversation_before
from .fork import accepted_attempt, refuse_partly_read
from .gate import LiveOp, LivePreview
from .executors import Executor, parse_executor, run_on_ray
from .serve import PlanServer

__all__ = ["WhatIfSpec", "WhatIf", "Counterfactual", "FirstDivergence", "SweepOutcome", "SweepReport",
           "plan_what_if", "run_what_if", "what_if_over", "WhatIfCancelled", "WhatIfRefused"]


class WhatIfCancelled(FluxError):
    """The user declined the side-effect gate; nothing was written."""


class WhatIfRefused(FluxError):
    """The live part may dispatch an op the client's toolbox has no implementation of (it would
    halt there, or record a fake "unknown op" result); refused before anything is written."""


@dataclass
class WhatIfSpec:
    """The knobs of a what-if (picklable: sweeps send it to worker processes)."""

    turn: Optional[int] = None
    substitute: dict[str, Any] = field(default_factory=dict)  # op → value
    substitute_at: dict[int, Any] = field(default_factory=dict)  # diff row of S → value
    policy: Optional[str] = None  # a policy file re-authorizing every dispatch
    off_tape: str = "halt"  # halt | live
    model: Optional[str] = None
    instructions: Optional[str] = None

    @property
    def replan(self) -> bool:
        return self.model is not None or self.instructions is not None

    def validate(self) -> None:
        if self.off_tape not in ("halt", "live"):
            raise FluxError(f"--off-tape is halt or live, got {self.off_tape!r}")
        if self.turn is not None and self.turn < 1:
            raise FluxError(f"--turn is 1-based: got {self.turn}")

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["substitute_at"] = {str(k): v for k, v in self.substitute_at.items()}
        return d


@dataclass(frozen=True)
class FirstDivergence:
    node: int
    kind: str  # Plan | Output
    detail: str


@dataclass
class Counterfactual:
    """A counterfactual run and how it relates to its source: what a what-if produced, or a
    fork of a recording with a value injected (:meth:`flux.testkit.Scenario.inject_at` — then
    ``at`` and ``fork``, the :class:`~flux.timemachine.fork.ForkResult`, are set). The one home of
    the concept: ``diff()``, ``first_divergence()``, ``hermetic``, ``cost()``, the chainable
    assertions (a failed one raises the test kit's ``AssertionFailed``, an ``AssertionError`` with
    the diff or the trajectory as its detail) and ``trajectory_diff()``."""

    source: str
    session: str
    store_dir: str
    turn: Optional[int] = None
    went_live: int = 0
    live_ops: list[str] = field(default_factory=list)
    denials: int = 0
    latched: Optional[str] = None  # an off-tape halt or a refused truncated cell
    substituted: int = 0
    served: int = 0
    model: Optional[str] = None
    model_calls: int = 0
    usage: Optional[dict] = None
    identical: Optional[bool] = None  # filled by diff()
    first: Optional[FirstDivergence] = None
    at: Optional[int] = None  # a fork's position (inject_at)
    fork: Any = None  # the ForkResult, when a fork made it
    label: str = ""  # how assertion messages name it (a scenario's name), default "what-if <session>"
    scenario_ref: Any = field(default=None, compare=False, repr=False)  # counts the test kit's assertions
    golden_transcript: Optional[list[str]] = None  # trajectory lines (source, this run): cells by default
    actual_transcript: Optional[list[str]] = None
    _ops: Optional[list[str]] = field(default=None, compare=False, repr=False)

    def __repr__(self) -> str:
        fd = self.first_divergence()
        at = f" @ {self.at}" if self.at is not None else ""
        return (f"Counterfactual({self.label or self.source}{at} → {self.session}"
                + (f", first divergence {fd.node} ({fd.kind})" if fd else "") + ")")

    @property
    def halted(self) -> Optional[str]:
        """Why the counterfactual stopped early (a fork's halted tail, an off-tape halt), if it did."""
        return (self.fork.halted if self.fork is not None else None) or self.latched

    @property
    def actual_ops(self) -> list[str]:
        """The ops of the counterfactual session's cells, in order."""
        if self._ops is None:
            r = StoreReader(self.store_dir)
            try:
                self._ops = [e.body.event.op for e in r.events(self.session, kinds=("run",))
                             if isinstance(e.body, Run) and isinstance(e.body.event, OpRecorded)]
            finally:
                r.close()
        return self._ops

    def trajectory_diff(self, width: int = 120) -> str:
        """Source and counterfactual side by side, one line per cell (or the transcripts given)."""
        if self.golden_transcript is None or self.actual_transcript is None:
            r = StoreReader(self.store_dir)
            try:
                self.golden_transcript = cell_trajectory(load_session(r, self.source, kinds=TRACE_KINDS))
                self.actual_transcript = cell_trajectory(load_session(r, self.session, kinds=TRACE_KINDS))
            finally:
                r.close()
        return side_by_side(self.golden_transcript, self.actual_transcript, width)

    # ---------------------------------------------------------------- comparisons
    def diff(self) -> Any:
        """``run_diff(S, D)``."""
        from .diff import run_diff

        r = StoreReader(self.store_dir)
        try:
            d = run_diff(r, self.source, r, self.session)
        finally:
            r.close()
        self.identical = d.identical
        i = d.first_divergence
        if i is None:
            self.first = None
        else:
            row = d.rows[i]
            if row.kind == "plan":
                self.first = FirstDivergence(row.node, "Plan", f"{d.text(row.a_stmt)} → {d.text(row.b_stmt)}")
            else:
                self.first = FirstDivergence(row.node, "Output", f"op `{row.op}`: {(row.a or '')[:60]!r} → {(row.b or '')[:60]!r}")
        return d

    def first_divergence(self) -> Optional[FirstDivergence]:
        if self.identical is None:
            self.diff()
        return self.first

    @property
    def hermetic(self) -> bool:
        """Nothing went live, nothing was latched, no policy denial, no model call."""
        if self.fork is not None and not self.fork.hermetic:
            return False
        return self.went_live == 0 and self.latched is None and self.denials == 0 and self.model_calls == 0

    @property
    def badge(self) -> str:
        """One phrase for lists and headers: what kept it from being hermetic, if anything."""
        if self.hermetic:
            return "hermetic"
        parts = []
        if self.model_calls:
            parts.append(f"{self.model_calls} model call(s)")
        if self.went_live:
            parts.append(f"went live ({self.went_live} op(s))")
        if self.denials:
            parts.append(f"{self.denials} denied by policy")
        if self.latched:
            parts.append("halted off tape" if "off tape" in self.latched else "refused a truncated cell"
                         if "truncated" in self.latched else "diverged")
        return " · ".join(parts)

    def cost(self, pricing: Any = None) -> float:
        """What the counterfactual spent (builtin prices unless ``pricing`` is given)."""
        if not self.usage or not self.model:
            return 0.0
        from ..model.pricing import load_price_table
        from ..store.events import Usage

        table = pricing or load_price_table()
        c = table.cost(self.model, Usage.from_body(self.usage))
        return float(c or 0.0)

    def _asserted(self) -> str:
        if self.scenario_ref is not None and hasattr(self.scenario_ref, "assertions"):
            self.scenario_ref.assertions += 1
        return self.label or f"what-if {self.session}"

    def assert_diverges_at(self, node: int) -> "Counterfactual":
        """The first divergence from the source is at diff row ``node`` (nothing before it changed)."""
        __tracebackhide__ = True  # pytest shows the failure, not this frame
        name = self._asserted()
        d = self.diff()
        fd = self.first
        if fd is not None and fd.node == node:
            return self
        what = (f"it does not diverge from {self.source}" if fd is None
                else f"it diverges at node {fd.node} ({fd.kind}): {fd.detail}")
        raise AssertionFailed(f"{name}: expected the first divergence at statement {node}; {what}",
                              detail=d.render_text().rstrip())

    def assert_compensated_with(self, op: str) -> "Counterfactual":
        """``op`` was dispatched by the counterfactual run (it is among its recorded cells)."""
        __tracebackhide__ = True  # pytest shows the failure, not this frame
        name = self._asserted()
        ops = self.actual_ops
        if op in ops:
            return self
        raise AssertionFailed(f"{name}: expected the run to compensate with `{op}`; it never dispatched `{op}` "
                              f"(it dispatched: {', '.join(ops) or 'nothing'})", detail=self.trajectory_diff())

    def to_json(self) -> dict[str, Any]:
        if self.identical is None:
            self.diff()
        fd = self.first
        return {"source": self.source, "session": self.session, "turn": self.turn, "hermetic": self.hermetic,
                "badge": self.badge,
                "went_live": self.went_live, "live_ops": self.live_ops, "denials": self.denials,
                "latched": self.latched, "substituted": self.substituted, "served": self.served,
                "model": self.model, "model_calls": self.model_calls, "identical": self.identical,
                "first_divergence": None if fd is None else {"node": fd.node, "kind": fd.kind, "detail": fd.detail},
                "cost_usd": self.cost()}


# ------------------------------------------------------------------------------------------------
# Planning


@dataclass
class _Plan:
    detail: SessionDetail
    spec: WhatIfSpec
    executions: list
    by_index: dict[int, Any]
    preview: LivePreview
    target_turn: Optional[int] = None  # re-plan: the turn re-driven


def row_cells(detail: SessionDetail) -> list[Optional[int]]:
    """Per diff row of the session (statement rows, else cell rows): its first cell's tape index."""
    out: list[Optional[int]] = []
    first: Optional[int] = None
    n = 0
    has_rows = False
    for e in detail.run_events:
        r = e.body.event
        if isinstance(r, OpRecorded):
            if first is None:
                first = n
            n += 1
        elif isinstance(r, (StatementCompleted, PlanHalted)):
            has_rows = True
            out.append(first)
            first = None
    return out if has_rows else list(range(len(detail.cells)))


def prepare_what_if(reader: StoreReader, session: str, spec: WhatIfSpec, *, catalog: Any = None,
                    workspace: Optional[str] = None, model: Optional[str] = None) -> _Plan:
    spec.validate()
    detail = load_session(reader, session, kinds=TRACE_KINDS)
    sid = detail.id
    refuse_partly_read(sid, detail.skipped_rows, "what-if")
    if not detail.cells:
        raise NotForkable(f"session {sid} cannot be asked a what-if: no cassette cells recorded (pre-C-43 run, or "
                          "FLUX_CASSETTE=0) — the world cannot be frozen")
    by_index: dict[int, Any] = {}
    if spec.substitute_at:
        rows = row_cells(detail)
        for node, value in spec.substitute_at.items():
            if not 0 <= node < len(rows):
                raise FluxError(f"--substitute-at {node}: session {sid} has {len(rows)} diff row(s), numbered 0–{len(rows) - 1}")
            if rows[node] is None:
                raise FluxError(f"--substitute-at {node}: statement {node} of {sid} dispatched nothing — there is no "
                                "outcome to substitute")
            by_index[rows[node]] = value
    target_turn = None
    if spec.replan:
        if not detail.turns:
            raise FluxError(f"session {sid} has no turns to re-plan")
        target_turn = spec.turn or len(detail.turns)
        if target_turn > len(detail.turns):
            raise FluxError(f"session {sid} has no turn {target_turn} (it has {len(detail.turns)})")
        execs = [e for e in executions_of(detail, verb="replayable") if e.turn is not None and e.turn < target_turn] \
            if target_turn > 1 else []
    else:
        execs = executions_of(detail, turn=spec.turn, verb="replayable")
    tape = ReplayTape(detail.cells)
    nodes = [n for ex in execs for n in ex.draft.body]
    served, misses = simulate_serve(tape, predict_calls(nodes, catalog))
    ops: list[LiveOp] = []
    notes = []
    if spec.replan:
        m = model or spec.model or detail.row.model
        if spec.off_tape == "live":
            ops = [LiveOp(s.name, live_effect(catalog, s.name), "(the model decides; off tape)", workspace, "off tape")
                   for s in (catalog or [])]
        notes.append(f"re-plan turn {target_turn} with {m}" + (" and new instructions" if spec.instructions else ""))
        preview = LivePreview("what-if", sid, False, tuple(ops), m, len(nodes), served, 0, 0, workspace, tuple(notes),
                              f"what if… {sid} (re-plan)", {"turn": target_turn})
    else:
        if misses:
            if spec.off_tape == "live":
                ops = [LiveOp(x.op, live_effect(catalog, x.op), x.detail, workspace, "off tape") for x in misses]
            else:
                notes.append(f"{len(misses)} dispatch(es) may be off tape → the run halts there (--off-tape halt)")
        subs = [f"{op} := {v!r}"[:60] for op, v in spec.substitute.items()]
        subs += [f"row {k} := {v!r}"[:60] for k, v in spec.substitute_at.items()]
        if subs:
            notes.append("substitute " + ", ".join(subs))
        if spec.policy:
            notes.append(f"policy {spec.policy} re-authorizes every dispatch")
        preview = LivePreview("what-if", sid, not ops, tuple(ops), None, 0, 0, len(nodes), served, workspace,
                              tuple(notes), f"what if… {sid}", {"turn": spec.turn})
    return _Plan(detail, spec, execs, by_index, preview, target_turn)


def plan_what_if(reader: StoreReader, session: str, spec: WhatIfSpec, **kw: Any) -> LivePreview:
    return prepare_what_if(reader, session, spec, **kw).preview


# ------------------------------------------------------------------------------------------------
# Running


def _authorizer(spec: WhatIfSpec, catalog: Any) -> Optional[Callable[[str, Any], tuple[bool, str]]]:
    if not spec.policy:
        return None
    from ..agent.approver import ApprovalRequest, load_policy

    approver = load_policy(spec.policy)
    declared = {s.name: s.effect for s in (catalog or [])}

    def authorize(op: str, input: Any) -> tuple[bool, str]:
        d = approver.decide(ApprovalRequest(op=op, effect=declared.get(op, "write"), input=input))
        return d.allowed, d.reason

    return authorize


def run_what_if(client: Any, session: str, spec: WhatIfSpec, *, confirm: Callable[[LivePreview], bool] | None = None,
                on_event: Callable[[dict], None] | None = None) -> Counterfactual:
    """Run a what-if on ``client``'s store (docs/cli.md, "flux what-if")."""

    catalog = client.toolbox.catalog()
    reader = StoreReader(client.store_dir)
    try:
        plan = prepare_what_if(reader, session, spec, catalog=catalog,
                               workspace=str(client.workspace), model=client.model if spec.model else None)
        refusal = plan.preview.refusal(catalog)
        if refusal is not None:  # as `flux what-if` and the app refuse it: up front, whoever runs it (sweeps too)
            raise WhatIfRefused(refusal)
        conv = conversation_before(reader, plan.detail.id, plan.detail.turns[plan.target_turn - 1].turn_id) \
            if plan.target_turn else []
    finally:
        reader.close()
    if confirm is not None and plan.preview.needs_confirm and not confirm(plan.preview):
        raise WhatIfCancelled("what-if cancelled at the side-effect gate — nothing was written")
    detail = plan.detail
    sid = detail.id
    w, red = client.writer, client.redactor
    cat = catalog_for(catalog)
    tape = ReplayTape(detail.cells)
    live = LiveHost(client.toolbox, client.approver, client._timer,
                     concurrent=getattr(client, "concurrent_ops", True))
    frozen = FrozenHost(tape, by_index=plan.by_index, by_op=spec.substitute, off_tape=spec.off_tape,
                        live=live if spec.off_tape == "live" else None, authorize=_authorizer(spec, catalog))
    at = f"{spec.turn}" if spec.turn else "latest"
    model = (client.model if spec.model else None) or detail.row.model or client.model
    cf = Counterfactual(sid, "", str(client.store_dir), spec.turn, model=model if spec.replan else None)
    if not spec.replan:
        # Whole or not at all: one transaction unless an op may go live (off tape `live` with a miss
        # predicted) — a live op's effect must not be rolled back unrecorded, nor hold the store's
        # write lock while it acts; the CLI checks the store whole before such a run.
        leased = ExitStack()  # the child's liveness lease until its turn_ended is written (as a fork's)
        with leased, (w.transaction() if spec.off_tape == "halt" or plan.preview.offline else _nullcontext()):
            did = w.create_session(detail.row.model or model, context={"correlation_id": sid, "agent_id": f"what_if:{sid}@{at}"})
            leased.enter_context(SessionLease.acquire(client.store_dir, did))
            tid = w.begin_turn(did, f"<what-if {sid}>", detail.row.model or model)
            rec = Recorder(w, did, red, client.cap)
            events: list[dict] = []
            sink = EventTee(rec, events)
            interp = Interpreter(cat, RecordingHost(frozen, sink, red, client.cap, enabled=True), sink,
                                 approver=lambda m, r: True, run_id=did)
            server = PlanServer(interp)
            halted = False
            resumable = writes_ledger(detail)
            for step, ex in enumerate(plan.executions, 1):
                rec.append(accepted_attempt(step, ex.draft, red), turn_id=tid)
                h = server.run(ex.draft, ResumeLedger.fold(events) if halted else None, resumable=resumable)
                halted = halted or h is not None
            rec.append(TurnEnded(outcome="ok", iterations=len(plan.executions), answer=""), turn_id=tid)
        cf.session = did
    else:
        did = _replan(client, plan, frozen, conv, model, at, on_event, cf)
        cf.session = did
    cf.went_live = len(frozen.live_ops)
    cf.live_ops = list(frozen.live_ops)
    cf.denials = frozen.denials
    cf.latched = tape.diverged
    cf.substituted = frozen.substituted
    cf.served = frozen.served
    return cf


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _replan(client: Any, plan: _Plan, frozen: FrozenHost, conv: list[dict], model: str, at: str,
            on_event: Any, cf: Counterfactual) -> str:
    from ..agent.session import Session
    from ..agent.loop import TurnRunner

    detail = plan.detail
    sid = detail.id
    w, red = client.writer, client.redactor
    # the turns before the target, hermetically, in memory first (a divergence writes nothing)
    prefix_tape = ReplayTape(detail.cells)
    mem = MemorySink()
    interp = Interpreter(catalog_for(client.toolbox.catalog()),
                         RecordingHost(ReplayHost(prefix_tape), mem, red, client.cap, enabled=True), mem,
                         approver=lambda m, r: True, run_id=f"what_if:{sid}")
    server = PlanServer(interp)
    items = []
    resumable = writes_ledger(detail)
    for ex in plan.executions:
        mark = len(mem.events)
        server.run(ex.draft, ResumeLedger.fold(mem.events) if resumable else None, resumable=resumable)
        items.append((ex.draft, mem.events[mark:]))
        if prefix_tape.diverged is not None:
            raise FluxError(f"the what-if prefix of {sid} diverged from the recording: {prefix_tape.diverged}")
    # the Frozen tape serves the target turn's dispatches: drop what the prefix consumed
    for i in prefix_tape.served:
        frozen.tape.take(frozen.tape.cells[i].op, frozen.tape.cells[i].input_hash, i)
    with w.transaction():
        did = w.create_session(model, context={"correlation_id": sid, "agent_id": f"what_if:{sid}@{at}"})
        if conv:
            w.append(did, Compacted(messages=conv))
        if items:
            tid = w.begin_turn(did, f"<what-if prefix {sid}>", model)
            for step, (draft, evs) in enumerate(items, 1):
                w.append(did, accepted_attempt(step, draft, red), turn_id=tid)
                flush_events(w, did, evs, red)
            w.append(did, TurnEnded(outcome="ok", iterations=len(items), answer=""), turn_id=tid)
    user_input = detail.turns[plan.target_turn - 1].user_input
    sess = Session(client, did)
    cfg = client.turn_config(did, on_event)
    cfg.host_wrap = lambda live: _Rebind(frozen, live)
    if plan.spec.instructions is not None:
        cfg.instructions = plan.spec.instructions
    import asyncio

    with SessionLease.acquire(client.store_dir, did):  # the re-planned turn is recorded live, as a turn of flux run is
        out, msgs = asyncio.run(TurnRunner(cfg).run_turn(sess.history, user_input))
    cf.model_calls = out.model_calls
    cf.usage = out.usage.to_body()
    return did


class _Rebind:
    """The Frozen host with its live fall-through bound to the turn's own live host."""

    def __init__(self, frozen: FrozenHost, live: Any):
        self.frozen = frozen
        if frozen.off_tape == "live":
            frozen.live = live

    def dispatch(self, op: str, input: Any, input_json: str | None = None) -> Any:
        return self.frozen.dispatch(op, input, input_json)


class WhatIf:
    """The builder (``session.what_if()``): set knobs, then :meth:`plan` or :meth:`run`."""

    def __init__(self, client: Any, session: str):
        self.client = client
        self.session_id = session
        self.spec = WhatIfSpec()

    def turn(self, n: int) -> "WhatIf":
        self.spec.turn = n
        return self

    def model(self, m: str) -> "WhatIf":
        self.spec.model = m
        return self

    def instructions(self, s: str) -> "WhatIf":
        self.spec.instructions = s
        return self

    def policy(self, path: str | os.PathLike[str]) -> "WhatIf":
        self.spec.policy = str(path)
        return self

    def substitute(self, op: str, value: Any) -> "WhatIf":
        self.spec.substitute[op] = value
        return self

    def substitute_at(self, node: int, value: Any) -> "WhatIf":
        self.spec.substitute_at[node] = value
        return self

    def off_tape(self, mode: str) -> "WhatIf":
        self.spec.off_tape = mode
        return self

    def plan(self) -> LivePreview:
        r = StoreReader(self.client.store_dir)
        try:
            return plan_what_if(r, self.session_id, self.spec, catalog=self.client.toolbox.catalog(),
                                workspace=str(self.client.workspace))
        finally:
            r.close()

    def run(self, *, confirm: Callable[[LivePreview], bool] | None = None) -> Counterfactual:
        return run_what_if(self.client, self.session_id, self.spec, confirm=confirm)


# ------------------------------------------------------------------------------------------------
# Sweeps


@dataclass
class SweepOutcome:
    session: str
    result: Optional[Counterfactual] = None
    error: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def changed(self) -> bool:
        """The run diverged from its source. An error row did not run, so it is counted as an error,
        never as a change."""
        return self.error is None and self.result is not None and not self.result.identical

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session, "ok": self.ok, "error": self.error,
                "result": self.result.to_json() if self.result is not None else None}


@dataclass
class SweepReport:
    outcomes: list[SweepOutcome]
    changed: int
    total: int
    offline_cost: float

    @property
    def errors(self) -> int:
        return sum(1 for o in self.outcomes if not o.ok)

    def summary_line(self) -> str:
        return f"changed {self.changed}/{self.total} · errors {self.errors} · offline cost ${self.offline_cost:.2f}"

    def to_json(self) -> dict[str, Any]:
        return {"changed": self.changed, "total": self.total, "errors": self.errors,
                "offline_cost": self.offline_cost, "outcomes": [o.to_json() for o in self.outcomes]}


_WORKER_CLIENT: dict = {}


def _worker_client(store_dir: str, client_args: dict) -> Any:
    key = (store_dir, tuple(sorted((k, str(v)) for k, v in client_args.items())))
    c = _WORKER_CLIENT.get(key)
    if c is None:
        c = _make_client(store_dir, client_args)
        _WORKER_CLIENT[key] = c
    return c


def _make_client(store_dir: str, client_args: dict) -> Any:
    """A sweep worker's client. Its live ops (what an off-tape ``live`` miss or a re-plan
    dispatches) are the toolbox the store was recorded with (``<store>/toolbox.json``, default the
    coding ops), bound to ``workspace`` (else the toolbox's, else the current directory) — as
    ``flux what-if`` runs a single one. Built in the worker: ops are code, not pickled arguments."""
    from ..agent.client import Client
    from ..agent.providers.null import NullProvider
    from ..agent.toolboxes import store_toolbox

    args = dict(client_args)
    if "ops" not in args:
        box = store_toolbox(store_dir)
        ws = args.get("workspace") or box.workspace or "."
        args["workspace"] = str(ws)
        args["ops"] = box.ops(ws)
    model = args.pop("model", None)
    if model:
        return Client(model, store=store_dir, **args)
    return Client(NullProvider(model="offline"), model="offline", store=store_dir, **args)


def close_worker_clients() -> None:
    """Close the clients this process's sweep tasks kept (a pool worker's, a Ray worker's)."""
    for c in list(_WORKER_CLIENT.values()):
        c.close()
    _WORKER_CLIENT.clear()


def _sweep_one(store_dir: str, sid: str, spec: WhatIfSpec, client_args: dict) -> SweepOutcome:
    try:
        client = _worker_client(store_dir, client_args)
    except FluxError as e:
        return SweepOutcome(sid, error=str(e))
    except Exception as e:
        return SweepOutcome(sid, error=f"{type(e).__name__}: {e}")
    return _sweep_with(client, sid, spec)


def _sweep_with(client: Any, sid: str, spec: WhatIfSpec) -> SweepOutcome:
    try:
        cf = run_what_if(client, sid, spec)
        cf.diff()
        return SweepOutcome(sid, cf)
    except FluxError as e:
        return SweepOutcome(sid, error=str(e))
    except sqlite3.Error as e:  # a damaged page found by the write (rolled back): the store's one line
        return SweepOutcome(sid, error=str(store_error(e, Path(client.store_dir) / "events.db")))
    except Exception as e:  # one broken session is an Err row, never the end of the sweep
        return SweepOutcome(sid, error=f"{type(e).__name__}: {e}")


_TEMPLATE: list = []  # the client whose siblings a forked sweep worker runs on (set around the pool)


def _sibling_client(template: Any) -> Any:
    """In a forked worker: the template client's provider, ops, approver, redactor and settings,
    on its own store connection (an SQLite connection is never used across a fork)."""
    import copy

    from ..store.store import StoreWriter

    c = copy.copy(template)
    c.writer = StoreWriter(template.store_dir, clock=template._clock)
    c._ephemeral = None  # the parent owns (and removes) an ephemeral store
    return c


def _sweep_one_on_template(sid: str, spec: WhatIfSpec) -> SweepOutcome:
    key = ("template", id(_TEMPLATE[0]))
    if key not in _WORKER_CLIENT:
        _WORKER_CLIENT[key] = _sibling_client(_TEMPLATE[0])
    return _sweep_with(_WORKER_CLIENT[key], sid, spec)


def what_if_over(store_dir: str | os.PathLike[str], sessions: Sequence[str], spec: WhatIfSpec, *, jobs: int = 1,
                 client_args: Optional[dict] = None,
                 on_progress: Callable[[int, int, SweepOutcome], None] | None = None,
                 client: Any = None, executor: Executor | str | None = None) -> SweepReport:
    """Run ``spec`` over every session (``jobs`` worker processes); outcomes in input order.

    ``client``: run on that client (``Client.what_if_over``) — sequentially on it, or in forked
    workers on siblings of it (same ops, approver, policy, redactor; their own store connection).
    Without one, each worker opens an offline client from ``client_args``.

    ``executor``: ``"pool"`` (default, the above), ``"ray"`` or ``"ray=ADDRESS"`` — each session a
    Ray task with its own client from ``client_args`` (a ``client``'s workspace is used; its ops
    are code and cannot travel to a cluster). The report is the same either way."""
    spec.validate()
    ex = executor if isinstance(executor, Executor) else parse_executor(executor)
    store = str(store_dir)
    args = dict(client_args or {})
    total = len(sessions)
    results: list[Optional[SweepOutcome]] = [None] * total
    import multiprocessing as mp

    can_fork = "fork" in mp.get_all_start_methods()
    if client is not None and (ex.kind == "ray" or not can_fork):
        args.setdefault("workspace", str(client.workspace))
        client = None
    if ex.kind == "ray":
        results = run_on_ray(_sweep_one, store, list(sessions), spec, args, executor=ex, jobs=jobs,
                             failed=lambda sid, why: SweepOutcome(sid, error=why), on_progress=on_progress,
                             close=close_worker_clients)
    elif jobs <= 1 or total <= 1:
        try:
            for i, sid in enumerate(sessions):
                results[i] = _sweep_with(client, sid, spec) if client is not None else _sweep_one(store, sid, spec, args)
                if on_progress is not None:
                    on_progress(i + 1, total, results[i])  # type: ignore[arg-type]
        finally:  # the per-sweep clients are closed however the loop ends (no connection left for GC)
            close_worker_clients()
    else:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        ctx = mp.get_context("fork") if can_fork else None
        if client is not None:
            client.writer.flush()  # nothing buffered is left for a forked copy of the writer
            _TEMPLATE[:] = [client]  # forked workers inherit it (they start at the first submit)
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            if client is not None:
                futs = {pool.submit(_sweep_one_on_template, sid, spec): i for i, sid in enumerate(sessions)}
            else:
                futs = {pool.submit(_sweep_one, store, sid, spec, args): i for i, sid in enumerate(sessions)}
            done = 0
            for f in as_completed(futs):
                i = futs[f]
                try:
                    results[i] = f.result()
                except Exception as e:  # a worker that died
                    results[i] = SweepOutcome(sessions[i], error=f"the worker failed: {type(e).__name__}: {e}")
                done += 1
                if on_progress is not None:
                    on_progress(done, total, results[i])  # type: ignore[arg-type]
        _TEMPLATE.clear()
    outcomes = [r for r in results if r is not None]
    changed = sum(1 for o in outcomes if o.changed)
    cost = sum(o.result.cost() for o in outcomes if o.result is not None)
    return SweepReport(outcomes, changed, total, cost)
