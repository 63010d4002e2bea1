"""Hermetic replay in memory that stays flat with the session's length (issue 10 item 2).

:func:`~flux.timemachine.replay.replay_session` with ``detail=False`` (what `flux replay` asks
for) first tries :func:`replay_streamed`: the session's rows are pulled through the read's cursor
*while* the replay runs, so a long session is never in memory at once:

* cassette cells go straight into a growing lean tape (:class:`StreamTape`) that lets each go once
  it is served; a plan runs once the rows after it (its cells) are scanned, and a request the
  scanned cells cannot answer reads on until one can, or to the end (a miss);
* accepted ``plan_source`` texts wait in a queue of one or two and are let go once they ran;
* a host plan that ran to completion with no halt latch open leaves no statement row and no value
  behind: nothing can read them, unless that same plan later halts (so becomes the latch) and the
  plan after it begins with the same statement (its fast-forward would read the row) — and then
  the stream is abandoned (below);
* the report keeps one compact record per execution.

It covers the common shape — the executions are the acceptances (no ``statement_completed`` /
``plan_halted`` row recorded, flux's batch path and every generated store), turns in order — and
*abandons the stream* for anything else, returning None so the caller replays the classic way
(read everything, then replay): a recorded ledger row, a turn or plan row out of order, a plan
that does not parse or names an op the catalog lacks, a run with no trace or no cells, a halted
one-statement plan followed by a plan that begins with the same statement (a failed call tried
again: its fast-forward may read a row let go), a divergence that may be the tape's end, a
non-UTF-8 row, any error. Nothing is written and nothing printed before it returns, so the classic replay then
gives the very output and error it always gave; a differential test checks both agree.
"""

from __future__ import annotations

from array import array
from collections import deque
from typing import Any

from ..cassette.replay import ReplayHost, ReplayTape
from ..errors import SessionNotFound
from ..lang.catalog import OpCatalog
from ..lang.hashes import stmt_hash16
from ..lang.interpreter import Interpreter
from ..store.events import PlanAttempted, TurnStarted
from ..store.store import StoreReader
from .replay import (
    PlanLog, ReplayedPlan, ReplayReport, _check_ops, _never_asked, _parse_cached, _run_plan, _ScratchSink, _settle,
)
from .replay_direct import DirectRunner, HostCall, host_call
from .replay_input import _scan

__all__ = ["replay_streamed", "StreamTape", "ServedLog"]


class _Abandon(Exception):
    """The stream cannot give the classic replay's answer: replay the classic way."""


class StreamTape(ReplayTape):
    """A lean :class:`~flux.cassette.replay.ReplayTape` that is filled while it serves: the read
    appends each cell as it scans it, and a lookup the cells scanned so far cannot answer reads on
    (``pump``) until one can or the session ends — so it answers exactly as the whole tape would
    (the first unconsumed cell with the key), holding only the cells not yet served."""

    def __init__(self) -> None:
        super().__init__((), lean=True)
        self.pump: Any = None  # () -> bool: scan one more row; False at the end of the session
        self._consumed: Any = bytearray()  # (a byte per cell, not a list slot)
        self.served: Any = ServedLog()  # (8 bytes per served cell, not a list slot and an int)

    def append(self, cell: Any) -> None:
        i = len(self.cells)
        self.cells.append(cell)
        self._consumed.append(0)
        self._index.setdefault((cell.op, cell.input_hash), []).append(i)
        red = cell.input_hash_redacted
        if red is not None and red != cell.input_hash:
            self._index.setdefault((cell.op, red), []).append(i)

    def find(self, op: str, h: str) -> int | None:
        i = ReplayTape.find(self, op, h)
        pump = self.pump
        while i is None and pump is not None:
            more = pump()  # (the last row's cells are appended by the call that finds the end)
            i = ReplayTape.find(self, op, h)
            if not more:
                break
        return i


