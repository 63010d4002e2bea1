"""Time-machine write side (issue 8, part 5), run by hand:

    python benchmarks/bench_timemachine_write.py [--quick] [--repeat 5]

Three measurements, each against its reference in the same run, interleaved (reference, measured,
reference, measured, …), medians of --repeat runs, printing the ratio:

1. fork of a 10,000-statement ledgered session at N = 9,999 (inject mode: the prefix is fast-
   forwarded from the ledger, the tail stays on tape, offline) vs a hermetic replay of the same
   session. Target ≤ 1.5×.
2. a 100-session sweep of pure-substitution what-ifs (``what_if_over``) with jobs=2 vs the same
   sweep with jobs=1. Target ≤ 0.7×.
3. resurrect of an interrupted turn whose accepted plan has 5,000 recorded cells and no
   ``turn_ended`` (no statement rows: every cell is crash tail, served from tape) vs a replay of
   those cells. Target ≤ 1.5×.

Every run of either side works on a fresh copy of its store; the copy is made before the clock
starts (excluded from both sides). Stores live in a temp dir; nothing else is touched.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_timemachine import _cell, write_ledgered  # noqa: E402

from flux.agent.client import Client  # noqa: E402
from flux.agent.providers.null import NullProvider  # noqa: E402
from flux.canonical import canonical_json  # noqa: E402
from flux.lang.formatter import format_flow  # noqa: E402
from flux.lang.parser import parse  # noqa: E402
from flux.store import Message, PlanAttempted, Run, StepStarted, StepSucceeded, StoreReader, StoreWriter  # noqa: E402
from flux.timemachine import fork_session, replay_session, resurrect_session  # noqa: E402
from flux.timemachine.whatif import WhatIfSpec, what_if_over  # noqa: E402


def write_interrupted(w: StoreWriter, cells: int) -> str:
    """One open turn: an accepted plan of ``cells`` write statements, every cell recorded, then the
    process died — no statement rows, no turn_ended (the shape a killed agent leaves)."""
    sid = w.create_session("mock")
    with w.transaction():
        w.append(sid, Message.text("user", "build"))
        tid = w.begin_turn(sid, "build", "mock")
        body = "".join(f'  s{k} = write({{"path":"out/{k}.txt","body":"step {k}"}})\n' for k in range(cells))
        w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=format_flow(parse(f"flow\n{body}"))),
                 turn_id=tid)
        for k in range(cells):
            h, cell = _cell("write", {"body": f"step {k}", "path": f"out/{k}.txt"}, "wrote 6 bytes")
            w.append(sid, Run(StepStarted(step=f"step_write_{h[:16]}", op="write", input_hash=h)))
            w.append(sid, cell)
            w.append(sid, Run(StepSucceeded(step=f"step_write_{h[:16]}", output=f"v_{k}")))
    return sid


def write_corpus(w: StoreWriter, sessions: int, reads: int) -> list[str]:
    """``sessions`` closed sessions, each one plan of ``reads`` read statements with their cells."""
    from flux.store import TurnEnded

    ids = []
    for s in range(sessions):
        sid = w.create_session("mock")
        with w.transaction():
            w.append(sid, Message.text("user", f"read {s}"))
            tid = w.begin_turn(sid, f"read {s}", "mock")
            body = "".join(f"  r{k} = read({canonical_json({'path': f'src/{s}/{k}.py'})})\n" for k in range(reads))
            w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=format_flow(parse(f"flow\n{body}"))),
                     turn_id=tid)
            for k in range(reads):
                h, cell = _cell("read", {"path": f"src/{s}/{k}.py"}, f"contents {s}/{k}\n" * 10)
                w.append(sid, Run(StepStarted(step=f"step_read_{h[:16]}", op="read", input_hash=h)))
                w.append(sid, cell)
                w.append(sid, Run(StepSucceeded(step=f"step_read_{h[:16]}", output=f"v_{k}")))
            w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
        ids.append(sid)
    return ids


Timed = Callable[[Path], tuple[Callable[[], None], Callable[[], None]]]


def paired(ref: Timed, meas: Timed, master: Path, tmp: Path,
           repeat: int) -> tuple[float, float]:
    """Interleave ``ref`` and ``meas``, each on a fresh copy of ``master`` (copy not timed)."""
    rt, mt = [], []
    for i in range(repeat + 1):  # the first pair warms up and is dropped
        for fn, out in ((ref, rt), (meas, mt)):
            work = tmp / f"run-{i}-{len(out)}-{id(out)}"
            shutil.copytree(master, work / "store")
            (work / "ws").mkdir()
            run, done = fn(work)  # setup (opening a client) is not timed
            t = time.perf_counter()
            run()
            dt = (time.perf_counter() - t) * 1000
            done()
            if i:
                out.append(dt)
            shutil.rmtree(work)
    return statistics.median(rt), statistics.median(mt)


def _client(work: Path) -> Client:
    return Client(NullProvider(model="offline"), model="offline", store=work / "store", workspace=work / "ws",
                  env_secrets=False, auto_resurrect=False)


def _replay(sid: str, faithful: bool = True) -> Timed:
    def setup(work: Path):
        r = StoreReader(work / "store")

        def run() -> None:
            rep = replay_session(r, sid)
            assert rep.diverged is None and (rep.faithful or not faithful), rep.unfaithful_reason
        return run, r.close
    return setup


def report(label: str, ref_label: str, ref: float, meas: float, target: float) -> None:
    ratio = meas / ref
    verdict = "met" if ratio <= target else "MISSED"
    print(f"  {ref_label:<44} {ref:9.1f} ms")
    print(f"  {label:<44} {meas:9.1f} ms  ratio {ratio:.2f}× (target ≤ {target}×: {verdict})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run, not the targets' sizes)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--statements", type=int, default=10_000)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--reads", type=int, default=40, help="read statements (cells) per sweep session")
    ap.add_argument("--cells", type=int, default=5_000, help="tail cells of the interrupted turn")
    ap.add_argument("--only", choices=("fork", "sweep", "resurrect"), action="append")
    a = ap.parse_args()
    if a.quick:
        a.statements, a.sessions, a.reads, a.cells, a.repeat = 1_000, 20, 20, 500, 3
    only = set(a.only or ("fork", "sweep", "resurrect"))
    print(f"cpus {os.cpu_count()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"medians of {a.repeat} interleaved runs, fresh store copy per run (copy not timed)")

    with tempfile.TemporaryDirectory(prefix="flux-bench-tmw-") as tmpd:
        tmp = Path(tmpd)

        if "fork" in only:
            master = tmp / "fork-master"
            with StoreWriter(master) as w:
                sid = write_ledgered(w, 1, a.statements)
            at = a.statements - 1

            def fork(work: Path):
                c = _client(work)

                def run() -> None:
                    res = fork_session(c, sid, at, inject="injected")
                    assert res.hermetic and res.live_ops == [] and res.prefix_served == at, res
                return run, c.close

            ref, meas = paired(_replay(sid), fork, master, tmp, a.repeat)
            print(f"1. fork of a {a.statements:,}-statement session at N = {at:,} (inject, tail on tape)")
            report(f"fork_session at {at:,}", f"replay_session of the same session", ref, meas, 1.5)

        if "sweep" in only:
            master = tmp / "sweep-master"
            with StoreWriter(master) as w:
                ids = write_corpus(w, a.sessions, a.reads)
            spec = WhatIfSpec(substitute={"read": "changed"})

            def sweep(jobs: int) -> Timed:
                def setup(work: Path):
                    def run() -> None:
                        rep = what_if_over(work / "store", ids, spec, jobs=jobs,
                                           client_args={"workspace": str(work / "ws")})
                        assert rep.total == a.sessions and rep.changed == a.sessions and not rep.errors, rep.errors
                        assert all(o.result.hermetic for o in rep.outcomes)
                    return run, lambda: None
                return setup

            ref, meas = paired(sweep(1), sweep(2), master, tmp, a.repeat)
            print(f"2. sweep of {a.sessions} pure-substitution what-ifs ({a.reads} read cells each)")
            report("what_if_over jobs=2", "what_if_over jobs=1 (sequential)", ref, meas, 0.7)

        if "resurrect" in only:
            master = tmp / "resurrect-master"
            with StoreWriter(master) as w:
                sid = write_interrupted(w, a.cells)

            def resurrect(work: Path):
                c = _client(work)

                def run() -> None:
                    rep = resurrect_session(c, sid)
                    assert rep is not None and rep.ops_run_live == 0 and rep.outcome == "resurrected", rep
                return run, c.close

            ref, meas = paired(_replay(sid, faithful=False), resurrect, master, tmp, a.repeat)
            print(f"3. resurrect of a turn with {a.cells:,} tail cells (no statement rows, no turn_ended)")
            report("resurrect_session", "replay_session of those cells", ref, meas, 1.5)

    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
