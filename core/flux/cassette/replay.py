"""The replay tape and the hosts that serve from it: :class:`ReplayTape` answers a request with the
first unconsumed cell of the same op whose input hash (or redacted input hash) matches, latching
the first divergence; :class:`ReplayHost` never goes live and auto-allows every confirm gate;
:class:`TapeFirstHost` (resurrect, a fork's tail) goes live on a miss; :class:`FrozenHost`
(what-if) substitutes outputs."""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

from ..canonical import canonical_json, compact_json, sha256_hex
from ..store.events import OpRecorded

__all__ = ["TapeCell", "ReplayTape", "ReplayHost", "TapeFirstHost", "FrozenHost", "ServeRecord", "make_outcome",
           "truncated_message", "miss_message", "off_tape_message", "unconsumed_message"]


_OpOutcome: Any = None


def make_outcome(content: str, view: str | None = None, is_error: bool = False, denied: bool = False) -> Any:
    """An ``OpOutcome`` of the interpreter's type (imported on first use: the language package
    loads only when something is served)."""
    global _OpOutcome
    if _OpOutcome is None:
        from ..lang.interpreter import OpOutcome as _OpOutcome
    return _OpOutcome(content, view, is_error, denied)


def truncated_message(index: int, op: str) -> str:
    return (f"recorded cell {index} for op `{op}` was truncated at the capture cap — this run is not "
            f"hermetically replayable past it (re-record with a larger FLUX_CASSETTE_MAX_BYTES)")


def miss_message(op: str, h: str) -> str:
    return (f"op `{op}` (input hash {h[:16]}…) has no matching unconsumed recorded cell — the plan's "
            f"dataflow diverged from the recording")


# The halt's reason and the CLI's way out, apart so a front end with another way out (the app's F3)
# can say its own: ``off_tape_message`` is their join.
OFF_TAPE_HALT = "is off tape: no unconsumed recorded cell matches it, and this Frozen scope is OffTape::Halt"
OFF_TAPE_CLI_WAY_OUT = "rerun with --off-tape live to dispatch it for real"


def off_tape_message(op: str, h: str) -> str:
    return f"op `{op}` (input hash {h[:16]}…) {OFF_TAPE_HALT} — {OFF_TAPE_CLI_WAY_OUT}"


def unconsumed_message(left: int, total: int) -> str:
    return f"replay left {left} of {total} recorded cassette cells unconsumed — the run diverged silently"


class ServeRecord(NamedTuple):
    """One request the tape answered: what was asked, which cell (if any) served it. (A named
    tuple: a detailed replay keeps one per request, and a tuple is the cheapest to build — hot
    paths build it with ``_new_record``.)"""

    op: str
    input_hash: str
    index: int | None  # tape index of the cell that matched (served or refused), None on a miss
    status: str  # "served" | "truncated" | "miss"
    message: str | None = None


_new_record = tuple.__new__  # ``_new_record(ServeRecord, (op, input_hash, index, status, message))``


class TapeCell(NamedTuple):
    """What the tape reads of a cell (an ``op_recorded`` row), and nothing else: the matcher's keys
    and the recorded outcome. Replay builds these straight from the rows; every ``OpRecorded``
    has the same attributes, so the tape takes either."""

    op: str = ""
    input_hash: str = ""
    input_hash_redacted: str | None = None
    content: str = ""
    view: str | None = None
    is_error: bool = False
    denied: bool = False
    truncated: bool = False

    @classmethod
    def of(cls, rec: Any) -> "TapeCell":
        return cls(rec.op, rec.input_hash, rec.input_hash_redacted, rec.content, rec.view, rec.is_error, rec.denied,
                   rec.truncated)


