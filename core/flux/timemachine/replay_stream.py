"""Hermetic replay in memory that stays flat with the session's length.

:func:`~flux.timemachine.replay.replay_session` with ``detail=False`` (what `flux replay` asks
for) first tries :func:`replay_streamed`: the session's rows are pulled through the read's cursor
*while* the replay runs, so a long session is never in memory at once:

* cassette cells go straight into a growing lean tape (:class:`StreamTape`) that lets each go once
  it is served; a plan runs once the rows after it (its cells) are scanned, and a request the
  scanned cells cannot answer reads on until one can, or to the end (a miss);
* the executions come as the classic replay orders them (:class:`_Source`): the acceptances
  themselves (no statement row in the session: flux's batch path), or folded from the
  ``statement_completed`` / ``plan_halted`` rows as they are read (a plan run resumably: flux's own
  turns), with each accepted plan keyed when read and the newest few held, missing sources and
  redacted stand-ins paired as the classic replay pairs them;
* a plan that ran through with no halt latch open, holding no row before, leaves no statement row
  and no value behind: only a fast-forward over that key's rows could read them, which takes the
  key to halt later (so become the latch) and the next plan to walk as far as a row let go (a
  failed call tried again after it once succeeded) — and then the stream stands aside (below);
* the report keeps one compact record per execution; the tape's end of an interrupted turn is
  told as the classic replay tells it.

It *stands aside* (returns None, and the caller replays the classic way: read everything, then
replay) for anything it cannot answer exactly: a turn or plan row out of order, statement rows
after plans already ran in acceptance order, a plan that does not parse or names an op the catalog
lacks, a run with no trace or no cells, an execution whose plan was let go from the held ones, a
plan accepted after an execution found none with its key, a stand-in pairing the whole session
would make otherwise, the let-go row above, a non-UTF-8 row, any error. Nothing is written and
nothing printed before it returns, so the classic replay then gives the very output and error it
always gave; differential tests check both agree.
"""

from __future__ import annotations

import json
from array import array
from collections import deque
from dataclasses import replace
from typing import Any

from ..cassette.redactor import DEFAULT_MARKER
from ..cassette.replay import ReplayHost, ReplayTape
from ..errors import SessionNotFound
from ..lang.catalog import OpCatalog
from ..lang.hashes import stmt_hash16
from ..lang.interpreter import Interpreter, ledger_walk
from ..store.events import PlanAttempted, TurnEnded, TurnStarted
from ..store.store import StoreReader
from .engine import ExecutionFold
from .plans import check_ops, parse_cached
from .replay_direct import NOT_DIRECT, HostCall, HostPlan, host_call, host_plan, statements_before_last, walk
from .replay_input import scan_rows
from .replay_report import PlanLog, ReplayedPlan, ReplayReport, TapeEnd, settle
from .serve import PlanServer, ScratchSink, never_asked

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


class _KeySieve:
    """A fixed-size set of flow keys that may answer "maybe" for a key it never held (a Bloom
    filter of one hash: 1 MB, a bit per slot, placed by the key's ``hash``, which a ``str``
    computes once) but never "no" for one it holds. The stream asks it only where "maybe" means
    "look closer" or "stand aside" (exact, just slower), so a long session costs no memory per key."""

    __slots__ = ("bits",)

    def __init__(self) -> None:
        self.bits = bytearray(1 << 20)

    def add(self, key: Any) -> bool:
        """Add ``key``; whether it may have been added before."""
        n = hash(key) & 0x7FFFFF
        bits = self.bits
        i = n >> 3
        b = bits[i]
        m = 1 << (n & 7)
        bits[i] = b | m
        return b & m != 0

    def __contains__(self, key: Any) -> bool:
        n = hash(key) & 0x7FFFFF
        return self.bits[n >> 3] & (1 << (n & 7)) != 0


