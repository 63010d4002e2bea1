"""The adaptive loop's host plan written from its parts (flux.agent.loop.host_plan_facts) equals the
general path: format_flow, fingerprint and flow_key of the AST, and the statement's JSON text."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.agent.loop import host_plan, host_plan_facts
from flux.lang import ast as A
from flux.lang.astjson import bind_call_json_text, node_json_text
from flux.lang.formatter import format_bind_call, format_flow
from flux.lang.hashes import fingerprint, flow_key
from flux.lang.parser import RESERVED

# Any code point, lone surrogates included (the one rule turns them into U+FFFD on the way out).
_ANY_CHAR = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=())
_HOSTILE = st.sampled_from(["{name}", "{{", "}}", '"""', 'a"""b', "line\nbreak", "cr\r", "tab\t", "back\\slash",
                            "quote\"", "1e-5", "2E+7", "\x00\x1f\x7f", "\u2028", "\ud83d", "\ud83d\ude00", "😀",
                            "ends with quote\"", "\n", ""])
_STR = st.one_of(_HOSTILE, st.text(_ANY_CHAR, max_size=12))
_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=-(1 << 70), max_value=1 << 70),
                    st.floats(allow_nan=False, allow_infinity=False), st.sampled_from([1e-7, 1e300, -0.0, 0.5, 1e16]),
                    _STR)
_JSON = st.recursive(_SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                      st.dictionaries(_STR, inner, max_size=4)), max_leaves=12)
_INPUT = st.dictionaries(_STR, _JSON, max_size=5)
_NAMES = st.one_of(st.sampled_from(["adaptive_gather_1", "adaptive_batch_0a1b_action_2", "_x", "9lives", "a.b",
                                    "flow", "do", "if", "e1", "x-1"] + sorted(RESERVED)[:6]),
                   st.text(_ANY_CHAR, min_size=1, max_size=10))
_OPS = st.one_of(st.sampled_from(["echo", "read_file", "fs.read", "a-b", "do", "flow", "parse", "x1e-5", "9op",
                                  "op name", "op\"q", "op\n", "\ud800"]),
                 st.text(_ANY_CHAR, min_size=1, max_size=10))


def _reference(bind: str, op: str, inp: dict) -> tuple:
    draft = host_plan(bind, op, inp)  # the AST, walked by the general path
    return draft, format_flow(draft), fingerprint(draft), flow_key(None, draft.body), node_json_text(draft.body[0])


@settings(max_examples=100, deadline=None)
@given(bind=_NAMES, op=_OPS, inp=_INPUT)
def test_host_plan_facts_equal_the_formatter_and_the_hashes(bind, op, inp):
    value, text, fp, key = host_plan_facts(bind, op, inp)
    ref_draft, ref_text, ref_fp, ref_key, ref_stmt = _reference(bind, op, inp)
    assert A.Lit(value) == ref_draft.body[0].value.args[0] and type(value) is dict  # the literal the plan calls with
    assert text == ref_text
    assert fp == ref_fp
    assert key == ref_key
    assert bind_call_json_text(bind, op, value) == ref_stmt


def test_the_plain_spelling_is_the_path_taken_for_host_plans():
    # The fast path must actually be the one used for the loop's own binds and ordinary ops.
    assert format_bind_call("adaptive_gather_3", "read_file", {"path": "a"}) == 'flow\n  adaptive_gather_3 = read_file({"path":"a"})\n'
    word = sorted(RESERVED)[0]
    for bind, op in (("flow", "echo"), ("9lives", "echo"), ("x", word), ("x", "op name")):
        assert format_bind_call(bind, op, {}) is None  # `$`-spelled or `@json`: the formatter writes it
    inp = {"s": "{name} and \"\"\"\n", "n": [1.5, -0.0, 1e-7]}
    value, text, fp, key = host_plan_facts("adaptive_gather_1", "echo", inp)
    assert text == format_flow(host_plan("adaptive_gather_1", "echo", inp))
    assert value == {"s": "{{name}} and \"\"\"\n", "n": [1.5, -0.0, 1e-7]}  # braces escaped for the interpreter
