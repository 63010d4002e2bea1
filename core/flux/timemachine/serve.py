"""Serving recorded plans from tape: :class:`PlanServer`, the one place where replay, fork's
prefix, resurrect and what-if re-execute an execution's plan (a host plan straight from its text,
:mod:`.replay_direct`; any other on the interpreter), and :func:`replay_executions`, the one loop
every replay runs over its executions. Beside them, the replay's scratch sink (the replayed run in
memory, its halt latch folded as the rows arrive)."""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Any, Callable

from ..cassette.replay import ReplayTape, TapeFirstHost
from ..lang.interpreter import Interpreter, PlanHalt, ResumeLedger
from ..lang.ledger import LedgerEntry
from ..store.events import Run, decode_run
from ..store.store import StoreWriter
from .engine import HostBody, plan_ast
from .replay_direct import NOT_DIRECT, DirectRunner, HostCall, HostPlan
from .replay_report import PlanLog, ReplayedPlan, ReplayReport, StatementResult, settle, tape_end

__all__ = ["PlanServer", "ScratchSink", "replay_executions", "never_asked", "gc_paused"]


_new_tuple = tuple.__new__  # a named tuple of its fields, without its own __new__ (all that does)


class ScratchSink:
    """The interpreter's event sink: keeps the replayed run in memory (and optionally in a store),
    and cuts the tape's request log at every statement boundary."""

    def __init__(self, tape: ReplayTape, writer: StoreWriter | None, session: str | None, *, keep: bool = True):
        self.tape = tape
        self.keep = keep  # keep the events and the per-statement results (else only the halt latch)
        # Nothing reads a step_* event (nothing kept, nothing written): the direct path then builds
        # none, and hands a completed statement to `completed` (replay_direct.DirectRunner).
        self.quiet = not keep and writer is None
        self.events: list[dict] = []
        self.writer = writer
        self.session = session
        self.results: list[StatementResult] = []
        self.execution = 0
        self._log_mark = 0
        # The halt latch of ResumeLedger.fold, kept as the events arrive instead of re-folded over
        # the whole scratch trace before every plan (that made a replay with many halted plans
        # quadratic): the halted plans not yet named `prior` by a later plan_resumed, in order
        # (the latch is the last), and per plan its statement_completed entries and its last
        # checkpoint — exactly what fold reads. A plan's rows are one (node, stmt, value) tuple, as
        # LedgerEntry holds them, or a list of them from its second row on (most plans have one).
        self.open_halts: list[Any] = []  # (read by the replay loop and the direct path: no latch open)
        self.completed_rows: dict[Any, Any] = {}  # per plan its statement rows (read-only outside this class)
        self.checkpoints: dict[Any, int] = {}  # per plan its last checkpoint
        self._ledger: ResumeLedger | None = None  # the last one handed out, reused while unchanged

    def ledger(self) -> ResumeLedger | None:
        """The scratch session's open halt latch (what ``ResumeLedger.fold`` gives of its trace)."""
        if not self.open_halts:
            return None
        plan = self.open_halts[-1]
        rows = self.completed_rows.get(plan, [])
        if type(rows) is tuple:
            rows = [rows]
        cp = self.checkpoints.get(plan)
        last = self._ledger
        if last is not None and last.plan == plan and len(last.completed) == len(rows) and last.checkpoint == cp:
            return last
        self._ledger = ResumeLedger(plan, [LedgerEntry(*r) for r in rows], cp)
        return self._ledger

    def emit(self, ev: dict) -> None:
        keep = self.keep
        if keep:
            self.events.append(ev)
        if self.writer is not None:
            self.writer.append(self.session, Run(decode_run(ev)))
        kind = ev.get("event")
        if kind == "step_started" or kind == "step_succeeded":  # (most events: nothing more to fold)
            return
        if kind == "statement_completed":
            node = int(ev.get("node", 0))
            self.completed(ev.get("plan"), node, str(ev.get("stmt", "")), ev.get("value"))
            if keep:
                self.results.append(_new_tuple(StatementResult, (
                    ev.get("plan", ""), self.execution, node, ev.get("stmt", ""),
                    "skipped" if ev.get("skipped") else "completed", None, None, self._requests())))
        elif kind == "checkpoint_reached":
            self.checkpoints[ev.get("flow_key")] = int(ev.get("node", 0))
        elif kind == "plan_halted":
            self.open_halts.append(ev.get("plan"))
            if keep:
                self.results.append(_new_tuple(StatementResult, (
                    ev.get("plan", ""), self.execution, int(ev.get("node", 0)), ev.get("stmt", ""), "halted",
                    ev.get("kind"), ev.get("error"), self._requests())))
        elif kind == "plan_resumed":
            prior = ev.get("prior")
            if prior in self.open_halts:
                self.open_halts[:] = [p for p in self.open_halts if p != prior]  # (in place: the replay loop holds the list)

    def _requests(self) -> tuple:
        """The tape requests since the last statement boundary (what the statement just ended asked)."""
        log = self.tape.log
        mark = self._log_mark
        end = len(log)
        self._log_mark = end
        return (log[mark],) if mark == end - 1 else tuple(log[mark:end])

    def completed(self, plan: Any, node: int, stmt: str, value: Any) -> None:
        """A ``statement_completed`` row into the halt latch's rows (what :meth:`emit` does with
        one, less the event itself: a quiet sink's direct path calls it instead)."""
        row = (node, stmt, value)
        had = self.completed_rows.get(plan)
        if had is None:
            self.completed_rows[plan] = row
        elif type(had) is list:
            had.append(row)
        else:
            self.completed_rows[plan] = [had, row]

    def let_go_of_rows(self, plan: Any, values: dict[str, Any]) -> bool:
        """``plan`` just ran through with no latch open and had no row before, so every row it holds is this run's — let go of them and
        of the values they name (a run with no latch fast-forwards nothing, so no other row names
        them). Not when it reached a checkpoint (the latch reads that too). False when nothing was
        let go."""
        rows = self.completed_rows.get(plan)
        if rows is None or plan in self.checkpoints:
            return False
        del self.completed_rows[plan]
        for row in (rows,) if type(rows) is tuple else rows:
            if row[2] is not None:
                values.pop(row[2], None)
        return True

    def forget(self, plan: Any) -> None:
        """``plan`` will not run again: unless it stands halted, nothing can make it the latch, so
        its rows are let go (a plan becomes the latch only by halting, which takes a run)."""
        if plan not in self.open_halts:
            self.completed_rows.pop(plan, None)
            self.checkpoints.pop(plan, None)