class ReplayTape:
    """The cells of a recording and which of them a replay has consumed.

    Every request is logged (``log``, a :class:`ServeRecord` each) unless the tape is ``lean``;
    either way it counts what a caller asks of the log without it: ``requests``, ``unserved`` (the
    requests not served), ``last`` (the latest record) and ``truncated`` (tape indices that refused
    service). A ``lean`` tape (hermetic replay when no caller wants the per-request detail) also lets
    go of each cell once it is consumed and of each index entry once its cells are all consumed, so
    what it holds shrinks as the replay runs; it cannot be :meth:`copy`-ed."""

    def __init__(self, cells: Iterable[Any], *, lean: bool = False):
        self.cells: list[OpRecorded | TapeCell | None] = [c if type(c) is TapeCell else getattr(c, "rec", c)
                                                          for c in cells]
        self._consumed = [False] * len(self.cells)
        self.served: list[int] = []  # tape indices in the order they were served
        self.log: list[ServeRecord] = []
        self.lean = lean
        self.requests = 0
        self.unserved = 0
        self._last: ServeRecord | None = None
        self._last_hit: tuple[str, str, int] | None = None  # a lean tape's latest serve, its record unbuilt
        self.truncated: list[int] = []
        self.diverged: str | None = None  # the latched message
        # (op, hash) -> tape indices in order, for both keys of every cell.
        self._index: dict[tuple[str, str], list[int]] = {}
        self._cursor: dict[tuple[str, str], int] = {}
        index = self._index
        for i, cell in enumerate(self.cells):
            op, h, red = cell.op, cell.input_hash, cell.input_hash_redacted
            at = index.get((op, h))
            if at is None:
                index[(op, h)] = [i]
            else:
                at.append(i)
            if red is not None and red != h:
                index.setdefault((op, red), []).append(i)

    # -- counts ---------------------------------------------------------------------------------

    @property
    def total(self) -> int:
        return len(self.cells)

    @property
    def consumed(self) -> int:
        return sum(self._consumed)

    @property
    def unconsumed(self) -> list[int]:
        """Tape indices no request consumed, in order."""
        return [i for i, c in enumerate(self._consumed) if not c]

    def is_consumed(self, index: int) -> bool:
        return self._consumed[index]

    @property
    def last(self) -> ServeRecord | None:
        """The latest request's record (a lean tape builds a served one only when asked)."""
        hit = self._last_hit
        if hit is not None:
            return ServeRecord(hit[0], hit[1], hit[2], "served")
        return self._last

    # -- the matcher ----------------------------------------------------------------------------

    def find(self, op: str, h: str) -> int | None:
        """The first unconsumed cell with this op whose ``input_hash`` or ``input_hash_redacted``
        is ``h`` (an index lookup plus a cursor that skips consumed cells, not a rescan)."""
        key = (op, h)
        candidates = self._index.get(key)
        if not candidates:
            return None
        pos = self._cursor.get(key, 0)
        while pos < len(candidates) and self._consumed[candidates[pos]]:
            pos += 1
        if pos < len(candidates):
            self._cursor[key] = pos
            return candidates[pos]
        if self.lean:  # every cell under this key is consumed: the entry can answer nothing again
            del self._index[key]
            self._cursor.pop(key, None)
        else:
            self._cursor[key] = pos
        return None

    def record(self, rec: ServeRecord) -> None:
        """Log one request (counted even on a lean tape, which keeps no log)."""
        self.requests += 1
        self._last, self._last_hit = rec, None
        if rec.status != "served":
            self.unserved += 1
            if rec.status == "truncated" and rec.index is not None:
                self.truncated.append(rec.index)
        if not self.lean:
            self.log.append(rec)

    def serve(self, op: str, input_json: str | None, h: str | None = None) -> Any:
        """Answer one dispatch from tape: the first unconsumed cell of ``op`` whose ``input_hash`` or
        ``input_hash_redacted`` equals ``sha256(input_json)`` is consumed and its recorded outcome
        returned; a truncated match latches the truncation message (overwriting an earlier one)
        and errors; no match latches the divergence message (only if nothing is latched yet) and
        returns an ``is_error`` outcome ``"replay diverged: <msg>"``. A caller
        that has the input's hash already passes it as ``h`` (``input_json`` is then not read)."""
        if h is None:
            h = sha256_hex(input_json)
        i = self.find(op, h)
        if i is None:
            msg = miss_message(op, h)
            if self.diverged is None:
                self.diverged = msg
            self.record(ServeRecord(op, h, None, "miss", msg))
            return make_outcome(f"replay diverged: {msg}", is_error=True)
        refused = self.refuse_truncated(op, h, i)
        if refused is not None:
            return refused
        cell = self.take(op, h, i)
        return make_outcome(cell.content, view=cell.view, is_error=cell.is_error, denied=cell.denied)

    def refuse_truncated(self, op: str, h: str, i: int) -> Any:
        """A truncated cell refuses hermetic service: latch (overwriting) and return the error outcome."""
        if not self.cells[i].truncated:
            return None
        msg = truncated_message(i, op)
        self.diverged = msg  # overwrites: the truncation is the more specific story
        self.record(ServeRecord(op, h, i, "truncated", msg))
        return make_outcome(f"replay diverged: {msg}", is_error=True)

    def serve_cell(self, op: str, h: str) -> Any:
        """:meth:`serve` (with the hash) for a caller that reads only the answer's ``content``,
        ``is_error`` and ``denied``: a served cell is answered by the cell itself (no outcome
        built); a miss or a truncated match as :meth:`serve` answers it."""
        key = (op, h)
        candidates = self._index.get(key)
        if candidates is not None and self.lean:  # find + take, fused, for the usual hit
            consumed = self._consumed
            pos = self._cursor.get(key, 0)
            last = len(candidates) - 1
            while pos <= last and consumed[candidates[pos]]:
                pos += 1
            if pos <= last:
                i = candidates[pos]
                cell = self.cells[i]
                if not cell.truncated:
                    consumed[i] = True
                    self.served.append(i)
                    self.requests += 1
                    self._last, self._last_hit = None, (op, h, i)
                    self.cells[i] = None
                    if pos == last:  # (op, h) has no unconsumed cell left
                        del self._index[key]
                        self._cursor.pop(key, None)
                    else:
                        self._cursor[key] = pos
                    return cell
        i = self.find(op, h)
        if i is None or self.cells[i].truncated:
            return self.serve(op, None, h)  # finds the same (a find changes nothing a second find sees)
        return self.take(op, h, i)

    def hit(self, op: str, h: str) -> OpRecorded | TapeCell | None:
        """:meth:`serve_cell`'s plain case on a tape that keeps its log (not ``lean``): the cell
        :meth:`find` gives, when it is a recorded success (not truncated, not an error, not a
        denial) — consumed, served and logged exactly as :meth:`serve_cell` does (its
        :class:`ServeRecord` is ``log[-1]``). Anything else is None with nothing done (a later
        :meth:`serve_cell` answers it as always: a find leaves nothing a second find sees)."""
        key = (op, h)
        candidates = self._index.get(key)
        if candidates is None or self.lean:
            return None
        consumed = self._consumed
        pos = self._cursor.get(key, 0)
        n = len(candidates)
        while pos < n and consumed[candidates[pos]]:
            pos += 1
        if pos == n:
            return None
        i = candidates[pos]
        cell = self.cells[i]
        if cell.truncated or cell.is_error or cell.denied:
            return None
        self._cursor[key] = pos
        consumed[i] = True
        self.served.append(i)
        rec = _new_record(ServeRecord, (op, h, i, "served", None))
        self.requests += 1
        self._last = rec
        self._last_hit = None
        self.log.append(rec)
        return cell

    def take(self, op: str, h: str, i: int) -> OpRecorded | TapeCell:
        """Consume cell ``i`` (found by :meth:`find`) and log the serve."""
        self._consumed[i] = True
        self.served.append(i)
        cell = self.cells[i]
        if not self.lean:
            self.record(_new_record(ServeRecord, (op, h, i, "served", None)))
        else:  # record(), without building the record: counted, and `last` builds it when asked
            self.requests += 1
            self._last, self._last_hit = None, (op, h, i)
            self.cells[i] = None
            candidates = self._index.get((op, h))
            if candidates is not None and candidates[-1] == i:  # (op, h) has no unconsumed cell left
                del self._index[(op, h)]
                self._cursor.pop((op, h), None)
        return cell

    def copy(self) -> "ReplayTape":
        """A tape over the same cells with the same cells consumed (for a what-would-happen
        simulation that must not consume the real one); the log and latch are not copied."""
        if self.lean:
            raise ValueError("a lean tape lets go of consumed cells: it cannot be copied")
        t = ReplayTape.__new__(ReplayTape)
        t.cells, t._consumed, t._index = self.cells, list(self._consumed), self._index
        t._cursor = dict(self._cursor)
        t.served, t.log, t.diverged = list(self.served), [], None
        t.lean, t.requests, t.unserved, t._last, t._last_hit, t.truncated = False, 0, 0, None, None, []
        return t

    def latch(self, op: str, h: str, msg: str) -> None:
        """Log a miss and latch ``msg`` if nothing is latched yet."""
        if self.diverged is None:
            self.diverged = msg
        self.record(ServeRecord(op, h, None, "miss", msg))


