"""Logs of other agents, written by the tests in the shape their producers write them.

Each builder returns the lines (or document) of one realistic session: the structure follows the
real files of each kind (Claude Code's project JSONL with one line per content block and its
``subagents/`` directory, Codex's rollout JSONL, the deepseek harness's snapshot ``session.jsonl``
with its compact chunk lines, an ATIF trajectory with an embedded sub-agent); the text is ours.
"""

from __future__ import annotations

import json
from pathlib import Path

SECRET = "sk-ant-api03-" + "Q" * 40  # a credential the redactor's patterns know
CC_VERSION = "2.0.14"


def write_jsonl(path: Path, lines: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in lines), encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------- ATIF


def atif_doc(*, with_subagent: bool = True, secret: str | None = None) -> dict:
    sub = {
        "schema_version": "ATIF-v1.7", "session_id": "sub-1", "trajectory_id": "traj-explorer",
        "agent": {"name": "explorer", "version": "0.3.0", "model_name": "gpt-4.1-mini"},
        "steps": [
            {"step_id": 1, "timestamp": "2026-05-01T10:00:02.100Z", "source": "user", "message": "find the parser"},
            {"step_id": 2, "timestamp": "2026-05-01T10:00:02.200Z", "source": "agent", "message": "",
             "tool_calls": [{"tool_call_id": "s1", "function_name": "grep", "arguments": {"pattern": "def parse"}}],
             "observation": {"results": [{"source_call_id": "s1", "content": "src/parser.py:4:def parse(text):"}]},
             "metrics": {"prompt_tokens": 300, "completion_tokens": 12}},
            {"step_id": 3, "timestamp": "2026-05-01T10:00:02.300Z", "source": "agent",
             "message": "parse() is in src/parser.py", "metrics": {"prompt_tokens": 340, "completion_tokens": 9}},
        ],
    }
    steps = [
        {"step_id": 1, "timestamp": "2026-05-01T10:00:00.000Z", "source": "system", "message": "You are a coding agent."},
        {"step_id": 2, "timestamp": "2026-05-01T10:00:01.000Z", "source": "user", "message": "fix the parser on empty input"},
    ]
    if with_subagent:
        steps.append({"step_id": 3, "timestamp": "2026-05-01T10:00:02.000Z", "source": "agent",
                      "model_name": "gpt-4.1", "message": "Delegating the search.",
                      "tool_calls": [{"tool_call_id": "c0", "function_name": "task",
                                      "arguments": {"role": "explorer", "prompt": "find the parser"}}],
                      "observation": {"results": [{"source_call_id": "c0", "content": "parse() is in src/parser.py",
                                                   "subagent_trajectory_ref": [{"trajectory_id": "traj-explorer"}]}]},
                      "metrics": {"prompt_tokens": 1000, "completion_tokens": 30, "cached_tokens": 800}})
    steps += [
        {"step_id": len(steps) + 1, "timestamp": "2026-05-01T10:00:03.000Z", "source": "agent", "model_name": "gpt-4.1",
         "message": "Reading it first.", "reasoning_content": "the bug is probably an index",
         "tool_calls": [{"tool_call_id": "c1", "function_name": "read_file", "arguments": {"path": "src/parser.py"}}],
         "observation": {"results": [{"source_call_id": "c1", "content": "def parse(text):\n    return text[0]\n"}]},
         "metrics": {"prompt_tokens": 1200, "completion_tokens": 40, "cached_tokens": 1000}},
        {"step_id": len(steps) + 2, "timestamp": "2026-05-01T10:00:04.000Z", "source": "agent", "model_name": "gpt-4.1",
         "message": "",
         "tool_calls": [{"tool_call_id": "c2", "function_name": "edit_file",
                         "arguments": {"path": "src/parser.py", "old": "text[0]", "new": "text[:1]",
                                       **({"api_key": secret} if secret else {})}}],
         "observation": {"results": [{"source_call_id": "c2", "content": "edited src/parser.py"}]},
         "metrics": {"prompt_tokens": 1300, "completion_tokens": 25, "cached_tokens": 1000}},
        {"step_id": len(steps) + 3, "timestamp": "2026-05-01T10:00:05.000Z", "source": "agent", "model_name": "gpt-4.1",
         "message": "Fixed: parse() no longer indexes an empty string.",
         "metrics": {"prompt_tokens": 1400, "completion_tokens": 15, "cached_tokens": 1000}},
    ]
    doc = {"schema_version": "ATIF-v1.7", "session_id": "run-7f3a",
           "agent": {"name": "codeact", "version": "0.3.0", "model_name": "gpt-4.1"},
           "steps": steps, "final_metrics": {"total_prompt_tokens": 4900, "total_completion_tokens": 80},
           "extra": {"harbor_task": "parser-empty"}}
    if with_subagent:
        doc["subagent_trajectories"] = [sub]
    return doc


