"""Replay of two checkouts against each other and the read floor, in one run (issue 10), by hand:

    python benchmarks/bench_replay_ab.py --base /path/to/other/checkout [--cells 1000,10000] [--rounds 7]
                                         [--stores DIR] [--shape batch|ledger|retry] [--instructions]

Two worker processes: one imports ``<base>/core`` (e.g. a detached worktree of main), the other
this checkout's ``core``. Each round asks both to replay the same store (``replay_session(reader,
"last", detail=False)``, what `flux replay` runs and ``bench_replay.py`` times — without
``detail`` on a checkout that lacks it — the order alternating round by round) and then runs the read floor — the same code as
``bench_replay.read_floor``: the rows replay reads, all eight columns, every payload
``json.loads``-ed. Wall and CPU (process time, measured inside the worker) medians and each
replay's ratio to the floor are printed — and to the stricter "scanner floor"
(``bench_replay.read_floor_scanner``: the same rows decoded by the C scanner ``json.loads`` runs,
called directly, as replay's read decodes them since ledger6: so a ratio to it counts none of
``json.loads``'s own per-row wrapper as replay's gain). The stores are ``bench_replay.py``'s (made once, kept
under ``--stores``). Keep a run under ~2 minutes on a shared machine: 100,000 cells takes ~30 s
per round.

``--instructions`` (needs valgrind) counts instead of timing: for each side and the floor, the
instructions of one replay (a process that replays three times less one that replays once, halved;
``valgrind --tool=cachegrind --cache-sim=no``), which do not move with the machine's load — a way
to compare two versions on a shared machine (instructions are not time: the Python interpreter
retires fewer per cycle than SQLite or the JSON scanner, so the time ratio is a little higher).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_WORKER = r"""
import json, sys, time
from pathlib import Path
from flux.store.store import StoreReader  # first: flux comes from PYTHONPATH (bench_replay puts its own core first)
from flux.timemachine.replay import replay_session
sys.path.insert(0, {bench!r})
from bench_replay import read_floor, read_floor_scanner
import flux
assert flux.__file__.startswith({core!r}), flux.__file__

import inspect
_LEAN = {{"detail": False}} if "detail" in inspect.signature(replay_session).parameters else {{}}

def replay(store):
    with StoreReader(store) as r:
        rep = replay_session(r, "last", **_LEAN)
    assert rep.diverged is None and rep.cells_consumed == rep.cells_total, rep.unfaithful_reason

print("ready", flush=True)
for line in sys.stdin:
    what, store = line.split(maxsplit=1)
    fn = replay if what == "replay" else read_floor_scanner if what == "scanfloor" else read_floor
    w, c = time.perf_counter(), time.process_time()
    fn(Path(store.strip()))
    print(json.dumps([time.perf_counter() - w, time.process_time() - c]), flush=True)
"""


_IR_SCRIPT = r"""
import sys
from pathlib import Path
from flux.store.store import StoreReader
from flux.timemachine.replay import replay_session
sys.path.insert(0, {bench!r})
from bench_replay import read_floor, read_floor_scanner
import inspect
_LEAN = {{"detail": False}} if "detail" in inspect.signature(replay_session).parameters else {{}}

def replay(store):
    with StoreReader(store) as r:
        replay_session(r, "last", **_LEAN)

fn = replay if sys.argv[1] == "replay" else read_floor_scanner if sys.argv[1] == "scanfloor" else read_floor
for _ in range(int(sys.argv[2])):
    fn(Path(sys.argv[3]))
