"""The typed model of every event kind flux stores and every ``run`` variant, and the tolerant
decoding of a body into it: a missing field takes its default, an unknown kind or run variant is
kept as :class:`UnknownEvent` / :class:`UnknownRun` so a viewer can show it (docs/store-format.md).
The payload text itself: :mod:`flux.store.payload_decode`, :mod:`flux.store.payload_encode`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .body_codec import Struct, coerce, field_plan, fields_exact, positional_maker
from .usage import Usage  # re-exported: one home, imported cheaply by listings

__all__ = [
    "Usage", "EventBody", "RunEvent", "decode_body", "decode_run", "run_fields_exact", "new_op_recorded",
    "SessionStarted", "ModelChanged", "Message", "Compacted", "Run", "TurnStarted", "PlanAttempted",
    "TurnEnded", "CallUsage", "PrivateNetAdmit", "CrossPluginResolve", "EndpointDiscovered",
    "Observation", "WakeupScheduled", "WakeupFired", "WakeupCancelled", "Custom", "UnknownEvent",
    "FlowStarted", "ThingResolved", "StepStarted", "StepSucceeded", "StepFailed",
    "ApprovalRequested", "ApprovalGranted", "OpRecorded", "Awaiting", "FlowReturned", "CtxShrunk",
    "CompileError", "PlanAccepted", "OnceCompleted", "CheckpointReached", "StatementCompleted",
    "PlanHalted", "PlanResumed", "UnknownRun", "EVENT_KINDS", "RUN_VARIANTS",
]


# --------------------------------------------------------------------------------------------
# Run events: internally tagged by "event".


class RunEvent(Struct):
    TAG: ClassVar[str] = ""

    def to_body(self) -> dict[str, Any]:
        body = {"event": self.TAG}
        body.update(Struct.to_body(self))
        return body


@dataclass(frozen=True, slots=True)
class FlowStarted(RunEvent):
    TAG: ClassVar[str] = "flow_started"
    run: str = ""
    flow: str | None = None


@dataclass(frozen=True, slots=True)
class ThingResolved(RunEvent):
    TAG: ClassVar[str] = "thing_resolved"
    thing: Any = None
    resolved: Any = None


@dataclass(frozen=True, slots=True)
class StepStarted(RunEvent):
    TAG: ClassVar[str] = "step_started"
    step: str = ""
    op: str = ""
    input_hash: str = ""


@dataclass(frozen=True, slots=True)
class StepSucceeded(RunEvent):
    TAG: ClassVar[str] = "step_succeeded"
    step: str = ""
    output: str = ""


@dataclass(frozen=True, slots=True)
class StepFailed(RunEvent):
    TAG: ClassVar[str] = "step_failed"
    step: str = ""
    error: str = ""


@dataclass(frozen=True, slots=True)
class ApprovalRequested(RunEvent):
    TAG: ClassVar[str] = "approval_requested"
    step: str = ""
    effects: list = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ApprovalGranted(RunEvent):
    TAG: ClassVar[str] = "approval_granted"
    step: str = ""


@dataclass(frozen=True, slots=True)
class OpRecorded(RunEvent):
    """The cassette cell: one redacted row per leaf-op dispatch."""

    TAG: ClassVar[str] = "op_recorded"
    seq: int = 0
    step: str = ""
    op: str = ""
    input_hash: str = ""
    input_hash_redacted: str | None = None
    input_view: str | None = None
    input_view_truncated: bool = False
    content: str = ""
    view: str | None = None
    is_error: bool = False
    denied: bool = False
    redacted: bool = False
    truncated: bool = False


new_op_recorded = positional_maker(OpRecorded)


@dataclass(frozen=True, slots=True)
class Awaiting(RunEvent):
    TAG: ClassVar[str] = "awaiting"
    run: str = ""
    node: int = 0


@dataclass(frozen=True, slots=True)
class FlowReturned(RunEvent):
    TAG: ClassVar[str] = "flow_returned"
    value: str = ""


@dataclass(frozen=True, slots=True)
class CtxShrunk(RunEvent):
    TAG: ClassVar[str] = "ctx_shrunk"
    ctx: str = ""
    kept: list = field(default_factory=list)
    dropped: list = field(default_factory=list)
    budget: int = 0


@dataclass(frozen=True, slots=True)
class CompileError(RunEvent):
    TAG: ClassVar[str] = "compile_error"
    step: int = 0
    error: str = ""


@dataclass(frozen=True, slots=True)
class PlanAccepted(RunEvent):
    TAG: ClassVar[str] = "plan_accepted"
    step: int = 0
    ops: int = 0


@dataclass(frozen=True, slots=True)
class OnceCompleted(RunEvent):
    TAG: ClassVar[str] = "once_completed"
    label: str = ""
    value: str | None = None
    summary: str = ""


@dataclass(frozen=True, slots=True)
class CheckpointReached(RunEvent):
    TAG: ClassVar[str] = "checkpoint_reached"
    flow_key: str = ""
    label: str = ""
    node: int = 0


@dataclass(frozen=True, slots=True)
class StatementCompleted(RunEvent):
    TAG: ClassVar[str] = "statement_completed"
    plan: str = ""
    node: int = 0
    stmt: str = ""
    value: str | None = None
    skipped: bool = False


@dataclass(frozen=True, slots=True)
class PlanHalted(RunEvent):
    TAG: ClassVar[str] = "plan_halted"
    plan: str = ""
    node: int = 0
    stmt: str = ""
    op: str | None = None
    kind: str = "runtime"
    error: str = ""


@dataclass(frozen=True, slots=True)
class PlanResumed(RunEvent):
    TAG: ClassVar[str] = "plan_resumed"
    plan: str = ""
    prior: str = ""
    skipped: int = 0


@dataclass(frozen=True, slots=True)
class UnknownRun(RunEvent):
    """A run variant this reader does not know (a newer writer); kept whole so it can be shown."""

    TAG: ClassVar[str] = "unknown"
    event: str = ""
    data: Any = None

    def to_body(self) -> dict[str, Any]:
        return dict(self.data) if isinstance(self.data, dict) else {"event": self.event}


RUN_VARIANTS: dict[str, type[RunEvent]] = {
    c.TAG: c
    for c in (FlowStarted, ThingResolved, StepStarted, StepSucceeded, StepFailed, ApprovalRequested,
              ApprovalGranted, OpRecorded, Awaiting, FlowReturned, CtxShrunk, CompileError,
              PlanAccepted, OnceCompleted, CheckpointReached, StatementCompleted, PlanHalted,
              PlanResumed)
}


def decode_run(d: Any) -> RunEvent:
    if not isinstance(d, dict):
        return UnknownRun(event="", data=d)
    tag = d.get("event")
    cls = RUN_VARIANTS.get(tag) if isinstance(tag, str) else None
    if cls is None:
        return UnknownRun(event=str(tag or ""), data=d)
    if not cls._nested and run_fields_exact(cls, d):  # well-typed: built as it is (nothing to coerce)
        return cls(**{name: d[key] for name, key, _sub in field_plan(cls) if key in d})
    try:
        return coerce(cls, cls.from_body(d))
    except TypeError:
        return UnknownRun(event=str(tag), data=d)


# --------------------------------------------------------------------------------------------
# Event bodies: adjacently tagged {"kind","data"}.


class EventBody(Struct):
    KIND: ClassVar[str] = ""


@dataclass(frozen=True, slots=True)
class SessionStarted(EventBody):
    KIND: ClassVar[str] = "session_started"
    model: str = ""


@dataclass(frozen=True, slots=True)
class ModelChanged(EventBody):
    KIND: ClassVar[str] = "model_changed"
    model: str = ""


@dataclass(frozen=True, slots=True)
class Message(EventBody):
    """A conversation message: ``role`` and a list of content blocks (kept as JSON dicts)."""

    KIND: ClassVar[str] = "message"
    role: str = "user"
    content: list = field(default_factory=list)

    @classmethod
    def text(cls, role: str, text: str) -> "Message":
        return cls(role=role, content=[{"type": "text", "text": text}])

    @property
    def plain_text(self) -> str:
        """The message's text blocks joined; what search and summaries read."""
        parts = []
        for b in self.content:
            if isinstance(b, dict) and b.get("type") == "text":
                parts.append(str(b.get("text", "")))
        return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class Compacted(EventBody):
    KIND: ClassVar[str] = "compacted"
    messages: list = field(default_factory=list)

    def message_list(self) -> list[Message]:
        return [Message.from_body(m) for m in self.messages if isinstance(m, dict)]


