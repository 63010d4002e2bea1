"""The replay tape and the hermetic op host that serves from it (spec §4.4, matcher).

``ReplayTape(cells)`` holds a session's cassette cells (``flux.model.session.Cell`` or bare
``OpRecorded``) in stream order. :meth:`ReplayTape.serve` takes the **first unconsumed** cell with
the same op whose ``input_hash`` or ``input_hash_redacted`` equals ``sha256(input_json)``:

* a truncated match latches the truncation message (overwriting an earlier one) and errors;
* a match is consumed and its recorded outcome returned;
* no match latches the divergence message (only if nothing is latched yet) and returns an
  ``is_error`` outcome ``"replay diverged: <msg>"``.

``ReplayHost(tape)`` is the op host: it never calls a live executor, and confirm gates under it
auto-allow (``auto_approve`` / :meth:`ReplayHost.approve`), so the approver is never asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ..canonical import canonical_json, sha256_hex
from ..store.events import OpRecorded

__all__ = ["ReplayTape", "ReplayHost", "ServeRecord", "make_outcome", "truncated_message", "miss_message",
           "unconsumed_message"]


def make_outcome(content: str, view: str | None = None, is_error: bool = False, denied: bool = False) -> Any:
    """An ``OpOutcome`` of the interpreter's type."""
    from ..lang.interpreter import OpOutcome

    return OpOutcome(content=content, view=view, is_error=is_error, denied=denied)


def truncated_message(index: int, op: str) -> str:
    return (f"recorded cell {index} for op `{op}` was truncated at the capture cap — this run is not "
            f"hermetically replayable past it (re-record with a larger FLUX_CASSETTE_MAX_BYTES)")


def miss_message(op: str, h: str) -> str:
    return (f"op `{op}` (input hash {h[:16]}…) has no matching unconsumed recorded cell — the plan's "
            f"dataflow diverged from the recording")


def unconsumed_message(left: int, total: int) -> str:
    return f"replay left {left} of {total} recorded cassette cells unconsumed — the run diverged silently"


@dataclass(frozen=True, slots=True)
class ServeRecord:
    """One request the tape answered: what was asked, which cell (if any) served it."""

    op: str
    input_hash: str
    index: int | None  # tape index of the cell that matched (served or refused), None on a miss
    status: str  # "served" | "truncated" | "miss"
    message: str | None = None


class ReplayTape:
    """The cells of a recording and which of them a replay has consumed."""

    def __init__(self, cells: Iterable[Any]):
        self.cells: list[OpRecorded] = [getattr(c, "rec", c) for c in cells]
        self._consumed = [False] * len(self.cells)
        self.served: list[int] = []  # tape indices in the order they were served
        self.log: list[ServeRecord] = []
        self.diverged: str | None = None  # the latched message
        # (op, hash) -> tape indices in order, for both keys of every cell.
        self._index: dict[tuple[str, str], list[int]] = {}
        self._cursor: dict[tuple[str, str], int] = {}
        for i, cell in enumerate(self.cells):
            self._index.setdefault((cell.op, cell.input_hash), []).append(i)
            red = cell.input_hash_redacted
            if red is not None and red != cell.input_hash:
                self._index.setdefault((cell.op, red), []).append(i)

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

    # -- the matcher ----------------------------------------------------------------------------

    def find(self, op: str, h: str) -> int | None:
        """The first unconsumed cell with this op whose ``input_hash`` or ``input_hash_redacted``
        is ``h`` (an index lookup plus a cursor that skips consumed cells, not a rescan)."""
        candidates = self._index.get((op, h))
        if not candidates:
            return None
        pos = self._cursor.get((op, h), 0)
        while pos < len(candidates) and self._consumed[candidates[pos]]:
            pos += 1
        self._cursor[(op, h)] = pos
        return candidates[pos] if pos < len(candidates) else None

    def serve(self, op: str, input_json: str) -> Any:
        """Answer one dispatch from tape (see the module doc). Returns an ``OpOutcome``."""
        h = sha256_hex(input_json)
        i = self.find(op, h)
        if i is None:
            msg = miss_message(op, h)
            if self.diverged is None:
                self.diverged = msg
            self.log.append(ServeRecord(op, h, None, "miss", msg))
            return make_outcome(f"replay diverged: {msg}", is_error=True)
        cell = self.cells[i]
        if cell.truncated:
            msg = truncated_message(i, op)
            self.diverged = msg  # overwrites: the truncation is the more specific story
            self.log.append(ServeRecord(op, h, i, "truncated", msg))
            return make_outcome(f"replay diverged: {msg}", is_error=True)
        self._consumed[i] = True
        self.served.append(i)
        self.log.append(ServeRecord(op, h, i, "served"))
        return make_outcome(cell.content, view=cell.view, is_error=cell.is_error, denied=cell.denied)


class ReplayHost:
    """A hermetic op host: every dispatch is answered by the tape, none reaches a live executor."""

    auto_approve = True  # confirm gates pass without asking the approver (§4.4)

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
