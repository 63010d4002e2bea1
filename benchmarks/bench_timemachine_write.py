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
starts (excluded from both sides). Stores live in a temp dir; nothing else is touched. Each run is
timed in wall-clock and in CPU time (``time.process_time``: this process, SQLite included), and
both ratios are printed — on a shared machine the CPU ratio is the steadier one.

``--against OTHER/core`` (fork and resurrect): every run happens in a fresh worker process, and
the rounds interleave this checkout's code with the other one's (e.g. a detached worktree of main:
``git worktree add --detach /tmp/main-wt main``), so both are measured in the same minutes on the
same stores: per round, old replay, old measured, new replay, new measured.

``--phases`` (fork, resurrect): where the CPU time goes, in this process (the fork's read, parse,
conversation, prefix run, plan rows, child rows and the rest; resurrect's read, plan check, run and
the rest; the payload texts and the commits within them; beside replay's read, run and the rest),
medians.

``--cli`` (fork): also time the ``flux fork S --at N --inject JSON --json`` verb in-process
(click's ``CliRunner`` on ``flux.cli.main``: it resolves the session, loads the store's toolbox,
shows the side-effect gate and forks), interleaved per round with the replay and ``fork_session``
runs: replay, fork_session, flux fork. The CLI modules are imported in the untimed setup. With
``--against`` it replaces ``fork_session`` as the measured side (each run a fresh worker).
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
# A worker of --against runs the other checkout's code: its core comes first on the path.
sys.path.insert(0, os.environ.get("FLUX_BENCH_CORE") or str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "benchmarks"))
import flux  # noqa: E402,F401  (first: bench_timemachine puts this checkout's core in front)

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


Times = tuple[float, float]  # (wall ms, CPU ms)


def timed(fn: Timed, work: Path) -> Times:
    """One run of ``fn`` in ``work`` (its store already copied there); setup is not timed."""
    run, done = fn(work)  # setup (opening a client) is not timed
    c, t = time.process_time(), time.perf_counter()
    run()
    dt, dc = (time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000
    done()
    return dt, dc


def _fresh(master: Path, work: Path) -> Path:
    shutil.copytree(master, work / "store")
    (work / "ws").mkdir()
    return work


def _medians(runs: list[Times]) -> tuple[float, float, float]:
    """(median wall, median CPU, least CPU) — the least CPU time is the run the other processes on
    a shared machine disturbed least."""
    return (statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), min(r[1] for r in runs))


def paired(ref: Timed, meas: Timed, master: Path, tmp: Path, repeat: int) -> tuple[tuple, tuple]:
    """Interleave ``ref`` and ``meas``, each on a fresh copy of ``master`` (copy not timed):
    medians of (wall, CPU) for each."""
    rt: list[Times] = []
    mt: list[Times] = []
    for i in range(repeat + 1):  # the first pair warms up and is dropped
        for fn, out in ((ref, rt), (meas, mt)):
            work = _fresh(master, tmp / f"run-{i}-{len(out)}-{id(out)}")
            t = timed(fn, work)
            if i:
                out.append(t)
            shutil.rmtree(work)
    return _medians(rt), _medians(mt)


def interleaved(fns: dict[str, Timed], master: Path, tmp: Path, repeat: int) -> dict[str, tuple]:
    """Like :func:`paired` for any number of sides, in the order given, one round after another."""
    runs: dict[str, list[Times]] = {k: [] for k in fns}
    for i in range(repeat + 1):  # the first round warms up and is dropped
        for label, fn in fns.items():
            work = _fresh(master, tmp / f"run-{i}-{label}")
            t = timed(fn, work)
            if i:
                runs[label].append(t)
            shutil.rmtree(work)
    return {k: _medians(v) for k, v in runs.items()}


def _worker_times(core: str | None, what: str, work: Path, sid: str, arg: int) -> Times:
    """One run in a fresh process on ``core``'s code (None: this checkout's)."""
    import json
    import subprocess

    env = dict(os.environ)
    env.pop("FLUX_BENCH_CORE", None)
    if core:
        env["FLUX_BENCH_CORE"] = core
    out = subprocess.run([sys.executable, __file__, "--worker", what, str(work), sid, str(arg)], env=env,
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out.strip().splitlines()[-1])
    expect = Path(core or ROOT / "core").resolve()
    assert Path(d["flux"]).resolve().is_relative_to(expect), f"the worker ran {d['flux']}, not {expect}"
    return d["wall"], d["cpu"]


