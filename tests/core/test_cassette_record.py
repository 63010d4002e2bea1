"""Cassette recording (§4.3): the cell a live dispatch leaves, and the outcome the run gets back."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from flux.canonical import canonical_json, sha256_hex
from flux.cassette.record import (
    CassetteWriteError,
    DEFAULT_CAP, RecordingHost, build_cell, cap_from_env, cassette_enabled, input_view, truncate_utf8,
)
from flux.cassette.redactor import Redactor
from tests.core.test_redactor import json_values
from flux.store.events import OpRecorded, Run
from flux.store.payload_decode import decode_payload
from flux.store.payload_encode import encode_payload

M = "[redacted]"
FIXTURE_INPUT = {"content": "created by flux mock\n", "path": "flux-mock.txt"}
FIXTURE_CELL = ('{"event":"op_recorded","seq":0,"step":"step_append_7b7d06ae306ee31a","op":"append",'
                '"input_hash":"7b7d06ae306ee31ae768f1e70ebbc4e4e92750881536d135cbec17de7d4f2dff",'
                '"input_view":"{\\"content\\":\\"created by flux mock\\\\n\\",\\"path\\":\\"flux-mock.txt\\"}",'
                '"input_view_truncated":false,"content":"appended 21 bytes to flux-mock.txt","is_error":false,'
                '"denied":false,"redacted":false,"truncated":false}')


@dataclass
class Outcome:
    content: str
    view: str | None = None
    is_error: bool = False
    denied: bool = False


class FakeLive:
    """A live host: answers from a dict and counts calls."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []
        self.catalog = "live-catalog"

    def dispatch(self, op, input, input_json):
        self.calls.append((op, input_json))
        return self.answers[op]


def test_fixture_cell_is_reproduced_byte_for_byte():
    sink = []
    host = RecordingHost(FakeLive({"append": Outcome("appended 21 bytes to flux-mock.txt")}), sink.append, Redactor(), env={})
    out = host.dispatch("append", FIXTURE_INPUT, canonical_json(FIXTURE_INPUT))
    assert out.content == "appended 21 bytes to flux-mock.txt"
    assert len(sink) == 1
    assert json.dumps(sink[0], ensure_ascii=False, separators=(",", ":")) == FIXTURE_CELL
    # and it is a valid run body for the store
    assert encode_payload(decode_payload("run", json.dumps({"kind": "run", "data": sink[0]}))) == \
        '{"kind":"run","data":' + FIXTURE_CELL + "}"


def test_secret_is_redacted_in_the_cell_but_the_run_sees_it():
    secret = "s3cr3t-value-123"
    live = FakeLive({"fetch": Outcome(f"token is {secret}", view=f"<b>{secret}</b>")})
    sink = []
    host = RecordingHost(live, sink.append, Redactor([secret]), env={})
    inp = {"url": "https://api.example.com", "auth": secret}
    ij = canonical_json(inp)
    out = host.dispatch("fetch", inp, ij)
    assert out.content == f"token is {secret}" and out.view == f"<b>{secret}</b>"  # unredacted to the live run
    cell = sink[0]
    assert secret not in json.dumps(cell)
    assert cell["input_hash"] == sha256_hex(ij)
    assert cell["input_hash_redacted"] == sha256_hex(ij.replace(secret, M))
    assert json.loads(cell["input_view"]) == {"auth": M, "url": "https://api.example.com"}
    assert cell["content"] == f"token is {M}" and cell["view"] == f"<b>{M}</b>"
    assert cell["redacted"] is True and cell["truncated"] is False
    assert cell["step"] == f"step_fetch_{sha256_hex(ij)[:16]}"


def test_secret_named_key_in_input_is_redacted_in_view_and_second_hash():
    sink = []
    host = RecordingHost(FakeLive({"login": Outcome("ok")}), sink.append, Redactor(), env={})
    inp = {"password": "hunter2", "user": "bob"}
    host.dispatch("login", inp, canonical_json(inp))
    cell = sink[0]
    assert "hunter2" not in cell["input_view"]
    assert cell["input_hash_redacted"] == sha256_hex('{"password":"[redacted]","user":"bob"}')
    assert cell["redacted"] is True and cell["content"] == "ok"


