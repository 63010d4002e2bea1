"""The parser's fast path for host-derived plans gives exactly what the general parser gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from flux.lang import ast as A
from flux.lang.formatter import format_flow
from flux.lang.parser import _Parser, _host_plan_fast, parse

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12),
                      st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
json_value = st.recursive(json_leaf, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=6), c, max_size=3)), max_leaves=8)
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)
ops = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)


@settings(max_examples=300, deadline=None)
@given(name=names, op=ops, value=st.dictionaries(st.text(max_size=8), json_value, max_size=4))
def test_fast_path_equals_general_parser(name, op, value):
    draft = A.DraftAst(body=(A.Bind(name, A.Call(op, (A.Lit(value),))),))
    text = format_flow(draft)
    slow = _Parser(text).flow()
    fast = _host_plan_fast(text)
    if fast is not None:
        assert fast == slow
    assert parse(text) == slow == draft or parse(text) == slow


def test_fast_path_takes_the_common_shape_and_declines_the_rest():
    assert _host_plan_fast('flow\n  x = read({"path":"a"})\n') is not None
    assert _host_plan_fast('flow\n  $x = read({"path":"a"})\n') is not None
    assert _host_plan_fast('flow\n  x = read({"a":1,"a":2})\n') is None  # duplicate keys: general parser decides
    assert _host_plan_fast('flow\n  x = read({"c":"""a\n"""})\n') is None
    assert _host_plan_fast('flow\n  x = read({"c":NaN})\n') is None
    assert _host_plan_fast('flow\n  x = read({"c":1})\n  y = read({})\n') is None


# ---- the formatter's `name = op(<literal>)` arm and its ASCII-key sort -------------------------------

from flux.lang import formatter as fmt  # noqa: E402
from flux.lang.parser import RESERVED  # noqa: E402

# every code point, lone surrogates included (they sort as U+FFFD in UTF-8 order, not by code point)
_any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, blacklist_categories=())
_keys = st.one_of(st.text(max_size=6), st.text(_any_char, max_size=4), st.sampled_from(["\ud800", "\ue000", "\uffff",
                                                                                          "é", "a", "Z", "_", ""]))
_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=False),
                  st.text(max_size=10), st.text(_any_char, max_size=4), st.sampled_from(["a\nb", 'x"""', "t\\n", "\t"]))
_value = st.recursive(_leaf, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(_keys, c, max_size=4)),
                      max_leaves=10)
_words = st.one_of(names, st.sampled_from(sorted(RESERVED)), st.sampled_from(["9lives", "a-b", "a.b", "", " x",
                                                                             "é", "\ud800", "x\n"]))
_ops = st.one_of(ops, st.sampled_from(sorted(RESERVED)), st.sampled_from(["git.status", "a-b", "9op", "", "o p",
                                                                         "op\n", "é"]))


def _utf8_sorted_compact(v):
    """compact_value as it was: every dict's keys sorted by their UTF-8 bytes (utf8_key)."""
    if isinstance(v, str):
        return fmt._str(v)
    if isinstance(v, dict):
        keys = sorted(v, key=A.utf8_key)
        return "{" + ",".join(fmt.json_string(k) + ":" + _utf8_sorted_compact(v[k]) for k in keys) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_utf8_sorted_compact(x) for x in v) + "]"
    if isinstance(v, float) and not isinstance(v, bool):
        return fmt.format_float(v)
    return fmt.compact_json(v)


@settings(max_examples=300, deadline=None)
@given(value=_value)
def test_compact_value_writes_what_the_utf8_key_sort_writes(value):
    assert fmt.compact_value(value) == _utf8_sorted_compact(value)


def test_compact_value_sorts_non_ascii_keys_by_their_utf8_bytes():
    # U+D800 (a lone surrogate) sorts as U+FFFD, after U+E000; code-point order would put it first
    assert fmt.compact_value({"\ud800": 1, "\ue000": 2, "b": 3, "a": 4}) == '{"a":4,"b":3,"\ue000":2,"\ud800":1}'
    assert fmt.compact_value({"b": 1, "a": {"d": 2, "c": 3}}) == '{"a":{"c":3,"d":2},"b":1}'


@settings(max_examples=400, deadline=None)
@given(name=_words, op=_ops, value=_value, extra=st.sampled_from(["none", "ty", "effect", "two args", "var arg"]))
def test_bind_call_arm_formats_what_the_general_arms_format(name, op, value, extra):
    """The `name = op(<literal>)` arm of the formatter against the general arms (the arm switched
    off): the same text for every name, op and literal, and it stands aside for any other shape."""
    args = (A.Lit(value),)
    kw = {}
    if extra == "ty":
        kw["ty"] = A.TypeRef("string")
    elif extra == "effect":
        kw["effect"] = "write"
    elif extra == "two args":
        args = (A.Lit(value), A.Lit(1))
    elif extra == "var arg":
        args = (A.Var("x"),)
    draft = A.DraftAst(body=(A.Bind(name, A.Call(op, args), **kw), A.Bind("y", A.Call("read", (A.Lit(value),)))))
    fast = fmt.format_flow(draft)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(fmt, "_bind_call_line", lambda *a: None)
        assert fmt.format_flow(draft) == fast
