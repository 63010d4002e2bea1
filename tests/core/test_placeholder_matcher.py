"""The one placeholder matcher (``flux.lang.interpreter.PLACEHOLDER``) answers what the two copies it
replaced answered: the agent loop's brace escaping (the same pattern, no group) and the replay
direct path's test of a host call's argument text (a looser prefix test, ``{`` then a name's first
character): on generated strings, the escaping is the same and the op's input hash is the same.
The old patterns are kept here, as the oracle."""

from __future__ import annotations

import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from flux.agent.loop import escape_braces
from flux.canonical import canonical_json, sha256_hex
from flux.lang.interpreter import PLACEHOLDER, interpolate, interpolate_json
from flux.timemachine.replay_direct import host_call

OLD_LOOP = re.compile(r"\{\{|\}\}|\{[A-Za-z_][A-Za-z0-9_]*\}")
OLD_REPLAY_PREFIX = re.compile(r"\{\{|\}\}|\{[A-Za-z_]")

# Strings dense in what the patterns look at: braces, name characters, a name's non-first
# character, a space, a non-ASCII letter (never a name's).
_CHARS = st.sampled_from(list("{}{}{}ab_Z09 -é\"\\\n"))
texts = st.text(_CHARS, max_size=14)
names = st.sampled_from(["a", "ab", "_", "Z0", "b_9"])
symbols = st.dictionaries(names, st.one_of(st.text(_CHARS, max_size=6), st.integers(-5, 5)), max_size=4)
# Host-call arguments: flat or nested objects whose strings hold those texts.
json_values = st.recursive(st.one_of(texts, st.integers(-3, 3), st.booleans(), st.none()),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(st.sampled_from(["a", "b", "k"]), inner,
                                                                   max_size=3)),
                           max_leaves=6)
arguments = st.dictionaries(st.sampled_from(["a", "b", "path", "x_1"]), json_values, min_size=1, max_size=3)


@settings(max_examples=600, deadline=None)
@given(texts)
def test_the_matcher_finds_what_the_loops_copy_found(s):
    assert (PLACEHOLDER.search(s) is None) == (OLD_LOOP.search(s) is None)
    assert [m.span() for m in PLACEHOLDER.finditer(s)] == [m.span() for m in OLD_LOOP.finditer(s)]


@settings(max_examples=400, deadline=None)
@given(st.lists(texts, max_size=3))
def test_escaping_braces_is_what_it_was(parts):
    old = [p.replace("{", "{{").replace("}", "}}") if OLD_LOOP.search(p) else p for p in parts]
    assert escape_braces(parts) == old
    for p in parts:  # and the interpreter reads every escaped string back as it was written
        assert interpolate(escape_braces(p), {"a": "A", "ab": "AB"}) == p


def _old_input_hash(arg: str, value, syms) -> str:
    """The input hash the direct path gave before: the interpolated value's when the old prefix test
    matched the argument text, else the text's own."""
    if OLD_REPLAY_PREFIX.search(arg) is not None:
        return sha256_hex(canonical_json(interpolate_json(value, syms)))
    return sha256_hex(arg)


@settings(max_examples=600, deadline=None)
@given(arguments, symbols)
@example({"path": "{ab", "x_1": "{a}"}, {"a": "A", "ab": "AB"})  # the old prefix test's match, a placeholder
@example({"path": "{ab é {_ b}"}, {"ab": 1})  # the old prefix test's match only
def test_a_host_calls_input_hash_is_what_it_was(value, syms):
    arg = canonical_json(value)
    hc = host_call(f"flow\n  out = fs.read({arg})")
    if hc is None:  # an argument the direct path does not take (the parser's path, either way)
        return
    assert hc.arg == arg
    new = hc.input_hash if hc.value is None else sha256_hex(canonical_json(interpolate_json(hc.value, syms)))
    assert new == _old_input_hash(arg, value, syms)
    # and what the interpreter would hash: the argument interpolated from the symbols
    assert new == sha256_hex(canonical_json(interpolate_json(value, syms)))


def test_the_oracles_tell_the_cases_apart():
    """The generated strings reach each case (the properties above would hold vacuously otherwise)."""
    assert OLD_LOOP.search("{ab}") and not OLD_LOOP.search("{ab") and not OLD_LOOP.search("{é}")
    assert OLD_REPLAY_PREFIX.search("{ab") and not OLD_LOOP.search("{ab")
    hc = host_call('flow\n  out = fs.read({"path":"{a}"})')
    assert hc is not None and hc.value == {"path": "{a}"}
    wrong = sha256_hex(canonical_json({"path": "{a}"}))
    assert sha256_hex(canonical_json(interpolate_json(hc.value, {"a": "x"}))) != wrong
