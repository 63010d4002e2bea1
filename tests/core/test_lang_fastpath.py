"""The parser's fast path for host-derived plans gives exactly what the general parser gives."""

from __future__ import annotations

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