"""


def instructions(core: Path, what: str, store: Path) -> int:
    """Instructions of one ``what`` (replay | floor) run against ``store`` with ``core`` imported."""
    env = {**os.environ, "PYTHONPATH": str(core), "PYTHONHASHSEED": "0"}  # (dict and set layouts: the same each run)
    code = _IR_SCRIPT.format(bench=str(ROOT / "benchmarks"))
    counts = []
    for n in (1, 3):
        out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                              sys.executable, "-c", code, what, str(n), str(store)],
                             env=env, capture_output=True, text=True, check=True).stderr
        line = next(x for x in out.splitlines() if "I" in x and "refs:" in x)
        counts.append(int(line.split()[-1].replace(",", "")))
    return (counts[1] - counts[0]) // 2


class _Worker:
    def __init__(self, core: Path):
        env = {**os.environ, "PYTHONPATH": str(core)}
        code = _WORKER.format(bench=str(ROOT / "benchmarks"), core=str(core.resolve()))
        self.proc = subprocess.Popen([sys.executable, "-c", code],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        assert self.proc.stdout.readline().strip() == "ready"

    def ask(self, what: str, store: Path) -> tuple[float, float]:
        self.proc.stdin.write(f"{what} {store}\n")
        self.proc.stdin.flush()
        return tuple(json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", type=Path, required=True, help="the other checkout (its core/ is imported)")
    ap.add_argument("--cells", default="1000,10000")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--stores", type=Path, default=None, help="keep the generated stores here (reused next time)")
    ap.add_argument("--instructions", action="store_true", help="count instructions (valgrind) instead of timing")
    ap.add_argument("--shape", choices=("batch", "ledger", "retry"), default="batch",
                    help="how the session was recorded (bench_replay.py --shape; the same store names)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_replay

    if args.instructions:
        tmp = None if args.stores else tempfile.TemporaryDirectory(prefix="flux-bench-replay-ab-")
        base = args.stores or Path(tmp.name)
        base.mkdir(parents=True, exist_ok=True)
        for n in [int(x) for x in args.cells.split(",")]:
            store = bench_replay.make_store(base / (f"cells-{n}" if args.shape == "batch" else f"cells-{n}-{args.shape}"),
                                            n, args.shape)
            floor = instructions(ROOT / "core", "floor", store)
            scanfloor = instructions(ROOT / "core", "scanfloor", store)
            print(f"{n:>7} cells, instructions per run:")
            for name, core in (("base", args.base / "core"), ("this", ROOT / "core")):
                ir = instructions(core, "replay", store)
                print(f"    {name:<6} {ir / 1e6:9.1f} M   vs floor: {ir / floor:5.2f}×   vs scanner floor: "
                      f"{ir / scanfloor:5.2f}×", flush=True)
            print(f"    floor  {floor / 1e6:9.1f} M   scanner floor {scanfloor / 1e6:9.1f} M")
        if tmp is not None:
            tmp.cleanup()
        return

    tmp = None
    base = args.stores
    if base is None:
        tmp = tempfile.TemporaryDirectory(prefix="flux-bench-replay-ab-")
        base = Path(tmp.name)
    base.mkdir(parents=True, exist_ok=True)
    workers = {"base": _Worker(args.base / "core"), "this": _Worker(ROOT / "core")}
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at start; base = {args.base}")
    try:
        for n in [int(x) for x in args.cells.split(",")]:
            store = bench_replay.make_store(base / (f"cells-{n}" if args.shape == "batch" else f"cells-{n}-{args.shape}"),
                                            n, args.shape)
            if n < 100_000:
                for w in workers.values():
                    w.ask("replay", store)  # warm: imports, page cache
            t: dict[str, list[tuple[float, float]]] = {"base": [], "this": [], "floor": [], "scanfloor": []}
            for r in range(args.rounds):
                for name in (("base", "this") if r % 2 == 0 else ("this", "base")):
                    t[name].append(workers[name].ask("replay", store))
                t["floor"].append(workers["this"].ask("floor", store))
                t["scanfloor"].append(workers["this"].ask("scanfloor", store))
            med = {k: (statistics.median(x[0] for x in v) * 1000, statistics.median(x[1] for x in v) * 1000)
                   for k, v in t.items()}
            fw, fc = med["floor"]
            sw, sc = med["scanfloor"]
            print(f"{n:>7} cells, median of {args.rounds}, load {os.getloadavg()[0]:.1f}:")
            for k in ("base", "this", "floor", "scanfloor"):
                w, c = med[k]
                print(f"    {k:<9} wall {w:9.1f} ms   cpu {c:9.1f} ms   vs floor: wall {w / fw:5.2f}×   cpu {c / fc:5.2f}×"
                      f"   vs scanner floor: cpu {c / sc:5.2f}×")
    finally:
        for w in workers.values():
            w.close()
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()
