"""``flux test -k``: the expression means what Python's own ``not``/``and``/``or`` would make of it."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.errors import FluxError
from flux.testkit.runner import keyword_match

WORDS = st.sampled_from(["tri", "age", "slow", "Build", "x"])
NAMES = st.sampled_from(["triage", "slow-build", "x", "fast", "TRIAGE_slow"])


def _expr(depth: int = 3):
    leaf = WORDS.map(lambda w: (w, w))
    if depth == 0:
        return leaf

    def combine(sub):
        return st.one_of(
            sub.map(lambda e: (f"not {e[0]}", ("not", e[1]))),
            st.tuples(sub, st.sampled_from(["and", "or"]), sub).map(
                lambda t: (f"{t[0][0]} {t[1]} {t[2][0]}", (t[1], t[0][1], t[2][1]))),
            sub.map(lambda e: (f"({e[0]})", e[1])),
        )

    return st.recursive(leaf, combine, max_leaves=8)


def _python_truth(text: str, name: str) -> bool:
    """The same words as Python booleans: each word true when it is in the name (case-insensitive)."""
    import re

    def word(mo: re.Match) -> str:
        w = mo.group(0)
        return w if w in ("and", "or", "not") else str(w.lower() in name.lower())

    return eval(re.sub(r"[A-Za-z_]+", word, text))  # noqa: S307 - only True/False/and/or/not/()


@settings(max_examples=200, deadline=None)
@given(_expr(), NAMES)
def test_keyword_match_agrees_with_python_precedence(expr, name):
    text, _ = expr
    assert keyword_match(text, name) is _python_truth(text, name)


@pytest.mark.parametrize("text, name, expected", [
    ("tri or slow and Build", "triage", True),     # and binds tighter: tri or (slow and Build)
    ("(tri or slow) and Build", "triage", False),
    ("not tri and not slow", "fast", True),
    ("x or not x", "anything", True),
])
def test_keyword_match_examples(text, name, expected):
    assert keyword_match(text, name) is expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "and", "or", "not", "(", ")", "b"]), max_size=8), NAMES)
def test_any_token_soup_is_a_bool_or_one_line_error(tokens, name):
    try:
        result = keyword_match(" ".join(tokens), name)
    except FluxError as e:
        assert "\n" not in str(e) and str(e).startswith("-k ")
    else:
        assert isinstance(result, bool)
