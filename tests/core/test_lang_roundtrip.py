"""Property test: ``parse(format_flow(ast)) == ast`` for random ASTs covering every node kind.

Every node kind has its own strategy (:data:`NODE_STRATEGIES`, checked against the AST's kinds).
Awkward names (reserved words, non-identifiers) and awkward strings (quotes, newlines, braces,
``\"\"\"``, CR, unicode) are generated on purpose: they exercise the ``$`` sigil, the ``\"\"\"``
rule of §5.2 and the ``@json`` fallback.
"""

from __future__ import annotations

import functools

from hypothesis import given, settings, strategies as st

from flux.lang import ast as A
from flux.lang.astjson import draft_from_json, draft_to_json
from flux.lang.formatter import format_flow
from flux.lang.parser import RESERVED, ParseError, parse, parse_expression

AWKWARD = ['"""', "\n", "{x}", "{{", "}", '"', "\\", "\r\n", "é", "🚀", "a\nb\"", "\t", "#"]

text = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
    st.lists(st.sampled_from(AWKWARD + ["x", " ", "line"]), max_size=5).map("".join),
)
ident = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)
name = st.one_of(ident, ident, ident, st.sampled_from(sorted(RESERVED | {"as"})),
                 st.sampled_from(["a b", "x-y", "", "ü", "1x", "9arg", "0"]))
u32 = st.integers(0, 2 ** 32 - 1)
dur = st.one_of(st.integers(0, 10 ** 9), st.integers(0, 1000).map(lambda x: x * 1000),
                st.integers(0, 100).map(lambda x: x * 60000))

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2 ** 63), 2 ** 64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e16, 1e-7, 0.1, -0.0, 1.0, 123456789.125, 1e300]),
    text,
)
json_values = st.recursive(
    scalars,
    lambda kids: st.one_of(st.lists(kids, max_size=3),
                           st.dictionaries(text, kids, max_size=3)),
    max_leaves=8,
)

types = st.recursive(
    st.one_of(st.sampled_from([A.TypeRef.any(), A.TypeRef.bool(), A.TypeRef.number(),
                               A.TypeRef.string()]),
              st.sampled_from(["Ticket", "Bool", "a b", "x.y", "List"]).map(A.TypeRef.named)),
    lambda inner: inner.map(A.TypeRef.list_of),
    max_leaves=3,
)
opt = lambda s: st.one_of(st.none(), s)  # noqa: E731
effects = opt(st.sampled_from(A.FLOW_EFFECTS))
op_names = st.one_of(ident, st.sampled_from(["email.draft", "git-stage", "fmt", "when", "x y"]))
things = st.one_of(
    st.builds(A.ThingRef, st.sampled_from(A.ThingRef.KINDS), st.sampled_from(A.ThingRef.SELECTORS),
              text, st.just(False)),
    st.builds(A.ThingRef, st.sampled_from(["widget", "ticket", "a b"]),
              st.sampled_from(A.ThingRef.SELECTORS), text, st.just(True)),
)
def _key_segment(k: str) -> str:
    return '["' + k.replace("\\", "\\\\").replace('"', '\\"') + '"]'


canonical_paths = st.lists(
    st.one_of(ident.map(lambda s: "." + s), u32.map(lambda i: f".{i}"), text.map(_key_segment)),
    min_size=1, max_size=3,
).map(lambda segs: "".join(("." + seg if i == 0 and seg.startswith("[") else seg)
                           for i, seg in enumerate(segs)))
paths = st.one_of(
    canonical_paths, canonical_paths,
    # legacy and malformed spellings: they must fall back to @json, never change on reparse
    st.sampled_from(["", "bad path", ".a..b", ".items[0]", '["k"]', ".a.01", ".content-type"]),
)


