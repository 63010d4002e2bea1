"""Interrupted-turn detection exactly as flux does it (spec §3.8), plus the reason for the cases
flux leaves unflagged, so ``flux show`` and the app can say why a turn with no end is not offered
for resurrection."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..errors import FluxError
from ..records import FrozenRecord

if TYPE_CHECKING:  # the check imports the language lazily: listing sessions must stay cheap
    from ..store.store import StoredEvent
    from .session import Turn

__all__ = ["InterruptedTurn", "InterruptCheck", "OpenTurn", "check_interrupted", "check_open_newest_turn"]


class InterruptedTurn(FrozenRecord):
    __slots__ = ("turn_number", "turn_id", "started_at_ms", "user_input", "plan_source", "flow_key", "completed", "draft")
    _NOT_COMPARED = _NOT_SHOWN = ("draft",)
    turn_number: int
    turn_id: int
    started_at_ms: int
    user_input: str
    plan_source: str
    flow_key: str
    completed: int  # statements the ledger shows completed
    draft: Any  # the parsed plan (resurrect reuses it)

    def __init__(self, turn_number: int, turn_id: int, started_at_ms: int, user_input: str, plan_source: str,
                 flow_key: str, completed: int, draft: Any = None) -> None:
        _set = object.__setattr__
        _set(self, "turn_number", turn_number)
        _set(self, "turn_id", turn_id)
        _set(self, "started_at_ms", started_at_ms)
        _set(self, "user_input", user_input)
        _set(self, "plan_source", plan_source)
        _set(self, "flow_key", flow_key)
        _set(self, "completed", completed)
        _set(self, "draft", draft)


class InterruptCheck(FrozenRecord):
    """``interrupted`` set: flux flags the session. ``reason`` set: an open turn flux does not flag."""

    __slots__ = ("interrupted", "reason", "open_turn")
    interrupted: InterruptedTurn | None
    reason: str | None
    open_turn: int | None  # 1-based number of the open turn, flagged or not

    def __init__(self, interrupted: InterruptedTurn | None = None, reason: str | None = None,
                 open_turn: int | None = None) -> None:
        _set = object.__setattr__
        _set(self, "interrupted", interrupted)
        _set(self, "reason", reason)
        _set(self, "open_turn", open_turn)


def check_interrupted(turns: "Sequence[Turn]", turn_run_trace: "Callable[[Turn], Sequence[StoredEvent]]", *,
                      parse_plan: "Callable[[str], tuple[Any, str]] | None" = None) -> InterruptCheck:
    """§3.8 for a session's turns. ``parse_plan``: ``(draft, flow_key)`` of the accepted plan, raising
    a :class:`FluxError` when it does not parse (default :func:`~flux.model.stored_plan.parse_stored_plan`)."""
    open_turn = next((t for t in reversed(turns) if not t.ended), None)
    if open_turn is None:
        return InterruptCheck()
    newest = turns[-1]
    if open_turn is not newest:
        return InterruptCheck(reason=(f"turn {open_turn.number} is interrupted, but turn {newest.number} ran and closed after it"
                                      " — needs manual recovery"), open_turn=open_turn.number)

    def trace_bodies() -> list[dict]:
        from .ledger import run_bodies

        return run_bodies(turn_run_trace(open_turn))

    return check_open_newest_turn(OpenTurn(open_turn.number, open_turn.turn_id, open_turn.started_at_ms, open_turn.user_input,
                                           tuple((p.outcome, p.plan_source) for p in open_turn.plan_attempts)),
                                  trace_bodies, parse_plan=parse_plan)


class OpenTurn(FrozenRecord):
    """The facts of a session's newest turn when it has no ``turn_ended`` — all steps 3-5 of §3.8
    read. The session list gathers them with a few SQL reads, the session model from its turns."""

    __slots__ = ("number", "turn_id", "started_at_ms", "user_input", "plans")
    number: int
    turn_id: int
    started_at_ms: int
    user_input: str
    plans: tuple[tuple[str, str | None], ...]  # (outcome, plan_source) of each plan attempt, in order

    def __init__(self, number: int, turn_id: int, started_at_ms: int, user_input: str,
                 plans: tuple[tuple[str, str | None], ...]) -> None:
        _set = object.__setattr__
        _set(self, "number", number)
        _set(self, "turn_id", turn_id)
        _set(self, "started_at_ms", started_at_ms)
        _set(self, "user_input", user_input)
        _set(self, "plans", plans)


def check_open_newest_turn(turn: OpenTurn, trace_bodies: "Callable[[], list[dict]]", *,
                           parse_plan: "Callable[[str], tuple[Any, str]] | None" = None) -> InterruptCheck:
    """§3.8 steps 3-5 for an open newest turn; ``trace_bodies`` gives the turn's ``run`` event bodies
    (asked for only when a plan parses); ``parse_plan`` as :func:`check_interrupted`'s."""
    accepted = [src for outcome, src in turn.plans if outcome == "accepted"]
    if not accepted:
        return InterruptCheck(reason=f"turn {turn.number} crashed before any plan was accepted — nothing to resume",
                              open_turn=turn.number)
    plan_source = accepted[-1]
    if plan_source is None:
        return InterruptCheck(reason=f"turn {turn.number}'s last accepted plan has no plan_source — not resumable",
                              open_turn=turn.number)
    from ..lang.ledger import ResumeLedger
    from .stored_plan import parse_stored_plan

    try:
        draft, key = (parse_plan or parse_stored_plan)(plan_source)
    except FluxError as e:  # StoredPlanError: any failure of a hostile plan, one line
        return InterruptCheck(reason=f"turn {turn.number}'s last accepted plan does not parse ({e}) — not resumable",
                              open_turn=turn.number)
    ledger = ResumeLedger.from_interrupted(trace_bodies(), key)
    return InterruptCheck(
        interrupted=InterruptedTurn(turn.number, turn.turn_id, turn.started_at_ms, turn.user_input,
                                    plan_source, key, len(ledger.completed) if ledger else 0, draft),
        open_turn=turn.number,
    )
