"""The embedded demo store: a realistic set of coding-agent sessions the product can make by itself.

Written through :class:`~flux.store.StoreWriter` in flux's event order (spec §2.6): user message,
``turn_started``, per tool call a host-derived one-statement plan (``plan_attempted``) followed by
its ``step_started`` / ``op_recorded`` / ``step_succeeded|step_failed`` rows, ``call_usage`` rows,
``turn_ended``, the observation flush, then the conversation messages.

What it holds, so every screen has something to show:
several multi-turn sessions, a tool error, a denied call, a redacted and a truncated cell, an
authored multi-statement flow with a statement ledger, an interrupted turn (accepted plan, no
``turn_ended``), a fork child linked to its source and a sub-agent.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .canonical import canonical_json, sha256_hex
from .store.events import (
    CallUsage, Compacted, Message, Observation, OpRecorded, PlanAttempted, Run, StatementCompleted,
    StepFailed, StepStarted, StepSucceeded, TurnEnded, Usage, FlowReturned,
)
from .store.store import StoreWriter
from .timefmt import now_ms as _now_ms

__all__ = ["build_demo_store"]

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR


def _host_plan(bind: str, op: str, input_obj: dict) -> tuple[str, str, Any]:
    """Canonical text, fingerprint and AST of a host-derived one-statement plan (§5.2)."""
    from .lang import ast as A
    from .lang.formatter import format_flow
    from .lang.hashes import fingerprint

    draft = A.DraftAst(name=None, params=(), returns=None,
                       body=(A.Bind(name=bind, value=A.Call(op=op, args=(A.Lit(value=input_obj),))),))
    return format_flow(draft), fingerprint(draft), draft


@dataclass
class _Turn:
    """Writes one live turn in flux's order; the clock advances a little per row."""

    w: StoreWriter
    sid: str
    model: str
    t: int
    user_input: str
    turn_id: int = 0
    messages: list[Message] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    usages: list[Usage] = field(default_factory=list)
    seq: int = 0
    plans: int = 0
    dispatch: int = 0

    def tick(self, ms: int = 40) -> int:
        self.t += ms
        return self.t

    def begin(self) -> "_Turn":
        self.w.append(self.sid, Message.text("user", self.user_input), ts=self.tick())
        self.turn_id = self.w.begin_turn(self.sid, self.user_input, self.model, ts=self.tick())
        return self

    def tool(self, op: str, input_obj: dict, content: str, *, is_error: bool = False, denied: bool = False,
             redacted: bool = False, truncated: bool = False, view: str | None = None, phase: str = "gather",
             ms: int = 120, text: str | None = None) -> None:
        self.plans += 1
        if phase == "gather":
            bind = f"adaptive_gather_{self.plans}"
        else:  # action-batch plans are named after their batch and action ids (§5.2)
            batch = sha256_hex(f"{self.sid}:{self.turn_id}:{self.plans}")[:20]
            bind = f"adaptive_batch_{batch}_action_1"
        source, fp, _ = _host_plan(bind, op, input_obj)
        self.w.append(self.sid, PlanAttempted(step=self.plans, outcome="accepted", fingerprint=fp, phase=phase,
                                              plan_source=source), turn_id=self.turn_id, ts=self.tick(5))
        ih = sha256_hex(canonical_json(input_obj))
        step = f"step_{op}_{ih[:16]}"
        self.w.append(self.sid, Run(event=StepStarted(step=step, op=op, input_hash=ih)), ts=self.tick(2))
        self.w.append(self.sid, Run(event=OpRecorded(
            seq=self.seq, step=step, op=op, input_hash=ih, input_view=canonical_json(input_obj),
            input_view_truncated=False, content=content, view=view, is_error=is_error, denied=denied,
            redacted=redacted, truncated=truncated)), ts=self.tick(ms))
        self.seq += 1
        if is_error or denied:
            self.w.append(self.sid, Run(event=StepFailed(step=step, error=content.splitlines()[0] if content else "error")), ts=self.tick(1))
        else:
            self.w.append(self.sid, Run(event=StepSucceeded(step=step, output=f"v_{self.seq * 2}")), ts=self.tick(1))
        self.dispatch += 1
        subjects = [input_obj["path"]] if isinstance(input_obj.get("path"), str) else []
        self.observations += [
            Observation("tool_call", "turn", {"caller": "local", "subjects": subjects, "tool": op}),
            Observation("tool.started", "turn", {"dispatch": self.dispatch, "elapsed_us": 40, "tool": op}),
            Observation("tool.ended", "turn", {"dispatch": self.dispatch, "elapsed_us": ms * 1000,
                                               "status": "denied" if denied else ("error" if is_error else "ok"), "tool": op}),
        ]
        tool_id = f"toolu_{self.sid}_{self.plans:02d}"
        blocks = ([{"type": "text", "text": text}] if text else []) + [{"type": "tool_use", "id": tool_id, "name": op, "input": input_obj}]
        self.messages.append(Message(role="assistant", content=blocks))
        self.messages.append(Message(role="user", content=[{"type": "tool_result", "tool_use_id": tool_id,
                                                            "content": [{"type": "text", "text": content}], "is_error": is_error or denied}]))

    def call(self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> None:
        self.usages.append(Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                                 cache_creation_input_tokens=cache_write, cache_read_input_tokens=cache_read))
        self.observations.append(Observation("model.call", "turn", {
            "chunks": 3, "duration_us": 850_000 + 1000 * output_tokens, "model": self.model, "ok": True,
            "provider": self.model.split(":")[0], "round": len(self.usages), "usage": self.usages[-1].to_body()}))

    def end(self, outcome: str, answer: str) -> None:
        self.w.append(self.sid, Run(event=FlowReturned(value=f"v_{self.seq * 2 + 1}")), ts=self.tick(3))
        total = Usage()
        for u in self.usages:
            self.w.append(self.sid, CallUsage(model=self.model, usage=u), turn_id=self.turn_id, ts=self.tick(1))
            total = total + u
        self.w.append(self.sid, TurnEnded(outcome=outcome, iterations=len(self.usages), answer=answer, usage=total),
                      turn_id=self.turn_id, ts=self.tick(1))
        for ob in self.observations:
            self.w.append(self.sid, ob, turn_id=self.turn_id, ts=self.tick(0))
        for m in self.messages:
            self.w.append(self.sid, m, ts=self.tick(0))
        self.w.append(self.sid, Message.text("assistant", answer), ts=self.tick(2))


