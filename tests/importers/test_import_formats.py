"""`flux import`: each format's realistic log becomes a session of the flux store format — turns,
cells, usage, sub-agent lineage, errors, provenance — and a log that is not what it claims is one
error line with nothing written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.model.lineage import lineage_of
from flux.model.session import load_session
from flux.store.events import CallUsage, Custom
from flux.store.store import StoreReader
from tests.helpers import tree_digest
from tests.importers.foreign_logs import (
    SECRET, atif_doc, claude_code_session, codex_rollout, deepseek_override, deepseek_session,
)


def flux(*args) -> "object":
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _imported(store: Path, session: str):
    with StoreReader(store) as r:
        detail = load_session(r, session)
        row = r.get_session(session)
        children = r.children_of(session)
    return detail, row, children


def _source(detail) -> dict:
    found = [ev.body.payload for ev in detail.events if isinstance(ev.body, Custom) and ev.body.name == "import_source"]
    assert len(found) == 1
    return found[0]


def _all_bytes(store: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(store.rglob("*")) if p.is_file())


def _atif_file(tmp_path: Path, **kw) -> Path:
    p = tmp_path / "logs" / "trajectory.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(atif_doc(**kw), indent=2), encoding="utf-8")
    return p


def test_atif_trajectory_imports_turns_cells_usage_subagent_and_provenance(tmp_path):
    src = _atif_file(tmp_path)
    store = tmp_path / "store"
    res = flux("import", src, "--store", store, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)["files"][0]
    assert out["turns"] == 1 and out["tool_calls"] == 3 and out["model_calls"] == 4 and len(out["sessions"]) == 2
    detail, row, children = _imported(store, out["session"])
    assert row.model == "gpt-4.1" and row.agent_id == "import:atif" and row.agent_version == "ATIF-v1.7"
    assert [t.outcome for t in detail.turns] == ["ok"]
    assert detail.turns[0].user_input == "fix the parser on empty input"
    cells = [(c.op, c.rec.content) for c in detail.cells]
    assert cells == [("task", "parse() is in src/parser.py"), ("read_file", "def parse(text):\n    return text[0]\n"),
                     ("edit_file", "edited src/parser.py")]
    usages = [ev.body.usage for ev in detail.events if isinstance(ev.body, CallUsage)]
    assert [(u.input_tokens, u.cache_read_input_tokens, u.output_tokens) for u in usages] == [
        (200, 800, 30), (200, 1000, 40), (300, 1000, 25), (400, 1000, 15)]
    prov = _source(detail)
    assert prov["format"] == "atif" and prov["version"] == "ATIF-v1.7" and prov["agent"] == "codeact"
    assert prov["file_hash"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert json.loads(prov["source"]) == atif_doc()  # kept verbatim: unknown fields (extra.harbor_task) included
    assert detail.turns[0].answer == "Fixed: parse() no longer indexes an empty string."
    # the sub-agent: a child session linked by lineage, its own cells
    assert len(children) == 1
    lin = lineage_of(children[0])
    assert lin.kind == "sub-agent" and lin.detail == "explorer" and lin.source == out["session"]
    child, _row, _c = _imported(store, children[0].id)
    assert [(c.op, c.rec.content) for c in child.cells] == [("grep", "src/parser.py:4:def parse(text):")]


def test_claude_code_log_with_subagent_file_and_failing_tool(tmp_path):
    log = claude_code_session(tmp_path / "projects" / "-home-dev-parser")
    store = tmp_path / "store"
    res = flux("import", log, "--store", store, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)["files"][0]
    detail, row, children = _imported(store, out["session"])
    assert row.model == "claude-sonnet-4-5-20250929" and row.agent_version == "2.0.14"
    # the three lines of msg_01AAA are one model call: thinking, text and the Bash call
    assert out["model_calls"] == 4 and out["tool_calls"] == 3
    assert [(c.op, c.rec.is_error) for c in detail.cells] == [("Bash", True), ("Task", False), ("Edit", False)]
    assert detail.cells[0].rec.content == "F\nIndexError: string index out of range"
    assert detail.turns[0].user_input == "the parser crashes on empty input, fix it"  # the isMeta line is no turn
    first = next(ev.body for ev in detail.events if getattr(ev.body, "role", None) == "assistant")
    kinds = [b["type"] for b in first.content]
    assert kinds == ["thinking", "text", "tool_use"]
    [child] = children
    assert lineage_of(child).detail == "Explore" and child.model == "claude-haiku-4-5-20251001"
    sub, _r, _c = _imported(store, child.id)
    assert [(c.op, c.rec.content) for c in sub.cells] == [("Grep", "src/cli.py:12:    parse(argv)")]
    assert _source(detail)["foreign_session"] == "6f1c2a9e-0000-4000-8000-000000000001"


def test_codex_rollout_shell_and_patch_calls(tmp_path):
    log = codex_rollout(tmp_path / "sessions")
    store = tmp_path / "store"
    res = flux("import", log, "--store", store, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)["files"][0]
    detail, row, _children = _imported(store, out["session"])
    assert row.model == "gpt-5-codex" and row.agent_version == "0.46.0"
    assert detail.turns[0].user_input == "make the tests pass"  # not the environment context
    assert [(c.op, c.rec.is_error) for c in detail.cells] == [("shell", True), ("apply_patch", False)]  # exit code 1
    usages = [ev.body.usage for ev in detail.events if isinstance(ev.body, CallUsage)]
    assert [(u.input_tokens, u.cache_read_input_tokens, u.output_tokens, u.reasoning_tokens) for u in usages] == [
        (1000, 3000, 60, 30), (300, 4000, 90, 0), (200, 4300, 20, 0)]
    assert detail.turns[0].answer == "Patched parse(); tests pass."


def test_deepseek_session_chunk_groups_and_error_turn(tmp_path):
    log = deepseek_session(tmp_path / "snap", error_turn=True)
    store = tmp_path / "store"
    res = flux("import", log, "--store", store, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)["files"][0]
    detail, row, _children = _imported(store, out["session"])
    assert row.model == "deepseek-v4-flash"
    assert [t.outcome for t in detail.turns] == ["ok", "error"]
    assert detail.turns[1].answer == "simulated provider error (HTTP 401) (AUTH)"
    [cell] = detail.cells
    assert cell.op == "bash" and cell.rec.content == "TERMINAL_OK\n"
    assert json.loads(cell.rec.input_view) == {"command": "echo TERMINAL_OK", "description": "Echo a marker"}
    assert detail.turns[0].answer == "DONE"
    first = next(ev.body for ev in detail.events if getattr(ev.body, "role", None) == "assistant")
    assert first.content[0] == {"type": "thinking", "thinking": "Run the command.", "signature": ""}


def test_deepseek_override_entries_replace_the_derived_model_script(tmp_path):
    snap = tmp_path / "snap"
    log = deepseek_session(snap)
    deepseek_override(snap)
    store = tmp_path / "store"
    res = flux("import", log, "--store", store, "--json")
    assert res.exit_code == 0, res.output
    detail, _row, _c = _imported(store, json.loads(res.output)["files"][0]["session"])
    # the override's one entry throws after a prefix chunk: the turn fails with its message, no tool ran
    assert [t.outcome for t in detail.turns] == ["error"]
    assert "upstream reset the stream (NETWORK)" in detail.turns[0].answer
    assert detail.cells == []
    prov = _source(detail)
    assert prov["extra"]["override"] == {"file": "replay.override.json", "entries": 1}
    assert json.loads(prov["files"]["replay.override.json"])[0]["message"] == "upstream reset the stream"


def test_reimport_is_a_no_op_and_a_directory_imports_every_log(tmp_path):
    logs = tmp_path / "logs"
    claude_code_session(logs / "claude")
    codex_rollout(logs / "codex")
    deepseek_session(logs / "deepseek")
    (logs / "atif").mkdir()
    (logs / "atif" / "run.json").write_text(json.dumps(atif_doc()), encoding="utf-8")
    (logs / "notes.json").write_text('{"todo": ["not a log"]}', encoding="utf-8")
    store = tmp_path / "store"
    res = flux("import", logs, "--store", store)
    assert res.exit_code == 0, res.output
    assert res.output.count("imported as") == 4 and "skipped 1 file(s)" in res.output
    with StoreReader(store) as r:
        roots = [s for s in r.list_sessions() if lineage_of(s) is None]
        assert len(roots) == 4 and r.session_count() == 6  # + the Claude Code and ATIF sub-agents
    before = tree_digest(store)
    again = flux("import", logs, "--store", store)
    assert again.exit_code == 0 and again.output.count("already imported as") == 4
    assert tree_digest(store) == before  # nothing written, not a byte


@pytest.mark.parametrize("fmt", ["atif", "claude-code", "codex", "deepseek"])
def test_planted_secrets_never_reach_the_store(tmp_path, fmt):
    logs = tmp_path / "logs"
    if fmt == "atif":
        log = _atif_file(tmp_path, secret=SECRET)
    elif fmt == "claude-code":
        log = claude_code_session(logs, secret=SECRET)
    elif fmt == "codex":
        log = codex_rollout(logs, secret=SECRET)
    else:
        log = deepseek_session(logs, secret=SECRET)
    assert SECRET.encode() in log.read_bytes()
    store = tmp_path / "store"
    res = flux("import", log, "--store", store)
    assert res.exit_code == 0, res.output
    data = _all_bytes(store)
    assert SECRET.encode() not in data and SECRET[13:30].encode() not in data
    assert b"[redacted]" in data


def _truncate_last_line(p: Path) -> int:
    lines = p.read_text(encoding="utf-8").splitlines()
    lines[-1] = lines[-1][: len(lines[-1]) // 2]
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


@pytest.mark.parametrize("fmt", ["claude-code", "codex", "deepseek"])
def test_a_truncated_log_is_one_error_line_naming_the_line_and_nothing_is_written(tmp_path, fmt):
    logs = tmp_path / "logs"
    log = {"claude-code": claude_code_session, "codex": codex_rollout, "deepseek": deepseek_session}[fmt](logs)
    n = _truncate_last_line(log)
    store = tmp_path / "store"
    flux("import", _atif_file(tmp_path), "--store", store)  # a store with one good import in it
    before = tree_digest(store)
    res = flux("import", log, "--store", store, "--format", fmt)
    assert res.exit_code == 1
    assert res.output.count("\n") == 1 and res.output.startswith("error: ")
    assert f"line {n} is not JSON" in res.output
    assert tree_digest(store) == before


def test_wrong_types_name_the_step_and_a_claimed_format_is_checked(tmp_path):
    doc = atif_doc()
    doc["steps"][3]["tool_calls"][0]["arguments"] = ["not", "an", "object"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    store = tmp_path / "store"
    res = flux("import", bad, "--store", store)
    assert res.exit_code == 1 and res.output.count("\n") == 1
    assert "step 4" in res.output and "must be an object" in res.output
    assert not store.exists()
    # a Codex log given as claude-code is not what it claims: one line, nothing written
    log = codex_rollout(tmp_path / "cx")
    res = flux("import", log, "--store", store, "--format", "claude-code")
    assert res.exit_code == 1 and res.output.count("\n") == 1 and res.output.startswith("error: ")
    assert not store.exists()
    res = flux("import", tmp_path / "nothing-here.jsonl", "--store", store)
    assert res.exit_code == 1 and "does not exist" in res.output


@pytest.mark.parametrize("where", ["a tool call", "the provenance event"])
def test_a_failure_while_recording_undoes_every_session_of_that_import(tmp_path, monkeypatch, where):
    from flux.importers import writer

    store = tmp_path / "store"
    flux("import", codex_rollout(tmp_path / "cx"), "--store", store)
    with StoreReader(store) as r:
        count = r.session_count()
    if where == "a tool call":
        real = writer._Tape.take

        def broken(self, name, given):  # the log's last tool result does not fit the call
            if self.next == len(self.uses) - 1:
                given = {**given, "changed": True}
            return real(self, name, given)

        monkeypatch.setattr(writer._Tape, "take", broken)
    else:
        def full(**kw):
            raise writer.FluxError("disk full")

        monkeypatch.setattr(writer, "Custom", full)
    res = flux("import", _atif_file(tmp_path), "--store", store)
    assert res.exit_code == 1 and res.output.count("\n") == 1 and "nothing was imported" in res.output
    with StoreReader(store) as r:
        assert r.session_count() == count  # the parent and its sub-agent were deleted again
