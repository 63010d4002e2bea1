"""Time-machine benchmarks: replay and diff of a large recorded session, run by hand:

    python benchmarks/bench_timemachine.py [--plans 2000] [--ledgered 200x10] [--repeat 5]

It writes its own stores in a temp dir (nothing else is touched):

* an *adaptive-shaped* session: N accepted one-statement plans, one cassette cell each, no
  statement rows (like real adaptive turns: replay falls back to the acceptance order and diff to
  cell rows);
* a *ledgered* session: P plans of S statements each, run resumably (statement rows), with a
  tampered copy whose last cell content differs.

Reports medians of: loading the session, replaying it (tape served, scratch kept in memory),
diffing it against itself and against the tampered copy, and diffing it against a *shifted* copy —
the same session without its second cell, as an inject fork of it is — whose rows are aligned as a
sequence (``flux.timemachine.align``) instead of by position; plus the alignment alone on 10,000
keys in its hard cases (repeated keys, unrelated runs).
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


def median_cpu_ms(fn, repeat: int) -> float:
    """Median CPU time (process_time): the machine is shared, and this part is pure computation."""
    fn()
    times = []
    for _ in range(repeat):
        t = time.process_time()
        fn()
        times.append((time.process_time() - t) * 1000)
    return statistics.median(times)


def _cell(op: str, inp: dict, content: str) -> tuple[str, Run]:
    ij = canonical_json(inp)
    h = sha256_hex(ij)
    return h, Run(OpRecorded(step=f"step_{op}_{h[:16]}", op=op, input_hash=h, input_view=ij, content=content))


def write_adaptive(w: StoreWriter, plans: int, skip: int | None = None) -> str:
    """``skip``: leave out that plan's cell (the shifted copy: every later cell moves up by one)."""
    sid = w.create_session("mock")
    with w.transaction():
        w.append(sid, Message.text("user", "work"))
        tid = w.begin_turn(sid, "work", "mock")
        for i in range(plans):
            inp = {"path": f"src/file_{i}.py"}
            src = f'flow\n  adaptive_gather_{i} = read({canonical_json(inp)})\n'
            w.append(sid, PlanAttempted(step=i + 1, outcome="accepted", phase="gather", plan_source=src), turn_id=tid)
            if i == skip:
                continue
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


def _read_cells(r: StoreReader, sid: str) -> int:
    """What replay cannot avoid: read the session's run rows and decode its cells."""
    from flux.model.session import collect_cells

    return len(collect_cells(r.events(sid, kinds=("run",))))


def _row_lists(r: StoreReader, a: str, b: str) -> None:
    from flux.model.session import TRACE_KINDS, diff_rows

    da, db = load_session(r, a, kinds=TRACE_KINDS), load_session(r, b, kinds=TRACE_KINDS)
    diff_rows(da.run_events, da.cells, db.run_events, db.cells)