@dataclass(frozen=True, slots=True)
class Run(EventBody):
    KIND: ClassVar[str] = "run"
    event: RunEvent = field(default_factory=lambda: UnknownRun())

    def to_body(self) -> dict[str, Any]:
        return self.event.to_body()

    @classmethod
    def from_body(cls, d: Any) -> "Run":
        return cls(event=decode_run(d))


@dataclass(frozen=True, slots=True)
class TurnStarted(EventBody):
    KIND: ClassVar[str] = "turn_started"
    user_input: str = ""
    model: str = ""
    loop_binding: dict | None = None


@dataclass(frozen=True, slots=True)
class PlanAttempted(EventBody):
    KIND: ClassVar[str] = "plan_attempted"
    step: int = 0
    outcome: str = "accepted"
    error: str | None = None
    fingerprint: str | None = None
    plan_text: str | None = None
    phase: str | None = None
    plan_source: str | None = None
    delta_source: str | None = None


@dataclass(frozen=True, slots=True)
class TurnEnded(EventBody):
    KIND: ClassVar[str] = "turn_ended"
    _nested: ClassVar[dict[str, type]] = {"usage": Usage}
    outcome: str = ""
    iterations: int = 0
    answer: str = ""
    usage: Usage | None = None
    loop_binding: dict | None = None


