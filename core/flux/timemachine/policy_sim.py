"""``flux policy simulate``: a store's recorded history under a proposed permission set.

Every recorded dispatch is put to the proposed policy as a live one would be (op name, declared
effect, input): the report says what it would have denied or sent to ``ask`` that ran, and what it
would allow that was refused. Calls after a refusal in the same turn are counted, not guessed at.
Reads only; sessions run on the process pool or on Ray.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ..agent.approver import ApprovalRequest, PolicyApprover
from ..errors import FluxError
from ..model.session import load_session
from ..store.store import StoreReader
from .executors import Executor, parse_executor, run_on_pool, run_on_ray

__all__ = ["CallChange", "SessionSimulation", "PolicySimulation", "simulate_policy", "simulate_session",
           "store_effects"]

#: What a recorded cell says happened.
RAN, REFUSED = "ran", "refused"


@dataclass(frozen=True)
class CallChange:
    """One recorded dispatch the proposal decides differently."""

    turn: Optional[int]
    cell: int  # the cell's tape index in its session
    op: str
    effect: str
    recorded: str  # ran | refused
    proposed: str  # allow | deny | ask
    rule: str  # the proposal's pattern that decided it ("default" when none matched)

    @property
    def blocks(self) -> bool:
        """It ran in the recording and the proposal would not let it run unattended."""
        return self.recorded == RAN and self.proposed != "allow"

    def to_json(self) -> dict[str, Any]:
        return {"turn": self.turn, "cell": self.cell, "op": self.op, "effect": self.effect,
                "recorded": self.recorded, "proposed": self.proposed, "rule": self.rule}


@dataclass
class SessionSimulation:
    session: str
    calls: int = 0
    changes: list[CallChange] = field(default_factory=list)
    not_run_after: int = 0  # recorded calls after a blocked one in its turn: they would not have run
    error: Optional[str] = None
    per_op: dict[str, tuple[int, int]] = field(default_factory=dict)  # op -> (calls, of them ran)

    @property
    def blocked(self) -> list[CallChange]:
        return [c for c in self.changes if c.blocks]

    @property
    def unblocked(self) -> list[CallChange]:
        return [c for c in self.changes if c.recorded == REFUSED and c.proposed == "allow"]

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session, "calls": self.calls, "error": self.error,
                "blocked": [c.to_json() for c in self.blocked], "unblocked": [c.to_json() for c in self.unblocked],
                "not_run_after": self.not_run_after}


@dataclass
class OpTally:
    calls: int = 0
    ran: int = 0
    deny: int = 0  # of the calls that ran: how many the proposal denies
    ask: int = 0  # … and how many it would ask about
    unblocked: int = 0  # refused in the recording, allowed by the proposal

    def to_json(self) -> dict[str, int]:
        return {"calls": self.calls, "ran": self.ran, "deny": self.deny, "ask": self.ask, "unblocked": self.unblocked}


@dataclass
class PolicySimulation:
    policy: str
    sessions: list[SessionSimulation]
    ops: dict[str, OpTally]

    @property
    def affected(self) -> int:
        return sum(1 for s in self.sessions if s.blocked)

    @property
    def errors(self) -> int:
        return sum(1 for s in self.sessions if s.error is not None)

    def summary_line(self) -> str:
        calls = sum(s.calls for s in self.sessions)
        blocked = sum(len(s.blocked) for s in self.sessions)
        return (f"{self.policy}: {self.affected}/{len(self.sessions)} session(s) affected · {blocked} of {calls} "
                f"recorded call(s) blocked · {sum(len(s.unblocked) for s in self.sessions)} newly allowed · "
                f"errors {self.errors}")

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "sessions": [s.to_json() for s in self.sessions],
                "ops": {op: t.to_json() for op, t in sorted(self.ops.items())},
                "affected": self.affected, "total": len(self.sessions), "errors": self.errors}


def store_effects(store_dir: str | Path) -> dict[str, str]:
    """Each op's declared effect in the toolbox the store was recorded with (``toolbox.json``,
    default the coding ops). An op the toolbox does not know has no entry."""
    from ..agent.toolboxes import store_toolbox

    box = store_toolbox(store_dir)
    return {o.name: o.effect for o in box.ops(Path(box.workspace or "."))}


def _input(raw: Optional[str]) -> Any:
    try:
        return json.loads(raw) if raw is not None else None
    except (ValueError, RecursionError):
        return raw


def simulate_session(store: str, sid: str, policy: PolicyApprover, effects: dict[str, str]) -> SessionSimulation:
    """One session's recorded dispatches under ``policy`` (a pool or Ray task: opens the store
    itself, reads only). A session that cannot be read is an error row."""
    out = SessionSimulation(sid)
    try:
        with StoreReader(store) as reader:
            detail = load_session(reader, sid)
    except FluxError as e:
        out.error = str(e)
        return out
    halted_turns: set[Optional[int]] = set()
    for c in detail.cells:
        r = c.rec
        out.calls += 1
        calls, ran = out.per_op.get(r.op, (0, 0))
        out.per_op[r.op] = (calls + 1, ran + (not r.denied))
        if c.turn_number in halted_turns:
            out.not_run_after += 1
        effect = effects.get(r.op, "unknown")
        action, rule = policy.action_for(ApprovalRequest(op=r.op, effect=effect, input=_input(r.input_view)))
        recorded = REFUSED if r.denied else RAN
        if (recorded == RAN) == (action == "allow"):
            continue
        change = CallChange(c.turn_number, c.index, r.op, effect, recorded, action, rule)
        out.changes.append(change)
        if change.blocks:
            halted_turns.add(c.turn_number)
    return out


def _failed(sid: str, why: str) -> SessionSimulation:
    return SessionSimulation(sid, error=why)


def simulate_policy(store_dir: str | Path, sessions: Sequence[str], policy: PolicyApprover, *, jobs: int = 1,
                    executor: Executor | str | None = None,
                    on_progress: Callable[[int, int, SessionSimulation], None] | None = None) -> PolicySimulation:
    """Every session of ``sessions`` under ``policy``; rows in input order, tallies per op."""
    ex = executor if isinstance(executor, Executor) else parse_executor(executor)
    store = str(store_dir)
    effects = store_effects(store)
    run = run_on_ray if ex.kind == "ray" else run_on_pool
    extra = {"executor": ex} if ex.kind == "ray" else {}
    rows = run(simulate_session, store, list(sessions), policy, effects, jobs=jobs, failed=_failed,
               on_progress=on_progress, **extra)
    ops: dict[str, OpTally] = {}
    for s in rows:
        for op, (calls, ran) in s.per_op.items():
            t = ops.setdefault(op, OpTally())
            t.calls += calls
            t.ran += ran
        for change in s.changes:
            t = ops.setdefault(change.op, OpTally())
            if change.blocks:
                t.deny += change.proposed == "deny"
                t.ask += change.proposed == "ask"
            else:
                t.unblocked += 1
    return PolicySimulation(policy.source, rows, ops)

