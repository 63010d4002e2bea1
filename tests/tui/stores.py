"""Small fixed stores for the app's tests, written through ``StoreWriter`` with fixed timestamps.

Everything on screen derived from them is deterministic: times are fixed (and the app renders
ages from a frozen "now"), and the only random values (event ULIDs) are never shown.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from tests.helpers import cell, copy_fixture, rewrite, write_turn
from flux.store import (
    CallUsage, Message, Observation, OpRecorded, PlanAttempted, PlanHalted, Run, StatementCompleted, StepFailed,
    StepStarted, StepSucceeded, StoreWriter, TurnEnded, UnknownEvent, UnknownRun, Usage,
)

BASE_MS = 1_785_000_000_000  # 2026-07-25T…Z
NOW_MS = BASE_MS + 3 * 86_400_000  # the frozen "now" of every test

RELEASE_FLOW = '''flow release
  version = read({"path":"VERSION"})
  tests = bash({"command":"pytest -q"})
  tag = bash({"command":"git tag v0.4.1"})
'''


def _writer(path: Path, start: int = BASE_MS) -> StoreWriter:
    clock = itertools.count(start, 1_000)
    return StoreWriter(path, clock=lambda: next(clock))


def _step(w: StoreWriter, sid: str, op: str, input_json: str, content: str, *, index: int, is_error=False,
          denied=False, redacted=False, truncated=False, input_view_truncated=False, view=None,
          input_hash_redacted=None) -> None:
    h = f"{index:02d}" * 32
    step = f"step_{op}_{h[:16]}"
    w.append(sid, Run(event=StepStarted(step=step, op=op, input_hash=h)))
    w.append(sid, Run(event=OpRecorded(seq=index, step=step, op=op, input_hash=h, input_hash_redacted=input_hash_redacted,
                                       input_view=input_json, input_view_truncated=input_view_truncated, content=content,
                                       view=view, is_error=is_error, denied=denied, redacted=redacted,
                                       truncated=truncated)))
    if is_error or denied:
        w.append(sid, Run(event=StepFailed(step=step, error=content)))
    else:
        w.append(sid, Run(event=StepSucceeded(step=step, output=f"v_{index}")))


def _host_turn(w: StoreWriter, sid: str, model: str, user: str, calls: list[tuple], *, answer: str = "Done.",
               usage: Usage | None = None, end: bool = True, outcome: str = "ok") -> int:
    """A live adaptive turn: one host-derived one-statement plan per call (like the fixture)."""
    w.append(sid, Message.text("user", user))
    tid = w.begin_turn(sid, user, model)
    for i, (op, input_json, content, flags) in enumerate(calls):
        bind = f"adaptive_batch_{i + 1}"
        w.append(sid, PlanAttempted(step=i + 1, outcome="accepted", phase="execute",
                                    plan_source=f"flow\n  {bind} = {op}({input_json})\n"), turn_id=tid)
        _step(w, sid, op, input_json, content, index=i, **flags)
    if not end:
        return tid
    u = usage or Usage(input_tokens=1200, output_tokens=80)
    w.append(sid, CallUsage(model=model, usage=u), turn_id=tid)
    w.append(sid, TurnEnded(outcome=outcome, iterations=len(calls), answer=answer, usage=u), turn_id=tid)
    w.append(sid, Observation(kind="tool_call", phase="turn", data={"caller": "local", "tool": calls[0][0] if calls else "-"}),
             turn_id=tid)
    content = [{"type": "text", "text": answer}]
    w.append(sid, Message(role="assistant", content=content))
    return tid


def build_gallery(path: Path) -> Path:
    """Five sessions covering the list's cases: ok, error outcome, unknown price, a fork, a
    sub-agent, and an interrupted turn."""
    w = _writer(path)
    s1 = w.create_session("claude-sonnet-4-5")
    _host_turn(w, s1, "claude-sonnet-4-5", "the tokenizer test fails on empty input — fix it", [
        ("grep", '{"path":"src","pattern":"def tokenize"}', "src/tokenizer.py:14:def tokenize(text):", {}),
        ("bash", '{"command":"pytest -q"}', "1 failed, 1 passed [exit 1]", {"is_error": True}),
        ("edit", '{"path":"src/tokenizer.py"}', "edited src/tokenizer.py", {}),
    ], answer="Fixed the empty-input case.", usage=Usage(input_tokens=23_000, output_tokens=700, cache_read_input_tokens=70_000))
    s2 = w.create_session("mystery-model-9")
    _host_turn(w, s2, "mystery-model-9", "summarise the changelog", [
        ("read", '{"path":"CHANGELOG.md"}', "# Changelog", {}),
    ], answer="Two entries.", outcome="error")
    s3 = w.create_session("claude-sonnet-4-5", context={"agent_id": f"fork:{s1}@2", "correlation_id": s1})
    _host_turn(w, s3, "claude-sonnet-4-5", "continue from the fork", [
        ("bash", '{"command":"pytest -q"}', "2 passed [exit 0]", {}),
    ])
    s4 = w.create_session("claude-haiku-4-5", context={"agent_id": "subagent:reviewer", "correlation_id": s1})
    _host_turn(w, s4, "claude-haiku-4-5", "review the diff", [
        ("read", '{"path":"src/tokenizer.py"}', "def tokenize(text): ...", {}),
    ])
    s5 = w.create_session("mock")
    build_interrupted_session(w, s5)
    w.close()
    return path


def build_interrupted_session(w: StoreWriter, sid: str) -> None:
    """An authored 3-statement flow: statement 0 completed (ledger row), statement 1 dispatched,
    then the process died — accepted plan, no ``turn_ended``: flux flags it."""
    w.append(sid, Message.text("user", "<flow run>"))
    tid = w.begin_turn(sid, "<flow run>", "mock")
    w.append(sid, PlanAttempted(step=1, outcome="accepted", phase="authored", plan_source=RELEASE_FLOW), turn_id=tid)
    from flux.lang import parse
    from flux.lang.hashes import flow_key, stmt_hash16

    draft = parse(RELEASE_FLOW)
    key = flow_key(draft.name, draft.body)
    _step(w, sid, "read", '{"path":"VERSION"}', "0.4.1", index=0)
    w.append(sid, Run(event=StatementCompleted(plan=key, node=0, stmt=stmt_hash16(draft.body[0]), value="v_0")))
    _step(w, sid, "bash", '{"command":"pytest -q"}', "40 passed in 1.88s [exit 0]", index=1)


def build_interrupted(path: Path) -> Path:
    w = _writer(path)
    s1 = w.create_session("mock")
    _host_turn(w, s1, "mock", "write a quick note", [("append", '{"path":"note.txt","content":"hi"}', "appended 2 bytes", {})])
    s2 = w.create_session("mock")
    build_interrupted_session(w, s2)
    w.close()
    return path


def build_open_unflagged(path: Path) -> Path:
    """A session whose newest turn never ended and never accepted a plan: not flagged, with a reason."""
    w = _writer(path)
    s1 = w.create_session("mock")
    w.append(s1, Message.text("user", "hello?"))
    w.begin_turn(s1, "hello?", "mock")
    w.close()
    return path


def build_errors(path: Path) -> Path:
    """One session, one turn, an authored flow with a ledger: a completed statement, a halted one
    (denied), error / redacted / truncated cells, an unknown event kind and an unknown run variant."""
    w = _writer(path)
    sid = w.create_session("claude-sonnet-4-5")
    w.append(sid, Message.text("user", "deploy to staging"))
    tid = w.begin_turn(sid, "deploy to staging", "claude-sonnet-4-5")
    src = '''flow deploy
  env = read({"path":"deploy/staging.env"})
  log = read({"path":"logs/api.log"})
  out = bash({"command":"./deploy.sh staging"})
  confirm "announce the deploy"
'''
    w.append(sid, PlanAttempted(step=1, outcome="compile_error", error="unknown op `deploy`"), turn_id=tid)
    w.append(sid, PlanAttempted(step=2, outcome="accepted", phase="authored", plan_source=src), turn_id=tid)
    from flux.lang import parse
    from flux.lang.hashes import flow_key, stmt_hash16

    draft = parse(src)
    key = flow_key(draft.name, draft.body)
    _step(w, sid, "read", '{"path":"deploy/staging.env"}', "DATABASE_URL=[REDACTED]\nREGION=eu-west-1", index=0,
          redacted=True, input_hash_redacted="ab" * 32)
    w.append(sid, Run(event=StatementCompleted(plan=key, node=0, stmt=stmt_hash16(draft.body[0]), value="v_0")))
    _step(w, sid, "read", '{"path":"logs/api.log","limit":"…', "2026-11-29T07:14:01Z worker-1 retrying …", index=1,
          truncated=True, input_view_truncated=True)
    w.append(sid, Run(event=StatementCompleted(plan=key, node=1, stmt=stmt_hash16(draft.body[1]), value="v_1")))
    _step(w, sid, "bash", '{"command":"./deploy.sh staging"}', "denied by policy: exec not allowed", index=2, denied=True)
    w.append(sid, Run(event=PlanHalted(plan=key, node=2, stmt=stmt_hash16(draft.body[2]), op="bash", kind="denied",
                                       error="bash denied by the approver")))
    w.append(sid, Run(event=UnknownRun(event="quantum_leap", data={"event": "quantum_leap", "to": "s_9"})))
    w.append(sid, UnknownEvent(kind="future_kind", data={"hello": "from a newer flux"}))
    u = Usage(input_tokens=4_000, output_tokens=300)
    w.append(sid, CallUsage(model="claude-sonnet-4-5", usage=u), turn_id=tid)
    w.append(sid, TurnEnded(outcome="halted", iterations=1, answer="The deploy was denied.", usage=u), turn_id=tid)
    w.append(sid, Observation(kind="flow.halt", phase="turn", data={"node": 2, "kind": "denied"}), turn_id=tid)
    w.append(sid, Message(role="assistant", content=[
        {"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {"command": "./deploy.sh staging"}},
    ]))
    w.append(sid, Message(role="user", content=[
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": "denied by policy"}],
         "is_error": True},
    ]))
    w.append(sid, Message.text("assistant", "The deploy was denied."))
    w.close()
    return path


def build_empty(path: Path) -> Path:
    StoreWriter(path).close()
    return path


def add_session(path: Path, model: str = "late-model", ts: int = NOW_MS - 1_000) -> str:
    """Append a fresh one-turn session to an existing store (the live-refresh tests)."""
    w = _writer(path, ts)
    sid = w.create_session(model)
    _host_turn(w, sid, model, "a late question", [("read", '{"path":"README.md"}', "# readme", {})])
    w.close()
    return sid


# -- replay and diff -----------------------------------------------------------------------------


def tamper_cell_content(store: Path, content: str = "appended 99 bytes to flux-mock.txt") -> Path:
    """The fixture's ``append`` cell says something else: replay still serves it (faithful)."""
    import dataclasses

    def go(b):
        if isinstance(b, Run) and isinstance(b.event, OpRecorded):
            return dataclasses.replace(b, event=dataclasses.replace(b.event, content=content))
        return b

    rewrite(store, go)
    return store


