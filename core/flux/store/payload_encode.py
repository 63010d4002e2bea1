"""Typed event bodies to the ``payload`` column's text, byte for byte as flux's serde writes it —
the general encoder and the recorder's hot rows written straight to text (each tested equal to
:func:`encode_payload_reference`, the plain dict-then-JSON way)."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, Iterable

from json.encoder import encode_basestring as json_str  # C: serde's escapes, raw UTF-8

from ..canonical import compact_json
from .body_codec import Struct, field_plan, json_name
from .events import RUN_VARIANTS, EventBody, Observation, OpRecorded, PlanAttempted, Run, RunEvent, decode_run
from .usage import Usage

__all__ = ["encode_payload", "encode_payload_reference", "encode_run_step", "encode_op_recorded",
           "encode_plan_attempted", "encode_accepted_plan", "encode_observation", "encode_run_body",
           "encode_run_bodies"]


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
        frags = _FRAGMENTS[cls] = tuple((name, json_str(key) + ":") for name, key, _sub in field_plan(cls))
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
        elif isinstance(v, Struct) and t.to_body is Struct.to_body:
            parts: list[str] = []
            _field_texts(v, parts)
            out.append(frag + "{" + ",".join(parts) + "}")
        else:
            out.append(frag + compact_json(v.to_body() if isinstance(v, (Struct, Usage)) else v))


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
    elif cls.to_body is Struct.to_body:
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
            out.append((json_name(f.name), types, f.default))
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
