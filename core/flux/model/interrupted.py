"""Interrupted-turn detection exactly as flux does it (spec §3.8), plus the reason for the cases
flux leaves unflagged, so ``flux show`` and the app can say why a turn with no end is not offered
for resurrection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from ..errors import FluxError

if TYPE_CHECKING:  # the check imports the language lazily: listing sessions must stay cheap
    from ..store.store import StoredEvent
    from .session import Turn

__all__ = ["InterruptedTurn", "InterruptCheck", "check_interrupted"]


@dataclass(frozen=True, slots=True)
class InterruptedTurn:
    turn_number: int
    turn_id: int
    started_at_ms: int
    user_input: str
    plan_source: str
    flow_key: str
    completed: int  # statements the ledger shows completed


@dataclass(frozen=True, slots=True)
class InterruptCheck:
    """``interrupted`` set: flux flags the session. ``reason`` set: an open turn flux does not flag."""

    interrupted: InterruptedTurn | None = None
    reason: str | None = None
    open_turn: int | None = None  # 1-based number of the open turn, flagged or not


def check_interrupted(turns: "Sequence[Turn]", turn_run_trace: "Callable[[Turn], Sequence[StoredEvent]]") -> InterruptCheck:
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
    from .ledger import ledger_from_interrupted
    from .stored_plan import parse_stored_plan

    try:
        _draft, key = parse_stored_plan(plan.plan_source)
    except FluxError as e:  # StoredPlanError: any failure of a hostile plan, one line
        return InterruptCheck(reason=f"turn {open_turn.number}'s last accepted plan does not parse ({e}) — not resumable",
                              open_turn=open_turn.number)
    ledger = ledger_from_interrupted(turn_run_trace(open_turn), key)
    return InterruptCheck(
        interrupted=InterruptedTurn(open_turn.number, open_turn.turn_id, open_turn.started_at_ms, open_turn.user_input,
                                    plan.plan_source, key, len(ledger.completed) if ledger else 0),
        open_turn=open_turn.number,
    )
