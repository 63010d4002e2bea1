"""Browse benchmarks (issue 2 §9), run by hand on a store from gen_store.py:

    python benchmarks/gen_store.py /tmp/bigstore          # once: 10,000 sessions, ~1M events
    python benchmarks/bench_browse.py /tmp/bigstore [--repeat 7]

Measures, reporting medians (and ratios against the bare SQL baseline):

1. listing in-process: the bare registry query vs ``list_sessions`` + JSON, for 30 rows and all rows;
2. listing as commands: ``flux sessions --json`` vs a bare ``python3 -c`` sqlite3 script printing
   the same rows as JSON (both pay interpreter start-up);
3. opening the 100,000-event session: ``load_session`` + the newest turn's timeline;
4. the app: first paint of the sessions screen and of the big session, and one cursor step
   (pilot key press until the screen has refreshed), through Textual's headless driver.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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

BARE_SQL = ("SELECT n, model, created_at, updated_at, msg_count, account, agent_id, agent_version, correlation_id "
            "FROM streams ORDER BY updated_at DESC, n DESC LIMIT ?")


def median_ms(fn, repeat: int) -> float:
    fn()  # warm-up (page cache, imports)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def row(label: str, ms: float, base: float | None = None) -> None:
    ratio = f"  ({ms / base:.2f}× bare)" if base else ""
    print(f"  {label:<58} {ms:9.2f} ms{ratio}")


def bench_listing(store: Path, repeat: int) -> None:
    import sqlite3

    print("listing, in-process (median)")
    reader = StoreReader(store)
    prices = load_price_table()
    total = reader.session_count()
    for limit in (30, total):
        def bare():
            con = sqlite3.connect(f"file:{store / 'events.db'}?immutable=1", uri=True)
            rows = con.execute(BARE_SQL, (limit,)).fetchall()
            json.dumps(rows)
            con.close()

        def ours():
            r = StoreReader(store)
            json.dumps([s.to_json() for s in list_sessions(r, limit=limit, prices=prices)])
            r.close()

        b = median_ms(bare, repeat)
        row(f"bare SQL, {limit} rows", b)
        row(f"list_sessions + JSON, {limit} rows", median_ms(ours, repeat), b)
    reader.close()

    print("listing, as commands (median wall clock)")
    flux = str(Path(sys.executable).parent / "flux")
    for limit in (30, total):
        bare_cmd = [sys.executable, "-c",
                    "import sqlite3, json, sys; con = sqlite3.connect(sys.argv[1], uri=True); "
                    f"print(json.dumps(con.execute({BARE_SQL!r}, (int(sys.argv[2]),)).fetchall()))",
                    f"file:{store / 'events.db'}?immutable=1", str(limit)]
        ours_cmd = [flux, "sessions", "--json", "--store", str(store), "--limit", str(limit)]
        b = median_ms(lambda: subprocess.run(bare_cmd, capture_output=True, check=True), repeat)
        row(f"python3 -c <bare sqlite3 query>, {limit} rows", b)
        row(f"flux sessions --json --limit {limit}", median_ms(lambda: subprocess.run(ours_cmd, capture_output=True, check=True), repeat), b)


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

    row("load_session (all events) + newest turn's timeline", median_ms(load_full, repeat))
    row("load_session(turn=-1) + newest turn's timeline", median_ms(load_turn, repeat))
    reader.close()


async def _app_paints(store: Path, repeat: int) -> None:
    try:
        from flux_tui.app import FluxApp
    except ImportError:
        print("app: flux_tui not importable, skipped")
        return
    from flux_tui import bench_hooks  # the app's own measuring points

    sid = biggest_session(store)
    print("the app (headless, median)")
    lists, opens, steps = [], [], []
    for _ in range(repeat):
        app = FluxApp(store)
        async with app.run_test(size=(120, 40)) as pilot:
            t = time.perf_counter()
            await bench_hooks.wait_sessions_painted(app, pilot)
            lists.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            await bench_hooks.open_session(app, pilot, sid)
            opens.append((time.perf_counter() - t) * 1000)
            for _ in range(20):
                t = time.perf_counter()
                await bench_hooks.cursor_step(app, pilot)
                steps.append((time.perf_counter() - t) * 1000)
    row("sessions screen first paint (app start → rows on screen)", statistics.median(lists))
    row(f"open {sid} → first paint of its timeline", statistics.median(opens))
    row("one cursor step (key → screen refreshed)", statistics.median(steps))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store", type=Path)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--skip-app", action="store_true")
    a = ap.parse_args()
    print(f"store {a.store}: {os.path.getsize(a.store / 'events.db') / 1e6:.0f} MB events.db, {os.cpu_count()} cores")
    bench_listing(a.store, a.repeat)
    bench_open(a.store, a.repeat)
    if not a.skip_app:
        asyncio.run(_app_paints(a.store, max(3, a.repeat // 2)))


if __name__ == "__main__":
    main()
