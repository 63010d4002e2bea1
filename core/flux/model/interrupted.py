"""Interrupted-turn detection as flux does it, plus the reason for the cases flux leaves unflagged,
so ``flux show`` and the app can say why a turn with no end is not offered for resurrection.

Beyond flux: a turn is interrupted only when it is open *and not leased* — an open newest turn whose
session lease a live process holds (:mod:`flux.store.lease`) is being recorded right now, not
left by a dead process; it is reported with ``recording_pid`` and a reason, never flagged. Every
surface asks here: :func:`check_session_interrupted` (a loaded session: ``flux show``, the app's
session screen), the session list (:mod:`flux.model.listing`) and resurrect."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..errors import FluxError
from ..records import FrozenRecord, init_fields
from ..store.lease import lease_holder

if TYPE_CHECKING:  # the check imports the language lazily: listing sessions must stay cheap
    from ..store.store import StoredEvent
    from .session import SessionDetail, Turn

__all__ = ["InterruptedTurn", "InterruptCheck", "OpenTurn", "check_interrupted", "check_open_newest_turn",
           "check_session_interrupted", "recording_check"]


class InterruptedTurn(FrozenRecord):
    __slots__ = ("turn_number", "turn_id", "started_at_ms", "user_input", "plan_source", "flow_key", "completed", "draft",
                 "position")
    _NOT_COMPARED = _NOT_SHOWN = ("draft",)
    turn_number: int
    turn_id: int
    started_at_ms: int
    user_input: str
    plan_source: str
    flow_key: str
    completed: int  # statements of the last accepted plan the ledger shows completed (flux's K)
    draft: Any  # the parsed plan (resurrect reuses it)
    # the statements of the turn completed before the crash, its plans laid end to end — the
    # number fork --turn T --at N, replay's tape end and resurrect's panel give the statement the
    # turn stopped at (what every note shows; ``completed`` is the same count inside the last plan)
    position: int

    def __init__(self, turn_number: int, turn_id: int, started_at_ms: int, user_input: str, plan_source: str,
                 flow_key: str, completed: int, draft: Any = None, position: int | None = None) -> None:
        init_fields(self, turn_number, turn_id, started_at_ms, user_input, plan_source, flow_key, completed, draft,
                    completed if position is None else position)


class InterruptCheck(FrozenRecord):
    """``interrupted`` set: the session is flagged. ``reason`` set: an open turn that is not flagged
    (``recording_pid`` set too when it is not flagged because a live process is recording it)."""

    __slots__ = ("interrupted", "reason", "open_turn", "recording_pid")
    interrupted: InterruptedTurn | None
    reason: str | None
    open_turn: int | None  # 1-based number of the open turn, flagged or not
    recording_pid: int | None  # the live writer's pid (0: unreadable) when its lease is held

    def __init__(self, interrupted: InterruptedTurn | None = None, reason: str | None = None,
                 open_turn: int | None = None, recording_pid: int | None = None) -> None:
        init_fields(self, interrupted, reason, open_turn, recording_pid)


def recording_check(turn_number: int, pid: int) -> InterruptCheck:
    """The check of an open newest turn a live process (``pid``) is recording: not interrupted."""
    who = f"pid {pid}" if pid > 0 else "a live process"
    return InterruptCheck(reason=f"turn {turn_number} is being recorded by {who} — live, not interrupted",
                          open_turn=turn_number, recording_pid=pid)


def check_session_interrupted(store_dir: Any, detail: "SessionDetail") -> InterruptCheck:
    """:func:`check_interrupted` for a loaded session of the store in ``store_dir``, with its lease
    consulted (read-only): what ``flux show`` and the app's session screen call."""
    return check_interrupted(detail.turns, detail.turn_run_trace,
                             recording_pid=lambda: lease_holder(store_dir, detail.id))


def check_interrupted(turns: "Sequence[Turn]", turn_run_trace: "Callable[[Turn], Sequence[StoredEvent]]", *,
                      parse_plan: "Callable[[str], tuple[Any, str]] | None" = None,
                      recording_pid: "Callable[[], int | None] | None" = None) -> InterruptCheck:
    """flux's check for a session's turns. ``parse_plan``: ``(draft, flow_key)`` of the accepted plan,
    raising a :class:`FluxError` when it does not parse (default
    :func:`~flux.model.stored_plan.parse_stored_plan`). ``recording_pid``: the pid of the live
    process recording the session (``None``: none) — asked only when the newest turn is open."""
    open_turn = next((t for t in reversed(turns) if not t.ended), None)
    if open_turn is None:
        return InterruptCheck()
    newest = turns[-1]
    if open_turn is not newest:
        return InterruptCheck(reason=(f"turn {open_turn.number} is interrupted, but turn {newest.number} ran and closed after it"
                                      " — needs manual recovery"), open_turn=open_turn.number)

    if recording_pid is not None:
        pid = recording_pid()
        if pid is not None:
            return recording_check(open_turn.number, pid)

    def trace_bodies() -> list[dict]:
        from .ledger import run_bodies

        return run_bodies(turn_run_trace(open_turn))

    return check_open_newest_turn(OpenTurn(open_turn.number, open_turn.turn_id, open_turn.started_at_ms, open_turn.user_input,
                                           tuple((p.outcome, p.plan_source) for p in open_turn.plan_attempts)),
                                  trace_bodies, parse_plan=parse_plan)


class OpenTurn(FrozenRecord):
    """The facts of a session's newest turn when it has no ``turn_ended`` — every step of flux's interrupted-turn check past the newest-turn test
    read. The session list gathers them with a few SQL reads, the session model from its turns."""

    __slots__ = ("number", "turn_id", "started_at_ms", "user_input", "plans")
    number: int
    turn_id: int
    started_at_ms: int
    user_input: str
    plans: tuple[tuple[str, str | None], ...]  # (outcome, plan_source) of each plan attempt, in order

    def __init__(self, number: int, turn_id: int, started_at_ms: int, user_input: str,
                 plans: tuple[tuple[str, str | None], ...]) -> None:
        init_fields(self, number, turn_id, started_at_ms, user_input, plans)


def check_open_newest_turn(turn: OpenTurn, trace_bodies: "Callable[[], list[dict]]", *,
                           parse_plan: "Callable[[str], tuple[Any, str]] | None" = None) -> InterruptCheck:
    """flux's interrupted-turn check, past the newest-turn test, for an open newest turn; ``trace_bodies`` gives the turn's ``run`` event bodies
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
    from .stored_plan import parse_stored_plan, statements_before_last_plan

    try:
        draft, key = (parse_plan or parse_stored_plan)(plan_source)
    except FluxError as e:  # StoredPlanError: any failure of a hostile plan, one line
        return InterruptCheck(reason=f"turn {turn.number}'s last accepted plan does not parse ({e}) — not resumable",
                              open_turn=turn.number)
    ledger = ResumeLedger.from_interrupted(trace_bodies(), key)
    completed = len(ledger.completed) if ledger else 0
    count = None if parse_plan is None else (lambda source: len(parse_plan(source)[0].body))
    before = statements_before_last_plan([src for src in accepted if src is not None], count)
    return InterruptCheck(
        interrupted=InterruptedTurn(turn.number, turn.turn_id, turn.started_at_ms, turn.user_input,
                                    plan_source, key, completed, draft, before + completed),
        open_turn=turn.number,
    )
