"""Hermetic replay (``flux replay``, :func:`replay_session`): re-execute a recorded session's
accepted plans with every op served from its tape — no model call, no live IO, nothing written to
the recording — and report any divergence. Here the entry points and the plan sources of a loaded
session (:class:`_EagerPlans`, :class:`_LazyPlans`); the loop is
:func:`~flux.timemachine.serve.replay_executions`, and ``detail=False`` first tries the streamed
replay (:mod:`.replay_stream`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..canonical import canonical_json
from ..cassette.replay import ReplayHost, ReplayTape
from ..errors import FluxError, NotReplayable, SessionNotFound
from ..lang import ast as A
from ..lang.catalog import OpCatalog
from ..lang.interpreter import Interpreter
from ..model.session import SessionDetail
from ..store.store import StoreReader, StoreWriter
from .plans import accepted_plans, check_ops, not_replayable, plan_turns, plans_by_key, redacted_standins, turn_keys
from .replay_direct import HostCall, statements_before_last_plan
from .replay_input import ReplayInput, read_replay_input
from .replay_report import PlanLog, ReplayedPlan, ReplayReport, StatementResult, TapeEnd
from .replay_stream import replay_streamed
from .serve import PlanServer, ScratchSink, gc_paused, never_asked, replay_executions

__all__ = [
    "ReplayReport", "ReplayedPlan", "PlanLog", "StatementResult", "TapeEnd", "ChildReplay", "ReplayTree", "replay_session",
    "replay_detail", "replay_tree", "plans_by_key", "plan_turns",
]

ProgressFn = Callable[[int, int], None]


def replay_detail(detail: SessionDetail, *, turn: int | None = None, catalog: OpCatalog | None = None,
                  on_progress: ProgressFn | None = None, scratch_dir: str | os.PathLike[str] | None = None,
                  recorded_dir: Path | None = None) -> ReplayReport:
    """Replay an already-loaded session (see :func:`replay_session`), with every per-statement detail."""
    with gc_paused():
        return _replay(ReplayInput.of_detail(detail), turn=turn, catalog=catalog, on_progress=on_progress,
                       scratch_dir=scratch_dir, recorded_dir=recorded_dir, keep=True)


class _Plans:
    """What both plan sources of a loaded session answer the replay loop
    (:func:`~flux.timemachine.serve.replay_executions`) about its turns."""

    detail: ReplayInput

    def interrupted_turn(self, flow_key: str) -> tuple[int, int] | None:
        """The newest turn's number and the statements its plans hold before its last one, when it
        never ended and accepted a plan with this key (where a tape can end); else None."""
        turns = self.detail.turns
        if not turns:
            return None
        turn = turns[-1]
        if turn.ended or flow_key not in turn_keys(self.detail, turn.number):
            return None
        return turn.number, statements_before_last_plan(turn)


class _EagerPlans(_Plans):
    """flux's order of work: every accepted plan parsed and keyed, and every execution's plan
    checked against the catalog, before the first runs. The app's path (it reports progress out of
    a known total) and a replay that writes a scratch store (nothing is written when a later plan
    cannot be replayed)."""

    def __init__(self, detail: ReplayInput, turn: int | None, catalog: OpCatalog | None, direct: bool):
        sid = detail.id
        self.detail = detail
        self.plans: dict[str, A.DraftAst | HostCall] = {}
        accepted_order: list[str] = []
        for _turn, key, plan in accepted_plans(detail, direct=direct):
            accepted_order.append(key)
            self.plans[key] = plan
        exec_keys = [k for k, _ in detail.executions]
        if not exec_keys:
            exec_keys = list(accepted_order)
            if not exec_keys:
                raise not_replayable(sid, "no executed statements and no accepted plan_source recorded")
        if turn is not None:
            wanted = turn_keys(detail, turn)
            exec_keys = [k for k in exec_keys if k in wanted]
        self.keys = exec_keys
        self.standins = redacted_standins(detail, exec_keys, self.plans) \
            if any(k not in self.plans for k in exec_keys) else {}
        if catalog is not None:
            for key in exec_keys:
                draft = self.plans.get(key) or self.standins.get(key)
                if draft is not None:
                    check_ops(sid, key, draft, catalog)
        self.catalog = None  # checked above, every one

    @property
    def total(self) -> int:
        return len(self.keys)

    def __iter__(self):
        plans, standins = self.plans, self.standins
        for key in self.keys:
            draft = plans.get(key)
            if draft is not None:
                yield key, draft, key, False
            else:
                draft = standins.get(key)
                yield key, draft, None, draft is not None

    def finish(self, rest) -> None:
        """Nothing left to check: everything was parsed and checked up front."""


class _LazyPlans(_Plans):
    """The same executions, plans and refusals as :class:`_EagerPlans`, with each accepted plan
    parsed when the replay reaches it and let go after its key's last execution — a long session
    does not hold every plan's AST (about 1.3 KB per one-op plan) at once.

    * Execution order from the ledger rows: plans are parsed forward in acceptance order
      until the wanted key turns up; one whose key runs later is held until its last run, any other
      dropped. Any plan with the key serves: a flow_key is the plan's name and body, all the
      interpreter runs, so "last acceptance wins" picks an equal plan.
    * No ledger rows: the executions are the acceptances themselves, each parsed as it runs.
    * Errors are flux's, in flux's order: :meth:`finish` (and every refusal raised on the way)
      parses what is left first, so a damaged ``plan_source`` anywhere is the error even when an
      earlier one was found first; after a divergence stops the replay, the executions it did not
      reach are still checked against the catalog. Nothing is written meanwhile (no scratch store
      on this path), so refusing late is refusing up front.
    """

    def __init__(self, detail: ReplayInput, turn: int | None, catalog: OpCatalog | None, direct: bool):
        self.detail = detail
        self.catalog = catalog
        self._cursor = accepted_plans(detail, direct=direct)
        self._left: dict[str, int] | None = None  # executions left per key (ledger order only)
        self._held: dict[str, A.DraftAst] = {}
        self._standins: dict[str, A.DraftAst] | None = None
        self.on_last_run: Callable[[str], None] | None = None  # told when a key has run for the last time
        try:
            keys = [k for k, _ in detail.executions]
            if not keys and not any(att.outcome == "accepted" and att.plan_source is not None
                                    for t in detail.turns for att in t.plan_attempts):
                raise not_replayable(detail.id, "no executed statements and no accepted plan_source recorded")
            self._wanted = turn_keys(detail, turn) if turn is not None else None
        except NotReplayable:
            self.refuse()
        if keys:
            self._keys: list[str] | None = keys if self._wanted is None else [k for k in keys if k in self._wanted]
            left: dict[str, int] = {}
            for k in self._keys:
                left[k] = left.get(k, 0) + 1
            self._left = left
        else:
            self._keys = None

    def refuse(self) -> None:
        """Re-raise the refusal being handled, unless a damaged plan later in the session is the
        error flux reports first (it parses every plan before refusing anything else)."""
        self.drain()
        raise

    def drain(self) -> None:
        for _ in self._cursor:  # parses (and drops) every plan not reached yet; raises on a damaged one
            pass

    def _checked(self, key: str, draft: A.DraftAst) -> A.DraftAst:
        if self.catalog is not None:
            try:
                check_ops(self.detail.id, key, draft, self.catalog)
            except NotReplayable:
                self.refuse()
        return draft

    def _plan(self, key: str) -> A.DraftAst | None:
        held = self._held.get(key)
        if held is not None:
            return held
        left = self._left
        for _t, k, draft in self._cursor:
            if k == key:
                if left.get(k, 0) > 1:
                    self._held[k] = draft
                return draft
            if k in left and k not in self._held:
                self._held[k] = draft
        return None

    def _ran(self, key: str) -> None:
        left = self._left
        n = left.get(key, 0) - 1
        if n > 0:
            left[key] = n
        else:
            left.pop(key, None)
            self._held.pop(key, None)
            if self.on_last_run is not None:
                self.on_last_run(key)

    def _standin(self, key: str) -> A.DraftAst | None:
        if self._standins is None:  # rare: a plan redacted before it was stored; pair them as flux's order does
            known = {k for _t, k, _d in accepted_plans(self.detail, direct=True)}
            self._standins = redacted_standins(self.detail, self._keys or [], known)
        return self._standins.get(key)

    def __iter__(self):
        if self._keys is None:  # the acceptances are the executions
            wanted = self._wanted
            checked = self.catalog is not None
            for _t, key, draft in self._cursor:
                if wanted is None or key in wanted:
                    yield key, (self._checked(key, draft) if checked else draft), key, False
            return
        for key in self._keys:
            draft = self._plan(key)
            if draft is not None:
                yield key, self._checked(key, draft), key, False
            else:
                draft = self._standin(key)
                yield key, (self._checked(key, draft) if draft is not None else None), None, draft is not None
            self._ran(key)

    def finish(self, rest) -> None:
        """After the loop: check the executions a divergence kept from running, then parse the rest."""
        if self.catalog is not None:
            for _ in rest:
                pass
        self.drain()


def _replay(detail: ReplayInput, *, turn: int | None, catalog: OpCatalog | None, on_progress: ProgressFn | None,
            scratch_dir: str | os.PathLike[str] | None, recorded_dir: Path | None, direct: bool = True,
            keep: bool = True) -> ReplayReport:
    """The replay. ``direct=False`` runs every plan through the interpreter (the differential test
    compares it with the direct path of :mod:`~flux.timemachine.replay_direct`); ``keep=False`` is
    ``detail=False`` (see :func:`replay_session`)."""
    sid = detail.id
    if not detail.has_trace:
        raise not_replayable(sid, "no run trace recorded")
    tape = ReplayTape(detail.cells, lean=not keep)
    if not keep:  # the tape holds the cells now, and lets each go once it is served
        detail.cells = []
    if tape.total == 0:
        raise not_replayable(sid, "no cassette cells recorded (pre-C-43 run, or FLUX_CASSETTE=0)")
    eager = scratch_dir is not None or on_progress is not None
    source = (_EagerPlans if eager else _LazyPlans)(detail, turn, catalog, direct)
    cat = catalog if catalog is not None else OpCatalog.permissive()

    writer = None
    scratch_sid = None
    if scratch_dir is not None:
        sd = Path(scratch_dir).expanduser()
        if recorded_dir is not None and sd.resolve() == Path(recorded_dir).resolve():
            raise FluxError("the scratch store must not be the recorded store — replay never writes the recording")
        writer = StoreWriter(sd)
        scratch_sid = writer.create_session("replay", context={"correlation_id": sid, "agent_id": f"replay:{sid}"})

    sink = ScratchSink(tape, writer, scratch_sid, keep=keep)
    if not eager:
        source.on_last_run = sink.forget
    interp = Interpreter(cat, ReplayHost(tape), sink, never_asked, run_id=scratch_sid or "replay")
    report = ReplayReport(session=sid, plans=[], cells_total=tape.total, cells_consumed=0, diverged=None,
                          missing_sources=0, turn=turn, scratch_session=scratch_sid, detail=keep)
    try:
        replay_executions(source, PlanServer(interp), sink, report, on_progress=on_progress)
    finally:
        if writer is not None:
            writer.close()
    report.requests = list(tape.log)
    report.statement_results = sink.results
    report.scratch_events = sink.events
    return report


def replay_session(reader: StoreReader, session_ref: str | None, turn: int | None = None, *,
                   catalog: OpCatalog | None = None, on_progress: ProgressFn | None = None,
                   scratch_dir: str | os.PathLike[str] | None = None, detail: bool = True) -> ReplayReport:
    """Hermetically replay ``session_ref`` (``s_<n>`` or ``last``) of ``reader``'s store.

    Raises :class:`~flux.errors.SessionNotFound` for an id the store does not hold and
    :class:`~flux.errors.NotReplayable` (one line, what to do) when there is nothing to replay.
    Divergence is not an exception: it is ``report.diverged``.

    ``detail=False`` (what `flux replay` prints needs no more) leaves the report's
    ``statement_results``, ``requests`` and ``scratch_events`` empty and lets the tape go of each
    cell once it is served: everything else — verdict, counts, plans, ``served``, ``cell_status``,
    ``tape_end`` — is the same, in memory that no longer grows with them.
    """
    with gc_paused():
        if not detail and turn is None and on_progress is None and scratch_dir is None and _STREAMED:
            report = replay_streamed(reader, session_ref, catalog)
            if report is not None:
                return report
        return _replay(read_replay_input(reader, session_ref), turn=turn, catalog=catalog, on_progress=on_progress,
                       scratch_dir=scratch_dir, recorded_dir=reader.dir, keep=detail)


# Whether replay_session(detail=False) first tries the streamed replay (replay_stream); the
# differential tests switch it off to get the classic replay of the same store.
_STREAMED = True


@dataclass
class ChildReplay:
    session: str
    report: ReplayReport | None = None
    error: str | None = None  # why the child could not be replayed at all

    def to_json(self) -> dict[str, Any]:
        r = self.report
        assert r is not None
        return {"cells_consumed": r.cells_consumed, "cells_total": r.cells_total, "diverged": r.diverged,
                "session": self.session}


@dataclass
class ReplayTree:
    report: ReplayReport
    children: list[ChildReplay] = field(default_factory=list)

    @property
    def diverged_child(self) -> ChildReplay | None:
        for c in self.children:
            if c.report is not None and c.report.diverged is not None:
                return c
        return None

    def to_json(self) -> dict[str, Any]:
        out = self.report.to_json()
        out["sub_agents"] = [c.to_json() for c in self.children if c.report is not None]
        return out

    def json_text(self) -> str:
        return canonical_json(self.to_json())


def replay_tree(reader: StoreReader, session_ref: str | None, turn: int | None = None, *,
                sub_agents: bool = False, catalog: OpCatalog | None = None,
                on_progress: ProgressFn | None = None,
                on_child: Callable[[str], None] | None = None, detail: bool = True) -> ReplayTree:
    """The parent replay, then (with ``sub_agents``) every ``children_of`` stream in order.

    A child that cannot be replayed at all is kept with its ``error`` and skipped; a child that
    diverges is reported (the CLI fails on it). ``detail``: see :func:`replay_session`."""
    parent = replay_session(reader, session_ref, turn, catalog=catalog, on_progress=on_progress, detail=detail)
    tree = ReplayTree(parent)
    if sub_agents:
        for row in reader.children_of(parent.session):
            if on_child is not None:
                on_child(row.id)
            try:
                tree.children.append(ChildReplay(row.id, report=replay_session(reader, row.id, catalog=catalog,
                                                                                 detail=detail)))
            except (NotReplayable, SessionNotFound) as e:
                tree.children.append(ChildReplay(row.id, error=str(e)))
    return tree