def against(other_core: str, what: str, master: Path, sid: str, arg: int, tmp: Path,
            repeat: int) -> dict[str, tuple[tuple, tuple]]:
    """``what`` (fork/resurrect) vs replay, for the other checkout's code and this one's, every run
    in a fresh worker, the four interleaved per round (the first round warms up and is dropped)."""
    runs: dict[tuple[str, str], list[Times]] = {}
    for i in range(repeat + 1):
        for label, core in (("other", other_core), ("this", None)):
            for side in ("replay", what):
                work = _fresh(master, tmp / f"w-{i}-{label}-{side}")
                # replay's arg: 1 = the replay must be faithful (the fork's source), 0 = may not be
                t = _worker_times(core, side, work, sid, arg if side == what else int(what.startswith("fork")))
                if i:
                    runs.setdefault((label, side), []).append(t)
                shutil.rmtree(work)
    return {label: (_medians(runs[(label, "replay")]), _medians(runs[(label, what)])) for label in ("other", "this")}


def worker(what: str, work: Path, sid: str, arg: int) -> None:
    """``--worker``: one timed run of replay / fork at ``arg`` / resurrect in ``work``; prints its times."""
    import json

    if what == "replay":
        fn = _replay(sid, faithful=bool(arg))
    elif what == "fork":
        fn = _fork(sid, arg)
    elif what == "forkcli":
        fn = _fork_cli(sid, arg)
    else:
        fn = _resurrect(sid)
    wall, cpu = timed(fn, work)
    print(json.dumps({"wall": wall, "cpu": cpu, "flux": sys.modules["flux"].__file__}))


def _client(work: Path) -> Client:
    return Client(NullProvider(model="offline"), model="offline", store=work / "store", workspace=work / "ws",
                  env_secrets=False)


def _replay(sid: str, faithful: bool = True) -> Timed:
    def setup(work: Path):
        r = StoreReader(work / "store")

        def run() -> None:
            rep = replay_session(r, sid)
            assert rep.diverged is None and (rep.faithful or not faithful), rep.unfaithful_reason
        return run, r.close
    return setup


def _fork_cli(sid: str, at: int) -> Timed:
    """``flux fork SID --at AT --inject '"injected"' --json`` in-process: the verb a user runs, gate
    included. Importing the CLI is setup, not timed (a replay's imports are not timed either)."""
    import json

    def setup(work: Path):
        from click.testing import CliRunner

        import flux.agent.client  # noqa: F401  (what the verb imports lazily: setup, not the fork)
        import flux.agent.providers.null  # noqa: F401
        import flux.agent.toolboxes  # noqa: F401
        import flux.cli.agent  # noqa: F401
        import flux.timemachine.fork  # noqa: F401
        from flux.cli import main as cli_main

        args = ["fork", sid, "--at", str(at), "--inject", '"injected"', "--store", str(work / "store"),
                "--workspace", str(work / "ws"), "--json"]

        def run() -> None:
            res = CliRunner().invoke(cli_main, args, catch_exceptions=False)
            assert res.exit_code == 0, res.output
            out = json.loads(res.stdout.strip().splitlines()[-1])
            assert out["hermetic"] and out["live_ops"] == [] and out["prefix_served"] == at, out
        return run, lambda: None
    return setup


def _fork(sid: str, at: int) -> Timed:
    def setup(work: Path):
        c = _client(work)

        def run() -> None:
            res = fork_session(c, sid, at, inject="injected")
            assert res.hermetic and res.live_ops == [] and res.prefix_served == at, res
        return run, c.close
    return setup


def _resurrect(sid: str) -> Timed:
    def setup(work: Path):
        c = _client(work)

        def run() -> None:
            rep = resurrect_session(c, sid)
            assert rep is not None and rep.ops_run_live == 0 and rep.outcome == "resurrected", rep
        return run, c.close
    return setup


