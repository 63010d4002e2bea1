"""Read models of one session: pure folds over its events in ``stream_seq`` order.

* turns — 1-based, outcome ``pending`` until ``turn_ended``, usage and call count;
* conversation — ``message`` appends, ``compacted`` replaces;
* accepted plans and cassette cells, each placed in its turn by position;
* statement rows with the cell-row fallback and the execution list.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, NamedTuple, Sequence

from ..store.events import (
    CallUsage, Compacted, Message, Observation, OpRecorded, PlanAttempted, PlanHalted, Run,
    StatementCompleted, TurnEnded, TurnStarted, UnknownEvent, UnknownRun, Usage,
)
from ..store.store import SessionRow, StoredEvent, StoreReader

__all__ = [
    "PlanAttempt", "Cell", "Turn", "StmtRow", "SessionDetail", "fold_turns", "TurnFold", "fold_conversation",
    "collect_cells", "stmt_rows", "cell_rows", "diff_rows", "execution_keys", "turn_index_of",
    "load_session", "MACHINERY_OPS",
]

# Outer agent-loop ops: they get step_* rows but are never cassetted, and viewers hide them.
MACHINERY_OPS = frozenset({
    "detect_intent", "explore", "approve_batch", "execute_batch", "present_results", "ai_segment",
    "observe", "evidence", "metrics", "grade",
})


class PlanAttempt(NamedTuple):
    """One ``plan_attempted`` row of a turn. A named tuple, not a frozen dataclass: a long
    session folds one per plan, and a tuple is built in a fifth of the time (replay's read)."""

    global_seq: int
    stream_seq: int
    ts: int
    turn_id: int | None
    step: int
    outcome: str
    error: str | None
    fingerprint: str | None
    phase: str | None
    plan_source: str | None
    plan_text: str | None

    @property
    def accepted(self) -> bool:
        """Accepted *and* carrying a source: what replay and the statement cursor work from."""
        return self.outcome == "accepted" and self.plan_source is not None


@dataclass(frozen=True, slots=True)
class Cell:
    """One cassette cell (an ``op_recorded`` row) with its place in the session."""

    index: int  # 0-based position among the session's cells (the tape index)
    global_seq: int
    stream_seq: int
    ts: int
    turn_number: int | None
    rec: OpRecorded

    @property
    def op(self) -> str:
        return self.rec.op

    @property
    def flagged_error(self) -> bool:
        return self.rec.is_error or self.rec.denied


@dataclass(slots=True)
class Turn:
    number: int  # 1-based, in turn_id order
    turn_id: int  # global_seq of turn_started
    stream_seq: int
    user_input: str
    model: str
    started_at_ms: int
    loop_binding: dict | None = None
    outcome: str = "pending"
    iterations: int = 0
    answer: str = ""
    ended_at_ms: int | None = None
    usage: Usage | None = None
    call_usage: Usage = field(default_factory=Usage)
    calls: int = 0
    call_models: list[tuple[str, Usage]] = field(default_factory=list)
    plan_attempts: list[PlanAttempt] = field(default_factory=list)

    @property
    def ended(self) -> bool:
        return self.ended_at_ms is not None

    @property
    def accepted_plans(self) -> list[PlanAttempt]:
        return [p for p in self.plan_attempts if p.accepted]

    @property
    def effective_usage(self) -> Usage:
        """What the turn spent: its per-call usage if any call reported, else ``turn_ended.usage``."""
        if self.calls:
            return self.call_usage
        return self.usage or Usage()


@dataclass(frozen=True, slots=True)
class StmtRow:
    """The diff unit: one statement boundary and the cells dispatched since the last."""

    node: int
    stmt: str
    halted: bool
    cells: tuple[tuple[str, str], ...]  # (op, content)
    plan: str = ""
    global_seq: int = 0


def fold_turns(events: Iterable[StoredEvent]) -> list[Turn]:
    """Turns with their plan attempts, ending and usage attached by ``turn_id``."""
    fold = TurnFold()
    for ev in events:
        fold.add(ev)
    return fold.turns_in_order()


_new_tuple = tuple.__new__  # PlanAttempt(*fields) without the named tuple's own __new__ (all it does)


class TurnFold:
    """:func:`fold_turns` one row at a time: :meth:`add` a decoded row, or hand
    :meth:`plan_attempted` a ``plan_attempted`` row's values straight (a reader that checks the
    fields itself builds no event for it); :meth:`turns_in_order` at the end."""

    __slots__ = ("turns", "by_id", "words")

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.by_id: dict[int, Turn] = {}
        self.words: dict[str, str] = {}  # one copy of each outcome/phase word, not one per attempt (long sessions)

    def add(self, ev: StoredEvent) -> None:
        b = ev.body
        if isinstance(b, TurnStarted):
            t = Turn(number=len(self.turns) + 1, turn_id=ev.global_seq, stream_seq=ev.stream_seq,
                     user_input=b.user_input, model=b.model, started_at_ms=ev.ts, loop_binding=b.loop_binding)
            self.turns.append(t)
            self.by_id[ev.global_seq] = t
            return
        if ev.turn_id is None:
            return
        if isinstance(b, PlanAttempted):
            self.plan_attempted(ev.global_seq, ev.stream_seq, ev.ts, ev.turn_id, b.step, b.outcome, b.error,
                                b.fingerprint, b.phase, b.plan_source, b.plan_text)
            return
        t = self.by_id.get(ev.turn_id)
        if t is None:
            return
        if isinstance(b, TurnEnded):
            t.outcome = b.outcome
            t.iterations = b.iterations
            t.answer = b.answer
            t.ended_at_ms = ev.ts
            t.usage = b.usage if isinstance(b.usage, Usage) else None  # a hostile null / number: none reported
            if t.loop_binding is None:
                t.loop_binding = b.loop_binding
        elif isinstance(b, CallUsage):
            t.calls += 1
            if isinstance(b.usage, Usage):  # a call whose usage is null (or not an object) reported none
                t.call_usage = t.call_usage + b.usage
                t.call_models.append((b.model, b.usage))

    def plan_attempted(self, global_seq: int, stream_seq: int, ts: int, turn_id: int | None, step: int,
                       outcome: str, error: str | None, fingerprint: str | None, phase: str | None,
                       plan_source: str | None, plan_text: str | None) -> None:
        """One decoded ``plan_attempted`` row (its ``turn_id`` column as every read coerces it)."""
        t = self.by_id.get(turn_id) if turn_id is not None else None
        if t is None:
            return
        words = self.words
        if type(outcome) is str and len(outcome) < 32:
            outcome = words.setdefault(outcome, outcome)
        if type(phase) is str and len(phase) < 32:
            phase = words.setdefault(phase, phase)
        t.plan_attempts.append(_new_tuple(PlanAttempt, (global_seq, stream_seq, ts, turn_id, step, outcome, error,
                                                        fingerprint, phase, plan_source, plan_text)))

    def turns_in_order(self) -> list[Turn]:
        turns = self.turns
        turns.sort(key=lambda t: t.turn_id)
        for i, t in enumerate(turns):
            t.number = i + 1
        return turns


def turn_index_of(turns: Sequence[Turn], global_seq: int) -> int | None:
    """Index of the turn a run row belongs to by position: ``turn_id <= gs < next.turn_id``."""
    ids = [t.turn_id for t in turns]
    i = bisect_right(ids, global_seq) - 1
    return i if i >= 0 else None


def fold_conversation(events: Iterable[StoredEvent]) -> list[Message]:
    """``message`` appends, ``compacted`` replaces everything so far."""
    out: list[Message] = []
    for ev in events:
        if isinstance(ev.body, Message):
            out.append(ev.body)
        elif isinstance(ev.body, Compacted):
            out = ev.body.message_list()
    return out


def collect_cells(events: Iterable[StoredEvent], turns: Sequence[Turn] = (), start_index: int = 0) -> list[Cell]:
    """The session's cells in stream order; ``index`` is the tape position (offset by
    ``start_index`` when only a later window of the session was read)."""
    cells: list[Cell] = []
    ids = [t.turn_id for t in turns]
    for ev in events:
        if isinstance(ev.body, Run) and isinstance(ev.body.event, OpRecorded):
            ti = bisect_right(ids, ev.global_seq) - 1 if ids else -1
            cells.append(Cell(start_index + len(cells), ev.global_seq, ev.stream_seq, ev.ts,
                              turns[ti].number if ti >= 0 else None, ev.body.event))
    return cells


def stmt_rows(run_events: Iterable[StoredEvent]) -> list[StmtRow]:
    rows: list[StmtRow] = []
    acc: list[tuple[str, str]] = []
    for ev in run_events:
        if not isinstance(ev.body, Run):
            continue
        r = ev.body.event
        if isinstance(r, OpRecorded):
            acc.append((r.op, r.content))
        elif isinstance(r, StatementCompleted):
            rows.append(StmtRow(r.node, r.stmt, False, tuple(acc), r.plan, ev.global_seq))
            acc = []
        elif isinstance(r, PlanHalted):
            rows.append(StmtRow(r.node, r.stmt, True, tuple(acc), r.plan, ev.global_seq))
            acc = []
    return rows


def cell_rows(cells: Sequence[Cell]) -> list[StmtRow]:
    """Fallback rows for statement-less (natively dispatched) runs: one per cell."""
    return [StmtRow(c.index, f"call:{c.op}:{c.rec.input_hash[:16]}", False, ((c.op, c.rec.content),), "", c.global_seq)
            for c in cells]


def diff_rows(a_events: Sequence[StoredEvent], a_cells: Sequence[Cell],
              b_events: Sequence[StoredEvent], b_cells: Sequence[Cell]) -> tuple[list[StmtRow], list[StmtRow]]:
    """The two row lists ``run_diff`` aligns: statement rows, or cell rows for both if either has none."""
    ra, rb = stmt_rows(a_events), stmt_rows(b_events)
    if not ra or not rb:
        return cell_rows(a_cells), cell_rows(b_cells)
    return ra, rb


def execution_keys(run_events: Iterable[StoredEvent]) -> list[str]:
    """One flow_key per execution, from the ledger rows; empty if there are none."""
    keys: list[str] = []
    cur: str | None = None
    last_node = -1
    for ev in run_events:
        if not isinstance(ev.body, Run):
            continue
        r = ev.body.event
        if isinstance(r, (StatementCompleted, PlanHalted)):
            if r.plan != cur or r.node <= last_node:
                keys.append(r.plan)
                cur = r.plan
            last_node = r.node
    return keys


@dataclass
class SessionDetail:
    """Everything one session's screens and ``flux show`` need, folded once."""

    row: SessionRow
    events: list[StoredEvent]
    turns: list[Turn]
    conversation: list[Message]
    cells: list[Cell]
    skipped_rows: int = 0
    # Set when only one turn's rows were loaded in full (``load_session(..., turn=N)``): the
    # global_seq window [start, end) whose events are all present; outside it only the turn
    # headers (turn_started/turn_ended/call_usage/plan_attempted of that turn) and messages are.
    window: tuple[int, int | None] | None = None
    # Set when ``load_session(..., max_rows=N)`` read only the first rows of the turn: ``window``
    # then ends where reading stopped, and the turn's later rows are still to be read.
    truncated: bool = False

    @property
    def partial(self) -> bool:
        return self.window is not None

    @property
    def id(self) -> str:
        return self.row.id

    @property
    def run_events(self) -> list[StoredEvent]:
        return [e for e in self.events if isinstance(e.body, Run)]

    def turn_window(self, turn: Turn) -> tuple[int, int | None]:
        """The ``global_seq`` window ``[start, end)`` of a turn's run rows."""
        i = turn.number - 1
        end = self.turns[i + 1].turn_id if i + 1 < len(self.turns) else None
        return turn.turn_id, end

    @cached_property
    def _event_seqs(self) -> list[int]:
        return [e.global_seq for e in self.events]  # ascending: stream order is append order

    @cached_property
    def _cell_seqs(self) -> list[int]:
        return [c.global_seq for c in self.cells]

    def _slice(self, seqs: list[int], turn: Turn) -> slice:
        start, end = self.turn_window(turn)
        return slice(bisect_left(seqs, start), len(seqs) if end is None else bisect_left(seqs, end))

    def turn_events(self, turn: Turn) -> list[StoredEvent]:
        """Every loaded row of the turn's window — a bisect, not a scan of the session."""
        return self.events[self._slice(self._event_seqs, turn)]

    def turn_run_trace(self, turn: Turn) -> list[StoredEvent]:
        return [e for e in self.turn_events(turn) if isinstance(e.body, Run)]

    def turn_cells(self, turn: Turn) -> list[Cell]:
        return self.cells[self._slice(self._cell_seqs, turn)]

    def observations(self, turn: Turn) -> list[tuple[StoredEvent, Observation]]:
        return [(e, e.body) for e in self.turn_events(turn) if e.turn_id == turn.turn_id and isinstance(e.body, Observation)]

    @cached_property
    def _message_bounds(self) -> list[int]:
        """Per turn, the global_seq where its messages start: its ``turn_started``, or the user
        message written right before it (flux opens a turn with the user message)."""
        pos = {e.global_seq: i for i, e in enumerate(self.events)}
        bounds = []
        for t in self.turns:
            i = pos.get(t.turn_id)
            prev = self.events[i - 1] if i else None
            if prev is not None and isinstance(prev.body, Message) and prev.body.role == "user":
                bounds.append(prev.global_seq)
            else:
                bounds.append(t.turn_id)
        return bounds

    def turn_messages(self, turn: Turn) -> list[StoredEvent]:
        """The ``message``/``compacted`` rows of one turn, by position: from the user message that
        opened it up to the one that opens the next turn. Rows before the first turn belong to it."""
        b = self._message_bounds
        i = turn.number - 1
        start = b[i] if i > 0 else -1
        end = b[i + 1] if i + 1 < len(b) else None
        return [e for e in self.events if isinstance(e.body, (Message, Compacted))
                and e.global_seq >= start and (end is None or e.global_seq < end)]

    @property
    def unknown_events(self) -> list[StoredEvent]:
        return [e for e in self.events
                if isinstance(e.body, UnknownEvent) or (isinstance(e.body, Run) and isinstance(e.body.event, UnknownRun))]

    def accepted_plans(self) -> list[PlanAttempt]:
        return [p for t in self.turns for p in t.accepted_plans]


# What hermetic replay and run diff read: turns, plan attempts and the run trace.
TRACE_KINDS = ("turn_started", "turn_ended", "plan_attempted", "run")
_HEADER_KINDS = ("session_started", "model_changed", "message", "compacted", "turn_started", "turn_ended", "call_usage")


def _cells_before(reader: StoreReader, stream: str, global_seq: int, stream_seq: int | None) -> int:
    """How many cells (``op_recorded`` rows) the stream holds before ``global_seq`` — a row at
    ``stream_seq`` of it. Every run row before it is read either way; the question is how. A stream
    written without other streams in between (its rows' global_seqs nearly contiguous) is read as
    one range of the table; an interleaved one through the ``(stream, kind, stream_seq)`` index.
    Never the ``kind`` index alone, which walks every stream's run rows before ``global_seq``."""
    cond = "json_extract(payload, '$.data.event') = 'op_recorded'"
    first = reader.query("SELECT global_seq FROM events WHERE stream = ? ORDER BY stream_seq LIMIT 1", (stream,))
    if stream_seq is not None and first and type(first[0][0]) is int and global_seq - first[0][0] <= 2 * stream_seq + 64:
        sql = f"SELECT COUNT(*) FROM events WHERE global_seq >= ? AND global_seq < ? AND +stream = ? AND +kind = 'run' AND {cond}"
        return reader.query_json(sql, (first[0][0], global_seq, stream))[0][0]
    return reader.query_json(f"SELECT COUNT(*) FROM events WHERE stream = ? AND kind = 'run' AND +global_seq < ? AND {cond}",
                        (stream, global_seq))[0][0]


def load_session(reader: StoreReader, ref: str | None, *, turn: int | None = None,
                 kinds: Sequence[str] | None = None, max_rows: int | None = None) -> SessionDetail:
    """Resolve ``s_<n>``/``last`` and fold the session.

    ``turn=None`` reads every event. ``turn=N`` (1-based; ``-1`` for the newest) reads what a
    viewer needs first: the session's messages and turn headers, and every row of that one turn
    only — so a 100,000-event session opens without decoding all of it. Within that turn the
    ``step_started``/``step_succeeded`` rows are left out (nothing a viewer shows needs them; they
    are half the rows of a busy turn); ``step_failed`` rows stay.

    ``kinds`` (whole-session loads only) restricts the rows read, for consumers that need only some
    (replay reads turns, plan attempts and run rows, never observations or messages).

    ``max_rows`` (with ``turn``) reads only the turn's first ``max_rows`` rows — what a viewer paints
    first; the detail is then ``truncated`` and its ``window`` ends where reading stopped. The turn
    headers (turn list, usage, cost) and the tape positions of its cells are exact all the same.
    """
    row = reader.resolve_session(ref)
    before = reader.skipped_rows
    truncated = False
    if turn is None:
        events = reader.events(row.id, kinds=kinds)
        window = None
    else:
        header = reader.events(row.id, kinds=_HEADER_KINDS, sparse=True)
        starts = [e.global_seq for e in header if isinstance(e.body, TurnStarted)]
        if not starts:
            events, window = header, None
        else:
            i = len(starts) - 1 if turn == -1 else max(0, min(turn, len(starts)) - 1)
            window = (starts[i], starts[i + 1] if i + 1 < len(starts) else None)
            inside = None
            if max_rows is not None:
                # The turn's first max_rows rows by stream position (an index range), and the
                # global_seq of the first row left out: where the truncated window ends.
                first_ss = next(e.stream_seq for e in header if e.global_seq == window[0])
                cut_ss = first_ss + max_rows
                cut = reader.query("SELECT global_seq FROM events WHERE stream = ? AND stream_seq >= ? ORDER BY stream_seq LIMIT 1",
                                   (row.id, cut_ss))
                if cut and type(cut[0][0]) is int and (window[1] is None or cut[0][0] < window[1]):
                    window, truncated = (window[0], cut[0][0]), True
                    inside = [e for e in reader.events(row.id, min_stream_seq=first_ss, max_stream_seq=cut_ss, lean=True)
                              if window[0] <= e.global_seq < window[1]]
            if inside is None:
                inside = reader.events(row.id, min_global_seq=window[0], max_global_seq=window[1], lean=True)
            seen = {e.global_seq for e in inside}
            # Turn-scoped rows outside the window (a writer that appended them late); a truncated
            # read leaves them to the full one.
            scoped = [] if truncated else [e for e in reader.turn_events(row.id, window[0]) if e.global_seq not in seen]
            events = sorted([e for e in header if e.global_seq not in seen] + inside + scoped, key=lambda e: e.stream_seq)
    skipped = reader.skipped_rows - before
    turns = fold_turns(events)
    offset = 0
    if window is not None:  # cells before the window still count for tape positions
        start = next((e for e in events if e.global_seq == window[0]), None)
        offset = _cells_before(reader, row.id, window[0], start.stream_seq if start is not None else None)
    return SessionDetail(row=row, events=events, turns=turns, conversation=fold_conversation(events),
                         cells=collect_cells(events, turns, offset), skipped_rows=skipped, window=window,
                         truncated=truncated)