def never_asked(message: str, risk: str) -> bool:
    # Under a Replay scope confirm gates auto-allow; the caller's approver is never consulted.
    return True


_gc_lock = threading.Lock()
_gc_holds = 0  # replays running with the cyclic collector paused
_gc_resume = False  # whether the collector was on when the first of them paused it


@contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector for one replay. Replay allocates a few containers
    per cell (events, values, serve records) and keeps most of them, so the collector ran over an
    ever larger heap at every threshold — the part of a long replay that grew faster than its
    length. What replay builds is reference-counted and acyclic; anything cyclic it leaves is
    collected once the collector is back on (when the last concurrent replay ends)."""
    global _gc_holds, _gc_resume
    with _gc_lock:
        if _gc_holds == 0:
            _gc_resume = gc.isenabled()
            gc.disable()
        _gc_holds += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_holds -= 1
            if _gc_holds == 0 and _gc_resume:
                gc.enable()


class PlanServer:
    """Re-executes recorded plans on one interpreter, each served from its host's tape: the one
    entry through which replay, fork's prefix, resurrect and what-if run an execution.

    A plan is a host plan keyed from its text (:class:`~flux.timemachine.replay_direct.HostCall`,
    :class:`~flux.timemachine.replay_direct.HostPlan`) or a :class:`~flux.lang.ast.DraftAst` whose
    body is parsed statements or a :class:`~flux.timemachine.engine.HostBody` over a host plan.
    A host plan goes the direct path (:class:`~flux.timemachine.replay_direct.DirectRunner`) when
    the host is one it serves from — a ``ReplayHost`` and a resumable run (replay, fork's prefix),
    or a ``TapeFirstHost`` (resurrect: the crash tail first, live on a miss) — and the plan is one
    it takes; anything else runs on the interpreter. Both leave the same events, values, symbols
    and step count. ``on_served(i)``: see :class:`DirectRunner` (fork's prefix re-records the cells
    it serves)."""

    __slots__ = ("interp", "direct", "resume", "value")

    def __init__(self, interp: Interpreter, *, on_served: Callable[[int], Any] | None = None):
        self.interp = interp
        self.direct = DirectRunner(interp, on_served=on_served)
        self.resume = type(interp.host) is TapeFirstHost
        self.value: Any = None  # the last plan's return value (None when the direct path ran it)

    def run(self, plan: Any, ledger: ResumeLedger | None = None, *, resumable: bool = True,
            flow_key: str | None = None) -> PlanHalt | None:
        """Run one execution's ``plan`` against the halt latch ``ledger`` (None: no latch open),
        resumably unless ``resumable`` is False, under ``flow_key`` (None: the plan's own); its
        :class:`PlanHalt`, or None when it ran through (its value in :attr:`value`)."""
        t = type(plan)
        host_plan = plan if t is HostCall or t is HostPlan else \
            plan.body.plan if type(plan.body) is HostBody else None
        if host_plan is not None:
            if self.resume:
                h = self.direct.run_resume(host_plan, ledger, resumable)
            else:
                h = self.direct.run(host_plan, ledger) if resumable else NOT_DIRECT
            if h is not NOT_DIRECT:
                self.value = None
                return h
            plan = host_plan.draft() if host_plan is plan else plan_ast(plan)
        result = self.interp.run(plan, resumable=resumable, ledger=ledger, flow_key=flow_key)
        self.value = result.value
        return result.halted


def replay_executions(source: Any, server: PlanServer, sink: ScratchSink, report: ReplayReport, *,
                      serve: Callable[[str, Any, Any, Any], PlanHalt | None] | None = None,
                      on_progress: Callable[[int, int], None] | None = None) -> ReplayReport:
    """The replay's one loop over its executions, whichever way they are read (a loaded session,
    or the rows as the streamed replay pulls them). ``source`` yields each execution as ``(key,
    plan or None when it has no stored source, the key to run it under or None for a redacted
    stand-in, whether it replays a stand-in)``; each plan is run by ``server`` against the halt
    latch ``sink`` keeps — or by ``serve(key, plan, latch, run_key)``, the streamed replay's way
    (:class:`PlanServer.run` with what it lets go of) — and its outcome added to ``report.plans``;
    the loop stops at the first divergence. Then ``source.finish(rest)`` checks the executions not
    reached, the tape's counts go into the report, and a divergence that is only the end of an
    interrupted recording becomes its ``tape_end`` (``source.interrupted_turn``: see
    :func:`~flux.timemachine.replay_report.tape_end`). ``on_progress(done, source.total)`` after
    each execution."""
    tape = sink.tape
    plans = report.plans
    ran = plans.ran if type(plans) is PlanLog else None  # (it keeps a plan that ran through as its key's number)
    run = server.run
    total = source.total if on_progress is not None else 0
    executions = iter(source)
    for done, (key, draft, run_key, standin) in enumerate(executions, 1):
        if standin:
            report.redacted_standins += 1
        if draft is None:
            report.missing_sources += 1
        else:
            sink.execution = len(plans)
            h = run(draft, sink.ledger(), flow_key=run_key) if serve is None else serve(key, draft, sink.ledger(), run_key)
            if h is None and ran is not None:
                ran(key)
            else:
                plans.append(_new_tuple(ReplayedPlan, (key, None, None, None) if h is None
                                        else (key, h.error, h.kind, h.node)))
            draft = None  # let a plan go as soon as it ran (the source holds one that runs again)
        if on_progress is not None:
            on_progress(done, total)
        if tape.diverged is not None:
            break
    source.finish(executions)
    settle(report, tape)
    end = tape_end(tape, plans, source.interrupted_turn)
    if end is not None:
        report.tape_end = end
        report.diverged = None
        plans[-1] = ReplayedPlan(end.flow_key, end.message(), "tape_end", end.node)
    return report
