"""The Postgres store against its floors, on one server (run by hand; it prints one JSON line per measure).

1. ``flux sessions`` (the newest 30, with turns, last outcome and spend) over a store of N
   sessions in Postgres, against one hand-written SQL query of the same facts on the same server.
2. Replay of a ~10,000-event session read from Postgres, against reading its rows raw (psycopg,
   ``json.loads`` of each payload).
3. 100 concurrent appenders (threads, each its own connection) on one stream: rows per second, and
   the stream's ``stream_seq`` checked contiguous.

The store is generated as a directory (benchmarks/gen_store.py) and moved in with ``flux store
copy`` (also timed). Without ``--dsn`` a throwaway cluster is started (tests/servers.py).

    python benchmarks/bench_postgres.py [--dsn URL] [--sessions N] [--big N] [--appenders N]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT))

from benchmarks.gen_store import generate  # noqa: E402
from flux.model.listing import list_sessions  # noqa: E402
from flux.model.session import TRACE_KINDS  # noqa: E402
from flux.store import Message  # noqa: E402
from flux.store.copy import copy_store  # noqa: E402
from flux.store.postgres import connect  # noqa: E402
from flux.store.store import StoreReader, StoreWriter, store_location  # noqa: E402
from flux.timemachine.replay import replay_session  # noqa: E402

# The facts `flux sessions` prints for the newest 30 sessions, in one query.
_SAME_FACTS = """
WITH page AS (SELECT n, 's_' || n AS id, model, msg_count, updated_at FROM streams ORDER BY updated_at DESC, n DESC LIMIT 30)
SELECT p.id, p.model, p.msg_count,
  (SELECT COUNT(*) FROM events e WHERE e.stream = p.id AND e.kind = 'turn_started'),
  (SELECT e.payload::jsonb #>> '{data,outcome}' FROM events e WHERE e.stream = p.id AND e.kind = 'turn_ended'
    ORDER BY e.stream_seq DESC LIMIT 1),
  (SELECT SUM((e.payload::jsonb #>> '{data,usage,input_tokens}')::float8) FROM events e
    WHERE e.stream = p.id AND e.kind = 'call_usage')
FROM page p ORDER BY p.updated_at DESC, p.n DESC
"""
_RAW_ROWS = ("SELECT global_seq, stream, stream_seq, id, kind, ts, turn_id, payload FROM events"
             " WHERE stream = %s AND kind = ANY(%s) ORDER BY stream_seq")


def best(fn, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench_listing(loc: Path, url: str) -> dict:
    def ours():
        with StoreReader(loc) as r:
            assert len(list_sessions(r, limit=30)) == 30

    conn = connect(url, read_only=True)

    def floor():
        assert len(conn.execute(_SAME_FACTS).fetchall()) == 30

    out = {"flux sessions (ms)": best(ours) * 1e3, "same-facts SQL (ms)": best(floor) * 1e3}
    conn.close()
    return out


def bench_replay(loc: Path, url: str) -> dict:
    with StoreReader(loc) as r:
        n_rows = r.count_events("s_1")

    def ours():
        with StoreReader(loc) as r:
            rep = replay_session(r, "s_1")
            assert rep.diverged is None, rep.diverged

    conn = connect(url, read_only=True)

    def floor():
        count = 0
        for row in conn.execute(_RAW_ROWS, ("s_1", list(TRACE_KINDS))):
            json.loads(row[7])
            count += 1
        assert count > 0

    out = {"events": n_rows, "replay (ms)": best(ours, 3) * 1e3, "raw row read (ms)": best(floor, 3) * 1e3}
    conn.close()
    return out


def bench_appenders(loc: Path, appenders: int, each: int = 20) -> dict:
    with StoreWriter(loc) as w:
        sid = w.create_session("bench")
    barrier = threading.Barrier(appenders)
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            w = StoreWriter(loc)
            barrier.wait()
            for i in range(each):
                w.append(sid, Message.text("user", f"a{k}-{i}"))
            w.close()
        except BaseException as e:  # noqa: BLE001  (reported below)
            errors.append(e)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(appenders)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    assert not errors, errors[:3]
    with StoreReader(loc) as r:
        seqs = [e.stream_seq for e in r.events(sid)]
    assert seqs == list(range(1 + appenders * each)), "stream_seq is not contiguous"
    return {"appenders": appenders, "rows": appenders * each, "wall (s)": wall, "rows/s": appenders * each / wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsn")
    ap.add_argument("--sessions", type=int, default=2_000)
    ap.add_argument("--big", type=int, default=10_000)
    ap.add_argument("--appenders", type=int, default=100)
    a = ap.parse_args()
    server = None
    if a.dsn is None:
        from tests.servers import PostgresServer

        server = PostgresServer().start()
        a.dsn = server.dsn
    os.environ.setdefault("FLUX_PG_LOCAL_DIR", tempfile.mkdtemp(prefix="flux-bench-pg-"))
    try:
        src = Path(tempfile.mkdtemp(prefix="flux-bench-src-")) / "store"
        generate(src, a.sessions, a.big)
        url = f"{a.dsn}?schema=bench_{os.getpid()}"
        loc = store_location(url)
        t0 = time.perf_counter()
        with StoreReader(src) as r, StoreWriter(loc) as w:
            report = copy_store(r, w)
        copy_s = time.perf_counter() - t0
        print(json.dumps({"copy": {"rows": report.total_rows, "s": round(copy_s, 1),
                                   "rows/s": round(report.total_rows / copy_s)}}))
        for name, res in (("listing", bench_listing(loc, url)), ("replay", bench_replay(loc, url)),
                          ("appenders", bench_appenders(loc, a.appenders))):
            print(json.dumps({name: {k: round(v, 2) if isinstance(v, float) else v for k, v in res.items()}}))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