def tamper_plan_input(store: Path) -> Path:
    """The fixture's accepted plan now appends other content: its input hash matches no cell."""
    import dataclasses

    rewrite(store, lambda b: dataclasses.replace(b, plan_source=b.plan_source.replace("flux mock", "flux MOCK"))
                  if isinstance(b, PlanAttempted) and b.plan_source else b)
    return store


RELEASE_A = '''flow release
  version = read({"path":"VERSION"})
  tests = bash({"command":"pytest -q"})
  tag = bash({"command":"git tag v0.4.1"})
'''
RELEASE_B = '''flow release
  version = read({"path":"VERSION"})
  tests = bash({"command":"pytest -q"})
  tag = bash({"command":"git tag v0.4.2"})
  notes = read({"path":"NOTES.md"})
'''


def _authored_turn(w: StoreWriter, sid: str, user: str, src: str, outputs: list[str], start: int = 0) -> None:
    """An authored flow run with a ledger: every statement dispatches one op, then completes."""
    from flux.lang import parse
    from flux.lang.hashes import flow_key, stmt_hash16

    w.append(sid, Message.text("user", user))
    tid = w.begin_turn(sid, user, "mock")
    w.append(sid, PlanAttempted(step=1, outcome="accepted", phase="authored", plan_source=src), turn_id=tid)
    draft = parse(src)
    key = flow_key(draft.name, draft.body)
    for node, (stmt, out) in enumerate(zip(draft.body, outputs)):
        call = stmt.value if hasattr(stmt, "value") else stmt
        op = getattr(call, "op", None) or "read"
        _step(w, sid, op, "{}", out, index=start + node)
        w.append(sid, Run(event=StatementCompleted(plan=key, node=node, stmt=stmt_hash16(stmt), value=f"v_{node}")))
    u = Usage(input_tokens=900, output_tokens=60)
    w.append(sid, CallUsage(model="mock", usage=u), turn_id=tid)
    w.append(sid, TurnEnded(outcome="ok", iterations=1, answer="Released.", usage=u), turn_id=tid)
    w.append(sid, Message.text("assistant", "Released."))


