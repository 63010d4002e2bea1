"""The streamed replay behind `flux replay` (``replay_session(detail=False)``): the session's rows
are pulled through the read's cursor while its plans run, so memory stays flat with its length. It
feeds the one replay loop (:func:`~flux.timemachine.serve.replay_executions`) from its own plan
source, and stands aside (returns None: the classic replay answers, with the very output it always
gave) for anything it cannot answer exactly as the classic replay would — docs/architecture.md,
"Replay", lists what."""

from __future__ import annotations

import json
from array import array
from collections import deque
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
from .replay_report import PlanLog, ReplayReport
from .serve import PlanServer, ScratchSink, never_asked, replay_executions

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

    def __init__(self, keyed: Any, check: Any, statements_before: Any) -> None:
        self.keyed = keyed  # text -> (key, plan): a damaged text raises
        self.check = check  # (key, plan) -> None: refuses a plan naming an op the catalog lacks (None: no catalog)
        self.statements_before = statements_before  # turn_id -> the statements its plans hold before its last
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
        self.last_key: Any = None  # acceptance order: the key of the plan taken last
        self.last_turns: set[Any] = set()  # acceptance order, once finished: the turns that accepted last_key
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

    def accepted_in_newest_turn(self, key: Any) -> bool:
        """Ledger order: whether a plan with ``key`` was accepted in the newest turn (its latest
        acceptance is; acceptances come in turn order). A key let go from the held plans stands aside."""
        held = self.plans.get(key)
        if held is not None:
            return held[1] is not None and held[1] == self._newest
        if key in self.accepted_keys:
            self._abandon("a plan let go: which turn accepted it is not known")
        return False

    def finish(self, rest: Any) -> None:
        """After the replay loop: the executions a divergence kept from running must still parse and
        check (the iteration does both), and the turns that accepted the last plan run's key are
        noted (acceptance order: where its tape ends asks). Then a missing key left without a
        stand-in while a redacted plan stayed unpaired is paired otherwise by the classic replay (it
        pairs over the whole session)."""
        last_key = self.last_key
        turns = {self.last_turn}
        for key, _plan, _run_key, _standin in rest:
            if key == last_key:
                turns.add(self.last_turn)
        self.last_turns = turns
        self._accept_pending()
        if self.unpaired and any(not o[1] for o in self.orphans.values()):
            self._abandon("a redacted plan accepted after the execution it stands in for")

    def interrupted_turn(self, flow_key: Any) -> tuple[int, int] | None:
        """The newest turn's number and the statements its plans hold before its last one, when it
        never ended and accepted a plan with this key (the last one run); else None."""
        if not self._turns or self.newest_ended:
            return None
        if self.ledgered:
            if not self.accepted_in_newest_turn(flow_key):
                return None
        elif self._newest not in self.last_turns:
            return None
        return len(self._turns), self.statements_before(self._newest)

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
        """Each execution as the replay loop takes it: ``(key, plan or None, the key to run it
        under or None, stand-in)``, its plan checked against the catalog."""
        queue = self.queue
        pump = self.pump
        keyed, check = self.keyed, self.check
        while not self.ledgered:  # acceptance order, until a ledger row turns up (before any plan ran)
            while len(queue) < 2 and not self.ledgered and pump():
                pass
            if self.ledgered:
                break
            if not queue:
                return
            self.started = True
            self.last_turn = self.queue_turns.popleft()
            key, draft = keyed(queue.popleft())
            self.last_key = key
            if check is not None:
                check(key, draft)
            yield key, draft, key, False
        plan_for = self.plan_for
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
            key = queue.popleft()
            draft, run_key, standin = plan_for(key)
            if check is not None and draft is not None:
                check(key, draft)
            yield key, draft, run_key, standin


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
    this session is not of the streamed shape (docs/architecture.md, "Replay"): then replay it the classic way.
    :class:`~flux.errors.SessionNotFound` is raised as the classic path raises it."""
    row = reader.resolve_session(session_ref)
    sid = row.id
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

    check = None if catalog is None else lambda key, draft: check_ops(sid, key, draft, catalog)
    source = _Source(keyed, check, lambda turn_id: _statements_before_last_plan(reader, sid, turn_id))
    events = source.events = scan_rows(reader, sid, False, source, tape, None, source.rows, seen, _PAUSE)
    try:
        report = _run(sid, source, tape, seen, catalog)
    except SessionNotFound:
        raise
    except Exception:  # noqa: BLE001 - any surprise: the classic replay answers (and raises) as always
        return None
    finally:
        events.close()
    reader.skipped_rows += seen["skipped"]
    return report


def _statements_before_last_plan(reader: StoreReader, sid: str, turn_id: Any) -> int:
    """How many statements a turn's accepted plans hold before its last one, counted as the classic
    replay counts them — from the turn's plan rows alone, read once (the stream kept no plan texts)."""
    sources = []
    for (payload,) in reader.query("SELECT payload FROM events WHERE stream = ? AND turn_id = ? AND kind = 'plan_attempted' "
                                   "ORDER BY global_seq", (sid, turn_id)):
        try:
            data = json.loads(payload)["data"]
        except (TypeError, ValueError, KeyError):
            continue
        if isinstance(data, dict) and data.get("outcome") == "accepted" and isinstance(data.get("plan_source"), str):
            sources.append(data["plan_source"])
    return statements_before_last(sources)


