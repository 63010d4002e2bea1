"""The recorder's payload encoder (flux.store.payload_encode.encode_payload) writes exactly the bytes of the
plain dict-then-compact_json path, for every event kind and run variant, odd field types included."""

from __future__ import annotations

import dataclasses
from json.encoder import encode_basestring

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.canonical import json_string
from flux.store.events import EVENT_KINDS, RUN_VARIANTS, Observation, Run, RunEvent, Usage
from flux.store.body_codec import field_plan
from flux.store.payload_encode import encode_payload, encode_payload_reference

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=30),
                    st.sampled_from(["1e+16", "\ud83d", "a\x00b\n\"\\", "é✓"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=8)
usages = st.builds(Usage, input_tokens=st.integers(0, 10**6), output_tokens=st.integers(0, 10**6),
                   reported_cost_usd=st.one_of(st.none(), st.floats(0, 10)))


def _build(cls, draw):
    kwargs = {}
    for name, key, sub in field_plan(cls):
        if sub is Usage or name == "usage":
            kwargs[name] = draw(st.one_of(st.none(), usages))
        else:
            kwargs[name] = draw(values)
    return cls(**{k: v for k, v in kwargs.items() if k in {f.name for f in dataclasses.fields(cls)}})


@st.composite
def bodies(draw):
    kind = draw(st.sampled_from(sorted(EVENT_KINDS)))
    cls = EVENT_KINDS[kind]
    if cls is Run:
        variant = RUN_VARIANTS[draw(st.sampled_from(sorted(RUN_VARIANTS)))]
        return Run(event=_build(variant, draw))
    if cls is Observation:
        return Observation(draw(st.one_of(st.text(max_size=10), values)), draw(st.one_of(st.just("turn"), values)), draw(values))
    return _build(cls, draw)


@settings(max_examples=300, deadline=None)
@given(body=bodies())
def test_fast_payload_equals_the_reference(body):
    assert encode_payload(body) == encode_payload_reference(body)


@settings(max_examples=200, deadline=None)
@given(text=st.text())
def test_the_c_string_encoder_writes_serdes_escapes(text):
    assert encode_basestring(text) == json_string(text)


def _reference_decode_run(d):
    from flux.store.events import UnknownRun
    from flux.store.body_codec import coerce

    cls = RUN_VARIANTS.get(d.get("event")) if isinstance(d.get("event"), str) else None
    if cls is None:
        return UnknownRun(event=str(d.get("event") or ""), data=d)
    try:
        return coerce(cls, cls.from_body(d))
    except TypeError:
        return UnknownRun(event=str(d.get("event")), data=d)


@st.composite
def run_dicts(draw):
    tag = draw(st.sampled_from(sorted(RUN_VARIANTS)))
    keys = [key for _name, key, _sub in field_plan(RUN_VARIANTS[tag])] + ["extra"]
    d = {"event": tag}
    for key in draw(st.lists(st.sampled_from(keys), unique=True)):
        d[key] = draw(st.one_of(values, st.sampled_from([True, 0, 1.5, "s", None])))
    return d


@settings(max_examples=300, deadline=None)
@given(d=run_dicts())
def test_decode_run_shortcut_equals_from_body_and_coerce(d):
    from flux.store.events import decode_run

    got, want = decode_run(d), _reference_decode_run(d)
    assert type(got) is type(want) and repr(got) == repr(want)


@st.composite
def event_dicts(draw):
    from flux.store.events import Compacted, Custom, Message

    kind = draw(st.sampled_from(sorted(k for k, c in EVENT_KINDS.items()
                                       if c not in (Run, Message, Compacted, Observation, Custom))))
    keys = [key for _name, key, _sub in field_plan(EVENT_KINDS[kind])] + ["extra"]
    d = {}
    for key in draw(st.lists(st.sampled_from(keys), unique=True)):
        d[key] = draw(st.one_of(values, st.sampled_from([True, 0, 1.5, "s", None, 2 ** 70])))
    return kind, d


@settings(max_examples=300, deadline=None)
@given(case=event_dicts())
def test_decode_body_shortcut_equals_from_body_and_coerce(case):
    """A well-typed body skips the coercion pass (fields_exact); the result is what coercing gives."""
    from flux.store.events import UnknownEvent, decode_body
    from flux.store.body_codec import coerce

    kind, d = case
    cls = EVENT_KINDS[kind]
    try:
        want = coerce(cls, cls.from_body(d))
    except TypeError:
        want = UnknownEvent(kind=kind, data=d)
    except (ValueError, OverflowError) as e:
        want = type(e)
    try:
        got = decode_body(kind, d)
    except (ValueError, OverflowError) as e:
        got = type(e)
    assert type(got) is type(want) and repr(got) == repr(want)

def _reader_cases():
    from flux.store.events import PlanAttempted, TurnStarted

    classes = {**{f"run:{t}": c for t, c in RUN_VARIANTS.items()}, "plan_attempted": PlanAttempted,
               "turn_started": TurnStarted}
    return classes


@st.composite
def reader_cases(draw):
    classes = _reader_cases()
    name = draw(st.sampled_from(sorted(classes)))
    cls = classes[name]
    keys = [key for _name, key, _sub in field_plan(cls)]
    literal = [f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING]  # (no list fields)
    want = tuple(draw(st.lists(st.sampled_from(literal), unique=True))) if literal else ()
    d = {"event": cls.TAG} if name.startswith("run:") else {}
    for key in draw(st.lists(st.sampled_from(keys + ["extra"]), unique=True)):
        d[key] = draw(st.one_of(values, st.sampled_from([True, False, 0, 1.5, "s", None, 2 ** 70, float("inf")])))
    return cls, want, d


@settings(max_examples=400, deadline=None)
@given(case=reader_cases())
def test_a_field_reader_answers_what_fields_exact_and_decoding_answer(case):
    """field_reader(cls, want)(d) is None exactly when fields_exact(cls, d) is False; else the
    wanted fields' values as decoding the body gives them (the replay read takes them from it)."""
    from flux.store.events import decode_body, decode_run
    from flux.store.body_codec import field_reader, fields_exact

    cls, want, d = case
    read = field_reader(cls, want)
    assert read is not None  # every run variant, plan_attempted and turn_started has one
    got = read(d)
    exact = fields_exact(cls, d)
    assert (got is not None) == exact
    if exact:
        body = decode_run(d) if issubclass(cls, RunEvent) else decode_body(cls.KIND, d)
        names = {key: name for name, key, _sub in field_plan(cls)}
        expected = tuple(getattr(body, names[k]) for k in want)
        assert (got == expected if want else got is True)
        assert all(type(a) is type(b) for a, b in zip(got if want else (), expected))
        if want:
            assert read(d, lambda *v: v) == expected  # the build hook gets the same values
            from collections import namedtuple

            made = namedtuple("Made", [f"f{i}" for i in range(len(want))])
            got_made = field_reader(cls, want, made)(d)
            assert type(got_made) is made and got_made == made(*expected)
    elif want:
        from collections import namedtuple

        assert field_reader(cls, want, namedtuple("Made", [f"f{i}" for i in range(len(want))]))(d) is None


# -- the recorder's hot rows written straight to text (encode_run_step, encode_op_recorded,
#    encode_observation) equal encode_payload of the body they stand for --------------------------

_texts = st.one_of(st.text(max_size=20), st.sampled_from(["", "\ud83d", "a\x00b\n\"\\", "é✓", "1e+16", "v_12"]))
_odd = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.lists(st.integers(), max_size=2))