def test_no_secret_means_no_second_hash_and_verbatim_view():
    sink = []
    host = RecordingHost(FakeLive({"read": Outcome("data", is_error=True, denied=True)}), sink.append, env={})
    inp = {"path": "a.txt", "n": 1.5}
    ij = canonical_json(inp)
    host.dispatch("read", inp, ij)
    cell = sink[0]
    assert "input_hash_redacted" not in cell and "view" not in cell
    assert cell["input_view"] == ij
    assert (cell["is_error"], cell["denied"], cell["redacted"]) == (True, True, False)


def test_seq_counts_per_scope_from_zero():
    live = FakeLive({"a": Outcome("1"), "b": Outcome("2")})
    s1, s2 = [], []
    h1 = RecordingHost(live, s1.append, env={})
    h2 = RecordingHost(live, s2.append, env={})
    for op in ("a", "b", "a"):
        h1.dispatch(op, {}, "{}")
    h2.dispatch("b", {}, "{}")
    assert [c["seq"] for c in s1] == [0, 1, 2]
    assert [c["seq"] for c in s2] == [0]
    assert [c.op for c in h1.cells] == ["a", "b", "a"]


def test_cap_truncates_content_and_view_on_a_char_boundary():
    sink = []
    content = "é" * 10  # 20 bytes
    host = RecordingHost(FakeLive({"x": Outcome(content, view="ok")}), sink.append, cap=5, env={})
    out = host.dispatch("x", {"q": "ééé"}, canonical_json({"q": "ééé"}))
    assert out.content == content
    cell = sink[0]
    assert cell["content"] == "éé" and cell["truncated"] is True
    assert cell["view"] == "ok"
    assert cell["input_view"] == '{"q":' and cell["input_view_truncated"] is True


def test_input_view_truncation_alone_does_not_set_truncated():
    sink = []
    host = RecordingHost(FakeLive({"x": Outcome("ok")}), sink.append, cap=4, env={})
    host.dispatch("x", {"long": "input"}, canonical_json({"long": "input"}))
    assert sink[0]["input_view_truncated"] is True and sink[0]["truncated"] is False


def test_env_switches():
    assert cassette_enabled({}) and cassette_enabled({"FLUX_CASSETTE": "1"}) and cassette_enabled({"FLUX_CASSETTE": ""})
    assert not cassette_enabled({"FLUX_CASSETTE": "0"})
    assert cap_from_env({}) == DEFAULT_CAP == 1_048_576
    assert cap_from_env({"FLUX_CASSETTE_MAX_BYTES": "64"}) == 64
    assert cap_from_env({"FLUX_CASSETTE_MAX_BYTES": "lots"}) == DEFAULT_CAP
    sink = []
    live = FakeLive({"x": Outcome("é" * 100)})
    off = RecordingHost(live, sink.append, env={"FLUX_CASSETTE": "0"})
    assert off.dispatch("x", {}, "{}").content == "é" * 100
    assert sink == [] and live.calls == [("x", "{}")]
    capped = RecordingHost(live, sink.append, env={"FLUX_CASSETTE_MAX_BYTES": "3"})
    capped.dispatch("x", {}, "{}")
    assert sink[0]["content"] == "é" and sink[0]["truncated"] is True


def test_sink_object_with_emit_and_loud_failures():
    class Sink:
        def __init__(self):
            self.got = []

        def emit(self, body):
            self.got.append(body)

    s = Sink()
    RecordingHost(FakeLive({"x": Outcome("1")}), s, env={}).dispatch("x", {}, "{}")
    assert s.got[0]["event"] == "op_recorded"

    def broken(body):
        raise OSError("disk full")

    live = FakeLive({"x": Outcome("1")})
    host = RecordingHost(live, broken, env={})
    with pytest.raises(CassetteWriteError, match=r"op `x` ran but its cassette cell could not be recorded \(OSError: disk full\)") as e:
        host.dispatch("x", {}, "{}")
    assert live.calls == [("x", "{}")] and e.value.op == "x"  # the op ran; its cell is missing, and said so
    assert host.seq == 0 and host.cells == []


def test_attributes_forward_to_the_inner_host():
    host = RecordingHost(FakeLive({}), [].append, env={})
    assert host.catalog == "live-catalog"
    with pytest.raises(AttributeError):
        host.no_such_thing


def test_input_json_defaults_to_canonical():
    sink = []
    RecordingHost(FakeLive({"x": Outcome("1")}), sink.append, env={}).dispatch("x", {"b": 1, "a": 2})
    assert sink[0]["input_hash"] == sha256_hex('{"a":2,"b":1}')