class _LettingGo:
    """How the streamed replay serves an execution: as :meth:`PlanServer.run
    <flux.timemachine.serve.PlanServer.run>` does, except that a plan that ran through with no halt
    latch open, and held no row before, keeps no row (nor the values they name). Only a
    fast-forward over that key's rows could read them, which takes the same key to halt later (so
    become the latch) and the next plan to walk its rows as far as a statement whose row was let go
    (:func:`_reads_let_go`: a failed call tried again). Then, if that key ran before (asked of a
    sieve of the keys run so far, kept from the first such walk on, and a "maybe" of the plan log),
    the stream stands aside."""

    __slots__ = ("serve", "run_through", "sink", "completed", "values", "plans", "halted", "executed")

    def __init__(self, server: PlanServer, sink: ScratchSink, plans: PlanLog):
        self.serve = server.run
        self.run_through = server.direct.run_through
        self.sink = sink
        self.completed = sink.completed_rows
        self.values = server.interp.values
        self.plans = plans
        self.halted: Any = None  # (plan, key, the sieve's "maybe" when it ran) of the plan that just halted
        self.executed: Any = None  # _KeySieve of the keys run so far, from the first walk that needs it

    def __call__(self, key: str, draft: Any, ledger: Any, run_key: str | None) -> Any:
        halted = self.halted
        if halted is not None:
            self.halted = None
            if ledger is not None and _reads_let_go(draft, halted[0], ledger) and self._ran_before(halted[1], halted[2]):
                raise _Abandon("the fast-forward may read a row that was let go")
        maybe_ran = self.executed.add(key) if self.executed is not None else None
        if ledger is None and run_key is not None and run_key not in self.completed:
            h = self.run_through(draft) if type(draft) is HostCall or type(draft) is HostPlan else NOT_DIRECT
            if h is NOT_DIRECT:  # (run_through keeps nothing of a plan that completes)
                h = self.serve(draft, None, flow_key=run_key)
                if h is None:
                    self.sink.let_go_of_rows(run_key, self.values)
        else:
            h = self.serve(draft, ledger, flow_key=run_key)
        if h is not None and run_key is not None:  # (a stand-in runs under its own key, whose rows are never let go)
            self.halted = (draft, run_key, maybe_ran)
        return h

    def _ran_before(self, key: str, seen: bool | None) -> bool:
        """Whether ``key`` (the last plan run, halted) ran through before; ``seen`` the sieve's
        "maybe" when it ran, None when there was no sieve yet (it is made now, of the plans run)."""
        plans = self.plans
        if seen is None:
            if self.executed is None:
                executed = self.executed = _KeySieve()
                for _i, p in zip(range(len(plans) - 1), plans):
                    executed.add(p.flow_key)
                seen = key in executed
                executed.add(key)
            else:
                seen = True
        return seen and plans.ran_before(key, len(plans) - 1)


def _run(sid: str, source: _Source, tape: StreamTape, seen: dict[str, Any], catalog: OpCatalog | None) -> Any:
    tape.pump = source.pump
    sink = ScratchSink(tape, None, None, keep=False)
    interp = Interpreter(catalog if catalog is not None else OpCatalog.permissive(), ReplayHost(tape), sink,
                         never_asked, run_id="replay")
    server = PlanServer(interp)
    report = ReplayReport(session=sid, plans=PlanLog(), cells_total=0, cells_consumed=0, diverged=None,
                          missing_sources=0, detail=False)
    replay_executions(source, server, sink, report, serve=_LettingGo(server, sink, report.plans))
    if source.abandoned or not seen["trace"] or tape.total == 0 or (source.accepted == 0 and not source.ledgered):
        raise _Abandon("nothing to replay: the classic replay says why")
    return report
