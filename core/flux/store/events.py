"""The typed model of every event kind flux stores and every ``run`` variant (docs/store-format.md).

Encoding follows serde as flux configures it: the payload is ``{"kind": <tag>, "data": <body>}``,
body fields in declared order, optional fields omitted when absent. Decoding is tolerant: a missing
field takes its default, an unknown kind or run variant is kept as :class:`UnknownEvent` /
:class:`UnknownRun` (so a viewer can show it), and only a payload that is not JSON at all is refused
(:class:`PayloadError`), which readers skip and count.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, Iterable

from json.encoder import encode_basestring as json_str  # C: serde's escapes, raw UTF-8

from ..canonical import compact_json, scrub_value
from . import schema

__all__ = [
    "Usage", "EventBody", "RunEvent", "PayloadError", "decode_payload", "encode_payload",
    "SessionStarted", "ModelChanged", "Message", "Compacted", "Run", "TurnStarted", "PlanAttempted",
    "TurnEnded", "CallUsage", "PrivateNetAdmit", "CrossPluginResolve", "EndpointDiscovered",
    "Observation", "WakeupScheduled", "WakeupFired", "WakeupCancelled", "Custom", "UnknownEvent",
    "FlowStarted", "ThingResolved", "StepStarted", "StepSucceeded", "StepFailed",
    "ApprovalRequested", "ApprovalGranted", "OpRecorded", "Awaiting", "FlowReturned", "CtxShrunk",
    "CompileError", "PlanAccepted", "OnceCompleted", "CheckpointReached", "StatementCompleted",
    "PlanHalted", "PlanResumed", "UnknownRun", "EVENT_KINDS", "RUN_VARIANTS",
]


class PayloadError(ValueError):
    """A payload row that is not a JSON object at all (corrupt); readers skip and count it."""


# --------------------------------------------------------------------------------------------
# Generic struct codec: declared order, None omitted, missing -> default.


class _Struct:
    """Mixin: ``to_body`` / ``from_body`` by dataclass field order.

    Fields whose value is ``None`` are omitted (serde ``skip_serializing_if = Option::is_none``).
    Fields listed in ``_nested`` are (de)serialized through the named class.
    """

    _nested: ClassVar[dict[str, type]] = {}

    def to_body(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, key, _sub in _field_plan(type(self)):
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, (_Struct, Usage)):
                v = v.to_body()
            out[key] = v
        return out

    @classmethod
    def from_body(cls, d: Any):
        if not isinstance(d, dict):
            d = {}
        kwargs = {}
        for name, key, sub in _field_plan(cls):
            if key in d:
                v = d[key]
                if sub is not None:
                    if v is None:  # a null nested struct (`"usage": null`) takes the field's default
                        continue
                    v = sub.from_body(v)
                kwargs[name] = v
        return cls(**kwargs)


_PLANS: dict[type, tuple[tuple[str, str, type | None], ...]] = {}


def _field_plan(cls: type) -> tuple[tuple[str, str, type | None], ...]:
    """(attribute, JSON key, nested class) per field, in declared order — computed once per class."""
    plan = _PLANS.get(cls)
    if plan is None:
        nested = getattr(cls, "_nested", {})
        plan = tuple((f.name, _json_name(f.name), nested.get(f.name)) for f in fields(cls) if not f.name.startswith("_"))
        _PLANS[cls] = plan
    return plan


def _json_name(name: str) -> str:
    return name[:-1] if name.endswith("_") else name  # `type_` style escapes


from .usage import Usage  # noqa: E402  (re-exported: one home, imported cheaply by listings)


# --------------------------------------------------------------------------------------------
# Run events: internally tagged by "event".


class RunEvent(_Struct):
    TAG: ClassVar[str] = ""

    def to_body(self) -> dict[str, Any]:
        body = {"event": self.TAG}
        body.update(_Struct.to_body(self))
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


def _positional_maker(cls: type) -> Any:
    """``cls(*fields)`` for a frozen slotted dataclass without ``__post_init__``, in declared field
    order, each slot set through its member descriptor: the generated frozen ``__init__`` goes
    through ``object.__setattr__`` once per field (13 for a cell: ~3 us a call, once per recorded
    op). The same object — tests/core/test_events_fast.py compares every field, ``==`` and hash."""
    names = [f.name for f in fields(cls)]
    if hasattr(cls, "__post_init__") or not getattr(cls, "__slots__", None) or any(f.init is False for f in fields(cls)):
        raise TypeError(f"{cls.__name__}: not a plain frozen slotted dataclass")
    ns: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    for i, name in enumerate(names):
        ns[f"_set{i}"] = getattr(cls, name).__set__
    src = (f"def new_{cls.__name__}(" + ", ".join(names) + "):\n    self = _new(_cls)\n"
           + "".join(f"    _set{i}(self, {name})\n" for i, name in enumerate(names)) + "    return self\n")
    exec(src, ns)  # noqa: S102 - the source is built from the dataclass's own field names
    return ns[f"new_{cls.__name__}"]


new_op_recorded = _positional_maker(OpRecorded)


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
        return cls(**{name: d[key] for name, key, _sub in _field_plan(cls) if key in d})
    try:
        return _coerce(cls, cls.from_body(d))
    except TypeError:
        return UnknownRun(event=str(tag), data=d)


# --------------------------------------------------------------------------------------------
# Event bodies: adjacently tagged {"kind","data"}.


class EventBody(_Struct):
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

# Kinds whose rows carry the owning turn's id (flux scopes a turn's rows by turn_id).
TURN_SCOPED_KINDS = frozenset({"plan_attempted", "turn_ended", "call_usage", "observation"})
# Kinds that never carry a turn_id.
UNSCOPED_KINDS = schema.UNSCOPED_KINDS


_TYPE_DEFAULTS = {int: 0, str: "", bool: False}


_TYPES: dict[type, tuple[tuple[str, str], ...]] = {}


def _coerce_types(cls: type) -> tuple[tuple[str, str], ...]:
    typed = tuple((f.name, f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")) for f in fields(cls))
    _TYPES[cls] = typed
    return typed


def _coerce(cls: type, obj: Any) -> Any:
    """Replace wrongly-typed scalar fields with their defaults (tolerant decoding of odd writers)."""
    typed = _TYPES.get(cls) or _coerce_types(cls)
    changes = None
    for name, t in typed:
        v = getattr(obj, name)
        if t == "int":
            if not isinstance(v, int) or isinstance(v, bool):
                changes = changes or {}
                # A float field holding a whole number keeps it; inf and NaN (Python's json reads
                # 1e999 and the bare NaN) have none: the default, like any other wrong type.
                changes[name] = int(v) if isinstance(v, float) and math.isfinite(v) else 0
        elif t == "str":
            if not isinstance(v, str):
                changes = changes or {}
                changes[name] = "" if v is None else str(v)
        elif t == "bool":
            if not isinstance(v, bool):
                changes = changes or {}
                changes[name] = bool(v)
        elif t == "str | None" and v is not None and not isinstance(v, str):
            changes = changes or {}
            changes[name] = str(v)
    if not changes:
        return obj
    kwargs = {name: getattr(obj, name) for name, _ in typed}
    kwargs.update(changes)
    return cls(**kwargs)


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
    return _coerce(cls, body)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def load_payload(payload: str) -> dict:
    """The JSON object of one ``payload`` column, with the surrogate rule applied; :class:`PayloadError`
    for a payload that is not a JSON object (the first half of :func:`decode_payload`)."""
    try:
        obj = json.loads(payload)
    except (ValueError, TypeError) as e:  # not JSON, not UTF-8, an integer over Python's digit limit
        raise PayloadError(f"payload is not JSON: {e}") from None
    except RecursionError:
        raise PayloadError("payload is nested too deeply to decode") from None
    if not isinstance(obj, dict):
        raise PayloadError("payload is not a JSON object")
    if "\\u" in payload and _SURROGATE_ESCAPE.search(payload):
        # JSON text can spell a lone surrogate ("\ud83d"); the one rule (flux.canonical) applies on
        # read as on write, so nothing downstream meets a string it cannot encode.
        obj = scrub_value(obj)
    return obj


def payload_kind(kind_column: str, obj: dict) -> str:
    """The kind a loaded payload decodes as: its own ``kind`` when that is text, else the column's."""
    kind = obj.get("kind", kind_column)
    return kind if isinstance(kind, str) else kind_column


