"""Browse benchmarks (issues 2 and 10), run by hand on a store from gen_store.py:

    python benchmarks/gen_store.py /tmp/bigstore          # once: 10,000 sessions, ~1M events
    python benchmarks/bench_browse.py /tmp/bigstore [--repeat 7] [--only listing|open|app]

Measures, reporting medians (the measured side and its floor run alternately):

1. listing in-process: ``list_sessions`` + the ``--json`` document vs ``floor_sessions.py``'s (bare
   SQL, the same facts and the same document), for 30 rows and all rows;
2. listing as commands: ``flux sessions [--json]`` vs ``python3 benchmarks/floor_sessions.py``
   printing the same text / JSON (both pay interpreter start-up); outputs are checked identical
   before timing;
3. opening the 100,000-event session: ``load_session`` + the newest turn's timeline;
4. the app: first paint of the sessions screen and of the big session, and one cursor step
   (pilot key press until the screen has refreshed), through Textual's headless driver.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT / "tui"))

from flux.model.listing import list_sessions  # noqa: E402
from flux.model.pricing import load_price_table  # noqa: E402
from flux.model.session import load_session  # noqa: E402
from flux.model.timeline import build_timeline  # noqa: E402
from flux.store import StoreReader  # noqa: E402



def median_ms(fn, repeat: int) -> float:
    fn()  # warm-up (page cache, imports)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def interleaved_ms(fns: dict, repeat: int) -> dict:
    """Medians of the given callables, run alternately (one warm-up each), so load hits all alike."""
    for fn in fns.values():
        fn()
    times = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            times[k].append((time.perf_counter() - t) * 1000)
    return {k: statistics.median(v) for k, v in times.items()}


def row(label: str, ms: float, base: float | None = None) -> None:
    ratio = f"  ({ms / base:.2f}× floor)" if base else ""
    print(f"  {label:<62} {ms:9.2f} ms{ratio}")


def _floor_in_process(store: Path, limit: int) -> str:
    import contextlib
    import io

    import floor_sessions

    with contextlib.redirect_stdout(io.StringIO()) as out:
        floor_sessions.main(["floor", str(store), "--limit", str(limit), "--json"])
    return out.getvalue()


def _ours_in_process(store: Path, limit: int) -> str:
    r = StoreReader(store)
    prices = load_price_table(None, r.dir)
    doc = {"store": str(r.dir), "sessions": [s.to_json() for s in list_sessions(r, limit=limit, prices=prices)],
           "skipped_rows": r.skipped_rows}
    r.close()
    return json.dumps(doc, ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def bench_listing(store: Path, repeat: int) -> None:
    """``flux sessions`` against ``floor_sessions.py`` (the same facts and output from bare SQL)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    reader = StoreReader(store)
    total = reader.session_count()
    reader.close()
    print("listing, in-process: list_sessions + the --json document vs the floor's (median, interleaved)")
    for limit in (30, total):
        if _floor_in_process(store, limit) != _ours_in_process(store, limit):
            sys.exit(f"error: the floor and list_sessions disagree for {limit} rows — the floor is not the same work")
        m = interleaved_ms({"floor": lambda: _floor_in_process(store, limit),
                            "ours": lambda: _ours_in_process(store, limit)}, repeat)
        row(f"floor: bare SQL facts + JSON, {limit} rows", m["floor"])
        row(f"list_sessions + JSON, {limit} rows", m["ours"], m["floor"])

    # As an installed package runs: with its bytecode cached (pip compiles it on install). Without
    # this, a PYTHONDONTWRITEBYTECODE environment makes every `flux` compile its modules from source
    # (~40 ms), which the floor, loading two flux modules, hardly pays.
    import compileall

    compileall.compile_dir(ROOT / "core", quiet=1)
    print("listing, as commands (median wall clock and CPU, interleaved)")
    flux = str(Path(sys.executable).parent / "flux")
    floor = [sys.executable, str(ROOT / "benchmarks" / "floor_sessions.py"), str(store)]
    for limit, extra in ((30, []), (30, ["--json"]), (total, ["--json"])):
        floor_cmd = floor + ["--limit", str(limit), *extra]
        ours_cmd = [flux, "sessions", "--store", str(store), "--limit", str(limit), *extra]
        a = subprocess.run(floor_cmd, capture_output=True, text=True, check=True)
        b = subprocess.run(ours_cmd, capture_output=True, text=True, check=True)
        if (a.stdout, a.stderr) != (b.stdout, b.stderr):
            sys.exit(f"error: floor_sessions.py and flux sessions print different things for {' '.join(extra + [str(limit)])}")
        cpu: dict[str, list[float]] = {"floor": [], "ours": []}

        def run(name: str, cmd: list[str]) -> None:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(cmd, capture_output=True, check=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)

        m = interleaved_ms({"floor": lambda: run("floor", floor_cmd), "ours": lambda: run("ours", ours_cmd)}, repeat)
        c = {k: statistics.median(v[1:]) for k, v in cpu.items()}  # [0]: the warm-up
        what = " ".join(["--limit", str(limit), *extra])
        row(f"python3 floor_sessions.py {what}", m["floor"])
        row(f"flux sessions {what}", m["ours"], m["floor"])
        print(f"  {'  CPU (user+sys): floor / flux sessions':<62} {c['floor']:7.0f} / {c['ours']:.0f} ms"
              f"  ({c['ours'] / c['floor']:.2f}× floor)")


