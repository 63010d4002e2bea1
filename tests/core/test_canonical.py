"""Canonical JSON: serde's bytes, and the C-encoder fast path equal to the reference serializer."""

from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from flux.canonical import canonical_json, canonical_json_slow, compact_json, format_float, sha256_hex

leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64), st.floats(allow_nan=True, allow_infinity=True),
                 st.text(), st.sampled_from(["1e+16", "x1e-05", "\x7f", "\u2028", "é", "\x00\x1f"]))
values = st.recursive(leaf, lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(st.text(max_size=8), c, max_size=4)), max_leaves=20)


@settings(max_examples=500, deadline=None)
@given(values)
def test_fast_path_equals_reference(v):
    assert canonical_json(v) == canonical_json_slow(v, True)
    assert compact_json(v) == canonical_json_slow(v, False)


def test_serde_float_layout():
    cases = {1.0: "1.0", 1e16: "1e16", 1e15: "1000000000000000.0", 0.1: "0.1", 0.00001: "0.00001",
             0.000001: "1e-6", 1.5e-7: "1.5e-7", 2.5e20: "2.5e20", -3.0: "-3.0", 1.2345678901234568e16: "1.2345678901234568e16"}
    for x, want in cases.items():
        assert format_float(x) == want
        assert canonical_json([x]) == f"[{want}]"
    assert canonical_json(math.inf) == "null"


def test_keys_sorted_by_bytes_and_escapes():
    assert canonical_json({"b": 1, "a": {"é": 1, "z": 2}, "A": "\n\"\\\x01/"}) == '{"A":"\\n\\"\\\\\\u0001/","a":{"z":2,"é":1},"b":1}'
    assert compact_json({"b": 1, "a": 2}) == '{"b":1,"a":2}'


def test_fixture_input_hash():
    inp = {"content": "created by flux mock\n", "path": "flux-mock.txt"}
    assert sha256_hex(canonical_json(inp)) == "7b7d06ae306ee31ae768f1e70ebbc4e4e92750881536d135cbec17de7d4f2dff"


def test_a_lone_surrogate_key_sorts_by_code_point_on_both_paths():
    # A float written with an exponent sends the value down the reference path, whose byte-order
    # sort could not encode a lone surrogate key (UnicodeEncodeError, not our one-line error).
    v = {"\ue000": 1, "\ud83d": 1e16, "a": 2, "\ud7ff": 3, "\U0001f600": 4}
    assert canonical_json(v) == '{"a":2,"\ud7ff":3,"\ud83d":1e16,"\ue000":1,"\U0001f600":4}'
    w = dict(v, **{"\ud83d": 1})  # no exponent: the C encoder's path
    assert canonical_json(w) == canonical_json_slow(w, True)