def phases(what: str, sid: str, at: int, master: Path, tmp: Path, repeat: int) -> None:
    """``--phases``: replay and ``what`` (fork or resurrect) interleaved in this process, each phase's
    CPU time taken by wrapping the functions they call through their modules' globals. A phase's
    time is exclusive: a wrapped call inside another (resurrect's read inside its prepare) counts
    only for itself. Rows marked ``·`` are parts of another row, not added to the total."""
    import contextlib

    import flux.store.payload_encode as payload_encode_mod
    import flux.store.store as store_mod
    import flux.timemachine.fork as fork_mod
    import flux.timemachine.plans as plans_mod
    import flux.timemachine.replay as replay_mod
    import flux.timemachine.resurrect as resurrect_mod
    import flux.timemachine.serve as serve_mod

    spent: dict[str, float] = {}
    nested: list[float] = []  # per open wrapped call: the CPU time of the wrapped calls inside it

    def timing(mod, name: str, label: str):
        real = getattr(mod, name)

        def wrapper(*args, **kw):
            c = time.process_time()
            nested.append(0.0)
            try:
                return real(*args, **kw)
            finally:
                took = time.process_time() - c
                inner = nested.pop()
                if "·" not in label:
                    if nested:
                        nested[-1] += took
                    took -= inner
                spent[label] = spent.get(label, 0.0) + took
        setattr(mod, name, wrapper)
        return mod, name, real

    real_tx = store_mod.StoreWriter.transaction

    @contextlib.contextmanager
    def commits(self):  # the time of each outermost COMMIT (a part of whatever phase holds it)
        outer = self._tx_depth == 0
        with real_tx(self):
            yield
            c = time.process_time()
        if outer:
            spent[f"{what}: · commits"] = spent.get(f"{what}: · commits", 0.0) + time.process_time() - c

    patched = [timing(replay_mod, "read_replay_input", "replay: read"),
               timing(plans_mod, "parse_stored_plan", "replay: parse the plans"),
               timing(serve_mod.PlanServer, "run", "replay (and a prefix): run the plans"),
               timing(payload_encode_mod, "encode_run_bodies", f"{what}: · payload texts (encode_run_bodies)")]
    if what == "fork":
        patched += [timing(fork_mod, "read_replay_input", "fork: read (as replay's, with the cell bodies)"),
                    timing(fork_mod, "executions_of", "fork: parse the plans (as replay)"),
                    timing(fork_mod, "_conversation", "fork: the conversation at N"),
                    timing(fork_mod, "run_fork_prefix", "fork: the prefix run from tape (as replay's run)"),
                    timing(fork_mod, "_attempt", "fork: the plan rows (format, fingerprint, redact)"),
                    timing(fork_mod, "flush_events", "fork: the child's run rows (payloads + SQLite insert)")]
        measured = _fork(sid, at)
    else:
        patched += [timing(resurrect_mod, "read_resurrect_input", "resurrect: read the turn"),
                    timing(resurrect_mod, "prepare_resurrect", "resurrect: check, ledger, tail (the rest of prepare)"),
                    timing(resurrect_mod, "_resurrect_run", "resurrect: run the plan (rows buffered, live flushes)")]
        measured = _resurrect(sid)
    store_mod.StoreWriter.transaction = commits
    runs: dict[str, list[dict[str, float]]] = {"replay": [], what: []}
    try:
        for i in range(repeat + 1):  # the first round warms up and is dropped
            for label, fn in (("replay", _replay(sid, faithful=what == "fork")), (what, measured)):
                spent.clear()
                _, cpu = timed(fn, _fresh(master, tmp / f"phase-{i}-{label}"))
                shutil.rmtree(tmp / f"phase-{i}-{label}")
                if i:
                    row = {k: v * 1000 for k, v in spent.items() if k.startswith(label + ":")}
                    row[f"{label}: the rest"] = cpu - sum(v for k, v in row.items() if "·" not in k)
                    row[f"{label}: total"] = cpu
                    runs[label].append(row)
    finally:
        store_mod.StoreWriter.transaction = real_tx
        for mod, name, real in patched:
            setattr(mod, name, real)
    for label in ("replay", what):
        keys = dict.fromkeys(k for r in runs[label] for k in r)
        for key in keys:
            print(f"  {key:<62} {statistics.median(r.get(key, 0.0) for r in runs[label]):8.1f} ms CPU")