_HELD_PLANS = 256  # distinct accepted plans a ledger-ordered stream keeps at hand (the newest)
# Turn and plan rows the read scans per pull (``scan_rows``'s ``pause``): each pull then folds that many
# plans' rows at once instead of one generator resume, fold and keying call per plan. The stream
# reads that far ahead of the plan it runs — more of the session than the one row it needs, which
# only ever brings its answers closer to the classic replay's (which reads the whole session first:
# every "not read yet" the stream stands aside for is one it sees sooner); the rows ahead are a
# few dozen, so memory stays flat.
_PAUSE = 16


class _Source:
    """The executions, in the order the classic replay runs them, pulled from the read as it goes.

    It is the read's turn fold (``scan_rows`` hands it each turn and plan row, as to a
    :class:`~flux.model.session.TurnFold`) and its ledger sink (``scan_rows`` appends each
    ``statement_completed`` / ``plan_halted`` row's tuple), and keeps only what replay runs:

    * **acceptance order** (no ledger row in the session: flux's batch path, every generated
      store): the accepted texts, queued, with one text of lookahead so the cells recorded after a
      plan are on the tape before it runs;
    * **ledger order** (a plan run resumably — flux's own recordings): the first ledger row
      switches to it (before any plan ran; after, the session mixes both and the stream stands
      aside). The executions are folded from the rows as they are scanned (``executions_from_rows``
      one row at a time) and queued by key; each accepted plan is parsed and keyed when scanned and
      held among the newest :data:`_HELD_PLANS` distinct keys. An execution whose plan was let go
      stands aside; one whose key no plan accepted so far has is a missing source (or replays a
      redacted stand-in, paired as the classic replay pairs them) — and if a plan with that key is
      accepted later, or the pairing turns out otherwise by the end, the stream stands aside.

    A key's membership in what was accepted or executed so far is asked of a :class:`_KeySieve`
    (no memory per key): a "maybe" where "no" was expected stands aside."""

    def __init__(self, keyed: Any) -> None:
        self.keyed = keyed  # text -> (key, plan): a damaged text raises
        self.events: Any = None  # the read (a generator yielding after each row it folds)
        self.queue: deque[Any] = deque()  # acceptance order: texts; ledger order: execution keys
        self.done = False
        self.abandoned = False  # set before an error leaves pump (in case a caller swallowed it)
        self.accepted = 0
        self.ledgered = False
        self.started = False  # a plan ran in acceptance order
        self.rows: list[Any] = []  # ledger rows the read appended, not folded yet
        self.pending: list[Any] = []  # accepted texts (ledger order) read, not keyed yet
        self._turns: set[int] = set()
        self._newest: int | None = None  # turn_id (global_seq) of the newest turn
        self.newest_ended = False  # the newest turn has a turn_ended (as TurnFold sets ``ended_at_ms``)
        self.queue_turns: deque[Any] = deque()  # acceptance order: each queued text's turn
        self.last_turn: Any = None  # acceptance order: the turn of the text taken last
        # ledger order
        self._executions = ExecutionFold()
        append = self.queue.append
        self._begun = lambda plan, _global_seq: append(plan)  # an execution begins: queue its key
        self.plans: dict[Any, Any] = {}  # the newest accepted plans by key (insertion order = age)
        self.accepted_keys: Any = None  # a _KeySieve, from the first ledger row on
        self.ran_orphans: set[Any] = set()  # redacted plans' keys that ran (so are no stand-ins)
        self.standins: dict[Any, Any] = {}  # missing execution key -> its redacted stand-in, or None
        self.orphans: dict[Any, list[Any]] = {}  # redacted plan's key -> [plan, paired]
        self.unpaired = False  # a missing key found no stand-in (a later redacted plan would be its)

    # -- the turn fold (TurnFold's protocol) --------------------------------------------------

    def add(self, ev: Any) -> None:
        """A decoded turn row, or a plan row the read decoded in full (TurnFold.add)."""
        b = ev.body
        if isinstance(b, TurnStarted):
            if self._newest is not None and ev.global_seq <= self._newest:
                self._abandon("turns out of order")  # the fold sorts them: another order
            self._newest = ev.global_seq
            self._turns.add(ev.global_seq)
            self.newest_ended = False
        elif isinstance(b, TurnEnded):
            if ev.turn_id is not None and ev.turn_id == self._newest:
                self.newest_ended = ev.ts is not None
        elif ev.turn_id is not None and isinstance(b, PlanAttempted):
            self.plan_attempted(ev.global_seq, ev.stream_seq, ev.ts, ev.turn_id, b.step, b.outcome, b.error,
                                b.fingerprint, b.phase, b.plan_source, b.plan_text)

    def plan_attempted(self, _gs: int, _sseq: int, _ts: int, turn_id: int | None, _step: Any, outcome: Any,
                       _error: Any, _fingerprint: Any, _phase: Any, plan_source: Any, _plan_text: Any) -> None:
        """A plan row's values (TurnFold.plan_attempted): an accepted text of the newest turn is taken."""
        if turn_id is None or turn_id not in self._turns:
            return  # the fold drops it too (no such turn started before it)
        if turn_id != self._newest:
            self._abandon("a plan row of an earlier turn")  # it would run before the newer turns' plans
        if outcome == "accepted" and plan_source is not None:
            self.accepted += 1
            if self.ledgered:
                self.pending.append((plan_source, turn_id))
            else:
                self.queue.append(plan_source)
                self.queue_turns.append(turn_id)

    # -- the ledger rows (engine.ExecutionFold, fed a batch at a time) ---------------------------

    def _fold_rows(self) -> None:
        """Fold the ledger rows the read appended to ``rows`` since the last call (each pull), in order."""
        rows = self.rows
        if not self.ledgered:
            if self.started:
                self._abandon("ledger rows after plans ran in acceptance order")
            self.ledgered = True
            self.accepted_keys = _KeySieve()
            self.pending.extend(zip(self.queue, self.queue_turns))
            self.queue.clear()
            self.queue_turns.clear()
        self._executions.feed(rows, self._begun)
        rows.clear()

    def _accept_pending(self) -> None:
        """Key the accepted texts read since the last execution was taken, in order (a batch: keying
        between reads is slower than keying a few after them). Before any execution is taken,
        and at the end."""
        texts = self.pending
        self.pending = []
        for text, turn in texts:
            self._accept(text, turn)

    def _accept(self, text: Any, turn: Any) -> None:
        """An accepted plan in ledger order: keyed, held among the newest (with its turn)."""
        key, draft = self.keyed(text)
        if key in self.standins:
            self._abandon("a plan accepted after an execution found none with its key")
        plans = self.plans
        plans.pop(key, None)
        plans[key] = (draft, turn)
        if len(plans) > _HELD_PLANS:
            del plans[next(iter(plans))]
        self.accepted_keys.add(key)
        if DEFAULT_MARKER in text and key not in self.orphans and key not in self.ran_orphans:
            self.orphans[key] = [draft, False]  # a redacted plan: a stand-in, unless its key runs

    def plan_for(self, key: Any) -> tuple[Any, Any, bool]:
        """An execution's plan in ledger order: ``(plan or None, the key to run it under, stand-in)``."""
        orphan = self.orphans.get(key)
        if orphan is not None:  # a redacted plan that runs: it is no stand-in
            if orphan[1]:
                self._abandon("a redacted plan paired as a stand-in runs later")
            del self.orphans[key]
            self.ran_orphans.add(key)
        held = self.plans.get(key)
        if held is not None:
            return held[0], key, False
        if key in self.accepted_keys:
            self._abandon("an execution of a plan let go (or the sieve's maybe)")
        if key not in self.standins:
            standin = None
            for orphan in self.orphans.values():
                if not orphan[1]:
                    if self.unpaired:  # the classic replay gives it to the earlier key left without one
                        self._abandon("a redacted plan accepted after the execution it stands in for")
                    orphan[1] = True
                    standin = orphan[0]
                    break
            if standin is None:
                self.unpaired = True
            self.standins[key] = standin
        standin = self.standins[key]
        return standin, None, standin is not None

    @property
    def turns(self) -> int:
        """How many turns the fold has (the newest turn's number)."""
        return len(self._turns)

    @property
    def newest(self) -> Any:
        return self._newest

    def accepted_in_newest_turn(self, key: Any) -> bool:
        """Ledger order: whether a plan with ``key`` was accepted in the newest turn (its latest
        acceptance is; acceptances come in turn order). A key let go from the held plans stands aside."""
        held = self.plans.get(key)
        if held is not None:
            return held[1] is not None and held[1] == self._newest
        if key in self.accepted_keys:
            self._abandon("a plan let go: which turn accepted it is not known")
        return False

    def settled(self) -> None:
        """At the end: a missing key left without a stand-in while a redacted plan stayed unpaired
        is paired otherwise by the classic replay (it pairs over the whole session)."""
        self._accept_pending()
        if self.unpaired and any(not o[1] for o in self.orphans.values()):
            self._abandon("a redacted plan accepted after the execution it stands in for")

    # -- pulling -------------------------------------------------------------------------------

    def pump(self) -> bool:
        """Read on to the next turn or plan row (scanning the run rows before it); False at the end."""
        if self.done:
            return False
        try:
            more = next(self.events, _END) is not _END
            if self.rows:
                self._fold_rows()
        except BaseException:
            self.abandoned = True
            raise
        if not more:
            self.done = True
        return more

    def _abandon(self, why: str) -> None:
        self.abandoned = True
        raise _Abandon(why)

    def __iter__(self):
        """``(ledgered, item)`` per execution: a plan text (acceptance order) or a key (ledger order)."""
        queue = self.queue
        pump = self.pump
        while not self.ledgered:  # acceptance order, until a ledger row turns up (before any plan ran)
            while len(queue) < 2 and not self.ledgered and pump():
                pass
            if self.ledgered:
                break
            if not queue:
                return
            self.started = True
            self.last_turn = self.queue_turns.popleft()
            yield False, queue.popleft()
        while True:
            while not queue and pump():
                pass
            if self.pending:
                try:
                    self._accept_pending()
                except BaseException:
                    self.abandoned = True
                    raise
            if not queue:
                return
            yield True, queue.popleft()