# -------------------------------------------------------------------------------- Claude Code


def _cc(kind: str, n: int, message: dict, ts: str, **more) -> dict:
    line = {"parentUuid": f"u-{n - 1}" if n > 1 else None, "isSidechain": False, "userType": "external",
            "cwd": "/home/dev/parser", "sessionId": "6f1c2a9e-0000-4000-8000-000000000001", "version": CC_VERSION,
            "gitBranch": "main", "type": kind, "message": message, "uuid": f"u-{n}", "timestamp": ts}
    line.update(more)
    return line


def _usage(i: int, o: int, cr: int = 0, cw: int = 0) -> dict:
    return {"input_tokens": i, "cache_creation_input_tokens": cw, "cache_read_input_tokens": cr, "output_tokens": o,
            "service_tier": "standard"}


def claude_code_session(root: Path, *, secret: str | None = None, sub_agent: bool = True,
                        name: str = "6f1c2a9e-0000-4000-8000-000000000001") -> Path:
    """A Claude Code project log: a prompt, thinking + text + tool_use split over lines of one
    message id, a failing Bash, an Edit, a Task sub-agent (its own file under subagents/), the answer."""
    model = "claude-sonnet-4-5-20250929"
    L = [{"type": "summary", "summary": "Fix parser empty input", "leafUuid": "u-20"},
         {"type": "file-history-snapshot", "messageId": "m0", "snapshot": {"trackedFileBackups": {}}, "isSnapshotUpdate": False}]
    L.append(_cc("user", 1, {"role": "user", "content": "<command-name>/clear</command-name>"}, "2026-06-01T09:00:00.000Z",
                 isMeta=True))
    L.append(_cc("user", 2, {"role": "user", "content": "the parser crashes on empty input, fix it"},
                 "2026-06-01T09:00:01.000Z"))
    mid = "msg_01AAA"
    L.append(_cc("assistant", 3, {"id": mid, "type": "message", "role": "assistant", "model": model,
                                  "content": [{"type": "thinking", "thinking": "Check the tests first.", "signature": "sig"}],
                                  "stop_reason": None, "usage": _usage(10, 5, 12000, 900)},
                 "2026-06-01T09:00:02.000Z", requestId="req_1"))
    L.append(_cc("assistant", 4, {"id": mid, "type": "message", "role": "assistant", "model": model,
                                  "content": [{"type": "text", "text": "Running the tests."}],
                                  "stop_reason": None, "usage": _usage(10, 5, 12000, 900)},
                 "2026-06-01T09:00:02.100Z", requestId="req_1"))
    L.append(_cc("assistant", 5, {"id": mid, "type": "message", "role": "assistant", "model": model,
                                  "content": [{"type": "tool_use", "id": "toolu_01", "name": "Bash",
                                               "input": {"command": "pytest -q", "description": "Run tests"}}],
                                  "stop_reason": "tool_use", "usage": _usage(10, 60, 12000, 900)},
                 "2026-06-01T09:00:02.200Z", requestId="req_1"))
    L.append(_cc("user", 6, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01",
                                                          "content": "F\nIndexError: string index out of range",
                                                          "is_error": True}]},
                 "2026-06-01T09:00:05.000Z",
                 toolUseResult={"stdout": "F", "stderr": "IndexError", "interrupted": False, "isImage": False}))
    n = 7
    if sub_agent:
        L.append(_cc("assistant", n, {"id": "msg_01SUB", "type": "message", "role": "assistant", "model": model,
                                      "content": [{"type": "tool_use", "id": "toolu_task", "name": "Task",
                                                   "input": {"description": "Find callers", "prompt": "who calls parse()?",
                                                             "subagent_type": "Explore"}}],
                                      "stop_reason": "tool_use", "usage": _usage(12, 40, 12900)},
                     "2026-06-01T09:00:06.000Z", requestId="req_2"))
        L.append(_cc("user", n + 1, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_task",
                                                                  "content": [{"type": "text", "text": "only src/cli.py calls parse()"}]}]},
                     "2026-06-01T09:00:09.000Z",
                     toolUseResult={"status": "completed", "agentId": "a1b2c3", "totalDurationMs": 3000,
                                    "content": [{"type": "text", "text": "only src/cli.py calls parse()"}]}))
        sub = root / name / "subagents" / "agent-a1b2c3.jsonl"
        write_jsonl(sub, [
            _cc("user", 1, {"role": "user", "content": "who calls parse()?"}, "2026-06-01T09:00:06.100Z",
                isSidechain=True, agentId="a1b2c3"),
            _cc("assistant", 2, {"id": "msg_S1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5-20251001",
                                 "content": [{"type": "tool_use", "id": "toolu_s1", "name": "Grep",
                                              "input": {"pattern": "parse\\(", "path": "src"}}],
                                 "stop_reason": "tool_use", "usage": _usage(800, 20)},
                "2026-06-01T09:00:07.000Z", isSidechain=True, agentId="a1b2c3"),
            _cc("user", 3, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_s1",
                                                         "content": "src/cli.py:12:    parse(argv)"}]},
                "2026-06-01T09:00:07.500Z", isSidechain=True, agentId="a1b2c3"),
            _cc("assistant", 4, {"id": "msg_S2", "type": "message", "role": "assistant", "model": "claude-haiku-4-5-20251001",
                                 "content": [{"type": "text", "text": "only src/cli.py calls parse()"}],
                                 "stop_reason": "end_turn", "usage": _usage(900, 12)},
                "2026-06-01T09:00:08.000Z", isSidechain=True, agentId="a1b2c3"),
        ])
        n += 2
    edit = {"file_path": "/home/dev/parser/src/parser.py", "old_string": "text[0]", "new_string": "text[:1]"}
    if secret:
        edit["note"] = f"ANTHROPIC_API_KEY={secret}"
    L.append(_cc("assistant", n, {"id": "msg_01BBB", "type": "message", "role": "assistant", "model": model,
                                  "content": [{"type": "tool_use", "id": "toolu_02", "name": "Edit", "input": edit}],
                                  "stop_reason": "tool_use", "usage": _usage(14, 80, 13000)},
                 "2026-06-01T09:00:10.000Z", requestId="req_3"))
    L.append(_cc("user", n + 1, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_02",
                                                              "content": "The file src/parser.py has been updated."}]},
                 "2026-06-01T09:00:10.500Z", toolUseResult={"filePath": "src/parser.py", "oldString": "text[0]"}))
    L.append(_cc("assistant", n + 2, {"id": "msg_01CCC", "type": "message", "role": "assistant", "model": model,
                                      "content": [{"type": "text", "text": "Fixed: parse() slices instead of indexing."}],
                                      "stop_reason": "end_turn", "usage": _usage(16, 20, 13100)},
                 "2026-06-01T09:00:12.000Z", requestId="req_4"))
    return write_jsonl(root / f"{name}.jsonl", L)