# What decoding a loaded payload's fields can raise on a hostile shape (the row is then skipped).
DECODE_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError, RecursionError)


def decode_object(kind_column: str, obj: dict) -> EventBody:
    """The second half of :func:`decode_payload`: a loaded payload object to its typed body."""
    kind = payload_kind(kind_column, obj)
    try:
        return decode_body(kind, obj.get("data"))
    except DECODE_ERRORS as e:
        # A hostile payload whose fields have types no flux version writes: skipped and counted.
        raise PayloadError(f"payload fields have the wrong shape for {kind!r}: {type(e).__name__}") from None


def decode_payload(kind_column: str, payload: str) -> EventBody:
    """Decode one ``payload`` column. Raises :class:`PayloadError` only for non-JSON payloads."""
    return decode_object(kind_column, load_payload(payload))


_STR_OR_NONE: Any = object()  # the exact-type marker of a ``str | None`` field
_EXACT: dict[type, dict[str, Any] | None] = {}


def _exact_types(cls: type) -> dict[str, Any] | None:
    """JSON key → the exact type its value must have (``str``/``int``/``bool``, or
    :data:`_STR_OR_NONE`), for the scalar fields :func:`_coerce` checks — or None when some such
    field's default would itself be coerced (then an absent field is not "exact")."""
    types = dict(_TYPES.get(cls) or _coerce_types(cls))
    by_name = {f.name: f for f in fields(cls)}
    marks = {"str": str, "int": int, "bool": bool, "str | None": _STR_OR_NONE}
    out: dict[str, Any] | None = {}
    for name, key, _sub in _field_plan(cls):
        mark = marks.get(types.get(name, ""))
        if mark is None:
            continue
        default = by_name[name].default
        if default is not MISSING and not (type(default) is mark or (mark is _STR_OR_NONE and
                                                                      (default is None or type(default) is str))):
            out = None
            break
        out[key] = mark
    _EXACT[cls] = out
    return out


