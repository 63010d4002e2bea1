"""Replay at the read floor (issue 10 item 2), run by hand:

    python benchmarks/bench_replay.py [--cells 1000,10000,100000] [--repeat 5] [--stores DIR]
                                      [--shape batch|ledger|retry] [--turn N] [--ab]

For each size it writes (once, with ``gen_store.py --sessions 1``; kept under ``--stores`` when
given) a store whose one session has that many cassette cells: 10 turns of one-op host-derived
plans, each plan with its step rows and its cell (~4 rows per cell, every 37th op an error that
halts its plan). Then, in this process, interleaved round by round:

* **replay** — ``replay_session(reader, "last", detail=False)``, what `flux replay` runs: opens the
  store, reads the session and re-executes every plan against the tape (``detail=False``: the
  report keeps no per-statement detail, which the CLI does not print; a checkout whose
  ``replay_session`` has no ``detail`` is run without it);
* **read floor** — the same rows replay reads (the session's ``turn_started``, ``turn_ended``,
  ``plan_attempted`` and ``run`` rows, all eight columns, in ``stream_seq`` order, with the same
  ``last`` lookup) read with raw ``sqlite3`` and every payload ``json.loads``-ed: replay json-loads
  each of those rows too (that is how it finds the corrupt ones), and nothing less can tell what
  the rows hold. No more, no less.

Reports medians of wall time and of process CPU time (CPU is what to compare when the machine is
loaded), their ratios, and the peak RSS (``VmHWM``) of a fresh interpreter that replays the
session once, next to the same interpreter's peak before the replay — for `flux replay`'s path and
for the full report (``detail=True``, what the app and the Test Kit ask for).

``--rss-only`` skips the timings (peak RSS only, each size and mode in its own process).

``--shape`` picks how the session was recorded (gen_store.py's shapes): ``batch`` (no statement
rows), ``ledger`` (run resumably, as flux records its own turns: statement rows order the
executions; every other plan two statements), ``retry`` (every failed call tried again on the
same input). ``--turn N`` replays only turn N (`flux replay --turn N`). ``--ab`` adds, interleaved
in the same rounds, the classic replay (read everything, then replay: ``replay._STREAMED = False``)
of the same store and prints streamed / classic CPU: the streamed path must be no slower.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))

from flux.model.session import TRACE_KINDS  # noqa: E402
from flux.store.store import StoreReader  # noqa: E402
from flux.timemachine.replay import replay_session  # noqa: E402

_ROWS = ("SELECT global_seq, stream, stream_seq, id, kind, ts, turn_id, payload FROM events"
         " WHERE stream = ? AND kind IN (" + ",".join("?" * len(TRACE_KINDS)) + ") ORDER BY stream_seq")


def make_store(dest: Path, cells: int, shape: str = "batch") -> Path:
    """A one-session store with ``cells`` cells (gen_store's big session: 10 turns × cells/10 plans)."""
    if not (dest / "events.db").exists():
        big = 4 * cells + 111  # gen_store: tools per turn = ((big - 1) // 10 - 11) // 4
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gen_store.py"), str(dest), "--sessions", "1",
                        "--big", str(big), "--shape", shape], check=True, stderr=subprocess.DEVNULL)
    return dest


_LEAN = {"detail": False} if "detail" in inspect.signature(replay_session).parameters else {}
_TURN: int | None = None


def replay(store: Path) -> int:
    with StoreReader(store) as r:
        rep = replay_session(r, "last", _TURN, **_LEAN)
    if _TURN is None:
        assert rep.diverged is None and rep.cells_consumed == rep.cells_total, rep.unfaithful_reason
    else:
        assert rep.diverged is None, rep.diverged
    return rep.cells_total


def replay_classic(store: Path) -> int:
    import flux.timemachine.replay as R

    R._STREAMED = False
    try:
        return replay(store)
    finally:
        R._STREAMED = True


def read_floor(store: Path) -> int:
    con = sqlite3.connect(f"file:{store / 'events.db'}?immutable=1", uri=True)
    try:
        (n,) = con.execute("SELECT n FROM streams WHERE typeof(n) = 'integer' ORDER BY n DESC LIMIT 1").fetchone()
        loads = json.loads
        count = 0
        for row in con.execute(_ROWS, (f"s_{n}", *TRACE_KINDS)):
            loads(row[7])
            count += 1
        return count
    finally:
        con.close()


_SCAN_ONCE = json.JSONDecoder().scan_once


def read_floor_scanner(store: Path) -> int:
    """:func:`read_floor` with each payload decoded by the C scanner ``json.loads`` runs, called
    directly (a payload whose value does not span the text goes to ``json.loads``), as replay's
    read decodes since ledger6 — the stricter floor: the same decode without ``json.loads``'s two
    Python frames and two regex matches a row, which replay no longer pays. Not the issue's floor
    (that is :func:`read_floor`, unchanged); ``bench_replay_ab.py`` prints the ratio to both."""
    con = sqlite3.connect(f"file:{store / 'events.db'}?immutable=1", uri=True)
    try:
        (n,) = con.execute("SELECT n FROM streams WHERE typeof(n) = 'integer' ORDER BY n DESC LIMIT 1").fetchone()
        loads = json.loads
        scan = _SCAN_ONCE
        count = 0
        for row in con.execute(_ROWS, (f"s_{n}", *TRACE_KINDS)):
            p = row[7]
            try:
                _obj, end = scan(p, 0)
                if end != len(p):
                    loads(p)
            except StopIteration:
                loads(p)
            count += 1
        return count
    finally:
        con.close()