def report(label: str, ref_label: str, ref: tuple, meas: tuple, target: float, cpu: bool = True) -> None:
    """``cpu=False``: the CPU time of this process is not the work (the sweep's jobs run in children)."""
    ratio, cpu_ratio = meas[0] / ref[0], meas[1] / ref[1]
    verdict = "met" if ratio <= target else "MISSED"
    cpu_verdict = "met" if cpu_ratio <= target else "MISSED"
    if not cpu:
        print(f"  {ref_label:<44} {ref[0]:9.1f} ms")
        print(f"  {label:<44} {meas[0]:9.1f} ms  ratio {ratio:.2f}× (target ≤ {target}×: {verdict})")
        return
    print(f"  {ref_label:<44} {ref[0]:9.1f} ms wall {ref[1]:9.1f} ms CPU (least {ref[2]:.1f})")
    print(f"  {label:<44} {meas[0]:9.1f} ms wall {meas[1]:9.1f} ms CPU (least {meas[2]:.1f})")
    print(f"  {'':<44} ratio {ratio:.2f}× wall ({verdict}), {cpu_ratio:.2f}× CPU ({cpu_verdict}), "
          f"{meas[2] / ref[2]:.2f}× least CPU; target ≤ {target}×")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run, not the targets' sizes)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--statements", type=int, default=10_000)
    ap.add_argument("--sessions", type=int, default=100)
    ap.add_argument("--reads", type=int, default=40, help="read statements (cells) per sweep session")
    ap.add_argument("--cells", type=int, default=5_000, help="tail cells of the interrupted turn")
    ap.add_argument("--only", choices=("fork", "sweep", "resurrect"), action="append")
    ap.add_argument("--against", metavar="OTHER_CORE", help="also measure fork/resurrect on another checkout's "
                    "core/ directory, interleaved with this one, each run in a fresh worker process")
    ap.add_argument("--cli", action="store_true", help="fork: also time the `flux fork` verb in-process "
                    "(CliRunner), interleaved with replay and fork_session; with --against, instead of fork_session")
    ap.add_argument("--phases", action="store_true", help="fork / resurrect: where the CPU time goes, in-process — "
                    "replay's read and the rest; fork's read, parse, conversation, prefix run, plan rows, child rows and "
                    "the rest (commit, tail, letting go); resurrect's read, plan check, run and the rest (row writes, "
                    "turn end); the payload texts and commits within them; medians of --repeat interleaved runs")
    ap.add_argument("--worker", nargs=4, metavar=("WHAT", "WORK", "SID", "ARG"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        what, work, sid, arg = a.worker
        worker(what, Path(work), sid, int(arg))
        return
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
            print(f"1. fork of a {a.statements:,}-statement session at N = {at:,} (inject, tail on tape)")
            if a.against:
                what, name = ("forkcli", "flux fork --inject") if a.cli else ("fork", "fork_session")
                for label, (ref, meas) in against(a.against, what, master, sid, at, tmp, a.repeat).items():
                    report(f"{name} at {at:,} [{label}]", f"replay_session [{label}]", ref, meas, 1.5)
            elif a.phases:
                phases("fork", sid, at, master, tmp, a.repeat)
            elif a.cli:
                t = interleaved({"replay": _replay(sid), "sdk": _fork(sid, at), "cli": _fork_cli(sid, at)},
                                master, tmp, a.repeat)
                report(f"fork_session at {at:,}", "replay_session of the same session", t["replay"], t["sdk"], 1.5)
                report(f"flux fork --at {at:,} --inject (CLI)", "replay_session of the same session", t["replay"],
                       t["cli"], 1.5)
                cli, sdk = t["cli"], t["sdk"]
                print(f"  {'flux fork / fork_session':<44} {cli[0] / sdk[0]:.2f}× wall, {cli[1] / sdk[1]:.2f}× CPU")
            else:
                ref, meas = paired(_replay(sid), _fork(sid, at), master, tmp, a.repeat)
                report(f"fork_session at {at:,}", "replay_session of the same session", ref, meas, 1.5)

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
            report("what_if_over jobs=2", "what_if_over jobs=1 (sequential)", ref, meas, 0.7, cpu=False)

        if "resurrect" in only:
            master = tmp / "resurrect-master"
            with StoreWriter(master) as w:
                sid = write_interrupted(w, a.cells)

            print(f"3. resurrect of a turn with {a.cells:,} tail cells (no statement rows, no turn_ended)")
            if a.against:
                for label, (ref, meas) in against(a.against, "resurrect", master, sid, 0, tmp, a.repeat).items():
                    report(f"resurrect_session [{label}]", f"replay_session of those cells [{label}]", ref, meas, 1.5)
            elif a.phases:
                phases("resurrect", sid, 0, master, tmp, a.repeat)
            else:
                ref, meas = paired(_replay(sid, faithful=False), _resurrect(sid), master, tmp, a.repeat)
                report("resurrect_session", "replay_session of those cells", ref, meas, 1.5)

    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
