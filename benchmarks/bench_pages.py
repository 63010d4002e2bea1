"""The review pages against replay: `flux export S -o run.html` of one big session (gen_store's
shape: 10 turns, N cells) timed as a command next to `flux replay S` of the same session, with the
page's size. The page replays the session itself (its served marks), so replay is its floor.

    python benchmarks/bench_pages.py [--cells 1000,10000,100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_replay import make_store  # noqa: E402

FLUX = [sys.executable, "-c", "from flux.cli import main; main()"]


def timed(args: list[str]) -> tuple[float, float]:
    """(wall, CPU of the child) of one command run to completion."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(FLUX + args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--stores", type=Path, default=None, help="keep the generated stores here (reused next time)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="flux-pages-") as tmp:
        base = args.stores or Path(tmp)
        print(f"export -o run.html vs flux replay, as commands, medians of {args.repeat} interleaved runs")
        for n in [int(x) for x in args.cells.split(",")]:
            store = make_store(base / f"c{n}", n)
            page = Path(tmp) / f"page{n}.html"
            t: dict[str, list[tuple[float, float]]] = {"export": [], "replay": []}
            for _ in range(args.repeat):
                t["export"].append(timed(["export", "last", "--store", str(store), "-o", str(page)]))
                t["replay"].append(timed(["replay", "last", "--store", str(store)]))
            m = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in t.items()}
            size = page.stat().st_size
            print(f"  {n:>7} cells: export {m['export'][0]:6.2f} s wall {m['export'][1]:6.2f} s CPU · "
                  f"replay {m['replay'][0]:6.2f} s wall {m['replay'][1]:6.2f} s CPU · "
                  f"ratio {m['export'][1] / m['replay'][1]:5.2f}× CPU · page {size / 1e6:6.1f} MB "
                  f"({size / n:,.0f} bytes a cell)")


if __name__ == "__main__":
    main()