def _authored_flow(w: StoreWriter, sid: str, model: str, t: int, source: str, cells: list[tuple[str, dict, str, bool]],
                   *, stop_after: int | None = None) -> int:
    """A ``flux flow run --resumable``-style turn: the authored plan, then per statement its
    dispatches and a ``statement_completed`` ledger row. ``stop_after`` cuts the run there (a crash):
    that many statements complete, the next one's cell is written, and the turn never ends."""
    from .lang.hashes import flow_key, stmt_hash16
    from .lang.parser import parse
    from .lang.hashes import fingerprint

    draft = parse(source)
    key = flow_key(draft.name, draft.body)
    w.append(sid, Message.text("user", "<flow run>"), ts=t)
    turn_id = w.begin_turn(sid, "<flow run>", model, ts=t + 5)
    w.append(sid, PlanAttempted(step=1, outcome="accepted", fingerprint=fingerprint(draft), phase="authored",
                                plan_source=source), turn_id=turn_id, ts=t + 10)
    t += 20
    for node, (op, inp, content, is_error) in enumerate(cells):
        ih = sha256_hex(canonical_json(inp))
        step = f"step_{op}_{ih[:16]}"
        w.append(sid, Run(event=StepStarted(step=step, op=op, input_hash=ih)), ts=t)
        w.append(sid, Run(event=OpRecorded(seq=node, step=step, op=op, input_hash=ih, input_view=canonical_json(inp),
                                           content=content, is_error=is_error)), ts=t + 150)
        if stop_after is not None and node >= stop_after:
            return t + 200  # killed mid-statement: no step result, no ledger row, no turn_ended
        w.append(sid, Run(event=StepSucceeded(step=step, output=f"v_{node + 1}")), ts=t + 151)
        w.append(sid, Run(event=StatementCompleted(plan=key, node=node, stmt=stmt_hash16(draft.body[node]),
                                                   value=f"v_{node + 1}")), ts=t + 152)
        t += 400
    w.append(sid, TurnEnded(outcome="completed", iterations=len(cells), answer=f"Flow completed ({len(cells)} step(s))."),
             turn_id=turn_id, ts=t)
    w.append(sid, Message.text("assistant", f"Flow completed ({len(cells)} step(s))."), ts=t + 1)
    return t + 10