@st.composite
def step_bodies(draw):
    tag = draw(st.sampled_from(["step_started", "step_succeeded", "step_failed", "flow_returned", "op_recorded"]))
    keys = {"step_started": ["step", "op", "input_hash"], "step_succeeded": ["step", "output"],
            "step_failed": ["step", "error"]}.get(tag, ["step", "value"])
    d = {"event": tag}
    for key in keys:
        if draw(st.integers(0, 9)):  # now and then a field is missing
            d[key] = draw(_texts) if draw(st.integers(0, 5)) else draw(_odd)
    if not draw(st.integers(0, 9)):
        d["extra"] = draw(_texts)
    return d


@settings(max_examples=300, deadline=None)
@given(ev=step_bodies())
def test_run_step_text_equals_the_encoded_run(ev):
    from flux.store.events import decode_run
    from flux.store.payload_encode import encode_run_step

    text = encode_run_step(ev)
    if text is not None:
        assert text == encode_payload_reference(Run(event=decode_run(ev)))
    shapes = {"step_started": {"event", "step", "op", "input_hash"}, "step_succeeded": {"event", "step", "output"},
              "step_failed": {"event", "step", "error"}}
    well_typed = set(ev) == shapes.get(ev["event"]) and all(type(v) is str for v in ev.values())
    assert (text is not None) == well_typed  # the fast path is taken exactly for the interpreter's own shape


