"""Issue 9 part 1: parser and formatter parity with flux, on flux's own test data.

The cases live as data under ``tests/lang/data/`` (ported from the Rust repository
``codewandler/flux``: ``cst_agreement.rs``, ``named_option_headers.rs``, ``jq_path.rs`` and the
shipped ``.flux`` files); this file is our own test code over them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from flux.canonical import compact_json
from flux.lang import ast as A
from flux.lang.astjson import draft_from_json, draft_json_text, draft_to_json, node_to_json
from flux.lang.formatter import format_flow, native_path
from flux.lang.parser import ParseError, parse, parse_program
from flux.lang.program import Program, program_to_json

DATA = Path(__file__).parent / "data"
CST = json.loads((DATA / "cst_agreement.json").read_text(encoding="utf-8"))
HEADERS = json.loads((DATA / "named_option_headers.json").read_text(encoding="utf-8"))
JQ = json.loads((DATA / "jq_paths.json").read_text(encoding="utf-8"))
MANIFEST = json.loads((DATA / "flux" / "MANIFEST.json").read_text(encoding="utf-8"))["files"]
FLOW_FILES = sorted(p for p, m in MANIFEST.items() if not m.get("program") and not m.get("draft_json"))
PROGRAM_FILES = sorted(p for p, m in MANIFEST.items() if m.get("program"))
DRAFT_JSON_FILES = sorted(p for p, m in MANIFEST.items() if m.get("draft_json"))


EXPRESSION_KINDS = {"peek", "fmt", "jq", "thing", "parse", "obj", "list", "expr"}


def round_trips(draft: A.DraftAst) -> str:
    text = format_flow(draft)
    assert parse(text) == draft, text
    assert format_flow(parse(text)) == text
    return text


def flux_ast_sha256(draft: A.DraftAst) -> str:
    return hashlib.sha256(b"flow\0" + draft_json_text(draft).encode("utf-8")).hexdigest()


# ------------------------------------------------------------------------- cst_agreement.rs

@pytest.mark.parametrize("src", CST["flows"], ids=[f"battery{i}" for i in range(len(CST["flows"]))])
def test_native_spelling_battery_parses_and_round_trips_natively(src):
    text = round_trips(parse(src))
    if "@json" not in src:  # only an expression standing as a statement has no native spelling
        for line in text.splitlines():  # (flux's fmt_stmt writes those as `@json` too)
            if "@json" in line:
                assert json.loads(line.split("@json ", 1)[1])["kind"] in EXPRESSION_KINDS, text


def test_compact_readable_spellings_lower_to_the_legacy_ast():
    case = CST["readable_equivalence"]
    assert parse(case["readable"]) == parse(case["legacy"])


def test_named_call_labels_are_semantic():
    draft = parse(CST["named_call"]["source"])
    assert node_to_json(draft.body[0].value.args[0]) == CST["named_call"]["arg_json"]


@pytest.mark.parametrize("case", CST["errors"])
def test_flux_error_wordings(case):
    with pytest.raises(ParseError, match=case["contains"].replace("`", "`")):
        parse(case["source"])


# ------------------------------------------------------------------- named_option_headers.rs

@pytest.mark.parametrize("construct,canonical,accepted", HEADERS["headers"],
                         ids=[h[0] for h in HEADERS["headers"]])
def test_legacy_header_spellings_give_the_canonical_ast(construct, canonical, accepted):
    new = parse(canonical)
    assert format_flow(new) == canonical  # the canonical spelling is a formatter fixed point
    header = canonical.splitlines()[1].strip()
    for legacy in accepted:
        old = parse(legacy)
        assert old == new, legacy
        printed = format_flow(old)
        assert header in printed and "@json" not in printed


def test_the_design_triage_fixture_round_trips():
    draft = parse(HEADERS["triage"])
    printed = round_trips(draft)
    assert '      confirm "Open issue?", risk: medium\n' in printed


def test_structural_headers_keep_their_word_and_indentation_forms():
    assert format_flow(parse(HEADERS["structural"])) == HEADERS["structural"]


@pytest.mark.parametrize("src", HEADERS["rejected_option_tails"] + HEADERS["double_until"])
def test_unknown_option_tails_and_a_second_until_are_errors(src):
    with pytest.raises(ParseError):
        parse(src)


# ----------------------------------------------------------------------------- jq_path.rs

@pytest.mark.parametrize("source,path", JQ["parse"])
def test_field_access_parses_to_flux_jq_paths(source, path):
    node = parse(f"flow\n  x = {source}\n").body[0].value
    assert isinstance(node, A.Jq) and node.path == path
    round_trips(parse(f"flow\n  x = {source}\n"))


@pytest.mark.parametrize("path,native", JQ["native"])
def test_native_path_spelling(path, native):
    assert native_path(path) == native
    draft = A.DraftAst(body=(A.Bind("x", A.Jq(path, A.Var("r"))),))
    text = round_trips(draft)
    assert ("@json" in text) == (native is None)


def test_a_quoted_first_segment_keeps_flux_leading_dot_and_hash():
    draft = parse('flow\n  x = response["a.b"]["br[ack]"]\n')
    assert compact_json(node_to_json(draft.body[0].value)) == (
        '{"kind":"jq","path":".[\\"a.b\\"][\\"br[ack]\\"]","input":{"kind":"var",'
        '"name":"response"},"optional":false}')


# ---------------------------------------------------------------------- shipped .flux files

@pytest.mark.parametrize("path", FLOW_FILES)
def test_shipped_flux_file_parses_and_round_trips(path):
    draft = parse((DATA / "flux" / path).read_text(encoding="utf-8"))
    round_trips(draft)
    meta = MANIFEST[path]
    if meta.get("pinned_version"):
        assert flux_ast_sha256(draft) == meta["flux_ast_sha256"]
    if "same_ast_as" in meta:  # the text and the JSON DraftAst spellings of one file
        other = json.loads((DATA / "flux" / meta["same_ast_as"]).read_text(encoding="utf-8"))
        assert draft == draft_from_json(other)
    if meta.get("flux_formatter_output"):  # flux's formatter wrote this file: ours writes it too
        assert format_flow(draft) == (DATA / "flux" / path).read_text(encoding="utf-8")


@pytest.mark.parametrize("path", DRAFT_JSON_FILES)
def test_json_draft_ast_files_load_and_round_trip_through_text(path):
    round_trips(draft_from_json(json.loads((DATA / "flux" / path).read_text(encoding="utf-8"))))


@pytest.mark.parametrize("path", PROGRAM_FILES)
def test_shipped_program_parses_to_flux_pinned_hash(path):
    module = parse_program((DATA / "flux" / path).read_text(encoding="utf-8"))
    assert isinstance(module, Program)
    text = compact_json(program_to_json(module))
    meta = MANIFEST[path]
    if meta["flux_ast_sha256"] is not None:
        assert hashlib.sha256(b"program\0" + text.encode("utf-8")).hexdigest() == meta["flux_ast_sha256"]
    flows = module.flow_asts()
    assert len(flows) == meta["formatted_asts"]  # flux's census of executable ASTs
    for draft in flows:
        round_trips(draft)


# cst_agreement.rs LEGACY_FIXTURES: the nine files flux pins an AST hash for.
FLUX_PINNED = {
    "crates/flux-app/examples/hello.flux", "crates/flux-app/examples/support-bot.flux",
    "crates/flux-flow/assets/agent-loop.flux", "examples/advanced-code-review.flux",
    "examples/channels-app.flux", "examples/data-transforms.flux", "examples/god-review.flux",
    "examples/multi-perspective.flux", "examples/strict_review.flux",
}


def test_every_flux_pin_has_a_fixture_in_its_pinned_version():
    matched = {m.get("flux_path", p) for p, m in MANIFEST.items()
               if m.get("pinned_version") or (m.get("program") and m["flux_ast_sha256"])}
    assert matched == FLUX_PINNED


def test_the_json_escape_version_differs_from_the_pinned_one_only_where_its_json_does():
    """advanced-code-review's @json version wrote the confirm's observe argument as a literal object;
    with that one node put back as the native text's template, its AST is the pinned one."""
    pinned = parse((DATA / "flux" / "pinned/examples/advanced-code-review.flux").read_text("utf-8"))
    escaped = parse((DATA / "flux" / "versions/examples/advanced-code-review.63244057418.flux")
                    .read_text("utf-8"))
    assert flux_ast_sha256(escaped) != flux_ast_sha256(pinned)
    observe = escaped.body[10].cases[2].body[1].body[0]
    assert observe.args == (A.Lit({"kind": "escalation.approved"}),)
    fixed = json.loads(json.dumps(draft_to_json(escaped)))
    fixed["body"][10]["cases"][2]["body"][1]["body"][0]["args"] = [
        {"kind": "obj", "fields": {"kind": {"kind": "lit", "value": "escalation.approved"}}}]
    assert fixed == draft_to_json(pinned)


