"""Reading a session for its screen (from worker threads): the whole session, or — for a big one —
its turn headers and one turn's rows, the first of them before the first paint; and the few
one-turn windows the screen keeps while the cursor moves between turns."""

from __future__ import annotations

from flux.model.interrupted import InterruptCheck, check_session_interrupted
from flux.model.listing import summarize_sessions
from flux.model.session import SessionDetail, Turn, load_session
from flux.model.timeline import build_timeline
from flux.store.store import StoreReader

from ..messages import SessionLoaded
from ..widgets.timeline_view import build_rows

__all__ = ["PARTIAL_OVER", "FIRST_ROWS", "TurnDetails", "initial_turn", "read_in_full", "read_session", "read_turn"]

# A session with more events than this opens one turn at a time (the newest first); the others load
# when the turn list moves to them. Smaller sessions load whole, once.
PARTIAL_OVER = 20_000
FIRST_ROWS = 400  # rows of a big session's turn read before the first paint (a screenful of statements and cells)
TURN_CACHE = 4


def read_in_full(detail: SessionDetail) -> set[int]:
    """Numbers of the turns whose rows ``detail`` holds in full (so whose plans it counts)."""
    if detail.truncated:
        return set()
    if not detail.partial:
        return {t.number for t in detail.turns}
    start = detail.window[0] if detail.window else None
    return {t.number for t in detail.turns if t.turn_id == start}


def initial_turn(detail: SessionDetail, check: InterruptCheck, wanted: int | None) -> Turn:
    """The turn a session opens on: ``wanted``, else the interrupted (or open) one, else the first —
    or, for a big session read one turn at a time, the newest (the one already read)."""
    turns = detail.turns
    default = turns[-1] if detail.partial else turns[0]
    chosen = next((t for t in turns if t.number == wanted), None)
    if chosen is not None:
        return chosen
    return next((t for t in turns if t.number == check.open_turn), default)


def read_session(reader: StoreReader, session_id: str, *, shown: SessionDetail | None, shown_turn: int | None,
                 wanted_turn: int | None) -> SessionLoaded | None:
    """The session as :class:`SessionLoaded`. ``shown``: the detail on screen (a reload), whose
    session is not read again when its row did not change (None is returned)."""
    reload = shown is not None
    if reload:
        row = reader.get_session(shown.row.id)
        if (row.last_seq, row.updated_at, row.msg_count) == (shown.row.last_seq, shown.row.updated_at, shown.row.msg_count) \
                and (not shown.turns or shown.turns[-1].ended):
            return None  # another session changed; this one did not (an open turn is read again: its writer may be gone)
    row = reader.resolve_session(session_id)
    if row.last_seq > PARTIAL_OVER:
        # Big session: its messages and turn headers, and the rows of one turn only — on opening,
        # only the first rows of that turn (what the screen shows); the rest is read by the timeline
        # worker once they are painted. The interrupted check is the session list's: it reads just
        # the open turn, not the one on screen.
        check = summarize_sessions(reader, [row], None)[0].interrupt
        if reload and shown_turn is not None:
            detail = load_session(reader, row.id, turn=shown_turn)
        else:
            detail = load_session(reader, row.id, turn=wanted_turn or check.open_turn or -1, max_rows=FIRST_ROWS)
    else:
        detail = load_session(reader, row.id)
        check = check_session_interrupted(reader.dir, detail)
    initial = None
    if not reload and detail.turns:
        # Build the first turn's timeline here too: one hop less before the first paint.
        first = initial_turn(detail, check, wanted_turn)
        timeline = build_timeline(detail, first)
        initial = (first.number, timeline, build_rows(first, timeline))
    return SessionLoaded(detail, check, reload, {}, detail.unknown_events, initial)


def read_turn(reader: StoreReader, session_id: str, turn: Turn, held: SessionDetail | None):
    """``(turn, timeline, rows, detail)`` of one turn, reading its rows unless ``held`` has them."""
    detail = held if held is not None else load_session(reader, session_id, turn=turn.number)
    turn = detail.turns[turn.number - 1] if turn.number - 1 < len(detail.turns) else turn
    timeline = build_timeline(detail, turn)
    return turn, timeline, build_rows(turn, timeline), detail


class TurnDetails:
    """The loaded details that hold a turn's rows in full, by turn number (a few one-turn windows
    at most; a whole session's one detail for all its turns)."""

    def __init__(self) -> None:
        self._by_turn: dict[int, SessionDetail] = {}

    def clear(self) -> None:
        self._by_turn = {}

    def get(self, turn: Turn) -> SessionDetail | None:
        return self._by_turn.get(turn.number)

    def remember(self, detail: SessionDetail) -> None:
        if detail.truncated:
            return  # the first rows of a turn only: the timeline worker reads the whole turn
        if not detail.partial:
            self._by_turn = {t.number: detail for t in detail.turns}
            return
        start = detail.window[0] if detail.window else None
        turn = next((t for t in detail.turns if t.turn_id == start), None)
        if turn is None:
            return
        self._by_turn.pop(turn.number, None)
        self._by_turn[turn.number] = detail
        while len(self._by_turn) > TURN_CACHE:
            self._by_turn.pop(next(iter(self._by_turn)))
