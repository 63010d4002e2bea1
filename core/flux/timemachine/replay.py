"""Hermetic replay (spec §4.4, ``replay_session``): re-execute a recorded session's accepted plans
with every op served from its cassette. No model call, no live IO, nothing written to the
recorded store (it is opened with :class:`~flux.store.store.StoreReader` only).

Steps, as flux does them:

1. the session's run trace must be non-empty, and it must hold cassette cells;
2. accepted ``plan_source`` texts are parsed and keyed by ``flow_key`` (last acceptance wins);
3. the execution list is the trace's statement-row executions (§3.7), else the acceptance order;
4. ``turn=N`` keeps only the keys accepted in turn N;
5. every execution runs in resumable mode on a fresh **scratch session** (``"replay"``), its halt
   latch folded from that scratch trace so a revision fast-forwards as it did live; ops go to a
   :class:`~flux.cassette.replay.ReplayHost`; confirm gates auto-allow;
6. replay stops at the first latched divergence.

Catalog choice: replay needs op *signatures* only to map positional arguments onto an op's named
input (§4.2). Recorded host-derived plans pass one JSON object, which needs no signature, so by
default replay uses :meth:`OpCatalog.permissive` (every op name exists). A caller that has the
real catalog passes it (``catalog=``); then a plan naming an op the catalog lacks is refused up
front with a :class:`~flux.errors.NotReplayable` error, before anything runs.

Scratch store: the replayed run's events are kept in memory (``ReplayReport.scratch_events``,
run bodies as dicts). Pass ``scratch_dir`` to also write them, as a real session, into a store
directory of your choosing (never the recorded one: the same directory is refused).

Beyond flux, the report tells the app which cells were served (``served``, ``cell_status``) and
how every statement ended (``statement_results``) so it can mark them ✓/✗. And where flux would
count an execution as a missing source because its plan text was redacted before it was stored
(a secret literal in the plan changes its flow_key), we replay the redacted plan in its place
(``redacted_standins``); its inputs then match the cells' ``input_hash_redacted``.
"""

from __future__ import annotations

import gc
import os
import re
import threading
from array import array
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple

from ..canonical import canonical_json
from ..cassette.redactor import DEFAULT_MARKER
from ..cassette.replay import ReplayHost, ReplayTape, ServeRecord, unconsumed_message
from ..errors import FluxError, NotReplayable, SessionNotFound
from ..lang import ast as A
from ..lang.catalog import OpCatalog
from ..lang.interpreter import Interpreter, ResumeLedger
from ..lang.ledger import LedgerEntry
from ..model.stored_plan import parse_stored_plan, stored_plan_key
from ..model.session import SessionDetail
from ..store.events import Run, decode_run
from ..store.store import StoreReader, StoreWriter
from .replay_direct import NOT_DIRECT, DirectRunner, HostCall, HostPlan, direct_plan, statements_before_last_plan
from .replay_input import ReplayInput, read_replay_input

__all__ = [
    "ReplayReport", "ReplayedPlan", "PlanLog", "StatementResult", "TapeEnd", "ChildReplay", "ReplayTree", "replay_session",
    "replay_detail", "replay_tree", "plans_by_key", "plan_turns",
]

ProgressFn = Callable[[int, int], None]


def _not_replayable(session: str, why: str) -> NotReplayable:
    return NotReplayable(f"session {session} is not replayable: {why}")


class ReplayedPlan(NamedTuple):
    """One execution's outcome in the report (a named tuple: the report keeps one per execution)."""

    flow_key: str
    halted: str | None = None  # the reproduced halt message, if the execution halted
    halt_kind: str | None = None  # denied | confirm_denied | assert_failed | runtime | awaiting
    node: int | None = None  # the statement it halted on

    def to_json(self) -> dict[str, Any]:
        return {"flow_key": self.flow_key, "halted": self.halted}