def _bench_alignment(n: int, repeat: int) -> None:
    """The row alignment alone (``align_rows``) on ``n`` rows, in the cases a matcher finds hard."""
    import random

    from flux.model.session import StmtRow
    from flux.timemachine.diff import align_by_position, align_rows

    def rows(keys):
        return [StmtRow(i, k, False, (("op", "c"),)) for i, k in enumerate(keys)]

    rng = random.Random(7)
    uniq = [f"call:read:{i:016x}" for i in range(n)]
    rep = ["call:run_tests:x", "call:edit:y"] * (n // 2)
    scattered = list(uniq)
    for _ in range(n // 5):
        del scattered[rng.randrange(len(scattered))]
    cases = [
        ("one cell fewer (inject fork)", uniq, uniq[:1] + uniq[2:]),
        ("repeated keys, one fewer", rep, rep[:3] + rep[4:]),
        (f"{n // 5} scattered deletions", uniq, scattered),
        ("unrelated runs (no common key)", uniq, [k + "z" for k in uniq]),
        ("two-key alphabet, 10% deleted", [rng.choice("ab") for _ in range(n)], None),
    ]
    ra0, rb0 = rows(uniq), rows(uniq[:1] + uniq[2:])
    floor = median_cpu_ms(lambda: align_by_position(ra0, rb0), repeat)
    print(f"  align_rows on {n} rows, CPU ms (floor: flux's positional pairing of the first case {floor:.1f} ms)")
    for label, a, b in cases:
        if b is None:
            b = [x for x in a if rng.random() > 0.1]
        ra, rb = rows(a), rows(b)
        ms = median_cpu_ms(lambda: align_rows(ra, rb), repeat)
        got = align_rows(ra, rb)
        paired = sum(1 for x in got if x.kind != "plan")
        print(f"    {label:<34} {ms:9.1f} ms  ({paired:,} rows paired, {len(got):,} rows)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plans", type=int, default=10_000, help="one-op plans (cells) in the adaptive session")
    ap.add_argument("--ledgered", default="1000x10", help="PLANSxSTATEMENTS of the ledgered sessions")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    lp, ls = (int(x) for x in args.ledgered.split("x"))

    with tempfile.TemporaryDirectory(prefix="flux-bench-tm-") as tmp:
        store = Path(tmp) / "store"
        t = time.perf_counter()
        with StoreWriter(store) as w:
            adaptive = write_adaptive(w, args.plans)
            shifted = write_adaptive(w, args.plans, skip=1)
            ledgered = write_ledgered(w, lp, ls)
            tampered = write_ledgered(w, lp, ls, tamper_last=True)
        print(f"wrote the stores in {(time.perf_counter() - t) * 1000:.0f} ms")
        r = StoreReader(store)
        print(f"store: {r.count_events()} events; {adaptive}: {args.plans} recorded ops; "
              f"{ledgered} and {tampered}: {lp}×{ls} = {lp * ls} statements each (the second tampered at its last cell)")

        rep = replay_session(r, adaptive)
        assert rep.faithful, rep.unfaithful_reason
        rep = replay_session(r, ledgered)
        assert rep.faithful, rep.unfaithful_reason
        d = run_diff(r, ledgered, r, tampered)
        assert not d.identical and d.summary["output"] == 1, d.summary

        print(f"medians over {args.repeat} runs")
        read = median_ms(lambda: _read_cells(r, adaptive), args.repeat)
        rp = median_ms(lambda: replay_session(r, adaptive), args.repeat)
        print(f"  read + decode {args.plans} cells                  {read:9.1f} ms")
        print(f"  replay {args.plans}-op session                    {rp:9.1f} ms  ({rp / read:.2f}× read+decode; "
              f"{args.plans / (rp / 1000):,.0f} cells/s)")
        rl = median_ms(lambda: _row_lists(r, ledgered, tampered), args.repeat)
        df = median_ms(lambda: run_diff(r, ledgered, r, tampered), args.repeat)
        print(f"  load both {lp * ls}-statement row lists          {rl:9.1f} ms")
        print(f"  run_diff of the two                          {df:9.1f} ms  ({df / rl:.2f}× loading)")
        rl2 = median_ms(lambda: _row_lists(r, adaptive, adaptive), args.repeat)
        df2 = median_ms(lambda: run_diff(r, adaptive, r, adaptive), args.repeat)
        print(f"  load both {args.plans}-cell row lists (cell rows)    {rl2:9.1f} ms")
        print(f"  run_diff of the two                          {df2:9.1f} ms  ({df2 / rl2:.2f}× loading)")
        d = run_diff(r, adaptive, r, shifted)
        assert d.sequence_aligned and d.summary == {"output": 0, "plan": 1, "same": args.plans - 1}, d.summary
        rl3 = median_ms(lambda: _row_lists(r, adaptive, shifted), args.repeat)
        df3 = median_ms(lambda: run_diff(r, adaptive, r, shifted), args.repeat)
        print(f"  load {args.plans} cells + the shifted copy's         {rl3:9.1f} ms")
        print(f"  run_diff of the two (aligned as a sequence)  {df3:9.1f} ms  ({df3 / rl3:.2f}× loading)")
        _bench_alignment(args.plans, args.repeat)

        host = [p.plan_source for p in load_session(r, adaptive).accepted_plans()]
        multi = [p.plan_source for p in load_session(r, ledgered).accepted_plans()]
        for label, plans in ((f"{len(host)} host-derived plans", host), (f"{len(multi)} {ls}-statement plans", multi)):
            ms = median_ms(lambda: [format_flow(parse(src)) for src in plans], args.repeat)
            print(f"  parse + format {label:<29} {ms:9.1f} ms  ({len(plans) / (ms / 1000):,.0f} plans/s)")


if __name__ == "__main__":
    main()
