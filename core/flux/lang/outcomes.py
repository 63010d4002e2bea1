"""What a Flux-Lang run talks to and returns: the op host and event sink it is given, the outcome of
one dispatch, the run's result or halt, and the control-flow signals the interpreter and its
constructs raise to stop a plan or return from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Protocol

from flux.errors import FluxError

__all__ = ["OpOutcome", "OpHost", "EventSink", "ListSink", "deny_all", "ResumeError", "PlanHalt", "RunResult",
           "Halt", "Denied", "OpFailed", "ConfirmDenied", "AssertFailed", "FATAL_HALTS", "ReturnSignal"]


# ---------------------------------------------------------------------------------------------
# Collaborators
# ---------------------------------------------------------------------------------------------

@dataclass
class OpOutcome:
    """What a host returns for one dispatch (mirrors the cassette cell's result fields)."""

    content: str
    view: Optional[str] = None
    is_error: bool = False
    denied: bool = False


class OpHost(Protocol):
    def dispatch(self, op: str, input: Any, input_json: str) -> OpOutcome: ...


class EventSink(Protocol):
    def emit(self, run_event: dict) -> None: ...


class ListSink:
    """An :class:`EventSink` that keeps the events in a list (tests, previews)."""

    def __init__(self) -> None:
        self.events: list[dict] = []

    def emit(self, run_event: dict) -> None:
        self.events.append(run_event)

    def kinds(self) -> list[str]:
        return [e["event"] for e in self.events]


def deny_all(message: str, risk: str) -> bool:
    """The default approver: nothing is approved unless the caller says so."""
    return False


class ResumeError(FluxError):
    """A resume cannot proceed (a recorded value is missing from the value store)."""


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------

@dataclass
class PlanHalt:
    kind: str  # denied | confirm_denied | assert_failed | runtime | awaiting
    error: str
    node: int
    stmt: str
    op: Optional[str] = None


@dataclass
class RunResult:
    value: Any = None
    halted: Optional[PlanHalt] = None
    returned: bool = False
    flow_key: str = ""
    symbols: Mapping[str, Any] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.halted is None


# ---------------------------------------------------------------------------------------------
# Control-flow signals (raised and caught inside the interpreter and its constructs)
# ---------------------------------------------------------------------------------------------

class Halt(Exception):
    """A failure that stops the plan; ``kind`` is the ``plan_halted`` kind."""

    kind = "runtime"

    def __init__(self, error: str, op: Optional[str] = None):
        super().__init__(error)
        self.error, self.op = error, op


class Denied(Halt):
    kind = "denied"


class OpFailed(Halt):
    """The host ran the op and it failed (``is_error``): a runtime halt, or ``false`` in a
    condition (flux's ``eval_cond``)."""


class ConfirmDenied(Halt):
    kind = "confirm_denied"


class AssertFailed(Halt):
    kind = "assert_failed"


FATAL_HALTS = (Denied, ConfirmDenied, AssertFailed)


class ReturnSignal(Exception):
    def __init__(self, value: Any, vid: str):
        super().__init__("return")
        self.value, self.vid = value, vid
