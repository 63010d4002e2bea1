"""observations._plain_json: a level-at-a-time check for long lists (the closing messages' blocks) — the
same verdict as the node-by-node walk, on values with every kind of non-plain part."""

from __future__ import annotations

import enum

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.agent.observations import _plain_json, _plain_json_levels


def _walk(v) -> bool:
    """The reference: every node one at a time (what _plain_json did for every value)."""
    stack = [v]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is dict:
            if any(type(k) is not str for k in x):
                return False
            stack.extend(x.values())
        elif t is list:
            stack.extend(x)
        elif t not in (str, int, float, bool, type(None)):
            return False
    return True


class _Str(str):
    pass


class _Int(int):
    pass


class _Dict(dict):
    pass


class _List(list):
    pass


class _Color(enum.IntEnum):
    RED = 1


_odd = st.sampled_from([(1, 2), _Str("s"), _Int(3), _Color.RED, {1, 2}, b"x", 1j, object(), _Dict(a=1), _List([1]),
                        float("nan"), frozenset()])
_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4)
_keys = st.text(max_size=3) | st.sampled_from([1, None, True, 2.5, (1,), _Str("k")])


def _values(leaves):
    return st.recursive(leaves, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=3), inner, max_size=4)
                        | st.dictionaries(_keys, inner, max_size=3), max_leaves=30)


_mostly_plain = _values(_scalars)
_sometimes_odd = _values(st.one_of(_scalars, _scalars, _scalars, _odd))


@settings(max_examples=150, deadline=None)
@given(st.lists(_mostly_plain | _sometimes_odd, min_size=17, max_size=40))
def test_levels_give_the_walks_verdict(blocks):
    assert _plain_json_levels(blocks) == _walk(blocks)
    assert _plain_json(blocks) == _walk(blocks)


@settings(max_examples=60, deadline=None)
@given(_mostly_plain | _sometimes_odd)
def test_any_value(v):
    assert _plain_json_levels(v) == _walk(v) == _plain_json(v)


def test_a_deep_value_costs_no_stack():
    v: list = []
    for _ in range(100_000):
        v = [v]
    assert _plain_json_levels([v] * 20) is True
    v = {"a": [1, {"b": (1,)}]}
    assert _plain_json_levels([v] * 20) is False
