"""Corpus sweeps on Ray against the local process pool: the same what-if over N sessions with 2
workers each way, timed from the call to the report (store open to close on both sides: every
task opens the store, writes its counterfactual and closes it), Ray's cluster start timed apart.
Prints per size the medians, the ratio, and each executor's cost per session — where the lines
cross is where Ray's per-task overhead stops paying on one machine.

    python benchmarks/bench_ray.py [--sizes 10,100,1000] [--repeat 3]
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
sys.path.insert(0, str(ROOT))

from flux.store import StoreWriter  # noqa: E402
from flux.timemachine.whatif import WhatIfSpec, what_if_over  # noqa: E402
from tests.helpers import cell, write_turn  # noqa: E402


def corpus(store: Path, n: int) -> list[str]:
    """``n`` sessions of one plan reading three files (three cells each)."""
    ids = []
    with StoreWriter(store) as w:
        for i in range(n):
            sid = w.create_session("mock")
            plan = "flow\n" + "".join(f'  r{k} = read({{"path":"f{i}_{k}.txt"}})\n' for k in range(3))
            write_turn(w, sid, f"read {i}", plan=plan,
                       cells=[cell("read", {"path": f"f{i}_{k}.txt"}, f"content {i} {k}") for k in range(3)])
            ids.append(sid)
    return ids


def sweep(store: Path, ids: list[str], ws: Path, executor: str) -> float:
    t0 = time.perf_counter()
    rep = what_if_over(store, ids, WhatIfSpec(substitute={"read": "changed"}), jobs=2,
                       client_args={"workspace": str(ws)}, executor=executor)
    took = time.perf_counter() - t0
    assert rep.errors == 0 and rep.changed == len(ids), rep.summary_line()
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,100,1000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    print(f"Ray local cluster start (2 CPUs): {time.perf_counter() - t0:.1f} s (paid once, not in the rows)")
    print("sweep of N sessions, 2 workers, medians of interleaved runs (wall, from call to report)")
    with tempfile.TemporaryDirectory(prefix="flux-bench-ray-") as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        for n in [int(x) for x in args.sizes.split(",")]:
            store = Path(tmp) / f"c{n}"
            ids = corpus(store, n)
            t: dict[str, list[float]] = {"pool": [], "ray": []}
            for _ in range(args.repeat):
                t["pool"].append(sweep(store, ids, ws, "pool"))
                t["ray"].append(sweep(store, ids, ws, "ray"))
            pool, on_ray = statistics.median(t["pool"]), statistics.median(t["ray"])
            print(f"  {n:>5} sessions: pool {pool:7.2f} s ({pool / n * 1000:6.1f} ms/session) · "
                  f"ray {on_ray:7.2f} s ({on_ray / n * 1000:6.1f} ms/session) · ray/pool {on_ray / pool:4.2f}×")
    ray.shutdown()


if __name__ == "__main__":
    main()
