"""Property test: ``parse(format_flow(ast)) == ast`` for random ASTs covering every node kind.

Awkward names (reserved words, non-identifiers) and awkward strings (quotes, newlines, braces,
``\"\"\"``, CR, unicode) are generated on purpose: they exercise the ``$`` sigil, the ``\"\"\"``
rule of §5.2 and the ``@json`` fallback.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from flux.lang import ast as A
from flux.lang.astjson import draft_from_json, draft_to_json
from flux.lang.formatter import format_flow
from flux.lang.parser import ParseError, parse, parse_expression

AWKWARD = ['"""', "\n", "{x}", "{{", "}", '"', "\\", "\r\n", "é", "🚀", "a\nb\"", "\t", "#"]

text = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=12),
    st.lists(st.sampled_from(AWKWARD + ["x", " ", "line"]), max_size=5).map("".join),
)
ident = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)
name = st.one_of(ident, ident, ident, st.sampled_from(["when", "true", "in", "fmt", "flat"]),
                 st.sampled_from(["a b", "x-y", "", "ü", "1x"]))
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
paths = st.one_of(
    st.lists(st.one_of(ident.map(lambda s: "." + s), u32.map(lambda i: f"[{i}]"),
                       st.just('["k y"]')), min_size=1, max_size=3).map("".join),
    st.sampled_from(["", "bad path", ".a..b"]),
)


@st.composite
def formulas(draw):
    """An operator formula parsed from generated source, so it is a real parser output."""
    leaves = st.one_of(ident.map(lambda s: "$" + s), st.integers(-5, 99).map(str),
                       st.sampled_from(['"s"', "true", "1.5", "$x.a"]))
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
    try:
        node = parse_expression(tree)
    except ParseError:
        node = A.Expr("a +", {"a": A.Var("a")})
    return node


def exprs(depth: int):
    leaf = st.one_of(
        name.map(A.Var), json_values.map(A.Lit), text.map(A.Fmt), name.map(A.Peek),
        things.map(A.Thing), formulas(),
        st.builds(A.Expr, text, st.dictionaries(ident, name.map(A.Var), max_size=2)),
    )
    if depth <= 0:
        return leaf
    sub = exprs(depth - 1)
    return st.one_of(
        leaf, leaf,
        st.builds(A.Call, op_names, st.lists(sub, max_size=3).map(tuple)),
        st.builds(A.Jq, paths, st.one_of(name.map(A.Var), sub), st.booleans()),
        st.builds(A.Parse, sub, st.sampled_from(["f64", "i64", "json", 'we"ird'])),
        st.builds(A.Obj, st.dictionaries(st.one_of(ident, text), sub, max_size=3)),
        st.builds(A.ListExpr, st.lists(sub, max_size=3).map(tuple)),
        st.builds(A.Call, op_names,
                  st.dictionaries(ident, st.one_of(sub, ident.map(A.Var)), min_size=1,
                                  max_size=3).map(lambda d: (A.Obj(d),))),
    )


def stmts(depth: int):
    e = exprs(1)
    simple = st.one_of(
        st.builds(A.Bind, name, e, opt(types), effects),
        st.builds(A.Memo, name, e, opt(types), effects),
        st.builds(A.Call, op_names, st.lists(e, max_size=3).map(tuple)),
        st.builds(A.Return, e),
        st.builds(A.Assert, e, opt(text)),
        st.builds(A.Verify, e, e, opt(text)),
        st.builds(A.CtxAppend, name, st.lists(name, max_size=3).map(tuple)),
        st.builds(A.Ctx, name, opt(text), st.lists(name, max_size=2).map(tuple),
                  st.lists(name, max_size=2).map(tuple), opt(u32)),
        st.builds(A.Checkpoint, text),
        st.builds(A.Await, opt(name), text, opt(types), opt(e)),
        e,
    )
    if depth <= 0:
        return simple
    body = st.lists(stmts(depth - 1), max_size=2).map(tuple)
    return st.one_of(
        simple, simple,
        st.builds(A.When, e, body, body),
        st.builds(A.Unless, e, body),
        st.builds(A.Each, e, name, body, opt(name), st.booleans()),
        st.builds(A.Repeat, u32, opt(e), body, opt(name)),
        st.builds(A.Seq, body, opt(name)),
        st.builds(A.Pipe, body, opt(name)),
        st.builds(A.Parallel, st.lists(st.builds(A.Branch, name, body), max_size=2).map(tuple)),
        st.builds(A.Race, dur, st.lists(st.builds(A.Branch, name, body), max_size=2).map(tuple),
                  opt(name)),
        st.builds(A.Retry, u32, opt(st.sampled_from(["exponential", "linear", "two words"])),
                  opt(dur), body, opt(name)),
        st.builds(A.Try, body, opt(name), body),
        st.builds(A.Confirm, text, opt(st.sampled_from(["high", "low", "very high"])), body),
        st.builds(A.Loop, dur, dur, opt(e), body, opt(name)),
        st.builds(A.Throttle, text, u32, dur, body),
        st.builds(A.Debounce, text, dur, body),
        st.builds(A.Match, e, st.lists(st.builds(A.MatchCase, e, body), max_size=2).map(tuple),
                  body),
        st.builds(A.Route, e, st.lists(st.builds(A.RouteCase, text, body), max_size=2)
                  .map(tuple), body),
        st.builds(A.Fallback, st.lists(st.builds(A.FallbackBranch, body), max_size=2)
                  .map(tuple), opt(name)),
        st.builds(A.Timeout, dur, body, opt(name)),
        st.builds(A.Budget, u32, body, opt(name)),
        st.builds(A.CapScope, st.lists(text, max_size=2).map(tuple), body, opt(name)),
        st.builds(A.Scope, opt(e), opt(name), body, body),
        st.builds(A.Saga, st.lists(st.builds(A.SagaStep, body, body), max_size=2).map(tuple)),
        st.builds(A.Once, text, body, opt(name)),
    )


header_names = st.one_of(st.none(), ident, st.just("agent-loop"))
drafts = st.builds(
    A.DraftAst, header_names,
    st.lists(st.builds(A.Param, ident, types.filter(
        lambda t: t.label().lower() not in ("any", "bool", "number", "string")
        or t.tag != "named")), max_size=2).map(tuple),
    opt(types.filter(lambda t: t.tag != "named" or t.name in ("Ticket", "x.y"))),
    st.lists(stmts(2), max_size=4).map(tuple),
)


def _spellable_header(d: A.DraftAst) -> bool:
    def ok(t):
        if t is None or t.tag in A.TypeRef.BUILTINS:
            return True
        if t.tag == "list":
            return ok(t.inner)
        return t.name in ("Ticket", "x.y")
    return all(ok(p.ty) for p in d.params) and ok(d.returns)


@settings(max_examples=400, deadline=None, )
@given(drafts)
def test_parse_format_roundtrip(draft):
    if not _spellable_header(draft):
        return
    text_ = format_flow(draft)
    assert parse(text_) == draft, text_
    # The text is canonical: formatting again yields the same bytes.
    assert format_flow(parse(text_)) == text_


@settings(max_examples=200, deadline=None, )
@given(drafts)
def test_ast_json_roundtrip(draft):
    assert draft_from_json(draft_to_json(draft)) == draft