@pytest.mark.parametrize("path", FLOW_FILES)
def test_a_lone_flow_file_is_a_flow_module(path):
    assert parse_program((DATA / "flux" / path).read_text(encoding="utf-8")) == \
        parse((DATA / "flux" / path).read_text(encoding="utf-8"))


def test_program_battery_agent_loop_and_digit_led_op():
    loop_src, op_src = CST["programs"]
    prog = parse_program(loop_src)
    assert [d.name for d in prog.agent_loops] == ["support"]
    assert prog.agents[0].agent_loop == "support"
    assert program_to_json(prog)["agents"] == [{"name": "guide", "tools": [], "datasources": [],
                                                "loop": "support"}]
    op = parse_program(op_src).ops[0]
    assert (op.name, op.params[0].name, op.returns) == ("9op", "9arg", A.TypeRef.named("9Type"))
    for draft in prog.flow_asts() + parse_program(op_src).flow_asts():
        round_trips(draft)


def test_composite_op_metadata_and_permissions():
    prog = parse_program(
        "permissions\n  allow [read, grep]\n  deny [bash]\n\n"
        "op summarize(path: String) -> String\n  description \"summarize a file\"\n  risk medium\n"
        "  idempotency non-idempotent\n  effects [read, model]\n  limits { dispatches: 3 }\n"
        "  expose false\n  text = read(path: path)\n  return text\n")
    assert program_to_json(prog)["permissions"] == {"allow": ["read", "grep"], "deny": ["bash"]}
    meta = program_to_json(prog)["ops"][0]["meta"]
    assert meta == {"description": "summarize a file", "risk": "medium",
                    "idempotency": "non_idempotent", "effects": ["read", "network"],
                    "expose": False, "limits": {"dispatches": 3}}
    assert len(prog.ops[0].body.body) == 2