_END = object()


def _body(draft: Any) -> Any:
    return draft.draft().body if type(draft) is HostCall or type(draft) is HostPlan else draft.body


def _stmt_hashes(draft: Any) -> list[str] | None:
    """A direct plan's statement hashes (none is a checkpoint or an await), without a parse; else None."""
    if type(draft) is HostCall:
        return [draft.stmt]
    if type(draft) is HostPlan:
        return draft.stmt_hashes()
    return None


def _reads_let_go(plan: Any, halted: Any, ledger: Any) -> bool:
    mine = _stmt_hashes(plan)
    theirs = _stmt_hashes(halted) if mine is not None else None
    if theirs is not None:  # _walks_further on the statements' hashes (no parse)
        i = walk(mine, ledger)
        if i == len(mine) or ledger.entry(i) is not None:
            return False
        return i < len(theirs) and theirs[i] == mine[i]
    return _walks_further(plan, halted, ledger)


def _walks_further(plan: Any, halted: Any, ledger: Any) -> bool:
    """Would ``plan``'s fast-forward over the latch of ``halted`` (a plan that halted after an
    earlier run of it may have let its rows go) read further in the classic replay? The stream's
    latch rows are a suffix of the classic replay's (rows are let go only of a run that began with
    none), so their walks part only where the stream finds no row for a statement that the
    classic replay may have one for: the same statement of ``halted``'s plan (the same key, the same
    statements)."""
    body = _body(plan)
    _done, i = ledger_walk(body, ledger)
    if i == len(body) or ledger.entry(i) is not None:  # the walk ends, or stops at a row of another statement
        return False
    theirs = _body(halted)
    return i < len(theirs) and not isinstance(theirs[i], Interpreter.PASS_THROUGH) \
        and stmt_hash16(theirs[i]) == stmt_hash16(body[i])