def fields_exact(cls: type, d: dict) -> bool:
    """Whether every scalar field of ``cls`` that ``d`` (a body's JSON object) holds already has its
    declared type, so :func:`_coerce` would change nothing (absent fields take their defaults,
    which are well-typed). One pass over ``d``'s items, exact type checks."""
    marks = _EXACT[cls] if cls in _EXACT else _exact_types(cls)
    if marks is None:
        return False
    for key, v in d.items():
        mark = marks.get(key)
        if mark is None or type(v) is mark:
            continue
        if mark is _STR_OR_NONE and (v is None or type(v) is str):
            continue
        return False
    return True


def run_fields_exact(cls: type[RunEvent], d: dict) -> bool:
    """Whether :func:`decode_run` takes ``d`` (a body tagged ``cls.TAG``) field for field as it is:
    every field present already has its declared type, so nothing is coerced and nothing can
    raise — the decoded event is ``cls(**fields)``. Lets a reader that needs only a few variants
    skip building the others while skipping and counting exactly the rows decoding would."""
    return fields_exact(cls, d)


_READERS: dict[tuple[type, tuple[str, ...] | None, type | None], Any] = {}


def field_reader(cls: type, want: tuple[str, ...] | None = None, make: type[tuple] | None = None) -> Any:
    """A function ``(d, build=None) -> build(*values) | None`` for bodies of ``cls``: when
    :func:`fields_exact` holds for ``d`` (a body's JSON object), ``build`` of the ``want`` fields'
    values (JSON keys, in that order; each absent one at its default — exactly what decoding the
    body gives for it; without ``build``, their tuple), else None. With ``want=()`` it answers
    True for an exact body. ``make``, a named tuple class of the ``want`` fields: the result is
    that tuple, built without a call to its ``__new__`` (what it would do: ``tuple.__new__``). A reader's
    hot path in one generated function: one ``dict.get`` per field and exact type checks, no loop
    over the body and nothing built but the result. None when ``cls`` has a field whose default
    would itself be coerced (:func:`fields_exact` is then always False) or a nested field.
    Generated once per (class, want) from the dataclass's fields (trusted names and literal
    defaults, never stored text)."""
    key = (cls, want, make)
    if key in _READERS:
        return _READERS[key]
    marks = _EXACT[cls] if cls in _EXACT else _exact_types(cls)
    fn = None
    if marks is not None and not getattr(cls, "_nested", None):
        defaults = {k: f.default for (name, k, _sub), f in zip(_field_plan(cls), [f for f in fields(cls)
                                                                                  if not f.name.startswith("_")])}
        names = want if want is not None else tuple(defaults)
        if all(k in defaults for k in names) and all(type(defaults[k]) in (str, int, bool, type(None))
                                                     for k in (*marks, *names)):
            var = {k: f"v{i}" for i, k in enumerate(dict.fromkeys((*marks, *names)))}
            loads = [f"    {var[k]} = g({k!r}, {defaults[k]!r})" for k in var]
            checks = [f"({var[k]} is None or t({var[k]}) is s)" if m is _STR_OR_NONE
                      else f"t({var[k]}) is {m.__name__[0]}" for k, m in marks.items()]
            vals = ", ".join(var[k] for k in names)
            result = f"({vals},) if build is None else build({vals})" if names else "True"
            if make is not None and names:
                result = f"new(make, ({vals},))"
            src = "\n".join(["def read(d, build=None, t=type, s=str, i=int, b=bool):", "    g = d.get", *loads,
                             f"    if not ({' and '.join(checks) or 'True'}):", "        return None",
                             f"    return {result}"])
            scope: dict[str, Any] = {"new": tuple.__new__, "make": make}
            exec(compile(src, f"<field reader {cls.__name__}>", "exec"), scope)  # noqa: S102 - from field names
            fn = scope["read"]
    _READERS[key] = fn
    return fn


