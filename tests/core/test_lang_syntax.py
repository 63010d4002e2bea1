"""Parser/formatter/hash tests on the real fixture and on hand-written samples of every construct."""

from __future__ import annotations

import pytest

from flux.canonical import compact_json
from flux.errors import FluxError
from flux.lang import ParseError, ast as A
from flux.lang.astjson import draft_to_json, node_from_json, node_to_json
from flux.lang.formatter import format_flow, format_statement
from flux.lang.hashes import (
    body_hash16, fingerprint, flow_key, input_hash, memo_symbol, once_key, step_id, stmt_hash16,
)
from flux.lang.parser import parse

from tests.helpers import fixture_dir


@pytest.fixture
def snap() -> str:
    """The plan flux 0.26.0 wrote (``plan.flux.snap`` of the real fixture)."""
    return (fixture_dir() / "plan.flux.snap").read_text()


# ------------------------------------------------------------------------------------ fixture

def test_fixture_hashes(snap):
    draft = parse(snap)
    assert fingerprint(draft) == "4d77ff8dba152ad56556d59eac770b0e36f266a5399d667d34140a64a10ff735"
    assert flow_key(draft.name, draft.body) == "h:0aac945488efbfd1"
    assert stmt_hash16(draft.body[0]) == "39ae08c585f98e6a"
    ih = input_hash({"content": "created by flux mock\n", "path": "flux-mock.txt"})
    assert ih == "7b7d06ae306ee31ae768f1e70ebbc4e4e92750881536d135cbec17de7d4f2dff"
    assert step_id("append", ih) == "step_append_7b7d06ae306ee31a"


def test_fixture_ast_json_is_the_spec_text(snap):
    assert compact_json(draft_to_json(parse(snap))) == (
        '{"params":[],"body":[{"kind":"bind","name":"adaptive_batch_ae51354e0a259cd3c68b_action_1",'
        '"value":{"kind":"call","op":"append","args":[{"kind":"lit","value":{"content":'
        '"created by flux mock\\n","path":"flux-mock.txt"}}]}}]}'
    )


def test_fixture_formats_byte_exact_without_sigil(snap):
    assert snap.startswith("flow\n  $adaptive_batch_ae51354e0a259cd3c68b_action_1 = append(")
    out = format_flow(parse(snap))
    assert out == snap.replace("$adaptive", "adaptive", 1)
    assert parse(out) == parse(snap)


def test_format_statement_is_a_one_statement_flow(snap):
    node = parse(snap).body[0]
    assert format_statement(node) == format_flow(A.DraftAst(body=(node,)))
    assert format_statement(node).startswith("flow\n  adaptive_batch_")


def test_other_hashes():
    body = (A.Call("send", (A.Lit("hi"),)),)
    assert once_key("welcome", body) == "welcome\u0000" + body_hash16(body)
    sym = memo_symbol("read", (A.Lit("x"),))
    assert sym.startswith("@memo:") and len(sym) == len("@memo:") + 32
    assert flow_key("deploy", body) == "deploy#" + body_hash16(body)
    assert flow_key("  ", body) == "h:" + body_hash16(body)


# ------------------------------------------------------------------------------------ samples