# -------------------------------------------------------------------------------------- Codex


def codex_rollout(root: Path, *, secret: str | None = None) -> Path:
    """A Codex rollout: meta, context, the user's message, reasoning + a shell call, its output,
    an apply_patch custom tool call, the answer, token counts."""
    ts = lambda s: f"2026-06-02T11:00:{s:02d}.000Z"  # noqa: E731
    cmd = ["bash", "-lc", "pytest -q" if not secret else f"TOKEN={secret} pytest -q"]
    L = [
        {"timestamp": ts(0), "type": "session_meta", "payload": {
            "id": "0199a1b2-0000-7000-8000-00000000c0de", "timestamp": ts(0), "cwd": "/home/dev/parser",
            "originator": "codex_cli_rs", "cli_version": "0.46.0", "instructions": None,
            "git": {"commit_hash": "abc123", "branch": "main"}}},
        {"timestamp": ts(0), "type": "response_item", "payload": {
            "type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/home/dev/parser</cwd>\n</environment_context>"}]}},
        {"timestamp": ts(1), "type": "turn_context", "payload": {
            "cwd": "/home/dev/parser", "approval_policy": "on-request", "sandbox_policy": {"mode": "workspace-write"},
            "model": "gpt-5-codex", "effort": "medium", "summary": "auto"}},
        {"timestamp": ts(1), "type": "response_item", "payload": {
            "type": "message", "role": "user", "content": [{"type": "input_text", "text": "make the tests pass"}]}},
        {"timestamp": ts(1), "type": "event_msg", "payload": {"type": "user_message", "message": "make the tests pass",
                                                              "images": []}},
        {"timestamp": ts(2), "type": "response_item", "payload": {
            "type": "reasoning", "summary": [{"type": "summary_text", "text": "**Running tests**"}],
            "content": None, "encrypted_content": "gAAAA-opaque"}},
        {"timestamp": ts(2), "type": "response_item", "payload": {
            "type": "function_call", "name": "shell", "arguments": json.dumps({"command": cmd, "workdir": "/home/dev/parser"}),
            "call_id": "call_shell_1"}},
        {"timestamp": ts(3), "type": "event_msg", "payload": {"type": "token_count", "info": {
            "total_token_usage": {"input_tokens": 4000, "cached_input_tokens": 3000, "output_tokens": 60,
                                  "reasoning_output_tokens": 30, "total_tokens": 4060},
            "last_token_usage": {"input_tokens": 4000, "cached_input_tokens": 3000, "output_tokens": 60,
                                 "reasoning_output_tokens": 30, "total_tokens": 4060},
            "model_context_window": 272000}, "rate_limits": None}},
        {"timestamp": ts(4), "type": "response_item", "payload": {
            "type": "function_call_output", "call_id": "call_shell_1",
            "output": json.dumps({"output": "1 failed, 3 passed", "metadata": {"exit_code": 1, "duration_seconds": 0.8}})}},
        {"timestamp": ts(5), "type": "response_item", "payload": {
            "type": "custom_tool_call", "status": "completed", "call_id": "call_patch_1", "name": "apply_patch",
            "input": "*** Begin Patch\n*** Update File: src/parser.py\n-    return text[0]\n+    return text[:1]\n*** End Patch"}},
        {"timestamp": ts(6), "type": "event_msg", "payload": {"type": "token_count", "info": {
            "last_token_usage": {"input_tokens": 4300, "cached_input_tokens": 4000, "output_tokens": 90,
                                 "reasoning_output_tokens": 0, "total_tokens": 4390}}}},
        {"timestamp": ts(6), "type": "response_item", "payload": {
            "type": "custom_tool_call_output", "call_id": "call_patch_1",
            "output": json.dumps({"output": "Success. Updated the following files:\nM src/parser.py\n",
                                  "metadata": {"exit_code": 0, "duration_seconds": 0.0}})}},
        {"timestamp": ts(7), "type": "response_item", "payload": {
            "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Patched parse(); tests pass."}]}},
        {"timestamp": ts(7), "type": "event_msg", "payload": {"type": "agent_message", "message": "Patched parse(); tests pass."}},
        {"timestamp": ts(8), "type": "event_msg", "payload": {"type": "token_count", "info": {
            "last_token_usage": {"input_tokens": 4500, "cached_input_tokens": 4300, "output_tokens": 20,
                                 "reasoning_output_tokens": 0, "total_tokens": 4520}}}},
        {"timestamp": ts(8), "type": "event_msg", "payload": {"type": "task_complete",
                                                              "last_agent_message": "Patched parse(); tests pass."}},
    ]
    return write_jsonl(root / "2026" / "06" / "02" / "rollout-2026-06-02T11-00-00-0199a1b2.jsonl", L)


