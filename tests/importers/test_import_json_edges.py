"""JSON inside foreign logs that Python's decoder refuses in ways other than a syntax error: an integer of
thousands of digits (a plain ValueError with no position) and text nested past the stack (RecursionError),
in a line, in a whole ATIF document, in a tool call's arguments string, in a tool's output. Each is one
`error:` line naming where, or (a tool's output is only text) imports — never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.cli import main
from flux.importers import ImportFormatError, parse_file
from flux.importers.model import arguments_object, load_json, token_count
from tests.importers.foreign_logs import atif_doc, codex_rollout, deepseek_session, claude_code_session

LONG_INT = "1" * 5000  # past Python's 4300-digit limit for int(): json.loads raises a ValueError without .msg
DEEP = "[" * 100_000 + "]" * 100_000  # past the decoder's recursion limit


def flux(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _one_error_line(res) -> str:
    assert res.exit_code == 1, res.output
    assert res.output.count("\n") == 1 and res.output.startswith("error: "), res.output
    return res.output


def _replace_line(log: Path, n: int, text: str) -> None:
    lines = log.read_text(encoding="utf-8").splitlines()
    lines[n - 1] = text
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.mark.parametrize("make,fmt", [(claude_code_session, "claude-code"), (codex_rollout, "codex"),
                                      (deepseek_session, "deepseek")])
@pytest.mark.parametrize("bad", [LONG_INT, DEEP], ids=["long-int", "deep"])
def test_a_jsonl_line_python_cannot_decode_is_one_error_naming_the_line(tmp_path, make, fmt, bad):
    log = make(tmp_path / "log")
    _replace_line(log, 3, '{"type": "x", "n": ' + bad + "}" if bad is LONG_INT else bad)
    out = _one_error_line(flux("import", log, "--store", tmp_path / "store", "--format", fmt))
    assert "line 3" in out
    assert ("is not JSON (Exceeds the limit" in out) if bad is LONG_INT else ("nests too deeply" in out)
    assert not (tmp_path / "store").exists()  # nothing is written before the whole log has parsed


@pytest.mark.parametrize("bad", [LONG_INT, DEEP], ids=["long-int", "deep"])
def test_an_atif_document_python_cannot_decode_is_one_error(tmp_path, bad):
    doc = json.dumps(atif_doc(with_subagent=False))
    text = doc[:-1] + ', "extra_number": ' + LONG_INT + "}" if bad is LONG_INT else DEEP
    log = tmp_path / "run.json"
    log.write_text(text, encoding="utf-8")
    out = _one_error_line(flux("import", log, "--store", tmp_path / "store", "--format", "atif"))
    assert "run.json" in out
    assert ("is not JSON" in out) if bad is LONG_INT else ("nests too deeply" in out)


def _codex_with(tmp_path: Path, edit) -> Path:
    log = codex_rollout(tmp_path / "log")
    lines = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()]
    for obj in lines:
        edit(obj)
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return log


def test_a_codex_tool_calls_arguments_nested_too_deeply_are_one_error(tmp_path):
    def edit(obj):
        if obj["payload"].get("type") == "function_call":
            obj["payload"]["arguments"] = DEEP
    log = _codex_with(tmp_path, edit)
    out = _one_error_line(flux("import", log, "--store", tmp_path / "store", "--format", "codex"))
    assert "the arguments text of tool call `shell` nests too deeply" in out


def test_a_codex_tool_output_that_is_deeply_nested_text_imports(tmp_path):
    def edit(obj):
        if obj["payload"].get("type") == "function_call_output":
            obj["payload"]["output"] = DEEP
    log = _codex_with(tmp_path, edit)
    run, _src = parse_file(log, "codex")
    uses = [u for t in run.turns for c in t.calls for u in c.tool_uses]
    assert uses[0].result == DEEP and uses[0].is_error is False
    assert flux("import", log, "--store", tmp_path / "store", "--format", "codex").exit_code == 0


def test_a_deepseek_tool_calls_arguments_that_are_not_json_are_one_error(tmp_path):
    log = deepseek_session(tmp_path / "log")
    lines = [json.loads(x) for x in log.read_text(encoding="utf-8").splitlines()]
    for obj in lines:
        block = obj.get("data", {}).get("chunk", {}).get("block", {}) if isinstance(obj.get("data"), dict) else {}
        if block.get("type") == "tool-call":
            block["arguments"] = '{"n": ' + LONG_INT + "}"
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    out = _one_error_line(flux("import", log, "--store", tmp_path / "store", "--format", "deepseek"))
    assert "the arguments text of tool call `bash` is not JSON (Exceeds the limit" in out


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(max_size=40), st.just(DEEP), st.just(LONG_INT),
                 st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                              lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3),
                              max_leaves=8).map(json.dumps)))
def test_tool_arguments_text_is_an_object_or_one_line_error(text):
    try:
        args = arguments_object(text, "log: line 1", "tool")
    except ImportFormatError as e:
        assert "\n" not in str(e) and str(e).startswith("log: line 1: the arguments ")
        return
    assert isinstance(args, dict)
    assert args == ({} if not text.strip() else json.loads(text))


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
                 st.lists(st.integers(), max_size=2)))
def test_a_token_count_is_a_non_negative_int_or_one_line_error(value):
    try:
        n = token_count(value, "log: line 1", "input_tokens")
    except ImportFormatError as e:
        assert str(e).startswith("log: line 1: `input_tokens` must be a non-negative number")
        assert value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not 0 <= value <= 1e15)
        return
    assert n == (0 if value is None else int(value)) and n >= 0


def test_load_json_names_the_place_and_the_reason():
    with pytest.raises(ImportFormatError, match=r"^f: line 2 is not JSON \(Expecting value\) — damaged$"):
        load_json("[", "f: line 2", "damaged", "deep")
    with pytest.raises(ImportFormatError, match=r"^f nests too deeply — deep$"):
        load_json(DEEP, "f", "damaged", "deep")
    assert load_json('{"a": [1]}', "f", "damaged", "deep") == {"a": [1]}