def encode_payload_reference(body: EventBody) -> str:
    """The ``payload`` column text built the plain way (the dict, then :func:`compact_json`):
    what :func:`encode_payload` must equal."""
    return compact_json({"kind": body.KIND, "data": body.to_body()})


# The recorder encodes ~7 payloads per op, so encode_payload writes the text from pre-built key
# fragments instead of building the dict first. A str field is written by the C string encoder
# that compact_json's own fast path uses (serde's escapes, tested equal to json_string), an exact
# int or bool by its literal, anything else (floats, dicts, lists, subclasses) by compact_json.
_FRAGMENTS: dict[type, tuple[tuple[str, str], ...]] = {}


def _fragments(cls: type) -> tuple[tuple[str, str], ...]:
    frags = _FRAGMENTS.get(cls)
    if frags is None:
        frags = _FRAGMENTS[cls] = tuple((name, json_str(key) + ":") for name, key, _sub in _field_plan(cls))
    return frags


def _field_texts(obj: Any, out: list[str]) -> None:
    for name, frag in _fragments(type(obj)):
        v = getattr(obj, name)
        if v is None:
            continue
        t = type(v)
        if t is str:
            out.append(frag + json_str(v))
        elif t is int:
            out.append(frag + int.__repr__(v))
        elif t is bool:
            out.append(frag + ("true" if v else "false"))
        elif isinstance(v, _Struct) and t.to_body is _Struct.to_body:
            parts: list[str] = []
            _field_texts(v, parts)
            out.append(frag + "{" + ",".join(parts) + "}")
        else:
            out.append(frag + compact_json(v.to_body() if isinstance(v, (_Struct, Usage)) else v))


def encode_payload(body: EventBody) -> str:
    """The ``payload`` column text: ``{"kind":…,"data":…}`` in serde's declared order."""
    cls = type(body)
    parts: list[str] = []
    if cls is Run:
        ev = body.event
        if type(ev).to_body is not RunEvent.to_body:
            return encode_payload_reference(body)
        parts.append('"event":' + json_str(ev.TAG))
        _field_texts(ev, parts)
    elif cls is Observation:
        if type(body.kind) is not str or type(body.phase) is not str:
            return encode_payload_reference(body)
        parts.append('"kind":' + json_str(body.kind) + ',"phase":' + json_str(body.phase) + ',"data":'
                     + compact_json(body.data))
    elif cls.to_body is _Struct.to_body:
        _field_texts(body, parts)
    else:
        return encode_payload_reference(body)
    return '{"kind":' + json_str(cls.KIND) + ',"data":{' + ",".join(parts) + "}}"


# The recorder's hot rows, written straight to text: per op call a ``step_started``, its cell and a
# ``step_succeeded`` (or ``step_failed``), per plan a ``plan_attempted``, and the turn's observations.
# Each takes its exact well-typed shape only — anything else returns None (or falls back to
# encode_payload), so the text is always encode_payload's (tests/core/test_payload_encoding.py).