# ----------------------------------------------------------------------------------- deepseek


def _ds(kind: str, seq: int, t: int, data: dict, **more) -> dict:
    out = {"type": kind, "seq": seq, "time": t, "data": data}
    out.update(more)
    return out


def deepseek_session(root: Path, *, secret: str | None = None, error_turn: bool = False) -> Path:
    """A deepseek-harness snapshot session.jsonl: header; turn 1 with a bash tool call (compact
    reasoning-chunks and tool-call-chunks lines, block-end, usage, finish) and the answer step
    (text-delta chunks); optionally a second turn that fails with a provider error before any chunk."""
    t0 = 1783352050748
    cmd = "echo TERMINAL_OK" if not secret else f"curl -H 'Authorization: Bearer {secret}' example.test"
    args = json.dumps({"command": cmd, "description": "Echo a marker"})
    L = [{"type": "session", "version": 0, "id": "e128dda9-0000-4000-8000-0000000000d5", "createdAt": t0, "cwd": "{{cwd}}",
          "delegationDepth": 0}]
    s = 0

    def ev(kind: str, data: dict, dt: int = 1, **more) -> None:
        nonlocal s
        L.append(_ds(kind, s, t0 + s * 10 + dt, data, **more))
        s += 1

    ev("turn/start", {"turn": 1, "trigger": {"kind": "message", "source": {"kind": "user"}}})
    ev("user/message", {"content": [{"type": "text", "text": "Use bash to run: echo TERMINAL_OK. Then reply DONE."}],
                        "source": {"kind": "user"}, "role": "user", "id": "m1"}, surfaceOp="append")
    ev("session/title", {"title": "Use bash", "messageSeqs": [1], "source": {"kind": "fallback"}})
    ev("user/message", {"content": [{"type": "text", "text": "Current runtime context."}],
                        "source": {"kind": "plugin", "plugin": "@deepseek-ai/dsh-system-prompt"}, "role": "user", "id": "m2"},
       surfaceOp="append")
    ev("step/start", {"turn": 1, "step": 1})
    ev("request/header", {"header": {"config": {"provider": "deepseek-official", "model": "deepseek-v4-flash"},
                                     "system": "{{system}}", "tools": "{{tools}}"}, "reason": "initial"})
    ev("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "block-start", "index": 0, "blockType": "reasoning"}})
    L.append({"type": "reasoning-chunks", "seq0": s, "time0": t0 + 500,
              "data": {"turn": 1, "step": 1, "index": 0, "dt": [3, 0, 1], "texts": ["Run", " the", " command."]}})
    s += 3
    ev("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "block-start", "index": 1, "blockType": "tool-call"}})
    pieces = [args[: len(args) // 2], args[len(args) // 2:]]
    L.append({"type": "tool-call-chunks", "seq0": s, "time0": t0 + 700,
              "data": {"turn": 1, "step": 1, "index": 1, "dt": [0, 5], "id": "call_00_abc", "name": "bash", "args": pieces}})
    s += 2
    ev("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "block-end", "index": 0,
                                                           "block": {"type": "reasoning", "text": "Run the command."}}})
    ev("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "block-end", "index": 1, "block": {
        "type": "tool-call", "id": "call_00_abc", "name": "bash", "arguments": args}}})
    ev("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "usage", "usage": {
        "inputTokens": 2877, "outputTokens": 90, "cacheReadTokens": 0, "reasoningTokens": 18}}})
    ev("assistant/chunk", {"turn": 1, "step": 1, "chunk": {"type": "finish", "reason": {"kind": "tool-calls"}}})
    ev("assistant/message", {"turn": 1, "step": 1, "message": {"role": "assistant", "content": [
        {"type": "reasoning", "text": "Run the command."},
        {"type": "tool-call", "id": "call_00_abc", "name": "bash", "arguments": args}],
        "source": {"kind": "model", "provider": "deepseek-official", "model": "deepseek-v4-flash"}, "id": "a1"},
        "usage": {"inputTokens": 2877, "outputTokens": 90, "cacheReadTokens": 0, "reasoningTokens": 18}},
       sourceEventSeqs=[6, 7], surfaceOp="append")
    ev("tool/call", {"turn": 1, "step": 1, "callId": "call_00_abc", "name": "bash", "arguments": args})
    ev("tool/result", {"turn": 1, "step": 1, "message": {"source": {"kind": "tool", "callId": "call_00_abc"}, "content": [
        {"type": "tool-result", "toolCallId": "call_00_abc", "content": [{"type": "text", "text": "TERMINAL_OK\n"}],
         "isError": False}], "role": "user", "id": "r1"}}, sourceEventSeqs=[s - 1], surfaceOp="append")
    ev("step/end", {"turn": 1, "step": 1})
    ev("step/start", {"turn": 1, "step": 2})
    ev("assistant/chunk", {"turn": 1, "step": 2, "chunk": {"type": "block-start", "index": 0, "blockType": "text"}})
    ev("assistant/chunk", {"turn": 1, "step": 2, "chunk": {"type": "text-delta", "index": 0, "text": "D"}})
    ev("assistant/chunk", {"turn": 1, "step": 2, "chunk": {"type": "text-delta", "index": 0, "text": "ONE"}})
    ev("assistant/chunk", {"turn": 1, "step": 2, "chunk": {"type": "block-end", "index": 0, "block": {"type": "text", "text": "DONE"}}})
    ev("assistant/chunk", {"turn": 1, "step": 2, "chunk": {"type": "usage", "usage": {
        "inputTokens": 168, "outputTokens": 25, "cacheReadTokens": 2816, "reasoningTokens": 0}}})
    ev("assistant/chunk", {"turn": 1, "step": 2, "chunk": {"type": "finish", "reason": {"kind": "stop"}}})
    ev("step/end", {"turn": 1, "step": 2})
    ev("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    if error_turn:
        ev("turn/start", {"turn": 2, "trigger": {"kind": "message", "source": {"kind": "user"}}})
        ev("user/message", {"content": [{"type": "text", "text": "and now the other thing"}], "source": {"kind": "user"},
                            "role": "user", "id": "m3"})
        ev("step/start", {"turn": 2, "step": 1})
        ev("step/end", {"turn": 2, "step": 1})
        ev("turn/end", {"turn": 2, "reason": {"kind": "error", "step": 1, "failure": {
            "message": "simulated provider error (HTTP 401)", "code": "AUTH"}}})
    return write_jsonl(root / "session.jsonl", L)


def deepseek_override(root: Path) -> Path:
    """A replay.override.json whose one entry throws after a prefix chunk (a mid-stream failure)."""
    entries = [{"kind": "throw", "chunks": [{"type": "block-start", "index": 0, "blockType": "text"},
                                            {"type": "text-delta", "index": 0, "text": "Work"}],
                "message": "upstream reset the stream", "code": "NETWORK", "status": 502}]
    p = root / "replay.override.json"
    p.write_text(json.dumps(entries, indent=2), encoding="utf-8")
    return p