def replay_streamed(reader: StoreReader, session_ref: str | None, catalog: OpCatalog | None) -> Any:
    """``replay_session(reader, session_ref, catalog=catalog, detail=False)``'s report, or None when
    this session is not of the streamed shape (see the module doc): then replay it the classic way.
    :class:`~flux.errors.SessionNotFound` is raised as the classic path raises it."""
    row = reader.resolve_session(session_ref)
    tape = StreamTape()
    seen: dict[str, Any] = {"trace": False, "skipped": 0}
    parsed: dict[str, Any] = {}

    def keyed(text: Any) -> tuple[str, Any]:
        # (direct_plan, inline, asking first the one a text of more than one line is likelier to be:
        # no text is both, so the order changes only how soon the other declines)
        if type(text) is str and text.count("\n", 7) > 1:
            hc = host_plan(text)
            if hc is None:
                hc = host_call(text)
        else:
            hc = host_call(text)
            if hc is None:
                hc = host_plan(text)
        if hc is not None:
            return hc.flow_key, hc
        draft, key = parse_cached(text, parsed)  # a damaged plan raises: the classic replay names it
        return key, draft

    source = _Source(keyed)
    events = source.events = scan_rows(reader, row.id, False, source, tape, None, source.rows, seen, _PAUSE)
    try:
        report = _run(row.id, source, tape, seen, catalog)
    except SessionNotFound:
        raise
    except Exception:  # noqa: BLE001 - any surprise: the classic replay answers (and raises) as always
        return None
    finally:
        events.close()
    reader.skipped_rows += seen["skipped"]
    if report.tape_end is not None:
        _number_tape_end(reader, row.id, source.newest, report)
    return report


