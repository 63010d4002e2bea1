"""``Redactor.finds_nothing`` (the fused tool call's check, flux.agent.loop.DirectCall.tool) is a
promise about :meth:`Redactor.redact` and :meth:`Redactor.redact_value`: when it holds for a text,
neither changes that text, any part of it, nor the JSON value a flat literal in it spells —
registered secrets with regex metacharacters, quotes and backslashes, secrets that overlap or
contain one another, numbers that are secrets, and credential-looking words in any case (qa4)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.cassette.redactor import Redactor

# Fragments of texts and secrets: the passes' literals in odd cases, metacharacters, the marker's
# pieces, digits (a number can be a secret), non-ASCII (the Kelvin sign folds to k).
_BITS = st.sampled_from(["a", "b", "1", "12", "345", " ", "=", ":", '"', "\\", ".", "*", "(", "[", "]", "|", "$", "^",
                         "-", "_", "é", "\u212a", "ey", "sec", "ret", "tok", "en", "pass", "w", "sk", "://", "AKIA",
                         "Bearer", "redacted", "\n", "x"])
_TEXT = st.lists(_BITS, max_size=12).map("".join)
_SECRETS = st.lists(st.lists(_BITS, min_size=1, max_size=5).map("".join), max_size=3)


@settings(max_examples=300, deadline=None)
@given(secrets=_SECRETS, text=_TEXT, cut=st.tuples(st.integers(0, 60), st.integers(0, 60)))
def test_a_text_the_redactor_finds_nothing_in_is_left_alone_whole_and_in_part(secrets, text, cut):
    r = Redactor(secrets)
    if not r.finds_nothing(text):
        return
    assert r.redact(text) == text
    i, j = sorted(cut)
    assert r.redact(text[i:j]) == text[i:j]


@settings(max_examples=300, deadline=None)
@given(secrets=_SECRETS, members=st.dictionaries(_TEXT, st.one_of(_TEXT, st.integers(-10**6, 10**6), st.booleans(),
                                                                    st.none()), max_size=3))
def test_a_flat_literal_the_redactor_finds_nothing_in_keeps_its_value(secrets, members):
    """The fused call's literal: its strings have no quote, backslash or brace, so the JSON text
    holds each verbatim — then redact_value of the value it spells changes nothing either."""
    flat = {k: v for k, v in members.items() if not any(c in k + (v if isinstance(v, str) else "")
                                                        for c in '"\\{}\n')}
    literal = json.dumps(flat, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    r = Redactor(secrets)
    if not r.finds_nothing("flow\n  x = op(" + literal + ")\n"):
        return
    assert r.redact(literal) == literal
    assert r.redact_value(flat) == flat
    assert [type(v) for v in r.redact_value(flat).values()] == [type(v) for v in flat.values()]