class ServedLog(array):
    """Tape indices in the order they were served (``ReplayTape.served``), 8 bytes each; equal to
    the list of the same indices (what the classic replay's report holds)."""

    def __new__(cls, indices: Any = ()) -> "ServedLog":
        return super().__new__(cls, "q", indices)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, array)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ServedLog({list(self)!r})"


class _NoLedger:
    """The read's ledger sink: a recorded ``statement_completed`` / ``plan_halted`` orders the
    executions by the ledger (§3.7) — not this path's shape."""

    hit = False

    def append(self, _row: Any) -> None:
        self.hit = True
        raise _Abandon("recorded ledger rows")


class _Plans:
    """The accepted plan texts in execution (= acceptance) order. It is the read's turn fold
    (``_scan`` hands it each turn and plan row, as to a :class:`~flux.model.session.TurnFold`) and
    keeps only what :class:`~flux.model.session.TurnFold` would attach that replay runs — the
    accepted texts, queued — with one text of lookahead so the cells recorded after a plan are on
    the tape before it runs."""

    def __init__(self) -> None:
        self.events: Any = None  # the read (a generator yielding after each row it folds)
        self.queue: deque[Any] = deque()
        self.done = False
        self.abandoned = False  # set before _Abandon leaves pump (in case a caller swallowed it)
        self.accepted = 0
        self._turns: set[int] = set()
        self._newest: int | None = None  # turn_id (global_seq) of the newest turn

    def add(self, ev: Any) -> None:
        """A decoded turn row, or a plan row the read decoded in full (TurnFold.add)."""
        b = ev.body
        if isinstance(b, TurnStarted):
            if self._newest is not None and ev.global_seq <= self._newest:
                self._abandon("turns out of order")  # the fold sorts them: another order
            self._newest = ev.global_seq
            self._turns.add(ev.global_seq)
        elif ev.turn_id is not None and isinstance(b, PlanAttempted):
            self.plan_attempted(ev.global_seq, ev.stream_seq, ev.ts, ev.turn_id, b.step, b.outcome, b.error,
                                b.fingerprint, b.phase, b.plan_source, b.plan_text)

    def plan_attempted(self, _gs: int, _sseq: int, _ts: int, turn_id: int | None, _step: Any, outcome: Any,
                       _error: Any, _fingerprint: Any, _phase: Any, plan_source: Any, _plan_text: Any) -> None:
        """A plan row's values (TurnFold.plan_attempted): an accepted text of the newest turn is queued."""
        if turn_id is None or turn_id not in self._turns:
            return  # the fold drops it too (no such turn started before it)
        if turn_id != self._newest:
            self._abandon("a plan row of an earlier turn")  # it would run before the newer turns' plans
        if outcome == "accepted" and plan_source is not None:
            self.accepted += 1
            self.queue.append(plan_source)

    def pump(self) -> bool:
        """Read on to the next turn or plan row (scanning the run rows before it); False at the end."""
        if self.done:
            return False
        if next(self.events, _END) is _END:
            self.done = True
            return False
        return True

    def _abandon(self, why: str) -> None:
        self.abandoned = True
        raise _Abandon(why)

    def __iter__(self):
        queue = self.queue
        while True:
            while len(queue) < 2 and self.pump():
                pass
            if not queue:
                return
            yield queue.popleft()


_END = object()


def _first_stmt(draft: Any) -> str | None:
    """The statement hash of a plan's first statement, or None when it is a ``checkpoint`` /
    ``await`` (a fast-forward passes over those: it never compares them with a latch row)."""
    if type(draft) is HostCall:
        return draft.stmt
    body = draft.body
    if not body or isinstance(body[0], Interpreter.PASS_THROUGH):
        return None
    return stmt_hash16(body[0])


