"""Write verbs on hostile input, run by hand: corrupted stores and scenario directories × every
write verb (fork, what-if, resurrect, export, golden update, sweep; flux test, --update,
--replay-only, export and golden check of a scenario), each run in-process with a private TMPDIR.

    .venv/bin/python benchmarks/fuzz_writes.py stores    --n 100 [--seed 1]
    .venv/bin/python benchmarks/fuzz_writes.py scenarios --n 200 [--seed 1]
    .venv/bin/python benchmarks/fuzz_writes.py all       --n 100

Prints inputs, runs and failures by class (see tests/hostile/corrupt_writes.py: traceback, hang,
bad_error, long_error, partial_write — the verb failed and bytes of the source changed —,
golden_rewritten, open_handle, temp_leak) and exits 1 when any class is not 0. The same --seed
repeats the same inputs; --start splits a long run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT))

from tests.hostile.corrupt import isolated_tmpdir  # noqa: E402
from tests.hostile.corrupt_writes import (  # noqa: E402
    WriteTally, build_scenario_base, build_store_base, scenario_battery, store_battery,
)


def run(target: str, n: int, seed: int, start: int, timeout_s: int) -> WriteTally:
    from flux.cli import main

    work = Path(tempfile.mkdtemp(prefix=f"flux-fuzz-writes-{target}-"))
    os.environ.pop("FLUX_GOLDEN", None)
    os.environ["FLUX_AUTO_RESURRECT"] = "0"
    try:
        base = (build_store_base if target == "stores" else build_scenario_base)(work / "base")
        watch = isolated_tmpdir(work)
        tally = WriteTally()
        battery = store_battery if target == "stores" else scenario_battery
        t0 = time.monotonic()
        for i in range(start, start + n):
            battery(main, base, work, watch, seed * 1_000_003 + i, tally, timeout_s)
            os.environ.pop("FLUX_GOLDEN", None)  # `flux test --update` sets it for its process
        secs = time.monotonic() - t0
    finally:
        os.environ.pop("TMPDIR", None)
        tempfile.tempdir = None
        shutil.rmtree(work, ignore_errors=True)
    print(f"{target}: {tally.variants} corrupted inputs · {tally.runs} runs · {secs:.0f}s · seed {seed}")
    print("  failures by class: " + " · ".join(tally.lines()) + f" · total {tally.total}")
    for e in tally.examples[:30]:
        print("  -", e[:400])
    return tally


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("target", choices=["stores", "scenarios", "all"])
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--timeout", type=int, default=30, help="seconds before a run counts as a hang")
    a = ap.parse_args()
    bad = 0
    for t in (["stores", "scenarios"] if a.target == "all" else [a.target]):
        bad += run(t, a.n, a.seed, a.start, a.timeout).total
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