RELEASE_FLOW = '''flow release
  version = read({"path":"VERSION"})
  notes = bash({"command":"git log --oneline v0.3.0..HEAD"})
  tests = bash({"command":"pytest -q"})
  tag = bash({"command":"git tag v0.4.0"})
'''


def build_demo_store(path: str | Path, now_ms: int | None = None, overwrite: bool = False) -> Path:
    """Write the demo store into ``path`` (created; must not hold a store unless ``overwrite``)."""
    path = Path(path)
    if overwrite and path.exists():
        for name in ("events.db", "events.db-wal", "events.db-shm", "flow.db", "flow.db-wal", "flow.db-shm"):
            (path / name).unlink(missing_ok=True)
    now = _now_ms() if now_ms is None else now_ms
    w = StoreWriter(path)
    try:
        _write_sessions(w, now)
    finally:
        w.close()
    return path


def _write_sessions(w: StoreWriter, now: int) -> None:
    sonnet = "anthropic:claude-sonnet-4-5"
    gpt = "openai:gpt-4.1-mini"

    # s_1 — a two-turn bug fix with a failing test run (tool error) in the middle.
    t0 = now - 3 * DAY
    s1 = w.create_session(sonnet, ts=t0)
    tr = _Turn(w, s1, sonnet, t0, "the tokenizer test fails on empty input — fix it").begin()
    tr.call(2_410, 96, cache_read=11_200, cache_write=2_048)
    tr.tool("grep", {"path": "src", "pattern": "def tokenize"}, "src/tokenizer.py:14:def tokenize(text: str) -> list[str]:",
            text="Let me find the tokenizer first.")
    tr.call(2_980, 64, cache_read=13_248)
    tr.tool("read", {"path": "src/tokenizer.py"},
            "import re\n\nWORD = re.compile(r\"\\w+|[^\\w\\s]\")\n\n\ndef tokenize(text: str) -> list[str]:\n"
            "    first = text[0]\n    if first.isspace():\n        text = text.lstrip()\n    return WORD.findall(text)\n")
    tr.call(3_620, 180, cache_read=13_248)
    tr.tool("bash", {"command": "pytest -q tests/test_tokenizer.py"},
            "F.\n=================================== FAILURES ===================================\n"
            "___________________________ test_empty_input ___________________________\n"
            "    def test_empty_input():\n>       assert tokenize(\"\") == []\n"
            "src/tokenizer.py:7: in tokenize\n    first = text[0]\nE   IndexError: string index out of range\n"
            "1 failed, 1 passed in 0.04s\n[exit 1]", is_error=True, phase="execute", ms=900,
            text="Reproducing the failure before changing anything.")
    tr.call(4_400, 210, cache_read=13_248)
    tr.tool("edit", {"path": "src/tokenizer.py", "old": "    first = text[0]\n    if first.isspace():\n        text = text.lstrip()\n",
                     "new": "    text = text.lstrip()\n"}, "edited src/tokenizer.py (1 replacement)", phase="execute")
    tr.call(4_700, 60, cache_read=13_248)
    tr.tool("bash", {"command": "pytest -q tests/test_tokenizer.py"}, "..\n2 passed in 0.03s\n[exit 0]", phase="execute", ms=850)
    tr.call(4_900, 88, cache_read=13_248)
    tr.end("ok", "Fixed: `tokenize` indexed `text[0]` before checking for empty input. It now strips leading "
                 "whitespace unconditionally, and both tokenizer tests pass.")
    tr2 = _Turn(w, s1, sonnet, tr.t + 4 * MINUTE, "add a changelog entry for that").begin()
    tr2.call(5_300, 120, cache_read=15_000)
    tr2.tool("append", {"path": "CHANGELOG.md", "content": "- tokenizer: empty input no longer raises IndexError\n"},
             "appended 52 bytes to CHANGELOG.md", phase="execute")
    tr2.call(5_500, 40, cache_read=15_000)
    tr2.end("ok", "Added the entry under Unreleased in CHANGELOG.md.")

    # s_2 — a destructive call the policy denied.
    t0 = now - 2 * DAY
    s2 = w.create_session(gpt, ts=t0)
    tr = _Turn(w, s2, gpt, t0, "clean up the build directory").begin()
    tr.call(1_800, 40)
    tr.tool("glob", {"pattern": "build/**"}, "build/lib/flux/__init__.py\nbuild/lib/flux/cli.py\nbuild/bdist.linux-x86_64/")
    tr.call(2_100, 52)
    tr.tool("bash", {"command": "rm -rf build"}, "denied by policy: `bash` (effect delete) needs approval — run with --yes or allow it in the policy file",
            denied=True, is_error=True, phase="execute")
    tr.call(2_400, 70)
    tr.end("ok", "I could not delete build/: the policy denied `rm -rf build`. Re-run with --yes, or delete it yourself.")

    # s_3 — a secret redacted out of a cell and a huge log truncated at the capture cap.
    t0 = now - 30 * HOUR
    s3 = w.create_session(sonnet, ts=t0)
    tr = _Turn(w, s3, sonnet, t0, "why does the staging deploy fail?").begin()
    tr.call(2_000, 50, cache_read=9_000)
    tr.tool("read", {"path": "deploy/staging.env"},
            "DATABASE_URL=postgres://deploy:[redacted]@db.internal:5432/app\nAPI_TOKEN=[redacted]\nREGION=eu-west-1\n",
            redacted=True)
    log_line = "2026-11-29T07:14:{:02d}Z worker-3 retrying connection to db.internal:5432 (attempt {})\n"
    big = "".join(log_line.format(i % 60, i) for i in range(1, 400))
    cap = 4096
    tr.call(2_600, 44, cache_read=9_000)
    tr.tool("bash", {"command": "kubectl logs deploy/api --since=1h"}, big.encode()[:cap].decode("utf-8", "ignore"),
            truncated=True, ms=1400)
    tr.call(3_900, 160, cache_read=9_000)
    tr.end("ok", "The API cannot reach db.internal:5432 — every worker retries the connection. The staging "
                 "DATABASE_URL points at a host that is not resolvable from the cluster.")

    # s_4 — an authored release flow, run resumably: a statement ledger per statement.
    t0 = now - 20 * HOUR
    s4 = w.create_session("mock", ts=t0)
    _authored_flow(w, s4, "mock", t0, RELEASE_FLOW, [
        ("read", {"path": "VERSION"}, "0.4.0\n", False),
        ("bash", {"command": "git log --oneline v0.3.0..HEAD"}, "a1b2c3d tokenizer: handle empty input\n9f8e7d6 cli: --json everywhere\n[exit 0]", False),
        ("bash", {"command": "pytest -q"}, "........................................\n40 passed in 1.92s\n[exit 0]", False),
        ("bash", {"command": "git tag v0.4.0"}, "[exit 0]", False),
    ])

    # s_5 — a fork of s_4 at statement 2 (replan mode): the prefix replayed from tape, its own
    # "<fork …>" turn left open as flux leaves it, then a live turn that closed.
    t0 = now - 8 * HOUR
    s5 = w.create_session("mock", context={"correlation_id": s4, "agent_id": f"fork:{s4}@2"}, ts=t0)
    w.append(s5, Compacted(messages=[Message.text("user", "<flow run>").to_body(),
                                     Message.text("assistant", "Flow completed (4 step(s)).").to_body()]), ts=t0 + 1)
    fork_turn = w.begin_turn(s5, f"<fork {s4} @ 2>", "mock", ts=t0 + 2)
    prefix_source = 'flow\n  version = read({"path":"VERSION"})\n  notes = bash({"command":"git log --oneline v0.3.0..HEAD"})\n'
    from .lang.hashes import fingerprint, flow_key, stmt_hash16
    from .lang.parser import parse

    prefix = parse(prefix_source)
    w.append(s5, PlanAttempted(step=1, outcome="accepted", fingerprint=fingerprint(prefix), plan_source=prefix_source),
             turn_id=fork_turn, ts=t0 + 3)
    pkey = flow_key(prefix.name, prefix.body)
    for node, (op, inp) in enumerate([("read", {"path": "VERSION"}), ("bash", {"command": "git log --oneline v0.3.0..HEAD"})]):
        ih = sha256_hex(canonical_json(inp))
        w.append(s5, Run(event=StepStarted(step=f"step_{op}_{ih[:16]}", op=op, input_hash=ih)), ts=t0 + 4 + node)
        w.append(s5, Run(event=StepSucceeded(step=f"step_{op}_{ih[:16]}", output=f"v_{node + 1}")), ts=t0 + 4 + node)
        w.append(s5, Run(event=StatementCompleted(plan=pkey, node=node, stmt=stmt_hash16(prefix.body[node]), value=f"v_{node + 1}")),
                 ts=t0 + 4 + node)
    tr = _Turn(w, s5, "mock", t0 + 50, f"Continue from the current forked state. The original task was: <flow run>").begin()
    tr.call(900, 30)
    tr.tool("bash", {"command": "pytest -q -x"}, "....F\n1 failed, 4 passed in 0.61s\n[exit 1]", is_error=True, phase="execute")
    tr.call(1_100, 44)
    tr.end("ok", "With the forked state the test suite fails (test_release_notes); not tagging.")

    # s_6 — a sub-agent s_1 spawned to explore the repository.
    t0 = now - 3 * DAY + 30_000
    s6 = w.create_session("anthropic:claude-haiku-4-5", context={"correlation_id": s1, "agent_id": "subagent:explorer"}, ts=t0)
    tr = _Turn(w, s6, "anthropic:claude-haiku-4-5", t0, "map where tokenization happens").begin()
    tr.call(1_200, 30)
    tr.tool("grep", {"path": ".", "pattern": "tokenize("}, "src/tokenizer.py:14\nsrc/parser.py:41\ntests/test_tokenizer.py:5")
    tr.call(1_400, 70)
    tr.end("ok", "tokenize() is defined in src/tokenizer.py and used by src/parser.py and the tests.")

    # s_7 — killed mid-turn: an accepted plan and its dispatch on tape, but no turn_ended.
    t0 = now - 25 * MINUTE
    s7 = w.create_session(sonnet, ts=t0)
    tr = _Turn(w, s7, sonnet, t0, "bump the version and publish").begin()
    tr.call(2_200, 60, cache_read=8_000)
    tr.tool("read", {"path": "pyproject.toml"}, "[project]\nname = \"tokenizer\"\nversion = \"0.4.0\"\n")
    tr.call(2_500, 90, cache_read=8_000)
    tr.tool("edit", {"path": "pyproject.toml", "old": "version = \"0.4.0\"", "new": "version = \"0.4.1\""},
            "edited pyproject.toml (1 replacement)", phase="execute")
    # …the process was killed here: no call_usage flush, no turn_ended, no observations, no answer.

    # s_8 — an authored flow killed after two completed statements (a ledger to resume from).
    t0 = now - 12 * MINUTE
    s8 = w.create_session("mock", ts=t0)
    _authored_flow(w, s8, "mock", t0, RELEASE_FLOW, [
        ("read", {"path": "VERSION"}, "0.4.1\n", False),
        ("bash", {"command": "git log --oneline v0.3.0..HEAD"}, "c0ffee1 release 0.4.1\n[exit 0]", False),
        ("bash", {"command": "pytest -q"}, "........................................\n40 passed in 1.88s\n[exit 0]", False),
    ], stop_after=2)