_STEP_HEADS = {
    "step_started": ('{"kind":"run","data":{"event":"step_started","step":', ',"op":', ',"input_hash":'),
    "step_succeeded": ('{"kind":"run","data":{"event":"step_succeeded","step":', ',"output":'),
    "step_failed": ('{"kind":"run","data":{"event":"step_failed","step":', ',"error":'),
}


def encode_run_step(ev: dict) -> str | None:
    """``encode_payload(Run(decode_run(ev)))`` for the interpreter's ``step_started`` /
    ``step_succeeded`` / ``step_failed`` body with exactly its fields, all strings; None otherwise."""
    heads = _STEP_HEADS.get(ev.get("event"))  # type: ignore[arg-type]
    if heads is None or len(ev) != len(heads) + 1:
        return None
    step = ev.get("step")
    if type(step) is not str:
        return None
    if len(heads) == 3:
        op, ih = ev.get("op"), ev.get("input_hash")
        if type(op) is not str or type(ih) is not str:
            return None
        return heads[0] + json_str(step) + heads[1] + json_str(op) + heads[2] + json_str(ih) + "}}"
    last = ev.get("output" if ev["event"] == "step_succeeded" else "error")
    if type(last) is not str:
        return None
    return heads[0] + json_str(step) + heads[1] + json_str(last) + "}}"


def encode_op_recorded(cell: "OpRecorded") -> str:
    """``encode_payload(Run(event=cell))`` for a cassette cell, written in one expression when every
    field has its declared type (the cell :func:`flux.cassette.record.build_cell` makes)."""
    c = cell
    if (type(c) is OpRecorded and type(c.seq) is int and type(c.step) is str and type(c.op) is str
            and type(c.input_hash) is str and type(c.content) is str and type(c.input_view_truncated) is bool
            and type(c.is_error) is bool and type(c.denied) is bool and type(c.redacted) is bool
            and type(c.truncated) is bool and (c.input_hash_redacted is None or type(c.input_hash_redacted) is str)
            and (c.input_view is None or type(c.input_view) is str) and (c.view is None or type(c.view) is str)):
        return ('{"kind":"run","data":{"event":"op_recorded","seq":' + int.__repr__(c.seq)
                + ',"step":' + json_str(c.step) + ',"op":' + json_str(c.op) + ',"input_hash":' + json_str(c.input_hash)
                + ("" if c.input_hash_redacted is None else ',"input_hash_redacted":' + json_str(c.input_hash_redacted))
                + ("" if c.input_view is None else ',"input_view":' + json_str(c.input_view))
                + (',"input_view_truncated":true' if c.input_view_truncated else ',"input_view_truncated":false')
                + ',"content":' + json_str(c.content)
                + ("" if c.view is None else ',"view":' + json_str(c.view))
                + (',"is_error":true' if c.is_error else ',"is_error":false')
                + (',"denied":true' if c.denied else ',"denied":false')
                + (',"redacted":true' if c.redacted else ',"redacted":false')
                + (',"truncated":true}}' if c.truncated else ',"truncated":false}}'))
    return encode_payload(Run(event=cell))


def encode_plan_attempted(body: "PlanAttempted") -> str:
    """``encode_payload(body)`` for a ``plan_attempted`` body, in one expression when every field has
    its declared type (an adaptive turn writes one per tool call)."""
    b = body
    opt = (b.error, b.fingerprint, b.plan_text, b.phase, b.plan_source, b.delta_source)
    if type(b) is not PlanAttempted or type(b.step) is not int or type(b.outcome) is not str or \
            any(v is not None and type(v) is not str for v in opt):
        return encode_payload(body)
    return ('{"kind":"plan_attempted","data":{"step":' + int.__repr__(b.step) + ',"outcome":' + json_str(b.outcome)
            + ("" if b.error is None else ',"error":' + json_str(b.error))
            + ("" if b.fingerprint is None else ',"fingerprint":' + json_str(b.fingerprint))
            + ("" if b.plan_text is None else ',"plan_text":' + json_str(b.plan_text))
            + ("" if b.phase is None else ',"phase":' + json_str(b.phase))
            + ("" if b.plan_source is None else ',"plan_source":' + json_str(b.plan_source))
            + ("" if b.delta_source is None else ',"delta_source":' + json_str(b.delta_source)) + "}}")


