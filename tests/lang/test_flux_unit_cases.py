"""flux's parse.rs / format.rs unit tests, ported as data (tests/lang/data/flux_unit_cases.json).

Each case is one of:
- ``ast``: flux's AST JSON; ``format_flow`` of it contains/lacks the given text, is native (no
  ``@json``) or not, and ``parse(format(ast)) == ast`` — flux's ``assert_round_trips``;
- ``source``: ``parse(source)`` gives ``ast`` (or the exact AST JSON ``ast_json``), or fails with the
  given words, line or error class; ``round_trips`` re-parses its formatting;
- ``program``: ``parse_program(program)`` gives a module whose JSON has the given values, or fails.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flux.lang import ast as A
from flux.lang.astjson import draft_from_json, draft_to_json
from flux.lang.formatter import format_flow
from flux.lang.parser import ParseError, parse, parse_program
from flux.lang.program import Program, program_to_json

CASES = json.loads((Path(__file__).parent / "data" / "flux_unit_cases.json")
                   .read_text(encoding="utf-8"))["cases"]


def error_class(message: str) -> str:
    """flux's frozen_error_class (parse.rs) over our message."""
    m = message.lower()
    if "tab" in m or "indent" in m:
        return "layout"
    if "else" in m:
        return "orphan_clause"
    if "json" in m:
        return "invalid_literal"
    if "top-level" in m or "declaration" in m:
        return "unknown_declaration"
    return "missing_operand"


def lookup(value, path: str):
    for part in path.split("."):
        if part == "#":
            return len(value)
        if isinstance(value, list):
            value = value[int(part)]
        else:
            value = value.get(part) if isinstance(value, dict) else None
    return value


def check_error(exc: ParseError, case: dict) -> None:
    words = case.get("error_contains") or []
    for w in [words] if isinstance(words, str) else words:
        assert w.lower() in str(exc).lower(), str(exc)
    if "error_line" in case:
        assert exc.line == case["error_line"], str(exc)
    if "error_class" in case:
        assert error_class(str(exc)) == case["error_class"], str(exc)


def check_text(text: str, case: dict) -> None:
    for want in case.get("contains", []) + case.get("formatted_contains", []):
        assert want in text, text
    for unwanted in case.get("absent", []):
        assert unwanted not in text, text
    if "native" in case:
        assert ("@json" not in text) == case["native"], text
    if "starts_with" in case:
        assert text.startswith(case["starts_with"]), text
    if case.get("json_line_single_line"):
        line = next(ln for ln in text.splitlines() if ln.lstrip().startswith("@json "))
        assert '"""' not in line and "\\n" in line, line
    if "json_statement_lines_at_least" in case:
        lines = [ln for ln in text.splitlines() if ln.lstrip().startswith("@json ")]
        assert len(lines) >= case["json_statement_lines_at_least"], text


@pytest.mark.parametrize("case", CASES, ids=[f"{i}-{c['test']}" for i, c in enumerate(CASES)])
def test_flux_unit_case(case):
    if "program" in case:
        if "error_contains" in case or "error_line" in case:
            with pytest.raises(ParseError) as err:
                parse_program(case["program"])
            check_error(err.value, case)
            return
        module = parse_program(case["program"])
        if case.get("module") == "flow":
            assert isinstance(module, A.DraftAst)
            return
        assert isinstance(module, Program)
        data = program_to_json(module)
        for path, want in case.get("program_json_has", {}).items():
            assert lookup(data, path) == want, path
        return
    if "source" in case:
        src = case["source"]
        if "error_contains" in case or "error_line" in case or "error_class" in case:
            with pytest.raises(ParseError) as err:
                parse(src)
            check_error(err.value, case)
            return
        draft = parse(src)
        if "ast" in case:
            assert draft == draft_from_json(case["ast"])
        if "ast_json" in case:
            assert draft_to_json(draft) == case["ast_json"]
        text = format_flow(draft)
        check_text(text, case)
        if case.get("round_trips"):
            assert parse(text) == draft, text
        return
    draft = draft_from_json(case["ast"])
    text = format_flow(draft)
    if case.get("format_then_parse_error"):
        with pytest.raises(ParseError):
            parse(text)
        return
    check_text(text, case)
    assert parse(text) == draft, text
    assert format_flow(parse(text)) == text