class PlanLog(Sequence):
    """``ReplayReport.plans`` of a long lean replay, compact: a :class:`ReplayedPlan` that ran
    through (no halt) under a plain key — ``h:`` and 16 lowercase hex digits, every key replay makes
    — is 8 bytes (the key's number in an ``array``), any other kept whole. It reads as the list of
    :class:`ReplayedPlan` it stands for (indexing builds the plan; equal to a list of the same
    plans); it grows by :meth:`append` (or :meth:`ran`, a plan that ran through, by its key) and
    its last item may be replaced."""

    __slots__ = ("_keys", "_whole")

    def __init__(self, plans: Iterable[ReplayedPlan] = ()) -> None:
        self._keys = array("Q")
        self._whole: dict[int, ReplayedPlan] = {}  # index -> a plan not kept as its key's number
        for p in plans:
            self.append(p)

    def ran(self, flow_key: str) -> None:
        """Append ``ReplayedPlan(flow_key)`` (it ran through)."""
        if len(flow_key) == 18 and _PLAIN_KEY.fullmatch(flow_key) is not None:
            self._keys.append(int(flow_key[2:], 16))
        else:
            self._whole[len(self._keys)] = ReplayedPlan(flow_key)
            self._keys.append(0)

    def ran_host(self, flow_key: str) -> None:
        """:meth:`ran` for a key :func:`~flux.timemachine.replay_direct.direct_plan` made (``h:`` and 16
        lowercase hex digits, always plain): no check."""
        self._keys.append(int(flow_key[2:], 16))

    def ran_before(self, flow_key: str, end: int) -> bool:
        """Whether one of the first ``end`` plans ran through under ``flow_key`` (a scan: asked rarely)."""
        whole = self._whole
        if len(flow_key) == 18 and _PLAIN_KEY.fullmatch(flow_key) is not None:
            n = int(flow_key[2:], 16)
            keys = self._keys
            i = 0
            while True:
                try:
                    i = keys.index(n, i, end)
                except ValueError:
                    break
                if i not in whole:
                    return True
                i += 1
        return any(i < end and p.flow_key == flow_key and p.halted is None and p.halt_kind is None
                   for i, p in whole.items())

    def append(self, plan: ReplayedPlan) -> None:
        if plan.halted is None and plan.halt_kind is None and plan.node is None:
            self.ran(plan.flow_key)
        else:
            self._whole[len(self._keys)] = plan
            self._keys.append(0)

    def __len__(self) -> int:
        return len(self._keys)

    def _at(self, i: int) -> ReplayedPlan:
        p = self._whole.get(i)
        return p if p is not None else ReplayedPlan(f"h:{self._keys[i]:016x}")

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(len(self._keys)))]
        n = len(self._keys)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("plan index out of range")
        return self._at(i)

    def __setitem__(self, i: int, plan: ReplayedPlan) -> None:
        n = len(self._keys)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("plan index out of range")
        self._whole[i] = plan

    def __iter__(self) -> Iterator[ReplayedPlan]:
        whole = self._whole
        for i, k in enumerate(self._keys):
            p = whole.get(i)
            yield p if p is not None else ReplayedPlan(f"h:{k:016x}")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (PlanLog, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  (mutable, like the list it stands for)

    def __repr__(self) -> str:
        return f"PlanLog({list(self)!r})"


_PLAIN_KEY = re.compile(r"h:[0-9a-f]{16}")


class StatementResult(NamedTuple):
    """How one top-level statement ended in the replay, and which tape requests it made. (A named
    tuple: a detailed replay keeps one per statement, built on the hot path with ``_new_tuple``.)"""

    plan: str  # flow_key
    execution: int  # index into ReplayReport.plans
    node: int
    stmt: str  # stmt_hash16
    status: str  # completed | skipped (fast-forwarded) | halted
    kind: str | None = None  # plan_halted kind when halted
    error: str | None = None
    requests: tuple[ServeRecord, ...] = ()  # what the statement asked the tape, in order

    @property
    def ok(self) -> bool:
        return self.status != "halted"

    @property
    def cells(self) -> tuple[int, ...]:
        """Tape indices served to this statement."""
        return tuple(r.index for r in self.requests if r.status == "served" and r.index is not None)


def _first_line(text: str, limit: int = 200) -> str:
    """A halt message on one report line: its first non-blank line, `…` when more was cut."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    cut = len(lines) > 1 or len(first) > limit
    return (first[:limit] + " …") if cut else first


@dataclass(frozen=True, slots=True)
class TapeEnd:
    """The replay ran off the end of the tape inside a turn that never ended (killed mid-plan): every
    recorded cell was served and the next op has none because the recording stops there. That is
    not a divergence — the run was interrupted at statement ``node``; ``flux resurrect`` finishes it."""

    turn: int  # 1-based turn number of the interrupted turn
    flow_key: str
    node: int  # the statement the tape ends at, inside its plan (0-based)
    op: str  # the op that found no recorded cell
    # the same statement counted over the turn's executions laid end to end — what
    # `flux fork --turn T --at N` names (in an adaptive turn every tool call is a one-statement
    # plan, so ``node`` is always 0 there); None when it could not be counted
    position: int | None = None

    @property
    def statement(self) -> int:
        return self.node if self.position is None else self.position

    def message(self) -> str:
        return (f"tape ends at statement {self.statement} — turn {self.turn} interrupted "
                f"(resurrect it with `flux resurrect`)")

    def to_json(self) -> dict[str, Any]:
        return {"flow_key": self.flow_key, "node": self.node, "op": self.op, "turn": self.turn,
                "position": self.statement}


@dataclass
class ReplayReport:
    session: str
    plans: list[ReplayedPlan] | PlanLog  # (a long lean replay keeps a compact PlanLog)
    cells_total: int
    cells_consumed: int
    diverged: str | None
    missing_sources: int
    served: list[int] = field(default_factory=list)  # tape indices, in serve order
    cell_status: list[str] = field(default_factory=list)  # per tape index: served | unconsumed | truncated
    statement_results: list[StatementResult] = field(default_factory=list)
    requests: list[ServeRecord] = field(default_factory=list)  # every tape request, in order
    scratch_events: list[dict] = field(default_factory=list)  # the replayed run's run bodies
    scratch_session: str | None = None  # id in scratch_dir, when one was given
    redacted_standins: int = 0  # executions replayed from their redacted stored plan (see _redacted_standins)
    turn: int | None = None
    tape_end: TapeEnd | None = None  # the recording stops mid-turn (interrupted), not a divergence
    # False when the caller asked for no per-statement detail (``detail=False``, `flux replay`):
    # statement_results, requests and scratch_events are then left empty — they are most of what
    # a long replay holds (three event dicts, a serve record and a statement result per cell).
    detail: bool = True

    @property
    def unconsumed(self) -> list[int]:
        return [i for i, s in enumerate(self.cell_status) if s != "served"]

    @property
    def faithful(self) -> bool:
        """No divergence and every recorded cell consumed (the Test Kit's ``faithful()``)."""
        return self.diverged is None and self.cells_consumed == self.cells_total

    @property
    def unfaithful_reason(self) -> str | None:
        if self.diverged is not None:
            return self.diverged
        if self.cells_consumed != self.cells_total:
            return unconsumed_message(self.cells_total - self.cells_consumed, self.cells_total)
        return None

    def to_json(self) -> dict[str, Any]:
        """flux's ``--json`` object (without ``sub_agents``, which the CLI adds), plus ``tape_end``
        (where an interrupted recording stops, present only then) beyond flux."""
        out = {
            "cells_consumed": self.cells_consumed,
            "cells_total": self.cells_total,
            "diverged": self.diverged,
            "missing_sources": self.missing_sources,
            "plans": [p.to_json() for p in self.plans],
            "session": self.session,
        }
        if self.tape_end is not None:  # only then: otherwise byte for byte flux's object
            out["tape_end"] = self.tape_end.to_json()
        return out

    def plan_line(self, p: ReplayedPlan) -> str:
        """One plan's line: ✓ ran, ✓ halted as recorded (a reproduced halt is a faithful replay),
        ⏸ the tape ends there (interrupted turn), ✗ diverged."""
        if p.halted is None:
            return f"✓ {p.flow_key}"
        if p.halt_kind == "tape_end":
            return f"⏸ {p.flow_key} — {p.halted}"
        if self.diverged is not None and p.halted.startswith("replay diverged"):
            return f"✗ {p.flow_key} — diverged: {_first_line(p.halted.removeprefix('replay diverged: '))}"
        return f"✓ {p.flow_key} — halted as recorded (reproduced): {_first_line(p.halted)}"

    def summary_lines(self) -> list[str]:
        """The stdout lines of ``flux replay`` (§6; a reproduced halt is ✓, not flux's ✗)."""
        out = [f"replayed {len(self.plans)} plan(s) · {self.cells_consumed}/{self.cells_total} recorded cell(s) served"]
        out.extend(f"  {self.plan_line(p)}" for p in self.plans)
        return out


# ------------------------------------------------------------------------------------------------


def plans_by_key(detail: SessionDetail) -> tuple[dict[str, A.DraftAst], list[str]]:
    """flow_key → parsed accepted plan (last acceptance wins), and the acceptance order (§3.4).

    An accepted ``plan_source`` that does not parse is a hard error naming the turn and attempt."""
    plans: dict[str, A.DraftAst] = {}
    order: list[str] = []
    for _turn, key, draft in accepted_plans(detail):
        order.append(key)
        plans[key] = draft
    return plans, order


def plan_turns(detail: SessionDetail) -> dict[str, int]:
    """flow_key → the number of the turn whose accepted plan replay runs under that key (last wins)."""
    return {key: turn.number for turn, key, _draft in accepted_plans(detail, direct=True)}


_PARSE_CACHE = 256  # distinct plan texts whose parse a replay keeps for a repeat (bounded: memory stays flat)


def accepted_plans(detail: SessionDetail, *, direct: bool = False):
    """``(turn, flow_key, parsed plan)`` per accepted plan in acceptance order; a damaged
    ``plan_source`` is :class:`NotReplayable` naming the turn and attempt. With ``direct``, a host
    plan comes as the :class:`~flux.timemachine.replay_direct.HostCall` its text gives (same key)
    instead of its AST.

    Identical plan texts are parsed once (the AST is frozen, and the same text always parses to
    the same AST and key): a session that accepts the same plan again — a retry, a revision that
    changed nothing, a loop of identical host-derived calls — pays for one parse. The cache keeps
    the last ``_PARSE_CACHE`` distinct texts, so a long session does not hold every plan's AST."""
    parsed: dict[str, tuple[A.DraftAst, str]] = {}
    for t in detail.turns:
        for att in t.plan_attempts:
            if att.outcome != "accepted" or att.plan_source is None:
                continue
            hc = direct_plan(att.plan_source) if direct else None
            if hc is not None:  # (held meanwhile: a HostCall is its text and three hashes, no AST)
                yield t, hc.flow_key, hc
            else:
                yield _accepted(detail, t, att, parsed, False)  # no local of this generator holds the plan meanwhile


def _accepted(detail: SessionDetail, t: Any, att: Any, parsed: dict[str, tuple[A.DraftAst, str]], direct: bool):
    hc = direct_plan(att.plan_source) if direct else None
    if hc is not None:
        return t, hc.flow_key, hc
    try:
        hit = _parse_cached(att.plan_source, parsed)
    except FluxError as e:
        raise _not_replayable(
            detail.id,
            f"the accepted plan of turn {t.number} (attempt step {att.step}, stream_seq {att.stream_seq}) "
            f"no longer parses: {e} — the stored plan_source is damaged; replay cannot re-execute it",
        ) from None
    return t, hit[1], hit[0]


def _parse_cached(source: Any, parsed: dict[str, tuple[A.DraftAst, str]]) -> tuple[A.DraftAst, str]:
    """``parse_stored_plan(source)`` through ``parsed``, a cache of the last ``_PARSE_CACHE`` texts."""
    hit = parsed.get(source)
    if hit is None:
        hit = parse_stored_plan(source)
        if _PARSE_CACHE > 0:
            if len(parsed) >= _PARSE_CACHE:
                del parsed[next(iter(parsed))]
            parsed[source] = hit
    return hit


def _redacted_standins(detail: SessionDetail, exec_keys: list[str], plans: dict[str, A.DraftAst]) -> dict[str, A.DraftAst]:
    """Stand-ins for executions whose plan text was redacted before it was stored.

    A live run keys its statement rows by the flow_key of the plan it *executed*; the stored
    ``plan_source`` went through the redactor first, so a plan with a secret literal parses to a
    different key and the execution finds no plan. Each such execution key is paired, in order,
    with an accepted plan that carries the redaction marker and whose own key never executed. The
    stand-in replays with redacted inputs, which the cells' ``input_hash_redacted`` match (§4.3).
    """
    executed = set(exec_keys)
    orphans: list[A.DraftAst] = []
    seen: set[str] = set()
    for t in detail.turns:
        for att in t.plan_attempts:
            if att.outcome != "accepted" or att.plan_source is None or DEFAULT_MARKER not in att.plan_source:
                continue
            try:
                d, k = parse_stored_plan(att.plan_source)
            except FluxError:
                continue
            if k not in executed and k not in seen:
                seen.add(k)
                orphans.append(d)
    out: dict[str, A.DraftAst] = {}
    for k in exec_keys:
        if k in plans or k in out or not orphans:
            continue
        out[k] = orphans.pop(0)
    return out


def _turn_keys(detail: SessionDetail, turn: int) -> set[str]:
    turns = detail.turns
    idx = max(turn, 1) - 1  # the SDK maps 0 to the first turn (§9.4); the CLI rejects 0
    if idx >= len(turns):
        have = f"it has {len(turns)} turn(s)" if turns else "it has no turns"
        raise _not_replayable(detail.id, f"turn {turn} does not exist ({have})")
    keys: set[str] = set()
    for att in turns[idx].plan_attempts:
        if att.outcome != "accepted" or att.plan_source is None:
            continue
        hc = direct_plan(att.plan_source)
        key = hc.flow_key if hc is not None else stored_plan_key(att.plan_source)
        if key is not None:
            keys.add(key)
    return keys


def _ops_in(obj: Any, out: list[str]) -> None:
    if isinstance(obj, A.Call):
        out.append(obj.op)
    if isinstance(obj, (tuple, list)):
        for x in obj:
            _ops_in(x, out)
    elif is_dataclass(obj) and not isinstance(obj, type):
        for f in fields(obj):
            _ops_in(getattr(obj, f.name), out)


class _ScratchSink:
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
        self._open_halts: list[Any] = []
        self._completed: dict[Any, Any] = {}
        self._checkpoints: dict[Any, int] = {}
        self._ledger: ResumeLedger | None = None  # the last one handed out, reused while unchanged

    def ledger(self) -> ResumeLedger | None:
        """The scratch session's open halt latch (§3.8 ``ResumeLedger::fold``)."""
        if not self._open_halts:
            return None
        plan = self._open_halts[-1]
        rows = self._completed.get(plan, [])
        if type(rows) is tuple:
            rows = [rows]
        cp = self._checkpoints.get(plan)
        last = self._ledger
        if last is not None and last.plan == plan and len(last.completed) == len(rows) and last.checkpoint == cp:
            return last
        self._ledger = ResumeLedger(plan, [LedgerEntry(*r) for r in rows], cp)
        return self._ledger

    def emit(self, ev: dict) -> None:
        if self.keep:
            self.events.append(ev)
        if self.writer is not None:
            self.writer.append(self.session, Run(decode_run(ev)))
        kind = ev.get("event")
        if kind == "statement_completed":
            self.completed(ev.get("plan"), int(ev.get("node", 0)), str(ev.get("stmt", "")), ev.get("value"))
        elif kind == "checkpoint_reached":
            self._checkpoints[ev.get("flow_key")] = int(ev.get("node", 0))
        elif kind == "plan_halted":
            self._open_halts.append(ev.get("plan"))
        elif kind == "plan_resumed":
            prior = ev.get("prior")
            if prior in self._open_halts:
                self._open_halts[:] = [p for p in self._open_halts if p != prior]  # (in place: _replay holds the list)
        if self.keep and kind in ("statement_completed", "plan_halted"):
            reqs = tuple(self.tape.log[self._log_mark:])
            self._log_mark = len(self.tape.log)
            if kind == "statement_completed":
                status = "skipped" if ev.get("skipped") else "completed"
                self.results.append(StatementResult(ev.get("plan", ""), self.execution, int(ev.get("node", 0)),
                                                    ev.get("stmt", ""), status, requests=reqs))
            else:
                self.results.append(StatementResult(ev.get("plan", ""), self.execution, int(ev.get("node", 0)),
                                                    ev.get("stmt", ""), "halted", ev.get("kind"), ev.get("error"),
                                                    requests=reqs))


    def host_succeeded(self, plan: str, stmt: str, step: str, op: str, input_hash: str, vid: str) -> None:
        """What emitting a host plan's ``step_started``, ``step_succeeded`` and ``statement_completed``
        (node 0, not skipped) does, in one call (the direct path's, when nothing is written)."""
        if self.writer is not None:
            self.emit({"event": "step_started", "step": step, "op": op, "input_hash": input_hash})
            self.emit({"event": "step_succeeded", "step": step, "output": vid})
            self.emit({"event": "statement_completed", "plan": plan, "node": 0, "stmt": stmt, "value": vid,
                       "skipped": False})
            return
        self.completed(plan, 0, stmt, vid)
        if self.keep:
            self.events += ({"event": "step_started", "step": step, "op": op, "input_hash": input_hash},
                            {"event": "step_succeeded", "step": step, "output": vid},
                            {"event": "statement_completed", "plan": plan, "node": 0, "stmt": stmt, "value": vid,
                             "skipped": False})
            log = self.tape.log
            reqs = tuple(log[self._log_mark:])
            self._log_mark = len(log)
            self.results.append(StatementResult(plan, self.execution, 0, stmt, "completed", requests=reqs))

    def completed(self, plan: Any, node: int, stmt: str, value: Any) -> None:
        """A ``statement_completed`` row into the halt latch's rows (what :meth:`emit` does with
        one, less the event itself: a quiet sink's direct path calls it instead)."""
        row = (node, stmt, value)
        had = self._completed.get(plan)
        if had is None:
            self._completed[plan] = row
        elif type(had) is list:
            had.append(row)
        else:
            self._completed[plan] = [had, row]

    @property
    def completed_rows(self) -> dict[Any, Any]:
        """Per plan, its ``statement_completed`` rows kept for the halt latch (read-only use)."""
        return self._completed

    def let_go_of_direct_row(self, plan: Any, values: dict[str, Any]) -> bool:
        """``plan`` (a one-statement host plan) just completed with no latch open and had no row
        before: let go of its one row and of the value it names (the interpreter's ``values``).
        Only a fast-forward over this plan's rows reads them, and that needs the plan to be the
        latch — the caller takes care that it never becomes one (replay_stream). False (nothing
        let go) when the plan holds more than that one row."""
        row = self._completed.get(plan)
        if type(row) is not tuple or plan in self._checkpoints:
            return False
        del self._completed[plan]
        if row[2] is not None:
            values.pop(row[2], None)
        return True

    def let_go_of_rows(self, plan: Any, values: dict[str, Any]) -> bool:
        """:meth:`let_go_of_direct_row` for a plan of any length: ``plan`` just ran through with no
        latch open and had no row before, so every row it holds is this run's — let go of them and
        of the values they name (a run with no latch fast-forwards nothing, so no other row names
        them). Not when it reached a checkpoint (the latch reads that too). False when nothing was
        let go."""
        rows = self._completed.get(plan)
        if rows is None or plan in self._checkpoints:
            return False
        del self._completed[plan]
        for row in (rows,) if type(rows) is tuple else rows:
            if row[2] is not None:
                values.pop(row[2], None)
        return True

    def forget(self, plan: Any) -> None:
        """``plan`` will not run again: unless it stands halted, nothing can make it the latch, so
        its rows are let go (a plan becomes the latch only by halting, which takes a run)."""
        if plan not in self._open_halts:
            self._completed.pop(plan, None)
            self._checkpoints.pop(plan, None)


def _never_asked(message: str, risk: str) -> bool:
    # Under a Replay scope confirm gates auto-allow; the caller's approver is never consulted.
    return True


def replay_detail(detail: SessionDetail, *, turn: int | None = None, catalog: OpCatalog | None = None,
                  on_progress: ProgressFn | None = None, scratch_dir: str | os.PathLike[str] | None = None,
                  recorded_dir: Path | None = None) -> ReplayReport:
    """Replay an already-loaded session (see :func:`replay_session`), with every per-statement detail."""
    with _gc_paused():
        return _replay(ReplayInput.of_detail(detail), turn=turn, catalog=catalog, on_progress=on_progress,
                       scratch_dir=scratch_dir, recorded_dir=recorded_dir, keep=True)


_gc_lock = threading.Lock()
_gc_holds = 0  # replays running with the cyclic collector paused
_gc_resume = False  # whether the collector was on when the first of them paused it


@contextmanager
def _gc_paused():
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


def _check_ops(sid: str, key: str, draft: A.DraftAst | HostCall | HostPlan, cat: OpCatalog) -> None:
    """A plan naming an op the caller's catalog lacks is refused (before it runs)."""
    ops: list[str] = []
    if type(draft) is HostCall:
        ops.append(draft.op)
    elif type(draft) is HostPlan:
        ops.extend(draft.ops)
    else:
        _ops_in(draft.body, ops)
    unknown = sorted({op for op in ops if cat.get(op) is None})
    if unknown:
        names = ", ".join(f"`{op}`" for op in unknown)
        raise _not_replayable(sid, f"plan {key} uses unknown op {names} — the catalog has no such op")


# One execution as the replay loop takes it: (execution key, plan to run or None when it has no stored
# source, the key to run it under (None for a stand-in, whose own key differs), replayed from a stand-in).
_Execution = tuple[str, "A.DraftAst | None", "str | None", bool]


class _EagerPlans:
    """flux's order of work: every accepted plan parsed and keyed, and every execution's plan
    checked against the catalog, before the first runs. The app's path (it reports progress out of
    a known total) and a replay that writes a scratch store (nothing is written when a later plan
    cannot be replayed)."""

    def __init__(self, detail: ReplayInput, turn: int | None, catalog: OpCatalog | None, direct: bool):
        sid = detail.id
        self.plans: dict[str, A.DraftAst | HostCall] = {}
        accepted_order: list[str] = []
        for _turn, key, plan in accepted_plans(detail, direct=direct):
            accepted_order.append(key)
            self.plans[key] = plan
        exec_keys = [k for k, _ in detail.executions]
        if not exec_keys:
            exec_keys = list(accepted_order)
            if not exec_keys:
                raise _not_replayable(sid, "no executed statements and no accepted plan_source recorded")
        if turn is not None:
            wanted = _turn_keys(detail, turn)
            exec_keys = [k for k in exec_keys if k in wanted]
        self.keys = exec_keys
        self.standins = _redacted_standins(detail, exec_keys, self.plans) \
            if any(k not in self.plans for k in exec_keys) else {}
        if catalog is not None:
            for key in exec_keys:
                draft = self.plans.get(key) or self.standins.get(key)
                if draft is not None:
                    _check_ops(sid, key, draft, catalog)
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

    def finish(self) -> None:
        """Nothing left to check: everything was parsed and checked up front."""


class _LazyPlans:
    """The same executions, plans and refusals as :class:`_EagerPlans`, with each accepted plan
    parsed when the replay reaches it and let go after its key's last execution — a long session
    does not hold every plan's AST (about 1.3 KB per one-op plan) at once.

    * Execution order from the ledger rows (§3.7): plans are parsed forward in acceptance order
      until the wanted key turns up; one whose key runs later is held until its last run, any other
      dropped. Any plan with the key serves: a flow_key is the plan's name and body (§4.1), all the
      interpreter runs, so "last acceptance wins" (§3.4) picks an equal plan.
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
                raise _not_replayable(detail.id, "no executed statements and no accepted plan_source recorded")
            self._wanted = _turn_keys(detail, turn) if turn is not None else None
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

    @property
    def plain(self) -> bool:
        """Whether the executions are the acceptances themselves, every one (no ledger rows, no
        turn asked for) and no catalog to check them against: then :meth:`acceptances` is the
        executions, each ``(turn, key, plan)`` run under its own key."""
        return self._keys is None and self._wanted is None and self.catalog is None

    def acceptances(self):
        """The accepted plans as they are parsed (``accepted_plans``): :meth:`finish` parses what is left."""
        return self._cursor

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
                _check_ops(self.detail.id, key, draft, self.catalog)
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
            self._standins = _redacted_standins(self.detail, self._keys or [], known)
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
        raise _not_replayable(sid, "no run trace recorded")
    tape = ReplayTape(detail.cells, lean=not keep)
    if not keep:  # the tape holds the cells now, and lets each go once it is served
        detail.cells = []
    if tape.total == 0:
        raise _not_replayable(sid, "no cassette cells recorded (pre-C-43 run, or FLUX_CASSETTE=0)")
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

    host = ReplayHost(tape)
    sink = _ScratchSink(tape, writer, scratch_sid, keep=keep)
    if not eager:
        source.on_last_run = sink.forget
    interp = Interpreter(cat, host, sink, _never_asked, run_id=scratch_sid or "replay")
    runner = DirectRunner(interp)
    run_direct = runner.run
    # the detailed replay's common execution in one call (see _fused_host_call), when it applies
    fused = _fused_host_call(runner, sink) if keep and writer is None and direct and _FUSED else None
    plans: list[ReplayedPlan] = []
    open_halts = sink._open_halts  # (sink.ledger() is None while it is empty; the sink keeps this list)
    report = ReplayReport(session=sid, plans=plans, cells_total=tape.total, cells_consumed=0, diverged=None,
                          missing_sources=0, turn=turn, scratch_session=scratch_sid, detail=keep)
    total = source.total if eager else 0
    plain = fused is not None and not eager and source.plain
    executions = source.acceptances() if plain else iter(source)

    def execute(key: str, draft: Any, known_key: str | None) -> None:
        """Run one execution's plan and add its :class:`ReplayedPlan`: the fused way when it applies
        (a one-statement host plan, no latch open: a halt goes the general way), else the general."""
        n = len(plans)
        if fused is not None and not open_halts and type(draft) is HostCall and fused(draft, n) is None:
            plans.append(_new_tuple(ReplayedPlan, (key, None, None, None)))
            return
        sink.execution = n
        h = _run_plan(run_direct, interp, draft, sink.ledger(), known_key)
        plans.append(_new_tuple(ReplayedPlan, (key, None, None, None) if h is None
                                else (key, h.error, h.kind, h.node)))

    try:
        if plain:  # the executions are the acceptances themselves: one generator, not two
            for _turn, key, draft in executions:
                execute(key, draft, key)
                draft = None
                if tape.diverged is not None:
                    break
        for done, (key, draft, known_key, standin) in enumerate(() if plain else executions, 1):
            if standin:
                report.redacted_standins += 1
            if draft is None:
                report.missing_sources += 1
            else:
                execute(key, draft, known_key)
            draft = None  # let a plan go as soon as it ran (the source holds one that runs again)
            if on_progress is not None:
                on_progress(done, total)
            if tape.diverged is not None:
                break
    finally:
        if writer is not None:
            writer.close()
    if not eager:
        source.finish(executions)

    _settle(report, tape)
    end = _tape_end(detail, tape, report)
    if end is not None:
        report.tape_end = end
        report.diverged = None
        last = report.plans[-1]
        report.plans[-1] = ReplayedPlan(last.flow_key, end.message(), "tape_end", last.node)
    report.requests = list(tape.log)
    report.statement_results = sink.results
    report.scratch_events = sink.events
    return report


_new_tuple = tuple.__new__  # a named tuple of its fields, without its own __new__ (all that does)

# Whether the detailed replay takes _fused_host_call's way where it applies; the differential tests
# switch it off to get the same replay through DirectRunner.run and the sink's calls.
_FUSED = True


def _fused_host_call(runner: DirectRunner, sink: "_ScratchSink") -> "Callable[[HostCall, int], Any] | None":
    """The detailed replay's common execution, a one-statement host plan
    (:class:`~flux.timemachine.replay_direct.HostCall`) with no halt latch open whose request the
    tape answers with a recorded success, in one call ``run(hc, execution)``: what
    :meth:`~flux.timemachine.replay_direct.DirectRunner.run` then does with a keeping
    :class:`_ScratchSink` (no scratch store) — the serve and its :class:`ServeRecord`
    (:meth:`ReplayTape.hit`), the value and its id, the binding, the step count, the halt latch's
    row, the three run events, the :class:`StatementResult` (``execution``: its index in the
    report's plans) — without the calls between them. Anything else (a miss, a truncated, failed
    or denied cell, an op the catalog lacks, a plan inside another, an input that needs the
    symbols) is :data:`NOT_DIRECT` with nothing done, and goes the general way. None when the
    runner has no tape to serve from. (A closure: what does not change between plans is bound
    once.)"""
    interp = runner.interp
    tape = runner.tape
    if tape is None:
        return None
    catalog, every_op = runner.catalog, runner.every_op
    hit, log = tape.hit, tape.log
    dispatched = interp.clock.dispatched
    values, symbols = interp.values, interp.symbols
    events, add_result, completed = sink.events, sink.results.append, sink.completed
    add_events = events.extend
    new = _new_tuple

    def run(hc: HostCall, execution: int) -> Any:
        op = hc.op
        ih = hc.input_hash
        if ih is None or interp._sched is not None or not (every_op or op in catalog):
            return NOT_DIRECT
        cell = hit(op, ih)
        if cell is None:
            return NOT_DIRECT
        dispatched()
        interp._steps_base += 1
        content = cell.content
        n = interp._next_vid  # interp._mint(content)
        interp._next_vid = n + 1
        vid = interp._last_vid = f"v_{n}"
        values[vid] = content
        symbols[hc.name] = content
        key = hc.flow_key
        stmt = hc.stmt
        completed(key, 0, stmt, vid)
        step = "step_" + op + "_" + ih[:16]
        add_events(({"event": "step_started", "step": step, "op": op, "input_hash": ih},
                    {"event": "step_succeeded", "step": step, "output": vid},
                    {"event": "statement_completed", "plan": key, "node": 0, "stmt": stmt, "value": vid,
                     "skipped": False}))
        mark = sink._log_mark
        end = len(log)
        reqs = (log[mark],) if mark == end - 1 else tuple(log[mark:])
        sink._log_mark = end
        add_result(new(StatementResult, (key, execution, 0, stmt, "completed", None, None, reqs)))
        return None

    return run


def _run_plan(run_direct: Callable[[HostCall, Any], Any], interp: Interpreter, draft: Any,
              ledger: ResumeLedger | None, known_key: str | None) -> Any:
    """Run one execution's plan (a host plan straight from its text by ``run_direct``, a
    :class:`~flux.timemachine.replay_direct.DirectRunner`'s ``run``, when it can) in resumable mode
    against the scratch session's halt latch; its :class:`PlanHalt` or None."""
    h = run_direct(draft, ledger) if type(draft) is HostCall or type(draft) is HostPlan else NOT_DIRECT
    if h is NOT_DIRECT:
        if type(draft) is HostCall or type(draft) is HostPlan:
            draft = draft.draft()
        h = interp.run(draft, resumable=True, ledger=ledger, flow_key=known_key).halted
    return h


def _settle(report: ReplayReport, tape: ReplayTape) -> ReplayReport:
    """The report's tape side once the replay is over: counts, the latched divergence, and which
    cells were served, refused (truncated) or left."""
    report.cells_total = tape.total
    report.cells_consumed = tape.consumed
    report.diverged = tape.diverged
    report.served = tape.served  # the tape is this replay's own: its list, not a copy
    status = ["unconsumed"] * tape.total
    for i in tape.truncated:
        status[i] = "truncated"
    for i in tape.served:
        status[i] = "served"
    report.cell_status = status
    return report


def _tape_end(detail: ReplayInput, tape: ReplayTape, report: ReplayReport) -> TapeEnd | None:
    """A "divergence" that is only the end of an interrupted recording: the one failed request is
    the last one, a miss after every recorded cell was served, in a plan of the newest turn, which
    never ended."""
    last_req = tape.last
    if tape.diverged is None or last_req is None or not report.plans or not detail.turns:
        return None
    if last_req.status != "miss" or tape.unserved != 1:  # the last request, and only it, was not served
        return None
    if tape.consumed != tape.total:
        return None
    turn = detail.turns[-1]
    plan = report.plans[-1]
    if turn.ended or plan.halted is None or plan.node is None or plan.flow_key not in _turn_keys(detail, turn.number):
        return None
    return TapeEnd(turn.number, plan.flow_key, plan.node, last_req.op, statements_before_last_plan(turn) + plan.node)


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
    with _gc_paused():
        if not detail and turn is None and on_progress is None and scratch_dir is None and _STREAMED:
            from .replay_stream import replay_streamed

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

