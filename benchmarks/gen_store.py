"""Generate a large, realistic flux store for the benchmarks (through our StoreWriter).

Default: 10,000 sessions and ~1,000,000 events — 9,999 ordinary sessions of 91 events (3 turns of
5 tool calls: host-derived plan, step rows, cassette cell, usage, observations) and one big session
of ~100,000 events (10 turns), the last session of all being interrupted (newest turn open).

Writes one transaction per session (the store's bulk path; live recording commits per append).

``--shape`` chooses how the plans were run (every shape replays faithfully):

* ``batch`` (default): flux's batch path — no statement rows; the executions are the acceptances;
* ``ledger``: run resumably, as flux records its own turns — each plan's ``statement_completed``
  rows (and a ``plan_halted`` for the call that failed), which order the executions (§3.7); every
  other plan has two statements (two calls, two cells);
* ``retry``: batch, and every failed call is tried again on the same input — the same plan
  accepted again, and a second cell that succeeds.

    python benchmarks/gen_store.py DIR [--sessions N] [--big N] [--shape batch|ledger|retry]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))

from flux.canonical import canonical_json, sha256_hex  # noqa: E402
from flux.store import (  # noqa: E402
    CallUsage, Message, Observation, OpRecorded, PlanAttempted, PlanHalted, Run, StatementCompleted, StepStarted,
    StepSucceeded, StoreWriter, TurnEnded, Usage,
)

SHAPES = ("batch", "ledger", "retry")

OPS = ("read", "grep", "bash", "edit", "glob")


def _input(op: str, i: int) -> dict:
    if op == "bash":
        return {"command": f"pytest -q tests/test_mod_{i % 97}.py"}
    if op == "grep":
        return {"path": "src", "pattern": f"def handler_{i}"}
    if op == "glob":
        return {"pattern": f"src/pkg_{i % 13}/**/*.py"}
    if op == "edit":
        return {"path": f"src/mod_{i % 211}.py", "old": f"x = {i}", "new": f"x = {i + 1}"}
    return {"path": f"src/mod_{i % 211}.py"}


def write_turn(w: StoreWriter, sid: str, ts: int, n_tools: int, *, end: bool = True, base: int = 0,
               shape: str = "batch") -> int:
    text = f"task {base}: make the handlers consistent"
    w.append(sid, Message.text("user", text), ts=ts)
    tid = w.begin_turn(sid, text, "anthropic:claude-sonnet-4-5", ts=ts + 1)
    k = 0
    step_no = 0
    while k < n_tools:
        calls = [base + k]
        if shape == "ledger" and step_no % 2 == 1 and k + 1 < n_tools:
            calls.append(base + k + 1)  # a two-statement plan
        k += len(calls)
        step_no += 1
        lines = []
        for j, i in enumerate(calls):
            op = OPS[i % len(OPS)]
            lines.append(f"  adaptive_gather_{k - len(calls) + j + 1} = {op}({canonical_json(_input(op, i))})\n")
        src = "flow\n" + "".join(lines)
        key = stmts = None
        if shape == "ledger":
            from flux.lang.hashes import stmt_hash16
            from flux.model.stored_plan import parse_stored_plan

            draft, key = parse_stored_plan(src)
            stmts = [stmt_hash16(n) for n in draft.body]
        tries = 2 if shape == "retry" and any(i % 37 == 0 for i in calls) else 1
        for attempt in range(tries):
            w.append(sid, PlanAttempted(step=step_no, outcome="accepted", phase="gather", plan_source=src),
                     turn_id=tid, ts=ts + 2)
            for j, i in enumerate(calls):
                op = OPS[i % len(OPS)]
                inp = _input(op, i)
                ih = sha256_hex(canonical_json(inp))
                step = f"step_{op}_{ih[:16]}"
                failed = i % 37 == 0 and attempt == 0
                w.append(sid, Run(event=StepStarted(step=step, op=op, input_hash=ih)), ts=ts + 3)
                w.append(sid, Run(event=OpRecorded(seq=k, step=step, op=op, input_hash=ih, input_view=canonical_json(inp),
                                                   content=f"result of {op} #{i}: " + "ok " * 20, is_error=failed)),
                         ts=ts + 4)
                w.append(sid, Run(event=StepSucceeded(step=step, output=f"v_{k}")), ts=ts + 5)
                if key is not None:
                    if failed:
                        w.append(sid, Run(event=PlanHalted(plan=key, node=j, stmt=stmts[j], op=op, kind="runtime",
                                                           error=f"{op} failed")), ts=ts + 5)
                    else:
                        w.append(sid, Run(event=StatementCompleted(plan=key, node=j, stmt=stmts[j], value=f"v_{k}")),
                                 ts=ts + 5)
                if failed:
                    break
    if not end:
        return ts + 10
    for _ in range(3):
        w.append(sid, CallUsage(model="anthropic:claude-sonnet-4-5", usage=Usage(input_tokens=2000, output_tokens=120, cache_read_input_tokens=9000)),
                 turn_id=tid, ts=ts + 6)
    w.append(sid, TurnEnded(outcome="ok", iterations=3, answer="Done: handlers updated.", usage=Usage(input_tokens=6000, output_tokens=360)),
             turn_id=tid, ts=ts + 7)
    for k in range(3):
        w.append(sid, Observation("tool_call", "turn", {"caller": "local", "subjects": [], "tool": OPS[k]}), turn_id=tid, ts=ts + 8)
    w.append(sid, Message.text("assistant", "Done: handlers updated."), ts=ts + 9)
    return ts + 10


def generate(dest: Path, sessions: int, big: int, shape: str = "batch") -> None:
    t0 = time.perf_counter()
    w = StoreWriter(dest)
    w.conn.execute("PRAGMA synchronous = OFF")  # generator only: durability is irrelevant here
    ts = 1_780_000_000_000
    # Per small session: 1 + 3 turns x (2 + 5*4 + 3 + 1 + 3 + 1) = 91 events.
    small = sessions - 1
    with w.transaction():
        big_sid = w.create_session("anthropic:claude-sonnet-4-5", ts=ts)
        per_turn = (big - 1) // 10
        tools = max(1, (per_turn - 11) // 4)
        for t in range(10):
            ts = write_turn(w, big_sid, ts, tools, base=t * tools, shape=shape)
    for s in range(small):
        with w.transaction():
            sid = w.create_session("anthropic:claude-sonnet-4-5", ts=ts)
            for t in range(3):
                last = s == small - 1 and t == 2
                ts = write_turn(w, sid, ts + 1000, 5, end=not last, base=s * 15 + t * 5, shape=shape)
        if s % 1000 == 0:
            print(f"  {s}/{small} sessions", file=sys.stderr)
    n = w.conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
    w.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    w.close()
    print(f"generated {small + 1} sessions, {n} events in {time.perf_counter() - t0:.1f}s → {dest}", file=sys.stderr)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path)
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--big", type=int, default=100_000)
    ap.add_argument("--shape", choices=SHAPES, default="batch")
    a = ap.parse_args()
    if (a.dir / "events.db").exists():
        sys.exit(f"error: {a.dir} already holds a store — pick an empty directory")
    generate(a.dir, a.sessions, a.big, a.shape)


if __name__ == "__main__":
    main()