def encode_accepted_plan(step: int, fingerprint: str, phase: str | None, plan_source: str) -> str:
    """``encode_plan_attempted(PlanAttempted(step=step, outcome="accepted", fingerprint=fingerprint,
    phase=phase, plan_source=plan_source))`` without building the body (an adaptive turn's host plan,
    one per tool call)."""
    if type(step) is not int or type(fingerprint) is not str or type(plan_source) is not str or \
            (phase is not None and type(phase) is not str):
        return encode_plan_attempted(PlanAttempted(step=step, outcome="accepted", fingerprint=fingerprint, phase=phase,
                                                   plan_source=plan_source))
    return ('{"kind":"plan_attempted","data":{"step":' + int.__repr__(step) + ',"outcome":"accepted","fingerprint":'
            + json_str(fingerprint) + ("" if phase is None else ',"phase":' + json_str(phase)) + ',"plan_source":'
            + json_str(plan_source) + "}}")


def encode_observation(kind: str, phase: str, data: Any) -> str:
    """``encode_payload(Observation(kind, phase, data))`` without building the body."""
    if type(kind) is not str or type(phase) is not str:
        return encode_payload(Observation(kind, phase, data))
    return ('{"kind":"observation","data":{"kind":' + json_str(kind) + ',"phase":' + json_str(phase) + ',"data":'
            + compact_json(data) + "}}")


_SIMPLE_TYPES = {"str": (str,), "int": (int,), "bool": (bool,), "str | None": (str, type(None))}
_FAST_RUN: dict[str, tuple[tuple[str, tuple[type, ...], Any], ...] | None] = {}


def _fast_plan(tag: str) -> tuple[tuple[str, tuple[type, ...], Any], ...] | None:
    """(JSON key, exact types accepted, default) per field of a run variant whose fields are all
    ``str`` / ``int`` / ``bool`` / ``str | None``; None for any other variant."""
    if tag in _FAST_RUN:
        return _FAST_RUN[tag]
    cls = RUN_VARIANTS.get(tag)
    plan = None
    if cls is not None and not cls._nested:
        out = []
        for f in fields(cls):
            types = _SIMPLE_TYPES.get(f.type if isinstance(f.type, str) else "")
            if f.name.startswith("_") or types is None or f.default is MISSING:
                out = None
                break
            out.append((_json_name(f.name), types, f.default))
        plan = tuple(out) if out is not None else None
    _FAST_RUN[tag] = plan
    return plan


def encode_run_body(body: dict) -> str:
    """``encode_payload(Run(decode_run(body)))`` for a run body as the interpreter emits it, without
    building the dataclass (a bulk append's hot path): the same text. A body of another variant, or
    with a field of a type the decoder would coerce, takes that exact path."""
    tag = body.get("event")
    plan = _fast_plan(tag) if type(tag) is str else None
    if plan is not None:
        data: dict[str, Any] = {"event": tag}
        for key, types, default in plan:
            v = body[key] if key in body else default
            if type(v) not in types:
                break
            if v is not None:
                data[key] = v
        else:
            return compact_json({"kind": "run", "data": data})
    return encode_payload(Run(event=decode_run(body)))


# Bulk encoding of run bodies (fork's prefix, resurrect's and what-if's re-executed runs): one
# generated function per variant writes the payload text in a single concatenation, where
# encode_run_body walks the variant's fields in a Python loop and then builds and encodes a dict.
_RUN_WRITERS: dict[str, Any] = {}


