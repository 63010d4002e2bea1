"""Recording a turn: the recorder that appends redacted rows with the store's durability-by-effect
commits, the live host that asks the approver and dispatches to the toolbox, and a tee of the
recorder for the time machine's writers."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from ..canonical import scrub_text
from ..cassette.record import CassetteWriteError, scrub_outcome
from ..cassette.redactor import Redactor
from ..lang.interpreter import OpOutcome, completed_work
from ..store.events import Message, OpRecorded, Run, decode_run
from ..store.payload_encode import encode_op_recorded, encode_run_step
from ..store.store import StoreWriter
from .approver import ApprovalRequest, Approver
from .cancel import raise_if_cancelled
from .ops import Toolbox
from .observations import RedactedJson, message_text

__all__ = ["RERUNNABLE_EFFECTS", "Recorder", "LiveHost", "EventTee"]


RERUNNABLE_EFFECTS = frozenset({"pure", "read"})  # safe to run again: their rows may be group-committed


class Recorder:
    """Appends the turn's events to the store, redacting every free-text field first.

    Durability by effect (``docs/store-format.md``): rows are buffered and written in one
    transaction before every dispatch of an op with an effect (write / delete / network / exec, or
    undeclared) — so its plan and ``step_started`` are on disk while it runs; its cell is then owed
    and rides with the next commit, which comes before the next dispatch of any op, an approval
    prompt, a sleep, a model call or the turn's end (one commit per effectful op). Rows of
    ``pure``/``read`` ops (re-runnable) may sit in the buffer (at most 512 rows or 50 ms) and are
    lost if the process dies first.

    ``durable(op)`` says whether ``op`` has an effect (or an unknown one). Its cell is written right
    away, or with ``defer_cells`` (a run that never has two branches at once) *owed* to the next
    commit, which :meth:`settle` forces. A kill meanwhile finds that op in flight without its cell —
    the one op resurrect runs at least once, as it would had the kill come while its cell was written."""

    def __init__(self, writer: StoreWriter, sid: str, redactor: Redactor, cap: int,
                 durable: Callable[[str], bool] = lambda op: True, *, defer_cells: bool = False):
        self.w, self.sid, self.redactor, self.cap = writer, sid, redactor, cap
        self.durable = durable
        self.defer_cells = defer_cells
        self.appended = 0
        self.cells: list[OpRecorded] = []
        self.owed: list[OpRecorded] = []  # effectful ops' cells not yet committed (defer_cells)

    def before_dispatch(self, op: str) -> None:
        raise_if_cancelled()  # after a Ctrl-C nothing further runs
        if self.owed:
            self.settle()
        elif self.durable(op):
            self.w.flush()

    def settle(self) -> None:
        """Commit the owed effectful cells (and everything buffered with them) now; a failure is
        the loud failure of the first one's op (:class:`CassetteWriteError`)."""
        owed, self.owed = self.owed, []
        if not owed:
            return
        try:
            self.w.flush()
        except Exception as e:
            lost = {id(c) for c in owed}
            self.cells = [c for c in self.cells if id(c) not in lost]
            raise CassetteWriteError(owed[0].op, e) from e

    def sleep(self, seconds: float) -> None:
        self.settle()
        time.sleep(seconds)

    def confirming(self, confirm: Callable[[str, str], bool]) -> Callable[[str, str], bool]:
        def ask(message: str, risk: str) -> bool:
            self.settle()
            return confirm(message, risk)
        return ask

    def emit(self, ev: dict) -> None:
        """The interpreter's and the cassette's sink: one ``run`` row per event."""
        kind = ev.get("event")
        if kind in ("step_failed", "plan_halted") and isinstance(ev.get("error"), str):
            ev = dict(ev)
            err = self.redactor.redact(scrub_text(ev["error"]))
            data = err.encode("utf-8")
            if len(data) > self.cap:
                err = data[:self.cap].decode("utf-8", "ignore")
            ev["error"] = err
        text = encode_run_step(ev)  # the per-call step rows, straight to their payload text
        if text is not None:
            self.w.append_text(self.sid, "run", text)
            self.appended += 1
            return
        body = decode_run(ev)
        if isinstance(body, OpRecorded):
            self.emit_cell(body)
            return
        self.w.append(self.sid, Run(event=body))
        self.appended += 1

    def emit_cell(self, cell: OpRecorded, text: Optional[str] = None) -> None:
        """The cassette's sink for a cell (the ``op_recorded`` row of one dispatch); ``text``: its
        payload, when the caller wrote it (``encode_op_recorded(cell)``)."""
        self.w.append_text(self.sid, "run", encode_op_recorded(cell) if text is None else text)
        self.appended += 1
        self.cells.append(cell)
        if self.durable(cell.op):
            if self.defer_cells:
                self.owed.append(cell)  # committed before anything else dispatches, waits or calls the model
            else:
                self.w.flush()  # acknowledged: on disk before the run goes on

    def append(self, body: Any, *, turn_id: Optional[int] = None, ts: Optional[int] = None) -> Any:
        self.appended += 1
        return self.w.append(self.sid, body, turn_id=turn_id, ts=ts)

    def append_text(self, kind: str, payload: str, turn_id: Optional[int] = None) -> None:
        """:meth:`append` of a payload already written as text (``StoreWriter.append_text``)."""
        self.appended += 1
        self.w.append_text(self.sid, kind, payload, turn_id=turn_id)

    def message(self, role: str, content: list[dict], ts: Optional[int] = None,
                writer: Optional[RedactedJson] = None) -> None:
        """Append a conversation message, redacted (``writer``: a :class:`RedactedJson` shared by a
        batch of messages; the text is :func:`message_text`'s, the same as the Message body's)."""
        text = message_text(role, content, writer or RedactedJson(self.redactor))
        if text is None:
            self.append(Message(role=role, content=self.redactor.redact_value(content)), ts=ts)
            return
        self.appended += 1
        self.w.append_message_text(self.sid, text, ts=ts)


