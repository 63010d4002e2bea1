"""Time-machine benchmarks: replay and diff of a large recorded session, run by hand:

    python benchmarks/bench_timemachine.py [--plans 2000] [--ledgered 200x10] [--repeat 5]

It writes its own stores in a temp dir (nothing else is touched):

* an *adaptive-shaped* session: N accepted one-statement plans, one cassette cell each, no
  statement rows (like real adaptive turns: replay falls back to the acceptance order and diff to
  cell rows);
* a *ledgered* session: P plans of S statements each, run resumably (statement rows), with a
  tampered copy whose last cell content differs.

Reports medians of: loading the session, replaying it (tape served, scratch kept in memory),
diffing it against itself and against the tampered copy.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))

from flux.canonical import canonical_json, sha256_hex  # noqa: E402
from flux.lang.formatter import format_flow  # noqa: E402
from flux.lang.hashes import flow_key, stmt_hash16  # noqa: E402
from flux.lang.parser import parse  # noqa: E402
from flux.model.session import load_session  # noqa: E402
from flux.store import (  # noqa: E402
    Message, OpRecorded, PlanAttempted, Run, StatementCompleted, StepStarted, StepSucceeded, StoreReader, StoreWriter,
    TurnEnded,
)
from flux.timemachine import replay_session, run_diff  # noqa: E402


def median_ms(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def _cell(op: str, inp: dict, content: str) -> tuple[str, Run]:
    ij = canonical_json(inp)
    h = sha256_hex(ij)
    return h, Run(OpRecorded(step=f"step_{op}_{h[:16]}", op=op, input_hash=h, input_view=ij, content=content))


def write_adaptive(w: StoreWriter, plans: int) -> str:
    sid = w.create_session("mock")
    with w.transaction():
        w.append(sid, Message.text("user", "work"))
        tid = w.begin_turn(sid, "work", "mock")
        for i in range(plans):
            inp = {"path": f"src/file_{i}.py"}
            src = f'flow\n  adaptive_gather_{i} = read({canonical_json(inp)})\n'
            w.append(sid, PlanAttempted(step=i + 1, outcome="accepted", phase="gather", plan_source=src), turn_id=tid)
            h, cell = _cell("read", inp, f"contents of file {i}\n" * 20)
            w.append(sid, Run(StepStarted(step=f"step_read_{h[:16]}", op="read", input_hash=h)))
            w.append(sid, cell)
            w.append(sid, Run(StepSucceeded(step=f"step_read_{h[:16]}", output=f"v_{i}")))
        w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
    return sid


def write_ledgered(w: StoreWriter, plans: int, stmts: int, tamper_last: bool = False) -> str:
    sid = w.create_session("mock")
    with w.transaction():
        w.append(sid, Message.text("user", "build"))
        tid = w.begin_turn(sid, "build", "mock")
        vid = 0
        for p in range(plans):
            body = "".join(f'  s{p}_{k} = write({{"path":"out/{p}/{k}.txt","body":"step {k}"}})\n' for k in range(stmts))
            src = f"flow\n{body}"
            draft = parse(src)
            key = flow_key(draft.name, draft.body)
            w.append(sid, PlanAttempted(step=p + 1, outcome="accepted", plan_source=format_flow(draft)), turn_id=tid)
            for k, node in enumerate(draft.body):
                inp = {"body": f"step {k}", "path": f"out/{p}/{k}.txt"}
                last = tamper_last and p == plans - 1 and k == stmts - 1
                h, cell = _cell("write", inp, "wrote 6 bytes" if not last else "wrote 7 bytes")
                vid += 1
                w.append(sid, Run(StepStarted(step=f"step_write_{h[:16]}", op="write", input_hash=h)))
                w.append(sid, cell)
                w.append(sid, Run(StepSucceeded(step=f"step_write_{h[:16]}", output=f"v_{vid}")))
                w.append(sid, Run(StatementCompleted(plan=key, node=k, stmt=stmt_hash16(node), value=f"v_{vid}")))
        w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
    return sid


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plans", type=int, default=2000, help="one-statement plans in the adaptive session")
    ap.add_argument("--ledgered", default="200x10", help="PLANSxSTATEMENTS of the ledgered session")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    lp, ls = (int(x) for x in args.ledgered.split("x"))

    with tempfile.TemporaryDirectory(prefix="flux-bench-tm-") as tmp:
        store = Path(tmp) / "store"
        t = time.perf_counter()
        with StoreWriter(store) as w:
            adaptive = write_adaptive(w, args.plans)
            ledgered = write_ledgered(w, lp, ls)
            tampered = write_ledgered(w, lp, ls, tamper_last=True)
        print(f"wrote the stores in {(time.perf_counter() - t) * 1000:.0f} ms")
        r = StoreReader(store)
        n_events = r.count_events()
        print(f"store: {n_events} events; adaptive {adaptive} = {args.plans} plans/cells; "
              f"ledgered {ledgered} = {lp}×{ls} statements (+ tampered copy {tampered})")

        rep = replay_session(r, adaptive)
        assert rep.faithful, rep.unfaithful_reason
        rep = replay_session(r, ledgered)
        assert rep.faithful, rep.unfaithful_reason
        d = run_diff(r, ledgered, r, tampered)
        assert not d.identical and d.summary["output"] == 1, d.summary

        print(f"medians over {args.repeat} runs")
        for label, fn in [
            (f"load_session (adaptive, {args.plans} cells)", lambda: load_session(r, adaptive)),
            ("replay_session (adaptive)", lambda: replay_session(r, adaptive)),
            ("run_diff adaptive ↔ itself", lambda: run_diff(r, adaptive, r, adaptive)),
            (f"load_session (ledgered, {lp * ls} statements)", lambda: load_session(r, ledgered)),
            ("replay_session (ledgered)", lambda: replay_session(r, ledgered)),
            ("run_diff ledgered ↔ tampered copy", lambda: run_diff(r, ledgered, r, tampered)),
        ]:
            print(f"  {label:<48} {median_ms(fn, args.repeat):9.1f} ms")


if __name__ == "__main__":
    main()