class ReplayHost:
    """A hermetic op host: every dispatch is answered by the tape, none reaches a live executor."""

    auto_approve = True  # confirm gates pass without asking the approver
    hermetic = True  # nothing live: the interpreter reads time-bound decisions from the tape

    def __init__(self, tape: ReplayTape):
        self.tape = tape

    def dispatch(self, op: str, input: Any, input_json: str | None = None) -> Any:
        if input_json is None:
            input_json = canonical_json(input)
        return self.tape.serve(op, input_json)

    def approve(self, *args: Any, **kwargs: Any) -> bool:
        """Under a Replay scope every confirm gate auto-allows."""
        return True

    @property
    def diverged(self) -> str | None:
        return self.tape.diverged


class _TapeHost:
    """What the hosts that serve each request from tape at most once, and may send a miss live,
    share: the tape, the live host, the counts (``served`` hits, ``live_ops`` the ops that went
    live, in order), serving a found cell and going live."""

    def __init__(self, tape: ReplayTape, live: Any):
        self.tape = tape
        self.live = live
        self.served = 0
        self.live_ops: list[str] = []

    def _serve(self, op: str, h: str, i: int, substitute: Any = None) -> Any:
        """The outcome of cell ``i`` (what ``tape.find(op, h)`` gave), served once — or
        ``substitute(i, op)``'s in its place when that is not None; a truncated cell is refused
        (latched) instead."""
        refused = self.tape.refuse_truncated(op, h, i)
        if refused is not None:
            return refused
        cell = self.tape.take(op, h, i)
        self.served += 1
        if substitute is not None:
            out = substitute(i, op)
            if out is not None:
                return out
        return make_outcome(cell.content, view=cell.view, is_error=cell.is_error, denied=cell.denied)

    def go_live(self, op: str, h: str, input: Any, input_json: str) -> Any:
        """A miss the tape left to ``live``: logged, counted, dispatched."""
        self.tape.record(ServeRecord(op, h, None, "live"))
        self.live_ops.append(op)
        return self.live.dispatch(op, input, input_json)