@st.composite
def formulas(draw):
    """An operator formula parsed from generated source, so it is a real parser output."""
    leaves = st.one_of(ident.map(lambda s: "$" + s), st.integers(-5, 99).map(str),
                       st.sampled_from(['"s"', "true", "1.5", "$x.a", "'quoted'", "len($q)",
                                        "$x.items[0]", "max($a, 2)"]))
    tree = draw(st.recursive(
        leaves,
        lambda k: st.one_of(
            st.tuples(k, st.sampled_from(["+", "-", "*", "/", "&&", "||", "<", "==", ">="]), k)
            .map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            k.map(lambda s: f"!{s}"),
        ),
        max_leaves=4,
    ))
    if not any(op in tree for op in "+-*/&|<=>!"):
        tree = f"{tree} + 1"
    tree = tree.replace("(", draw(st.sampled_from(["(", "( "])), 1)  # formulas keep their text
    try:
        node = parse_expression(tree)
    except ParseError:
        node = A.Expr("a +", {"a": A.Var("a")})
    return node


def body(depth: int):
    return st.lists(stmts(depth - 1), max_size=2).map(tuple) if depth > 0 else st.just(())


@functools.lru_cache(maxsize=None)
def leaf_exprs():
    return st.one_of(name.map(A.Var), json_values.map(A.Lit), text.map(A.Fmt), name.map(A.Peek),
                     things.map(A.Thing), formulas())


@functools.lru_cache(maxsize=None)
def kind_strategies(depth: int) -> dict:
    """One strategy per AST node class; ``depth`` bounds the nesting of blocks and expressions."""
    e = exprs(depth - 1)
    b = body(depth)
    branches = st.lists(st.builds(A.Branch, name, b), max_size=2).map(tuple)
    return {
        A.Var: name.map(A.Var),
        A.Lit: json_values.map(A.Lit),
        A.Fmt: text.map(A.Fmt),
        A.Peek: name.map(A.Peek),
        A.Thing: things.map(A.Thing),
        A.Expr: st.one_of(formulas(), st.builds(A.Expr, text, st.dictionaries(
            ident, st.one_of(name.map(A.Var), json_values.map(A.Lit)), max_size=2))),
        A.Call: st.one_of(
            st.builds(A.Call, op_names, st.lists(e, max_size=3).map(tuple)),
            st.builds(A.Call, op_names, st.dictionaries(ident, st.one_of(e, ident.map(A.Var)),
                                                        min_size=1, max_size=3)
                      .map(lambda d: (A.Obj(d),)))),
        A.Jq: st.builds(A.Jq, paths, st.one_of(name.map(A.Var), e), st.booleans()),
        A.Parse: st.builds(A.Parse, e, st.sampled_from(["f64", "i64", "json", 'we"ird'])),
        A.Obj: st.builds(A.Obj, st.dictionaries(st.one_of(ident, text), e, max_size=3)),
        A.ListExpr: st.builds(A.ListExpr, st.lists(e, max_size=3).map(tuple)),
        A.Bind: st.builds(A.Bind, name, e, opt(types), effects),
        A.Memo: st.builds(A.Memo, name, e, opt(types), effects),
        A.Return: st.builds(A.Return, e),
        A.Assert: st.builds(A.Assert, e, opt(text)),
        A.Verify: st.builds(A.Verify, e, e, opt(text)),
        A.CtxAppend: st.builds(A.CtxAppend, name, st.lists(name, max_size=3).map(tuple)),
        A.Ctx: st.builds(A.Ctx, name, opt(text), st.lists(name, max_size=2).map(tuple),
                         st.lists(name, max_size=2).map(tuple), opt(u32)),
        A.Checkpoint: st.builds(A.Checkpoint, text),
        A.Await: st.builds(A.Await, opt(name), text, opt(types), opt(e)),
        A.When: st.builds(A.When, e, b, b),
        A.Unless: st.builds(A.Unless, e, b),
        A.Each: st.builds(A.Each, e, name, b, opt(name), st.booleans()),
        A.Repeat: st.builds(A.Repeat, u32, opt(e), b, opt(name)),
        A.Seq: st.builds(A.Seq, b, opt(name)),
        A.Pipe: st.builds(A.Pipe, b, opt(name)),
        A.Parallel: st.builds(A.Parallel, branches),
        A.Race: st.builds(A.Race, dur, branches, opt(name)),
        A.Retry: st.builds(A.Retry, u32, opt(st.sampled_from(["exponential", "linear", "two words"])),
                           opt(dur), b, opt(name)),
        A.Try: st.builds(A.Try, b, opt(name), b),
        A.Confirm: st.builds(A.Confirm, text, opt(st.sampled_from(["high", "low", "very high"])), b),
        A.Loop: st.builds(A.Loop, dur, dur, opt(e), b, opt(name)),
        A.Throttle: st.builds(A.Throttle, text, u32, dur, b),
        A.Debounce: st.builds(A.Debounce, text, dur, b),
        A.Match: st.builds(A.Match, e, st.lists(st.builds(A.MatchCase, e, b), max_size=2)
                           .map(tuple), b),
        A.Route: st.builds(A.Route, e, st.lists(st.builds(A.RouteCase, text, b), max_size=2)
                           .map(tuple), b),
        A.Fallback: st.builds(A.Fallback, st.lists(st.builds(A.FallbackBranch, b), max_size=2)
                              .map(tuple), opt(name)),
        A.Timeout: st.builds(A.Timeout, dur, b, opt(name)),
        A.Budget: st.builds(A.Budget, u32, b, opt(name)),
        A.CapScope: st.builds(A.CapScope, st.lists(text, max_size=2).map(tuple), b, opt(name)),
        A.Scope: st.builds(A.Scope, opt(e), opt(name), b, b),
        A.Saga: st.builds(A.Saga, st.lists(st.builds(A.SagaStep, b, b), max_size=2).map(tuple)),
        A.Once: st.builds(A.Once, text, b, opt(name)),
    }


