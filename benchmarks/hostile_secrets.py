"""The secrets battery: plant N secrets of every shape on a fresh seed in a real recorded run and a
recorded scenario, grep every byte written, print planted / leaked by surface (and by shape).

    python benchmarks/hostile_secrets.py --n 5000 [--seed S] [--per-run 40]

Each run records ``--per-run`` planted secrets (every shape in every place: prompt, tool input,
tool output, model text) through ``flux run``, ``flux record``, ``show``, ``export``, ``replay``,
``test`` and a judge verdict, in a private directory that is also its ``TMPDIR``
(tests/hostile/planting.py says what is planted and how it is looked for). Exit 1 when anything
leaked or a verb failed.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT))

from tests.hostile.planting import Findings, make_planting, oracle_misses, run_planting  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="secrets to plant in all")
    ap.add_argument("--seed", type=int, default=None, help="default: a fresh one (printed)")
    ap.add_argument("--per-run", type=int, default=40, help="secrets planted in one recorded run")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    total = Findings()
    misses = 0
    t0 = time.monotonic()
    runs = 0
    done = 0
    while done < args.n:
        n = min(args.per_run, args.n - done)
        planting = make_planting(seed * 1_000_003 + runs, n)
        misses += len(oracle_misses(planting))
        work = Path(tempfile.mkdtemp(prefix="flux-secrets-"))
        tmp = work / "tmp"
        tmp.mkdir()
        old_tmp = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = str(tmp)
        tempfile.tempdir = None
        try:
            total.add(run_planting(planting, work), done)
        finally:
            if old_tmp is None:
                os.environ.pop("TMPDIR", None)
            else:
                os.environ["TMPDIR"] = old_tmp
            tempfile.tempdir = None
            shutil.rmtree(work, ignore_errors=True)
        done += n
        runs += 1
    secs = time.monotonic() - t0
    print(f"secrets: seed {seed} · {total.planted} planted in {runs} recorded runs ({secs:.0f}s) · "
          f"leaked {len(total.leaked)} ({100 * len(total.leaked) / max(total.planted, 1):.1f} %) · "
          f"redactor pattern gaps (plain text) {misses} · failed verbs {len(total.errors)}")
    for surface in sorted(total.by_surface, key=lambda k: -len(total.by_surface[k])):
        print(f"  {surface:<40} {len(total.by_surface[surface])}")
    if total.by_shape:
        print("  by shape: " + ", ".join(f"{k} {len(v)}" for k, v in sorted(total.by_shape.items())))
    for e in total.examples[:12]:
        print("  -", e[:300])
    for e in total.errors[:12]:
        print("  ! ", e[:300])
    return 1 if total.leaked or total.errors else 0


if __name__ == "__main__":
    sys.exit(main())