def replay_streamed(reader: StoreReader, session_ref: str | None, catalog: OpCatalog | None) -> Any:
    """``replay_session(reader, session_ref, catalog=catalog, detail=False)``'s report, or None when
    this session is not of the streamed shape (see the module doc): then replay it the classic way.
    :class:`~flux.errors.SessionNotFound` is raised as the classic path raises it."""
    row = reader.resolve_session(session_ref)
    tape = StreamTape()
    seen: dict[str, Any] = {"trace": False, "skipped": 0}
    ledger = _NoLedger()
    plans = _Plans()
    events = plans.events = _scan(reader, row.id, False, plans, tape, None, ledger, seen)
    try:
        report = _run(row.id, plans, tape, seen, catalog)
        if ledger.hit:
            return None
    except SessionNotFound:
        raise
    except Exception:  # noqa: BLE001 - any surprise: the classic replay answers (and raises) as always
        return None
    finally:
        events.close()
    reader.skipped_rows += seen["skipped"]
    return report


def _run(sid: str, plans: _Plans, tape: StreamTape, seen: dict[str, Any], catalog: OpCatalog | None) -> Any:
    tape.pump = plans.pump
    sink = _ScratchSink(tape, None, None, keep=False)
    interp = Interpreter(catalog if catalog is not None else OpCatalog.permissive(), ReplayHost(tape), sink,
                         _never_asked, run_id="replay")
    runner = DirectRunner(interp)
    run_direct, run_through = runner.run, runner.run_through
    report = ReplayReport(session=sid, plans=PlanLog(), cells_total=0, cells_consumed=0, diverged=None,
                          missing_sources=0, detail=False)
    # A host plan that ran through with no latch open keeps no row (let_go_of_direct_row): only a
    # fast-forward over its rows could read them, which takes that plan (the one-statement key) to
    # halt and the next plan to begin with the same statement — its first row is then the latch's
    # entry for node 0. That (a failed call tried again) is when the stream stands aside.
    halted_stmt: str | None = None  # the one statement of the one-statement plan that just halted
    parsed: dict[str, Any] = {}

    def keyed(text: Any) -> tuple[str, Any]:
        hc = host_call(text)
        if hc is not None:
            draft: Any = hc
            key = hc.flow_key
        else:
            draft, key = _parse_cached(text, parsed)  # a damaged plan raises: the classic replay names it
        if catalog is not None:
            _check_ops(sid, key, draft, catalog)
        return key, draft

    completed = sink.completed_rows
    ran_host = report.plans.ran_host
    for text in plans:
        key, draft = keyed(text)
        text = None
        ledger = sink.ledger()
        if halted_stmt is not None:
            if _first_stmt(draft) == halted_stmt:
                raise _Abandon("a halted one-statement plan's rows may be read, and some were let go")
            halted_stmt = None
        sink.execution = len(report.plans)
        if type(draft) is HostCall and ledger is None and key not in completed:
            h = run_through(draft)  # its row and value let go as it completes (let_go_of_direct_row)
            if h is None:
                ran_host(key)
        else:
            h = _run_plan(run_direct, interp, draft, ledger, key)
            if h is None:
                report.plans.ran(key)
        if h is not None:
            if type(draft) is HostCall:
                halted_stmt = draft.stmt
            elif len(draft.body) == 1:
                halted_stmt = _first_stmt(draft)
            report.plans.append(ReplayedPlan(key, h.error, h.kind, h.node))
        draft = None
        if tape.diverged is not None:
            break
    for text in plans:  # after a divergence: the plans not reached must still parse (and be known ops)
        keyed(text)
    if plans.abandoned or not seen["trace"] or tape.total == 0 or plans.accepted == 0:
        raise _Abandon("nothing to replay: the classic replay says why")
    last = tape.last
    if tape.diverged is not None and last is not None and last.status == "miss" and tape.unserved == 1 \
            and tape.consumed == tape.total:
        raise _Abandon("perhaps the tape's end (an interrupted turn)")
    return _settle(report, tape)