def build_diff(path: Path) -> Path:
    """s_1 releases v0.4.1; s_2, its fork, sees a failing test (world), tags v0.4.2 (plan) and
    reads one more file (only B)."""
    w = _writer(path)
    s1 = w.create_session("mock")
    _authored_turn(w, s1, "cut the release", RELEASE_A, ["0.4.1", '{"passed": 40, "failed": []}', "tagged v0.4.1"])
    s2 = w.create_session("mock", context={"agent_id": f"fork:{s1}@1", "correlation_id": s1})
    _authored_turn(w, s2, "cut the release", RELEASE_B,
                   ["0.4.1", '{"passed": 39, "failed": ["test_tokenize_empty"]}', "tagged v0.4.2", "# notes"])
    w.close()
    return path


def build_multi_turn(path: Path, turns: int = 3) -> Path:
    """One session of several host-derived turns (the one-turn-at-a-time loading tests)."""
    w = _writer(path)
    sid = w.create_session("mock")
    for t in range(turns):
        _host_turn(w, sid, "mock", f"question {t + 1}", [
            ("read", f'{{"path":"file_{t + 1}.txt"}}', f"content of file {t + 1}", {}),
            ("bash", '{"command":"ls"}', f"listing {t + 1}", {}),
        ], answer=f"answer {t + 1}")
    w.close()
    return path