_INLINE = (A.Call, A.Jq, A.Parse, A.Obj, A.ListExpr, A.Expr)


@functools.lru_cache(maxsize=None)
def exprs(depth: int):
    if depth <= 0:
        return leaf_exprs()
    table = kind_strategies(depth)
    return st.one_of(leaf_exprs(), leaf_exprs(), *[table[k] for k in _INLINE])


@functools.lru_cache(maxsize=None)
def stmts(depth: int):
    return st.deferred(lambda: st.one_of(*kind_strategies(depth).values()))


#: one strategy per node kind — the coverage test checks it against the AST's kinds
NODE_STRATEGIES = kind_strategies(2)


header_names = st.one_of(st.none(), ident, st.just("agent-loop"))
drafts = st.builds(
    A.DraftAst, header_names,
    st.lists(st.builds(A.Param, ident, types.filter(
        lambda t: t.label().lower() not in ("any", "bool", "number", "string")
        or t.tag != "named")), max_size=2).map(tuple),
    opt(types.filter(lambda t: t.tag != "named" or t.name in ("Ticket", "x.y"))),
    st.lists(stmts(2), max_size=4).map(tuple),
)


def test_every_node_kind_has_a_strategy():
    assert {cls.kind for cls in NODE_STRATEGIES} == set(A.NODE_CLASSES)


def _spellable_header(d: A.DraftAst) -> bool:
    def ok(t):
        if t is None or t.tag in A.TypeRef.BUILTINS:
            return True
        if t.tag == "list":
            return ok(t.inner)
        return t.name in ("Ticket", "x.y")
    return all(ok(p.ty) for p in d.params) and ok(d.returns)


@settings(max_examples=250, deadline=None)
@given(drafts)
def test_parse_format_roundtrip(draft):
    if not _spellable_header(draft):
        return
    text_ = format_flow(draft)
    assert parse(text_) == draft, text_
    # The text is canonical: formatting again yields the same bytes.
    assert format_flow(parse(text_)) == text_


@settings(max_examples=150, deadline=None)
@given(drafts)
def test_ast_json_roundtrip(draft):
    assert draft_from_json(draft_to_json(draft)) == draft