def _number_tape_end(reader: StoreReader, sid: str, turn_id: Any, report: Any) -> None:
    """The tape end's statement counted over its turn's plans, as the classic replay counts it —
    from the turn's plan rows alone, read once (the stream kept no plan texts)."""
    sources = []
    for (payload,) in reader.query("SELECT payload FROM events WHERE stream = ? AND turn_id = ? AND kind = 'plan_attempted' "
                                   "ORDER BY global_seq", (sid, turn_id)):
        try:
            data = json.loads(payload)["data"]
        except (TypeError, ValueError, KeyError):
            continue
        if isinstance(data, dict) and data.get("outcome") == "accepted" and isinstance(data.get("plan_source"), str):
            sources.append(data["plan_source"])
    end = replace(report.tape_end, position=statements_before_last(sources) + report.tape_end.node)
    report.tape_end = end
    report.plans[-1] = ReplayedPlan(end.flow_key, end.message(), "tape_end", end.node)


def _run(sid: str, source: _Source, tape: StreamTape, seen: dict[str, Any], catalog: OpCatalog | None) -> Any:
    tape.pump = source.pump
    sink = ScratchSink(tape, None, None, keep=False)
    interp = Interpreter(catalog if catalog is not None else OpCatalog.permissive(), ReplayHost(tape), sink,
                         never_asked, run_id="replay")
    server = PlanServer(interp)
    serve = server.run
    run_through = server.direct.run_through
    report = ReplayReport(session=sid, plans=PlanLog(), cells_total=0, cells_consumed=0, diverged=None,
                          missing_sources=0, detail=False)
    keyed = source.keyed
    completed = sink.completed_rows
    ran_host = report.plans.ran_host
    # A plan that ran through with no latch open, and held no row before, keeps no row (nor the
    # values they name): only a fast-forward over that key's rows could read them, which takes the
    # same key to halt later (so become the latch) and the next plan to walk its rows as far as a
    # statement whose row was let go (_reads_let_go: a failed call tried again). Then, if that key
    # ran before (asked of a sieve of the keys run so far, kept from the first such walk on, and
    # a "maybe" of the plan log), the stream stands aside.
    halted: Any = None  # (plan, key) of the plan that just halted
    executed: Any = None  # _KeySieve of the keys run so far, from the first walk that needs it
    plan_for = source.plan_for

    def ran_before(key: str, seen: bool | None) -> bool:
        """Whether ``key`` (the last plan run, halted) ran through before; ``seen`` the sieve's
        "maybe" when it ran, None when there was no sieve yet (it is made now, of the plans run)."""
        nonlocal executed
        plans = report.plans
        if seen is None:
            if executed is None:
                executed = _KeySieve()
                for _i, p in zip(range(len(plans) - 1), plans):
                    executed.add(p.flow_key)
                seen = key in executed
                executed.add(key)
            else:
                seen = True
        return seen and plans.ran_before(key, len(plans) - 1)

    for ledgered, item in source:
        if ledgered:
            key = item
            draft, known, standin = plan_for(key)
            if standin:
                report.redacted_standins += 1
            if draft is None:
                report.missing_sources += 1
                continue
        else:
            key, draft = keyed(item)
            known = key
        item = None
        if catalog is not None:
            check_ops(sid, key, draft, catalog)
        ledger = sink.ledger()
        if halted is not None:
            if ledger is not None and _reads_let_go(draft, halted[0], ledger) and ran_before(halted[1], halted[2]):
                raise _Abandon("the fast-forward may read a row that was let go")
            halted = None
        maybe_ran = executed.add(key) if executed is not None else None
        sink.execution = len(report.plans)
        if ledger is None and known is not None and known not in completed:
            direct = type(draft) is HostCall or type(draft) is HostPlan
            h = run_through(draft) if direct else NOT_DIRECT  # nothing of it kept once it completes
            if h is NOT_DIRECT:
                h = serve(draft, None, flow_key=known)
                if h is None:
                    sink.let_go_of_rows(known, interp.values)
            if h is None:
                (ran_host if direct else report.plans.ran)(key)
        else:
            h = serve(draft, ledger, flow_key=known)
            if h is None:
                report.plans.ran(key)
        if h is not None:
            if known is not None:  # (a stand-in runs under its own key, whose rows are never let go)
                halted = (draft, known, maybe_ran)
            report.plans.append(ReplayedPlan(key, h.error, h.kind, h.node))
        draft = None
        if tape.diverged is not None:
            break
    # (the tape's end, below: the last plan run, and which turns accepted a plan with its key)
    last_key = report.plans[-1].flow_key if len(report.plans) else None
    last_turn = source.last_turn  # acceptance order: the turn of the last plan run
    key_turns: set[Any] = set()  # acceptance order: the turns of the acceptances not reached with that key
    for ledgered, item in source:  # after a divergence: the executions not reached must still parse and check
        if ledgered:
            key = item
            draft = plan_for(key)[0]
        else:
            key, draft = keyed(item)
            if key == last_key:
                key_turns.add(source.last_turn)
        if catalog is not None and draft is not None:
            check_ops(sid, key, draft, catalog)
    source.settled()
    if source.abandoned or not seen["trace"] or tape.total == 0 or (source.accepted == 0 and not source.ledgered):
        raise _Abandon("nothing to replay: the classic replay says why")
    end = _tape_end(source, tape, report, last_key is not None, last_turn, key_turns)
    settle(report, tape)
    if end is not None:
        report.tape_end = end
        report.diverged = None
        report.plans[-1] = ReplayedPlan(end.flow_key, end.message(), "tape_end", end.node)
    return report


def _tape_end(source: _Source, tape: StreamTape, report: ReplayReport, ran: bool, last_turn: Any,
              key_turns: set[Any]) -> TapeEnd | None:
    """Where an interrupted recording stops, as the classic replay finds it: the one failed request
    is the last one, a miss after every recorded cell was served, in a plan of the newest turn
    (accepted in it), which never ended. ``ran``: some plan ran; ``last_turn`` and ``key_turns``
    (acceptance order): the turn of the last plan run, and the turns of the acceptances not
    reached with its key."""
    last = tape.last
    if tape.diverged is None or last is None or not ran or not source.turns or last.status != "miss" \
            or tape.unserved != 1 or tape.consumed != tape.total:
        return None
    plan = report.plans[-1]
    if source.newest_ended or plan.halted is None or plan.node is None:
        return None
    newest = source.newest
    if source.ledgered:
        in_newest = source.accepted_in_newest_turn(plan.flow_key)
    else:
        in_newest = (last_turn is not None and last_turn == newest) or newest in key_turns
    return TapeEnd(source.turns, plan.flow_key, plan.node, last.op) if in_newest else None