def _input_hash(input: Any, input_json: str | None) -> tuple[str, str]:
    """A dispatch's input JSON (canonical, when the caller did not pass it) and its hash."""
    if input_json is None:
        input_json = canonical_json(input)
    return input_json, sha256_hex(input_json)


class TapeFirstHost(_TapeHost):
    """The Resume scope and the fork tail: a dispatch that matches an unconsumed
    cell is served from tape exactly once; a truncated match is refused and latched; a miss runs
    on ``live`` (an approver-gated live host) — or, with ``live=None``, is latched as a divergence."""

    auto_approve = False

    def dispatch(self, op: str, input: Any, input_json: str | None = None) -> Any:
        input_json, h = _input_hash(input, input_json)
        out = self.from_tape(op, h)
        return out if out is not None else self.go_live(op, h, input, input_json)

    # The two halves of a dispatch (this and go_live), for a caller that has the input's hash and
    # builds the input itself only when it goes live (resurrect's direct path, flux.timemachine.replay_direct).
    def from_tape(self, op: str, h: str) -> Any:
        """The outcome of a dispatch the tape answers — a hit (served once), a truncated match
        (refused and latched), or with ``live=None`` a miss (latched) — or None: it must go live."""
        i = self.tape.find(op, h)
        if i is not None:
            return self._serve(op, h, i)
        if self.live is None:
            msg = miss_message(op, h)
            self.tape.latch(op, h, msg)
            return make_outcome(f"replay diverged: {msg}", is_error=True)
        return None


def _sub_content(value: Any) -> str:
    """A substitution value: a JSON string is raw content, anything else its compact JSON."""
    return value if isinstance(value, str) else compact_json(value)


class FrozenHost(_TapeHost):
    """The what-if scope: every dispatch is answered from the whole
    session's cells, with substitutions by tape index (wins) or by op name; substituted outcomes
    are ``ok``. A miss under ``off_tape="halt"`` is latched and refused; under ``"live"`` it runs
    on ``live``. With ``authorize`` (policy mode) each dispatch is first checked:
    ``authorize(op, input) -> (allowed, reason)``; a denial returns a denied error outcome."""

    auto_approve = True

    def __init__(self, tape: ReplayTape, *, by_index: dict[int, Any] | None = None,
                 by_op: dict[str, Any] | None = None, off_tape: str = "halt", live: Any = None,
                 authorize: Any = None):
        if off_tape not in ("halt", "live"):
            raise ValueError("off_tape is halt or live")
        super().__init__(tape, live)
        self.by_index = dict(by_index or {})
        self.by_op = dict(by_op or {})
        self.off_tape = off_tape
        self.authorize = authorize
        self.substituted = 0
        self.denials = 0

    def _substitution(self, i: int, op: str) -> Any:
        """The substituted outcome for cell ``i`` of ``op`` (by index first), or None."""
        if i in self.by_index:
            value = self.by_index[i]
        elif op in self.by_op:
            value = self.by_op[op]
        else:
            return None
        self.substituted += 1
        return make_outcome(_sub_content(value))

    def dispatch(self, op: str, input: Any, input_json: str | None = None) -> Any:
        input_json, h = _input_hash(input, input_json)
        i = self.tape.find(op, h)
        if self.authorize is not None:
            allowed, reason = self.authorize(op, input)
            if not allowed:
                self.denials += 1
                if i is not None:
                    self.tape.take(op, h, i)
                return make_outcome(reason, is_error=True, denied=True)
        if i is not None:
            return self._serve(op, h, i, self._substitution)
        if self.off_tape == "live" and self.live is not None:
            return self.go_live(op, h, input, input_json)
        msg = off_tape_message(op, h)
        self.tape.latch(op, h, msg)
        return make_outcome(f"what-if halted: {msg}", is_error=True)