def _run_writer(tag: str) -> Any:
    """For a variant :func:`encode_run_body` takes its fast path on (every field ``str``, ``int``,
    ``bool`` or ``str | None``): a function ``body -> payload text`` that writes exactly that
    path's text — ``{"kind":"run","data":{"event":…, fields in declared order}}``, a missing field
    taken at its default, a ``None`` left out — or returns None when a value is not of its field's
    exact type (the caller then takes :func:`encode_run_body`, which takes the slow path). None for
    any other variant. Generated once per variant from the dataclass's fields (trusted names and
    literal defaults, never stored text)."""
    if tag in _RUN_WRITERS:
        return _RUN_WRITERS[tag]
    if tag not in RUN_VARIANTS:
        return None  # an unknown tag (a hostile body): encode_run_body's reference path, nothing cached
    plan = _fast_plan(tag)
    fn = None
    if plan is not None and all(type(d) in (str, int, bool, type(None)) for _, _, d in plan):
        head = '{"kind":"run","data":{"event":' + json_str(tag)
        loads, checks, parts = [], [], [repr(head)]
        for i, (key, types, default) in enumerate(plan):
            frag = repr("," + json_str(key) + ":")
            loads.append(f"    v{i} = g({key!r}, {default!r})")
            if types == (str,):
                checks.append(f"type(v{i}) is str")
                parts.append(f"{frag} + js(v{i})")
            elif types == (int,):
                checks.append(f"type(v{i}) is int")
                parts.append(f"{frag} + ir(v{i})")
            elif types == (bool,):
                checks.append(f"type(v{i}) is bool")
                parts.append(f"({frag} + ('true' if v{i} else 'false'))")
            else:  # str | None: None is left out
                checks.append(f"(v{i} is None or type(v{i}) is str)")
                parts.append(f"({frag} + js(v{i}) if v{i} is not None else '')")
        src = "\n".join(["def write(b):", "    g = b.get", *loads,
                         f"    if not ({' and '.join(checks) or 'True'}):", "        return None",
                         f"    return {' + '.join(parts)} + '}}}}'"])
        scope: dict[str, Any] = {"js": json_str, "ir": int.__repr__}
        exec(compile(src, f"<run writer {tag}>", "exec"), scope)  # noqa: S102 - generated from field names
        fn = _run_writer_fast(tag, plan, head, scope["write"])
    _RUN_WRITERS[tag] = fn
    return fn


def _run_writer_fast(tag: str, plan: tuple, head: str, general: Any) -> Any:
    """The writer :func:`_run_writer` returns: ``general``'s text (its fields in declared order, a
    missing one at its default, None left out, None for a value of another type) in one ``%``
    template instead of a chain of concatenations — a body lacking a field whose default is not
    None is handed to ``general`` (a KeyError), so every text is ``general``'s."""
    loads, opt, checks, fmt, args = [], [], [], [head.replace("%", "%%")], []
    for i, (key, types, default) in enumerate(plan):
        frag = ("," + json_str(key) + ":").replace("%", "%%")
        if default is None:
            opt.append(f"    v{i} = b.get({key!r})")
        else:
            loads.append(f"        v{i} = b[{key!r}]")
        if types == (str,):
            checks.append(f"t(v{i}) is s")
            fmt.append(frag + "%s")
            args.append(f"js(v{i})")
        elif types == (int,):
            checks.append(f"t(v{i}) is i")
            fmt.append(frag + "%s")
            args.append(f"ir(v{i})")
        elif types == (bool,):
            checks.append(f"t(v{i}) is o")
            fmt.append(frag + "%s")
            args.append(f"('true' if v{i} else 'false')")
        else:  # str | None: None is left out
            checks.append(f"(v{i} is None or t(v{i}) is s)")
            fmt.append("%s")
            args.append(f"('' if v{i} is None else {frag.replace('%%', '%')!r} + js(v{i}))")
    fmt.append("}}")
    body = ["    try:", *loads, "    except KeyError:", "        return general(b)"] if loads else []
    src = "\n".join(["def write(b, t=type, s=str, i=int, o=bool):", *body, *opt,
                     f"    if not ({' and '.join(checks) or 'True'}):", "        return None",
                     f"    return {''.join(fmt)!r} % ({', '.join(args)},)" if args else f"    return {''.join(fmt)!r}"])
    scope: dict[str, Any] = {"js": json_str, "ir": int.__repr__, "general": general}
    exec(compile(src, f"<run writer {tag}>", "exec"), scope)  # noqa: S102 - generated from field names
    return scope["write"]


def encode_run_bodies(bodies: Iterable[dict]) -> list[str]:
    """``[encode_run_body(b) for b in bodies]`` — the same texts — written by a generated writer per
    variant (:func:`_run_writer`) where the values have their types, else by :func:`encode_run_body`."""
    out: list[str] = []
    add = out.append
    writers = _RUN_WRITERS
    for b in bodies:
        tag = b.get("event") if type(b) is dict else None
        w = (writers[tag] if tag in writers else _run_writer(tag)) if type(tag) is str else None
        text = w(b) if w is not None else None
        add(text if text is not None else encode_run_body(b))
    return out
