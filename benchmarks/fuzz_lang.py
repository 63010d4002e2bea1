"""Long-run parser fuzzing (issue 7): N hostile inputs through the tests/lang/fuzzing.py oracle.

    .venv/bin/python benchmarks/fuzz_lang.py [-n 100000] [--seed 1] [--show 5]

Prints how many inputs were rejected with a ParseError, round-tripped, or refused by the
formatter, and every violation (an exception other than ParseError, a round-trip or idempotence
failure). Exit status 1 when there is any violation. Seeded and reproducible: input i of seed s is
always the same text.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.lang.fuzzing import Violation, check, one_input  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=100_000, help="number of inputs")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=5, help="violations to print in full")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    counts: Counter = Counter()
    violations: list[tuple[str, str]] = []
    t0 = time.perf_counter()
    for _ in range(args.n):
        text = one_input(rng)
        try:
            counts[check(text)] += 1
        except Violation as exc:
            counts["violation"] += 1
            violations.append((text, str(exc)))
    dt = time.perf_counter() - t0
    print(f"inputs {args.n}  seed {args.seed}  {dt:.1f}s ({args.n / dt:,.0f}/s)")
    print(f"rejected with ParseError {counts['rejected']}  round-tripped {counts['roundtrip']}  "
          f"refused by the formatter {counts['refused']}")
    print(f"violations {counts['violation']} (exceptions other than ParseError, round-trip or "
          f"idempotence failures)")
    for text, why in violations[:args.show]:
        print("---", why.splitlines()[0][:300])
        print("   input:", repr(text[:300]))
    return 1 if violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