@dataclass(frozen=True, slots=True)
class CallUsage(EventBody):
    KIND: ClassVar[str] = "call_usage"
    _nested: ClassVar[dict[str, type]] = {"usage": Usage}
    model: str = ""
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True, slots=True)
class PrivateNetAdmit(EventBody):
    KIND: ClassVar[str] = "private_net_admit"
    caller: str = ""
    host: str = ""
    grant_source: str = ""


@dataclass(frozen=True, slots=True)
class CrossPluginResolve(EventBody):
    KIND: ClassVar[str] = "cross_plugin_resolve"
    consumer: str = ""
    provider: str = ""
    reference_location: str = ""


@dataclass(frozen=True, slots=True)
class EndpointDiscovered(EventBody):
    KIND: ClassVar[str] = "endpoint_discovered"
    product: str = ""
    provider: str = ""
    count: int = 0


@dataclass(frozen=True, slots=True)
class Observation(EventBody):
    KIND: ClassVar[str] = "observation"
    kind: str = ""
    phase: str = "turn"
    data: Any = None

    def to_body(self) -> dict[str, Any]:
        return {"kind": self.kind, "phase": self.phase, "data": self.data}


@dataclass(frozen=True, slots=True)
class WakeupScheduled(EventBody):
    KIND: ClassVar[str] = "wakeup_scheduled"
    fire_at_ms: int = 0
    prompt: str = ""
    context: str | None = None


@dataclass(frozen=True, slots=True)
class WakeupFired(EventBody):
    KIND: ClassVar[str] = "wakeup_fired"
    wakeup_id: str = ""
    turn_id: int = 0


@dataclass(frozen=True, slots=True)
class WakeupCancelled(EventBody):
    KIND: ClassVar[str] = "wakeup_cancelled"
    wakeup_id: str = ""


@dataclass(frozen=True, slots=True)
class Custom(EventBody):
    KIND: ClassVar[str] = "custom"
    name: str = ""
    payload: Any = None

    def to_body(self) -> dict[str, Any]:
        return {"name": self.name, "payload": self.payload}


@dataclass(frozen=True, slots=True)
class UnknownEvent(EventBody):
    """An event kind this reader does not know (a newer writer); kept so a viewer can show it."""

    KIND: ClassVar[str] = "unknown"
    kind: str = ""
    data: Any = None

    def to_body(self) -> Any:
        return self.data


EVENT_KINDS: dict[str, type[EventBody]] = {
    c.KIND: c
    for c in (SessionStarted, ModelChanged, Message, Compacted, Run, TurnStarted, PlanAttempted,
              TurnEnded, CallUsage, PrivateNetAdmit, CrossPluginResolve, EndpointDiscovered,
              Observation, WakeupScheduled, WakeupFired, WakeupCancelled, Custom)
}


def decode_body(kind: str, data: Any) -> EventBody:
    cls = EVENT_KINDS.get(kind)
    if cls is None:
        return UnknownEvent(kind=kind, data=data)
    try:
        body = cls.from_body(data)
    except TypeError:
        return UnknownEvent(kind=kind, data=data)
    if cls in (Run, Message, Compacted, Observation, Custom):
        if cls is Message and not isinstance(body.content, list):
            body = Message(role=str(body.role), content=[])
        return body
    if type(data) is dict and fields_exact(cls, data):  # well-typed: nothing to coerce
        return body
    return coerce(cls, body)


def run_fields_exact(cls: type[RunEvent], d: dict) -> bool:
    """Whether :func:`decode_run` takes ``d`` (a body tagged ``cls.TAG``) field for field as it is:
    every field present already has its declared type, so nothing is coerced and nothing can
    raise — the decoded event is ``cls(**fields)``. Lets a reader that needs only a few variants
    skip building the others while skipping and counting exactly the rows decoding would."""
    return fields_exact(cls, d)