SAMPLES = {
    "bind_call": 'flow\n  x = read(path: "a.txt")\n',
    "header": "flow greet(who: String, n: List<Number>) -> Ticket\n  return who\n",
    "effect": '@effect(write_file)\n  out: String = write(path: p, content: "x")\n',
    "do_form": 'flow\n  do fmt "x", 1\n  do when 1\n',
    "pun": "flow\n  r = tool(a, b)\n  s = tool($a, $b)\n  t = tool(a, k: 1)\n",
    "templates": 'flow\n  x = { a: y, "b c": [ y, 1 ] }\n',
    "jq": 'flow\n  x = y.a.b[0]["k"]?\n  z = $when.a\n',
    "expr": "flow\n  ok = $a > 3 && !$b || ($c + 1) * 2 == $d\n",
    "fmt_peek_parse_thing": (
        'flow\n  a = fmt("hi {name}")\n  b = peek c\n  d = parse(e, as: "f64")\n'
        '  f = thing ticket id "FLUX-42"\n  g = thing custom "widget" name "w"\n'
    ),
    "when": "flow\n  when a\n    x = f()\n  else\n    y = g()\n",
    "unless": "flow\n  unless a\n    f()\n",
    "each": "flow\n  each f in files -> flat out\n    read(f)\n  each g in xs\n    read(g)\n",
    "repeat": "flow\n  repeat 5, until: done -> steps\n    step_op()\n",
    "seq_pipe": "flow\n  seq -> s\n    a()\n  pipe -> p\n    a()\n    b()\n",
    "memo": "flow\n  memo survey: String = read()\n",
    "parallel": "flow\n  parallel\n    branch left\n      read(\"l\")\n    branch right\n      read(\"r\")\n",
    "await": 'flow\n  await d: Decision = "agent.decision", when: q\n  await "tick"\n',
    "retry": "flow\n  retry 3, backoff: exponential, delay: 2s -> r\n    flaky()\n",
    "try": "flow\n  try\n    a()\n  catch e\n    b(e)\n",
    "confirm": 'flow\n  confirm "deploy?", risk: high\n    deploy()\n',
    "loop": "flow\n  loop for 5m, every: 30s, until: done -> l\n    poll()\n",
    "race": "flow\n  race 1500ms -> w\n    branch a\n      x()\n",
    "throttle_debounce": (
        'flow\n  throttle "api", max: 5, per: 1m\n    call()\n'
        '  debounce "save", wait: 500ms\n    save()\n'
    ),
    "assert_verify": (
        'flow\n  assert ok, "must be ok"\n  verify bash(cmd: "ls") contains "x": "listing"\n'
    ),
    "ctx": (
        'flow\n  ctx pack\n    purpose "review"\n    budget 8000\n    include a, b\n'
        "    exclude c\n  pack += d, e\n"
    ),
    "match_route": (
        'flow\n  match kind\n    case "a"\n      x()\n    default\n      y()\n'
        '  route sel\n    case "fix"\n      z()\n    default\n      w()\n'
    ),
    "fallback": "flow\n  fallback -> f\n    branch\n      a()\n    branch\n      b()\n",
    "timeout_budget_tools": (
        'flow\n  timeout 10s -> t\n    a()\n  budget 100 -> b\n    a()\n'
        '  with_tools ["read","grep"] -> c\n    a()\n'
    ),
    "scope": "flow\n  scope h = open()\n    use(h)\n  finally\n    close(h)\n",
    "saga": "flow\n  saga\n    step\n      a()\n    undo\n      un_a()\n    step\n      b()\n",
    "once_checkpoint": 'flow\n  once "welcome" -> w\n    send()\n  checkpoint "phase-1"\n',
    "return_lit": 'flow\n  return {"a":[1,2.5,true,null]}\n',
    "multiline": 'flow\n  x = """line one\nline two"""\n',
    "json_escape": '@json {"kind":"lit","value":1}\n',
}


def _as_flow(src: str) -> str:
    return src if src.startswith("flow") else "flow\n  " + src


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_sample_parse_format_parse_is_stable(name):
    src = _as_flow(SAMPLES[name])
    first = parse(src)
    text = format_flow(first)
    assert parse(text) == first
    assert format_flow(parse(text)) == text


def test_canonical_samples_format_to_themselves():
    # These samples are written in canonical form, so formatting is the identity.
    for name in ("when", "each", "repeat", "parallel", "retry", "try", "confirm", "loop", "race",
                 "throttle_debounce", "ctx", "match_route", "fallback", "scope", "saga",
                 "once_checkpoint", "pun", "templates", "jq", "fmt_peek_parse_thing", "await",
                 "assert_verify", "timeout_budget_tools", "multiline", "do_form", "expr"):
        src = SAMPLES[name]
        assert format_flow(parse(src)) == src, name