@pytest.mark.parametrize("src,words", [
    ("", "empty input"),
    ("widget w\n", "unknown top-level declaration"),
    ("  flow\n    x = 1\n", "column 0"),
    ("trigger t\n  run x\n", "needs an `on` event label"),
    ("trigger t\n  on \"e\"\n  when x\n", "unknown trigger attribute `when`"),
    ("journey j\n  agent a\n", "needs a `flow` body"),
    ("op o\n  risk extreme\n", "unknown risk"),
    ("agent a\n  tools \"x\"\n", "must be a list of strings"),
])
def test_program_errors(src, words):
    with pytest.raises(ParseError, match=words):
        parse_program(src)


# ------------------------------------------------------------ the constructs issue 9 lists

def test_until_on_its_own_line_after_repeat():
    src = "flow f\n  repeat 50\n    until $done\n    step()\n"
    assert parse(src) == parse("flow f\n  repeat 50, until: done\n    step()\n")
    with pytest.raises(ParseError, match="only valid as the first line"):
        parse("flow f\n  until $done\n")


def test_goal_header_lines_are_ignored():
    a = parse('flow commit(paths: List<String>) -> String\ngoal "Create one commit."\n\n'
              '  assert $paths, "need paths"\n')
    b = parse('goal "g"\nflow commit(paths: List<String>) -> String\n  assert paths, "need paths"\n')
    assert a == b and len(a.body) == 1


def test_field_puns_in_templates():
    d = parse("flow\n  x = create_issue({ ticket, hits })\n  return { state, recent }\n")
    assert d.body[0].value.args[0] == A.Obj({"ticket": A.Var("ticket"), "hits": A.Var("hits")})
    assert d.body[1].value == A.Obj({"state": A.Var("state"), "recent": A.Var("recent")})
    round_trips(d)