def test_build_cell_round_trips_through_the_store_codec():
    cell = build_cell(3, "x", '{"a":1}', Outcome("c", view="v"), Redactor(), DEFAULT_CAP)
    assert isinstance(cell, OpRecorded)
    assert decode_payload("run", encode_payload(Run(cell))).event == cell


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=60), cap=st.integers(min_value=0, max_value=80))
def test_truncate_utf8_properties(text, cap):
    cut, was = truncate_utf8(text, cap)
    assert len(cut.encode()) <= cap
    assert text.startswith(cut)
    assert was == (len(text.encode()) > cap)
    if was:
        # nothing more than one (partial) character was lost past the cut
        assert len(cut.encode()) > cap - 4


@settings(max_examples=200, deadline=None)
@given(value=st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20)),
    lambda ch: st.one_of(st.lists(ch, max_size=4), st.dictionaries(st.text(max_size=8), ch, max_size=4)),
    max_leaves=12), secret=st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=8, max_size=16).filter(
        lambda s: s not in "[redacted]"))  # a secret inside the marker itself would "survive" as the marker
@example(value=2_500_000_000, secret="00000000")  # the secret inside a number (hypothesis found it)
def test_planted_secret_never_reaches_any_cell_field(value, secret):
    assume(secret not in "[redacted]")  # the marker itself would "contain" such a secret
    assume(secret not in "op_recorded")  # nor can the cell's own kind be redacted (hypothesis found "recorded")
    inp = {"data": value, "planted": f"x {secret} y", "nested": [{"k": secret}]}
    ij = canonical_json(inp)
    sink = []
    host = RecordingHost(FakeLive({"op": Outcome(f"out {secret}", view=secret)}), sink.append, Redactor([secret]), env={})
    host.dispatch("op", inp, ij)
    cell = sink[0]
    for field_value in cell.values():
        assert secret not in str(field_value)
    # The second hash is of the input redacted on its decoded values — what a replay of the
    # redacted plan rebuilds (a secret inside a number becomes a string there, not bare text).
    assert cell["input_hash_redacted"] == sha256_hex(_reference_input_view(ij, Redactor([secret])))
    # the view is valid JSON
    json.loads(cell["input_view"])


def test_input_view_not_json_is_redacted_as_text():
    assert input_view("token=abc", Redactor()) == "token=[redacted]"


def _reference_input_view(input_json: str, redactor: Redactor) -> str:
    """input_view without its shortcut: parse, scrub node by node, compare, re-serialize."""
    from flux.cassette.redactor import same_json as _same

    value = json.loads(input_json)  # (the caller's texts are JSON)
    scrubbed = redactor.redact_value(value)
    if _same(scrubbed, value):
        return redactor.redact(input_json)
    return redactor.redact(canonical_json(scrubbed))


@settings(max_examples=200, deadline=None)
@example(value={"api_key": "v"}, form="escaped", secrets=[])  # "key" spelled \u006bey in the text
@example(value={"u": "https://a:b@c/"}, form="slashes", secrets=[])
@example(value=float("nan"), form="ascii", secrets=[])  # json.dumps writes the bare word NaN
@example(value=[float("nan"), {"k": float("nan")}], form="python", secrets=["1234"])
@given(value=json_values, form=st.sampled_from(["canonical", "ascii", "slashes", "escaped", "python"]),
       secrets=st.lists(st.sampled_from(["hunter22", "1234", "AKIAXXXX"]), max_size=1))
def test_input_view_shortcut_equals_the_full_scrub(value, form, secrets):
    from flux.cassette.record import input_view

    r = Redactor(secrets)
    text = {"canonical": lambda: canonical_json(value),
            "ascii": lambda: json.dumps(value),  # non-ASCII as \uXXXX
            "slashes": lambda: canonical_json(value).replace("/", "\\/"),  # JSON's optional \/
            "escaped": lambda: canonical_json(value).replace("k", "\\u006b").replace("A", "\\u0041"),
            "python": lambda: str(value)}[form]()
    try:
        json.loads(text)
    except ValueError:  # not JSON: each "string" literal decoded and redacted in place, then the text passes
        if '"' not in text:
            assert input_view(text, r) == r.redact(text)
        return
    assert input_view(text, r) == _reference_input_view(text, r)