@st.composite
def cells(draw):
    from flux.store.events import OpRecorded

    def field(kind):
        if not draw(st.integers(0, 7)):
            return draw(_odd)  # a field of the wrong type now and then: must take the general path
        return {"int": lambda: draw(st.integers()), "str": lambda: draw(_texts), "bool": lambda: draw(st.booleans()),
                "opt": lambda: draw(st.one_of(st.none(), _texts))}[kind]()

    return OpRecorded(seq=field("int"), step=field("str"), op=field("str"), input_hash=field("str"),
                      input_hash_redacted=field("opt"), input_view=field("opt"), input_view_truncated=field("bool"),
                      content=field("str"), view=field("opt"), is_error=field("bool"), denied=field("bool"),
                      redacted=field("bool"), truncated=field("bool"))


@settings(max_examples=200, deadline=None)
@given(cell=cells())
def test_op_recorded_text_equals_the_encoded_cell(cell):
    from flux.store.payload_encode import encode_op_recorded

    assert encode_op_recorded(cell) == encode_payload_reference(Run(event=cell))


@settings(max_examples=200, deadline=None)
@given(kind=st.one_of(_texts, values), phase=st.one_of(st.just("turn"), _texts, values), data=values)
def test_observation_text_equals_the_encoded_observation(kind, phase, data):
    from flux.store.payload_encode import encode_observation

    assert encode_observation(kind, phase, data) == encode_payload_reference(Observation(kind, phase, data))


@st.composite
def plan_attempts(draw):
    from flux.store.events import PlanAttempted

    def field(well_typed):
        return draw(_odd) if not draw(st.integers(0, 11)) else draw(well_typed)  # now and then the wrong type

    return PlanAttempted(field(st.integers()), field(_texts), *[field(st.one_of(st.none(), _texts)) for _ in range(6)])


@settings(max_examples=200, deadline=None)
@given(body=plan_attempts())
def test_plan_attempted_text_equals_the_encoded_body(body):
    from flux.store.payload_encode import encode_plan_attempted

    assert encode_plan_attempted(body) == encode_payload_reference(body)


def test_an_int_field_holding_inf_or_nan_decodes_to_its_default():
    """Python's json reads 1e999 as inf and the bare NaN: an int field holding one has no whole
    number to keep, so it takes its default like any other wrong type (it raised OverflowError)."""
    from flux.store.events import Awaiting, decode_run
    from flux.store.payload_encode import encode_run_body

    for v in (float("inf"), float("-inf"), float("nan")):
        assert decode_run({"event": "awaiting", "node": v}) == Awaiting(run="", node=0)
        assert encode_run_body({"event": "awaiting", "node": v}) == '{"kind":"run","data":{"event":"awaiting","run":"","node":0}}'
    assert decode_run({"event": "awaiting", "node": 3.0}).node == 3


@settings(max_examples=200, deadline=None)
@given(step=st.one_of(st.integers(), _odd), fp=st.one_of(_texts, _odd), phase=st.one_of(st.none(), st.just("gather"), _texts, _odd),
       src=st.one_of(_texts, _odd))
def test_an_accepted_plan_text_equals_the_encoded_body(step, fp, phase, src):
    from flux.store.events import PlanAttempted
    from flux.store.payload_encode import encode_accepted_plan

    body = PlanAttempted(step=step, outcome="accepted", fingerprint=fp, phase=phase, plan_source=src)
    assert encode_accepted_plan(step, fp, phase, src) == encode_payload_reference(body)