def test_return_without_value_and_comments_after_return():
    d = parse("flow\n  return\n  # done\n")
    assert d.body == (A.Return(A.Lit(None)),)
    assert parse("flow\n  return $x  # the answer\n# trailing\n").body == (A.Return(A.Var("x")),)


def test_expr_with_named_args():
    d = parse('flow\n  total = expr("price * qty", price: $price, qty: $qty)\n')
    assert d.body[0].value == A.Expr("price * qty", {"price": A.Var("price"), "qty": A.Var("qty")})
    round_trips(d)


def test_formulas_keep_flux_text_single_quotes_and_len():
    d = parse("flow\n  when $status == 'ok' && len($queue) > 0\n    x = 1\n")
    assert d.body[0].cond == A.Expr("status == 'ok' && len(queue) > 0",
                                    {"status": A.Var("status"), "queue": A.Var("queue")})
    round_trips(d)
    with pytest.raises(ParseError, match="single-quoted"):
        parse("flow\n  x = 'ok'\n")


def test_thing_custom_kind():
    d = parse('flow\n  w = thing custom "widget" key "w-1"\n')
    assert d.body[0].value == A.Thing(A.ThingRef("widget", "key", "w-1", custom=True))
    assert draft_to_json(d)["body"][0]["value"]["thing"] == {
        "kind": {"custom": "widget"}, "selector": {"key": "w-1"}}
    round_trips(d)


def test_numeric_index_access():
    d = parse("flow\n  first = $issues.0\n  body = $issues.0.body\n")
    assert [b.value.path for b in d.body] == [".0", ".0.body"]
    assert format_flow(d) == "flow\n  first = issues[0]\n  body = issues[0].body\n"


def test_type_labels_are_exact_case_as_in_flux():
    d = parse("flow agent-loop -> string\n  return 1\n")
    assert d.returns == A.TypeRef.named("string")
    assert parse("flow f -> String\n  return 1\n").returns == A.TypeRef.string()
    round_trips(d)


@pytest.mark.parametrize("src", [
    "type Ticket = { id: String }\nflow f\n  return 1\n",
    "flow f\n  x = @kind(ticket) \"T-1\"\n",
    "flow f\n  watch $x\n    y = 1\n",
    "flow f\n  block\n    y = 1\n",
    "flow f\n  x = a |> b\n",
])
def test_syntax_flux_does_not_implement_is_a_clean_parse_error(src):
    with pytest.raises(ParseError):
        parse(src)


# ---------------------------------------------- format.rs fmt_stmt / fmt_expr / fmt_call_args

_V = {"kind": "var", "name": "x"}


@pytest.mark.parametrize("node,text", [
    ({"kind": "bind", "name": "t", "value": {"kind": "thing", "thing": {
        "kind": {"custom": "widget"}, "selector": {"key": "w-1"}}}}, 't = thing custom "widget" key "w-1"'),
    ({"kind": "return", "value": {"kind": "obj", "fields": {"a": {"kind": "var", "name": "a"}, "b": _V}}},
     "return { a, b: x }"),
    ({"kind": "call", "op": "write", "args": [{"kind": "obj", "fields": {"a-b": _V}}]},
     '@json {"kind":"call","op":"write","args":[{"kind":"obj","fields":{"a-b":{"kind":"var","name":"x"}}}]}'),
    ({"kind": "when", "cond": {"kind": "expr", "formula": "issue.state == 'opened'",
                               "vars": {"issue": {"kind": "var", "name": "issue"}}}, "then": []},
     "when issue.state == 'opened'"),
    ({"kind": "peek", "name": "x"}, '@json {"kind":"peek","name":"x"}'),
    ({"kind": "try", "body": [], "handler": []}, "try\ncatch"),
    ({"kind": "call", "op": "when", "args": [_V, {"kind": "lit", "value": 1}]}, "do when $x, 1"),
])
def test_formatter_spells_nodes_as_flux_formatter_does(node, text):
    draft = draft_from_json({"body": [node]})
    assert format_flow(draft) == "flow\n" + "".join("  " + ln + "\n" for ln in text.split("\n"))
    assert parse(format_flow(draft)) == draft
