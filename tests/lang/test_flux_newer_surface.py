"""flux's newer language surface, ported as data: reserved words read as plain values, a blank before a
bracketed key, ``parse_program`` on the package, and what the formatter writes for reserved names."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings, strategies as st

import flux.lang
from flux.lang import ast as A
from flux.lang.formatter import format_flow
from flux.lang.parser import RESERVED, VALUE_WORDS, ParseError, parse, parse_program

#: flux's reserved set beyond the statement and clause words (its formatter writes `$agent`, `do risk …`)
FLUX_ONLY_RESERVED = ("agent", "agent_loop", "backoff", "board", "channel", "datasource", "delay",
                      "journey", "op", "per", "permissions", "risk", "trigger")
#: every word a symbol could be spelled as that is a keyword somewhere
KEYWORDS = sorted(RESERVED)
PLAIN_VALUE_WORDS = [w for w in KEYWORDS if w not in VALUE_WORDS]


def _only_stmt(text: str) -> A.Node:
    (stmt,) = parse(text).body
    return stmt


def test_parse_program_is_exported_from_the_package():
    assert flux.lang.parse_program is parse_program
    assert "parse_program" in flux.lang.__all__
    module = flux.lang.parse_program("agent helper\n  model \"m\"\n\nflow main\n  x = f()\n")
    assert [a.name for a in module.agents] == ["helper"]


def test_the_reserved_set_is_fluxs():
    assert set(FLUX_ONLY_RESERVED) <= RESERVED
    assert "as" not in RESERVED
    # `as` is a plain name now: bound and formatted bare
    draft = parse("flow\n  as = f(as)\n")
    assert draft.body == (A.Bind("as", A.Call("f", (A.Var("as"),))),)
    assert format_flow(draft) == "flow\n  as = f(as)\n"


def test_blog_fence_with_a_reserved_word_as_a_named_argument_parses():
    # the blog fence website_contract.rs checks: `branch` is a clause word, and a plain value here
    stmt = _only_stmt("flow\n  r = git_checkout(branch: branch, create: true)\n")
    assert stmt == A.Bind("r", A.Call("git_checkout", (A.Obj({"branch": A.Var("branch"),
                                                               "create": A.Lit(True)}),)))


@pytest.mark.parametrize("word", PLAIN_VALUE_WORDS)
def test_every_reserved_word_is_a_value_in_a_named_argument(word):
    stmt = _only_stmt(f"flow\n  r = h(a: {word})\n")
    assert stmt == A.Bind("r", A.Call("h", (A.Obj({"a": A.Var(word)}),)))
    text = format_flow(A.DraftAst(body=(stmt,)))
    assert text == f"flow\n  r = h(a: ${word})\n"   # the formatter keeps the `$`
    assert parse(text).body == (stmt,)


@pytest.mark.parametrize("word", PLAIN_VALUE_WORDS)
def test_every_reserved_word_is_a_value_in_a_bind_and_a_condition(word):
    assert _only_stmt(f"flow\n  x = {word}\n") == A.Bind("x", A.Var(word))
    assert _only_stmt(f"flow\n  x = {word}.field\n") == A.Bind("x", A.Jq(".field", A.Var(word)))


@pytest.mark.parametrize("word", FLUX_ONLY_RESERVED)
def test_the_formatter_writes_fluxs_spelling_for_reserved_names(word):
    bind = A.Bind(word, A.Call("run", (A.Var(word),)))
    assert format_flow(A.DraftAst(body=(bind,))) == f"flow\n  ${word} = run(${word})\n"
    call = A.Call(word, (A.Var("x"), A.Lit(1)))
    text = format_flow(A.DraftAst(body=(call,)))
    assert text == f"flow\n  do {word} $x, 1\n"
    assert parse(text).body == (call,)


def test_the_literal_and_peek_words_keep_their_meaning():
    assert _only_stmt("flow\n  x = h(a: true, b: null)\n") == A.Bind(
        "x", A.Call("h", (A.Obj({"a": A.Lit(True), "b": A.Lit(None)}),)))
    assert _only_stmt("flow\n  x = peek y\n") == A.Bind("x", A.Peek("y"))
    # positional `true` stays a literal: no pun turns it into a symbol
    assert _only_stmt("flow\n  x = h(a, true)\n") == A.Bind("x", A.Call("h", (A.Var("a"), A.Lit(True))))


@pytest.mark.parametrize("src", [
    "flow\n  x = peek\n",              # peek needs a symbol
    "flow\n  x = h(a: )\n",            # a named argument needs a value
    "flow\n  x = { when }\n",          # a field pun may not be a reserved word
    "flow\n  x = h(a: thing)\n",       # `thing` starts a thing reference
])
def test_reserved_word_misuse_is_still_an_error(src):
    with pytest.raises(ParseError):
        parse(src)


def test_a_blank_before_a_bracketed_key_reads_as_flux_reads_it():
    spaced = _only_stmt('flow\n  ct = response.headers ["content-type"]\n')
    assert spaced == A.Bind("ct", A.Jq('.headers["content-type"]', A.Var("response")))
    assert spaced == _only_stmt('flow\n  ct = response.headers["content-type"]\n')
    assert _only_stmt("flow\n  y = items [0]\n") == A.Bind("y", A.Jq(".0", A.Var("items")))
    assert format_flow(A.DraftAst(body=(spaced,))) == 'flow\n  ct = response.headers["content-type"]\n'


@pytest.mark.parametrize("src", [
    'flow\n  ct = response.headers ["content-type"\n',   # unclosed bracket
    "flow\n  ct = response.headers [name]\n",            # a bracket holds a string key or an index
    'flow\n  ct = response.headers\n    ["k"]\n',         # not across a line break
])
def test_a_bad_bracket_after_a_blank_is_an_error(src):
    with pytest.raises(ParseError):
        parse(src)


ident = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True).filter(lambda w: w not in RESERVED)
key_text = st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\"\\"), max_size=6)
segments = st.lists(st.one_of(ident.map(lambda s: ("." + s, "." + s)),
                              st.integers(0, 999).map(lambda i: (f"[{i}]", f"[{i}]")),
                              key_text.map(lambda k: ('["' + k + '"]', '["' + k + '"]'))),
                    min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(ident, segments, st.lists(st.sampled_from(["", " ", "  ", "\t"]), min_size=4, max_size=4))
def test_blanks_before_brackets_never_change_the_path(var, segs, gaps):
    tight = var + "".join(s for s, _ in segs)
    loose = var + "".join((gaps[i] if s.startswith("[") else "") + s for i, (s, _) in enumerate(segs))
    assert parse(f"flow\n  x = {loose}\n") == parse(f"flow\n  x = {tight}\n")


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(PLAIN_VALUE_WORDS), ident, ident)
def test_a_bare_reserved_value_equals_its_sigil_spelling(word, key, op):
    assume(key != "n")
    bare = parse(f"flow\n  r = {op}({key}: {word}, n: 1)\n")
    sigil = parse(f"flow\n  r = {op}({key}: ${word}, n: 1)\n")
    assert bare == sigil
    assert parse(format_flow(bare)) == bare