def biggest_session(store: Path) -> str:
    import sqlite3

    con = sqlite3.connect(f"file:{store / 'events.db'}?immutable=1", uri=True)
    n = con.execute("SELECT n FROM streams ORDER BY last_seq DESC LIMIT 1").fetchone()[0]
    con.close()
    return f"s_{n}"


def bench_open(store: Path, repeat: int) -> None:
    sid = biggest_session(store)
    reader = StoreReader(store)
    n = reader.count_events(sid)
    print(f"opening {sid} ({n:,} events), in-process (median)")

    def load_full():
        d = load_session(reader, sid)
        build_timeline(d, d.turns[-1])

    def load_turn():  # what the app does for a big session: the newest turn only
        d = load_session(reader, sid, turn=-1)
        build_timeline(d, d.turns[-1])

    from flux_tui.screens.session import FIRST_ROWS  # what the app reads before its first paint

    def load_first():  # what the app paints first: the newest turn's first rows
        d = load_session(reader, sid, turn=-1, max_rows=FIRST_ROWS)
        build_timeline(d, d.turns[-1])

    row("load_session (all events) + newest turn's timeline", median_ms(load_full, repeat))
    row("load_session(turn=-1) + newest turn's timeline", median_ms(load_turn, repeat))
    row(f"load_session(turn=-1, max_rows={FIRST_ROWS}) + its timeline (first paint's data)", median_ms(load_first, repeat))
    reader.close()


async def _app_paints(store: Path, repeat: int) -> None:
    try:
        from flux_tui.app import FluxApp, tune_gc
    except ImportError:
        print("app: flux_tui not importable, skipped")
        return
    tune_gc()  # what `flux-tui` (flux_tui.app.main) does to its process before the app starts
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import app_probes  # measuring points: each returns once its state is painted

    sid = biggest_session(store)
    print("the app (headless, median)")
    lists, opens, open_cpu, rests, steps = [], [], [], [], []
    for _ in range(repeat):
        app = FluxApp(store)
        async with app.run_test(size=(120, 40)) as pilot:
            t = time.perf_counter()
            await app_probes.wait_sessions_painted(app, pilot)
            lists.append((time.perf_counter() - t) * 1000)
            t, c = time.perf_counter(), time.process_time()
            await app_probes.open_session(app, pilot, sid)  # app.open_session → the timeline's rows painted
            opens.append((time.perf_counter() - t) * 1000)
            open_cpu.append((time.process_time() - c) * 1000)  # every thread of the process
            await app_probes.wait_turn_read(app, pilot)  # … and the rest of the turn read and painted
            rests.append((time.perf_counter() - t) * 1000)
            for _ in range(20):
                t = time.perf_counter()
                await app_probes.cursor_step(app, pilot)
                steps.append((time.perf_counter() - t) * 1000)
    row("sessions screen first paint (app start → rows on screen)", statistics.median(lists))
    row(f"open {sid} → first paint of its timeline", statistics.median(opens))
    print(f"  {'  each run, wall: ' + ' '.join(f'{v:.0f}' for v in opens):<62}")
    row(f"  CPU of that (user+sys, all threads)", statistics.median(open_cpu))
    row(f"open {sid} → the whole turn read and painted", statistics.median(rests))
    row("one cursor step (key → screen refreshed)", statistics.median(steps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store", type=Path)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--skip-app", action="store_true")
    ap.add_argument("--only", choices=("listing", "open", "app"), default=None, help="Run one part only.")
    a = ap.parse_args()
    print(f"store {a.store}: {os.path.getsize(a.store / 'events.db') / 1e6:.0f} MB events.db, {os.cpu_count()} cores,"
          f" load average {os.getloadavg()[0]:.1f}")
    if a.only in (None, "listing"):
        bench_listing(a.store, a.repeat)
    if a.only in (None, "open"):
        bench_open(a.store, a.repeat)
    if a.only == "app" or (a.only is None and not a.skip_app):
        asyncio.run(_app_paints(a.store, max(3, a.repeat // 2)))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