def test_sample_asts():
    d = parse(SAMPLES["pun"])
    assert d.body[0].value == A.Call("tool", (A.Obj({"a": A.Var("a"), "b": A.Var("b")}),))
    assert d.body[1].value == A.Call("tool", (A.Var("a"), A.Var("b")))
    assert d.body[2].value == A.Call("tool", (A.Obj({"a": A.Var("a"), "k": A.Lit(1)}),))
    jq = parse(SAMPLES["jq"]).body[0].value
    # flux's canonical jq path: a numeric index is a `.0` segment (issue 9)
    assert jq == A.Jq('.a.b.0["k"]', A.Var("y"), True)
    e = parse(SAMPLES["expr"]).body[0].value
    assert e == A.Expr("a > 3 && !b || (c + 1) * 2 == d",
                       {n: A.Var(n) for n in ("a", "b", "c", "d")})
    loop = parse(SAMPLES["loop"]).body[0]
    assert (loop.for_ms, loop.every_ms) == (300000, 30000)
    eff = parse(_as_flow(SAMPLES["effect"])).body[0]
    assert eff.effect == "write_file" and eff.ty == A.TypeRef.string()
    assert parse(SAMPLES["multiline"]).body[0].value == A.Lit("line one\nline two")


def test_dollar_and_bare_spellings_parse_the_same():
    a = parse("flow\n  $x = op($y)\n  when $x\n    $z = $x.a\n")
    b = parse("flow\n  x = op(y)\n  when x\n    z = x.a\n")
    assert a == b


def test_loose_spellings():
    src = (
        'goal "write a note"\n'
        "flow   # the header\n"
        "    # a comment line\n\n"
        "    x = op(\n"
        '        path: "a",   # trailing comment\n'
        "        content: [\n"
        "          1,\n"
        "          2,\n"
        "        ],\n"
        "    )\n"
        "    timeout 1500\n"
        "        y()\r\n"
    )
    d = parse(src)
    assert d.body[0] == A.Bind("x", A.Call("op", (A.Obj({"path": A.Lit("a"),
                                                          "content": A.Lit([1, 2])}),)))
    assert d.body[1] == A.Timeout(1500, (A.Call("y"),))


def test_interpolation_stays_text_and_ints_floats_differ():
    d = parse('flow\n  a = "{sym} and {{x}}"\n  b = 1\n  c = 1.0\n  d = 1e16\n')
    assert d.body[0].value == A.Lit("{sym} and {{x}}")
    assert d.body[1].value != d.body[2].value
    assert isinstance(d.body[3].value.value, float)
    assert format_flow(d).splitlines()[4] == "  d = 1e16"


def test_json_node_roundtrip_uses_declared_order():
    node = A.Each(A.Var("xs"), "x", (A.Call("f", (A.Var("x"),)),), "out", True)
    assert list(node_to_json(node)) == ["kind", "in", "as", "body", "collect", "flat"]
    assert node_from_json(node_to_json(node)) == node
    assert "flat" not in node_to_json(A.Each(A.Var("xs"), "x"))
    assert node_to_json(A.Jq(".a", A.Var("x"))) == {
        "kind": "jq", "path": ".a", "input": {"kind": "var", "name": "x"}, "optional": False}


@pytest.mark.parametrize("src, where, what", [
    ("flow\n  x = \n", "line 2, col 7", "expected an expression"),
    ("flow\n\tx = a()\n", "line 2, col 1", "tabs are not allowed"),
    ("flow\n  x = a()\n    y = b()\n", "line 3, col 5", "unexpected indentation"),
    ("flow\n  when a\n      x()\n    y()\n", "line 4, col 5", "inconsistent indentation"),
    ('flow\n  x = "abc\n', "line 2, col 7", "unterminated string"),
    ("nope\n", "line 1, col 1", "expected `flow`"),
    ("flow\n  x = a(\n", "line 3, col 1", "expected"),
    ("flow\n  x = peek\n", "line 2, col 11", "expected a symbol"),
    ('flow\n  @json {"kind":"nope"}\n', "line 2, col 3", "unknown node kind"),
    ("flow\n  timeout 5h\n", "line 2, col 12", "unknown duration unit"),
])
def test_parse_errors_are_one_line_with_position(src, where, what):
    with pytest.raises(ParseError) as info:
        parse(src)
    msg = str(info.value)
    assert isinstance(info.value, FluxError)
    assert "\n" not in msg
    assert msg.startswith(where + ": "), msg
    assert what in msg, msg