class LiveHost:
    """Dispatches to the toolbox after asking the approver; a refusal is a denied outcome."""

    def __init__(self, toolbox: Toolbox, approver: Approver, timer: Callable[[], int],
                 before_dispatch: Callable[[str], None] = lambda op: None, *, concurrent: bool = True,
                 keep_log: bool = True):
        self.toolbox, self.approver, self.timer = toolbox, approver, timer
        self.before_dispatch = before_dispatch
        self.concurrent = concurrent
        self.last: Optional[OpOutcome] = None
        self.last_exec_us = 0
        self.dispatches = 0
        # op, input, status, started_us, exec_us per dispatch — what a flow turn's observations are
        # written from; an adaptive turn writes them as it goes and keeps none (keep_log=False)
        self.keep_log = keep_log
        self.log: list[tuple[str, Any, str, int, int]] = []
        # ("tool_start" | "tool_end", fields) for a display, as each dispatch starts and ends (a flow turn's)
        self.notify: Optional[Callable[..., None]] = None

    def dispatch(self, op: str, input: Any, input_json: str) -> OpOutcome:
        return self.begin(op, input, input_json)()

    def begin(self, op: str, input: Any, input_json: str) -> Callable[[], OpOutcome]:
        """Start a dispatch on the interpreter's thread (durability flush, approval — one prompt
        at a time) and return the tool call, which may run in a worker thread while other
        `parallel`/`race` branches go on (see flux.lang.scheduler)."""
        raise_if_cancelled()
        self.before_dispatch(op)
        self.dispatches += 1
        started = self.timer()
        o = self.toolbox.get(op)
        refusal: Optional[OpOutcome] = None
        if o is None:
            refusal = OpOutcome(content=f"unknown op `{op}`", is_error=True)
        else:
            d = self.approver.decide(ApprovalRequest(op=op, effect=o.effect, input=input))
            if not d.allowed:
                refusal = OpOutcome(content=d.reason or f"denied: `{op}`", is_error=True, denied=True)
        notify = self.notify
        if notify is not None:
            notify("tool_start", name=op, input=input)

        def work() -> OpOutcome:
            out = refusal if refusal is not None else \
                scrub_outcome(o.call(input if isinstance(input, dict) else {}))
            exec_us = max(0, self.timer() - started)
            self.last_exec_us = exec_us
            status = "denied" if out.denied else ("error" if out.is_error else "ok")
            if self.keep_log:
                self.log.append((op, input, status, started, exec_us))
            self.last = out
            if notify is not None:
                notify("tool_end", name=op, status=status, content=out.content if isinstance(out.content, str) else "")
            return out
        return work if self.concurrent else completed_work(work())


class EventTee:
    """A recorder's sink that also keeps every event it passes on (``events``): the time machine's
    writers fold a halt latch or a resumed plan from them without reading the store back."""

    def __init__(self, recorder: Any, events: Optional[list[dict]] = None):
        self.recorder = recorder
        self.events: list[dict] = [] if events is None else events

    def emit(self, ev: dict) -> None:
        self.events.append(ev)
        self.recorder.emit(ev)