_RSS_SCRIPT = """
import json, sys
sys.path.insert(0, {core!r})
import inspect
from pathlib import Path
from flux.store.store import StoreReader
from flux.timemachine.replay import replay_session
kw = {{"detail": {detail}}} if "detail" in inspect.signature(replay_session).parameters else {{}}

def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

import flux.timemachine.replay as R
R._STREAMED = {streamed}
before = hwm()
with StoreReader(Path({store!r})) as r:
    rep = replay_session(r, "last", {turn!r}, **kw)
print(json.dumps({{"before_kb": before, "peak_kb": hwm(), "cells": rep.cells_consumed}}))
"""


def peak_rss(store: Path, detail: bool = False, streamed: bool = True) -> dict:
    script = _RSS_SCRIPT.format(core=str(ROOT / "core"), store=str(store), detail=detail, turn=_TURN,
                                streamed=streamed)
    out = subprocess.run([sys.executable, "-c", script],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def timed(fn, store: Path) -> tuple[float, float]:
    w, c = time.perf_counter(), time.process_time()
    fn(store)
    return time.perf_counter() - w, time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", default="1000,10000,100000", help="comma-separated session sizes (cassette cells)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--stores", type=Path, default=None, help="keep the generated stores here (reused next time)")
    ap.add_argument("--rss-only", action="store_true", help="peak RSS only, no timings")
    ap.add_argument("--shape", choices=("batch", "ledger", "retry"), default="batch")
    ap.add_argument("--turn", type=int, default=None, help="replay only this turn (flux replay --turn N)")
    ap.add_argument("--ab", action="store_true", help="also time the classic replay, interleaved")
    args = ap.parse_args()
    global _TURN
    _TURN = args.turn
    sizes = [int(x) for x in args.cells.split(",")]
    tmp = None
    base = args.stores
    if base is None:
        tmp = tempfile.TemporaryDirectory(prefix="flux-bench-replay-")
        base = Path(tmp.name)
    base.mkdir(parents=True, exist_ok=True)
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at start; shape {args.shape}"
          + (f", turn {args.turn}" if args.turn is not None else ""))
    rss: dict[int, dict] = {}
    full: dict[int, dict] = {}
    classic: dict[int, dict] = {}
    try:
        for n in sizes:
            store = make_store(base / (f"cells-{n}" if args.shape == "batch" else f"cells-{n}-{args.shape}"), n,
                               args.shape)
            if args.rss_only:
                rss[n], full[n] = peak_rss(store), peak_rss(store, detail=True)
                classic[n] = peak_rss(store, streamed=False)
                print(f"{n:>7} cells: peak RSS {rss[n]['peak_kb'] / 1024:.0f} MB (flux replay's path), "
                      f"{classic[n]['peak_kb'] / 1024:.0f} MB (its classic path), "
                      f"{full[n]['peak_kb'] / 1024:.0f} MB (full detail); the interpreter before the replay: "
                      f"{rss[n]['before_kb'] / 1024:.0f} MB", flush=True)
                continue
            rows = read_floor(store)
            replay(store)  # warm: imports, page cache
            repeat = args.repeat if n < 100_000 else max(1, min(args.repeat, 3))
            t: dict[str, list[tuple[float, float]]] = {"replay": [], "floor": []}
            if args.ab:
                t["classic"] = []
            for _ in range(repeat):  # interleaved: each round runs both (all three)
                t["replay"].append(timed(replay, store))
                t["floor"].append(timed(read_floor, store))
                if args.ab:
                    t["classic"].append(timed(replay_classic, store))
            med = {k: (statistics.median(x[0] for x in v) * 1000, statistics.median(x[1] for x in v) * 1000)
                   for k, v in t.items()}
            rss[n], full[n] = peak_rss(store), peak_rss(store, detail=True)
            (rw, rc), (fw, fc) = med["replay"], med["floor"]
            print(f"{n:>7} cells ({rows} rows), median of {repeat}, load {os.getloadavg()[0]:.1f}:")
            print(f"    replay      wall {rw:9.1f} ms   cpu {rc:9.1f} ms")
            print(f"    read floor  wall {fw:9.1f} ms   cpu {fc:9.1f} ms")
            print(f"    ratio       wall {rw / fw:9.2f} ×    cpu {rc / fc:9.2f} ×   (target ≤ 2×, flat)")
            if args.ab:
                cw, cc = med["classic"]
                print(f"    classic     wall {cw:9.1f} ms   cpu {cc:9.1f} ms   streamed / classic cpu {rc / cc:.3f} ×")
            r = rss[n]
            print(f"    peak RSS {r['peak_kb'] / 1024:.0f} MB (flux replay's path), {full[n]['peak_kb'] / 1024:.0f} MB "
                  f"(full detail); the interpreter before the replay: {r['before_kb'] / 1024:.0f} MB", flush=True)
        if 10_000 in rss and 100_000 in rss:
            for label, m in (("flux replay's path", rss), ("its classic path", classic), ("full detail", full)):
                if 10_000 not in m or 100_000 not in m:
                    continue
                a, b = m[10_000], m[100_000]
                print(f"peak RSS 100k / 10k, {label}: {b['peak_kb'] / a['peak_kb']:.2f}×  (target ≤ 2×); above the "
                      f"interpreter: {(b['peak_kb'] - b['before_kb']) / max(1, a['peak_kb'] - a['before_kb']):.1f}×")
    finally:
        if tmp is not None:
            tmp.cleanup()


if __name__ == "__main__":
    main()
