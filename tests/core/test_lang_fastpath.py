"""The parser's fast path for host-derived plans gives exactly what the general parser gives."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from flux.lang import ast as A
from flux.lang.formatter import format_flow
from flux.errors import FluxError
from flux.lang.host_plans import read_host_plan, read_host_plan_lines
from flux.lang.parse_text import IDENT
from flux.lang.parser import new_parser, parse

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
    slow = new_parser(text).flow()
    fast = read_host_plan(text)
    if fast is not None:
        assert fast == slow
    assert parse(text) == slow == draft or parse(text) == slow


def test_fast_path_takes_the_common_shape_and_declines_the_rest():
    assert read_host_plan('flow\n  x = read({"path":"a"})\n') is not None
    assert read_host_plan('flow\n  $x = read({"path":"a"})\n') is not None
    assert read_host_plan('flow\n  x = read({"a":1,"a":2})\n') is None  # duplicate keys: general parser decides
    assert read_host_plan('flow\n  x = read({"c":"""a\n"""})\n') is None
    assert read_host_plan('flow\n  x = read({"c":NaN})\n') is None
    assert read_host_plan('flow\n  x = read({"c":1})\n  y = read({})\n') is None
    # A bare CR between JSON tokens: whitespace to json.loads, an error to the general parser.
    assert read_host_plan('flow\n  x = read({"c":\r1})\n') is None
    with pytest.raises(FluxError):
        parse('flow\n  x = read({"c":\r1})\n')


# ---- plans of several host statements, one a line (a resumable turn's plans) -----------------------

from flux.lang.parser import RESERVED as _RESERVED  # noqa: E402

_stmt_names = st.one_of(names, st.sampled_from(sorted(_RESERVED)[:12]))
_line_junk = st.sampled_from(["", " ", "\t", "# c", "\r", "  ", ")", "{", "\n", "\r\n"])


def _general(text: str):
    try:
        return new_parser(text).flow()
    except FluxError:
        return "error"


@settings(max_examples=300, deadline=None)
@given(stmts=st.lists(st.tuples(st.booleans(), _stmt_names, ops, st.dictionaries(st.text(max_size=8), json_value, max_size=4),
                                st.booleans()), min_size=1, max_size=5),
       trailing=st.booleans(), junk=st.none() | st.tuples(st.integers(0, 400), _line_junk))
def test_several_host_statements_read_fast_as_the_general_parser_reads_them(stmts, trailing, junk):
    import json

    lines = []
    for sigil, name, op, value, ascii_only in stmts:
        arg = json.dumps(value, ensure_ascii=ascii_only, separators=(",", ":"))
        lines.append(f"  {'$' if sigil else ''}{name} = {op}({arg})")
    text = "flow\n" + "\n".join(lines) + ("\n" if trailing else "")
    if junk is not None:  # a character or line the general parser may read differently, or refuse
        at, bit = junk
        at %= len(text) + 1
        text = text[:at] + bit + text[at:]
    fast = read_host_plan_lines(text)
    if fast is not None:
        assert fast == _general(text)
    whole = parse(text) if _general(text) != "error" else None
    if whole is not None:
        assert whole == _general(text)


@settings(max_examples=100, deadline=None)
@given(body=st.lists(st.tuples(names, ops, st.dictionaries(st.text(max_size=8), json_value, max_size=3)), min_size=2, max_size=4))
def test_a_formatted_plan_of_host_statements_reads_fast(body):
    draft = A.DraftAst(body=tuple(A.Bind(n, A.Call(o, (A.Lit(v),))) for n, o, v in body))
    text = format_flow(draft)
    fast = read_host_plan_lines(text)
    if all(n not in _RESERVED for n, _o, _v in body) and all(o not in _RESERVED and o != "fmt" for _n, o, _v in body) \
            and '"""' not in text:
        assert fast is not None
    if fast is not None:
        assert fast == new_parser(text).flow()


def test_several_host_statements_fast_and_the_rest_declined():
    two = 'flow\n  a = read({"path":"a"})\n  $b = bash({"command":"ls {a}"})\n'
    fast = read_host_plan_lines(two)
    assert fast is not None and fast == new_parser(two).flow() and len(fast.body) == 2
    assert parse(two) is not None and parse(two) == fast
    for other in ('flow\n  a = read({"p":1})\n\n  b = read({})\n',  # a blank line
                  'flow\n  a = read({"p":1})  # note\n  b = read({})\n',  # a comment
                  'flow\n  a = read({"p":1})\n\tb = read({})\n',  # another indent
                  'flow\n  a = read({"p":1})\n  b = read({"p":1,"p":2})\n',  # duplicate keys
                  'flow\n  a = read({"p":1})\n  else = read({})\n',  # a reserved word
                  'flow\n  a = read({"p":1})\n  b = read({})\n\n',  # two line ends
                  'flow\n  a = read({"p":1})\r\n  b = read({})\n'):
        assert read_host_plan_lines(other) is None, other


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
    """compact_value as it was: every dict's keys sorted by their UTF-8 bytes (utf8_key), each string
    written by the regex-based json_string (or as a triple-quoted leaf), no arm for a str-keyed dict."""
    if isinstance(v, str):
        if "\n" in v and '"""' not in v and not v.endswith('"') and "\r" not in v:
            return f'"""{v}"""'
        return fmt.json_string(v)
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


class _Str(str):
    pass


class _Dict(dict):
    pass


def test_compact_value_fast_arm_on_the_shapes_it_takes_and_declines():
    """The str-keyed dict arm (str leaves in place) against the previous writer on what it takes —
    flat, nested, newline and quote leaves — and on what it leaves to the general arms: subclasses,
    non-ASCII keys, non-str keys."""
    cases = [{"path": "out/0.txt", "body": "step 0"}, {"b": "x\ny", "a": 'q"""', "c": "t\n", "d": "\r\n"},
             {"z": {"y": ["a\nb", 1.5, None, True]}, "a": 10 ** 20}, {}, {"k": _Str("s\nt")}, _Dict(b=1, a="x"),
             {"é": 1, "e": 2}, {"\ud800": "\ud800", "a": "\ud800"}, {"a": "\x00\x1f\"\\", "b": "\x7f\u2028"}]
    for v in cases:
        assert fmt.compact_value(v) == _utf8_sorted_compact(v), v
    assert fmt.compact_value({"b": "2", "a": "1"}) == '{"a":"1","b":"2"}'
    assert fmt.compact_value({"a": "x\ny"}) == '{"a":"""x\ny"""}'


@settings(max_examples=300, deadline=None)
@given(name=st.one_of(_words, st.text(max_size=6), st.text(_any_char, max_size=3)))
def test_a_plain_name_is_an_ascii_identifier_as_the_ident_pattern_says(name):
    """_bind_call_line tests a name with str methods; they accept exactly IDENT's language."""
    assert (name.isascii() and name.isidentifier()) == bool(IDENT.fullmatch(name))


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