CHAIN_PLAN = 'flow\n  a = read({"path":"A"})\n  b = read({"path": $a})\n'


def build_chain(path: Path) -> Path:
    """s_1: ``a = read(A)`` returned "B", then ``b = read($a)`` read file B ("bee"): substituting
    a's result sends b off tape."""
    from flux.lang import parse
    from flux.lang.hashes import flow_key, stmt_hash16

    d = parse(CHAIN_PLAN)
    key = flow_key(d.name, d.body)
    cells = [cell("read", {"path": "A"}, "B"), cell("read", {"path": "B"}, "bee")]
    events = []
    for i, (node, c) in enumerate(zip(d.body, cells)):
        events += [c, Run(event=StatementCompleted(plan=key, node=i, stmt=stmt_hash16(node)))]
    with StoreWriter(path) as w:
        s1 = w.create_session("mock")
        write_turn(w, s1, "go", plan=CHAIN_PLAN, cells=events)
    return path


def stream_registry(store: Path) -> list[tuple]:
    """The store's session registry, ``(n, agent_id, correlation_id)`` in order: what a write added."""
    import sqlite3

    con = sqlite3.connect(store / "events.db")
    try:
        return con.execute("SELECT n, agent_id, correlation_id FROM streams ORDER BY n").fetchall()
    finally:
        con.close()
