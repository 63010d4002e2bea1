"""What a replay tells: one record per execution (:class:`ReplayedPlan`, kept compact by
:class:`PlanLog` in a long replay), how every statement ended (:class:`StatementResult`), where an
interrupted recording stops (:class:`TapeEnd`), and the whole :class:`ReplayReport` with its
``flux replay`` lines and ``--json`` object."""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..cassette.replay import ReplayTape, ServeRecord, unconsumed_message

__all__ = ["ReplayedPlan", "PlanLog", "StatementResult", "TapeEnd", "ReplayReport", "settle", "tape_end"]


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
    tuple: a detailed replay keeps one per statement, built on the hot path with ``tuple.__new__``.)"""

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
    """One replay's verdict: the executions run, the cells served, the divergence if any, and (a
    detailed replay) every statement's result, tape request and scratch event."""

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
    redacted_standins: int = 0  # executions replayed from their redacted stored plan (see plans.redacted_standins)
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
        """The stdout lines of ``flux replay`` (a reproduced halt is ✓, not flux's ✗)."""
        out = [f"replayed {len(self.plans)} plan(s) · {self.cells_consumed}/{self.cells_total} recorded cell(s) served"]
        out.extend(f"  {self.plan_line(p)}" for p in self.plans)
        return out


def settle(report: ReplayReport, tape: ReplayTape) -> ReplayReport:
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


def tape_end(tape: ReplayTape, plans: Sequence[ReplayedPlan], interrupted_turn: Any) -> TapeEnd | None:
    """A "divergence" that is only the end of an interrupted recording, or None: the one failed
    request is the last one, a miss after every recorded cell was served, in the last plan run,
    which halted on it. ``interrupted_turn(flow_key)`` answers for the session's turns: the newest
    turn's number and how many statements its plans hold before its last one, when that turn never
    ended and accepted a plan with this key; else None."""
    last = tape.last
    if tape.diverged is None or last is None or not plans or last.status != "miss" or tape.unserved != 1:
        return None
    if tape.consumed != tape.total:
        return None
    plan = plans[-1]
    if plan.halted is None or plan.node is None:
        return None
    turn = interrupted_turn(plan.flow_key)
    if turn is None:
        return None
    number, before = turn
    return TapeEnd(number, plan.flow_key, plan.node, last.op, before + plan.node)
