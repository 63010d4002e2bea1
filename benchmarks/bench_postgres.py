"""The Postgres store against its floors, on one server (run by hand; it prints one JSON line per measure).

1. ``flux store copy`` of the source directory into Postgres (rows/s), and back into a fresh
   directory (rows/s).
2. ``flux sessions`` (the newest 30, with turns, last outcome, spend and the interrupted check)
   over the store's N sessions, against the same facts read by hand-written SQL on the same server:
   one statement for the page (registry rows, turn counts, newest turn, spend sums per turn and
   model, each ``turn_ended``'s outcome and usage) and one for the open newest turns' rows. Two
   scopes, each side alike: on an open store / open connection (the listing's own work), and from
   open to close (``StoreReader`` opened, listed, closed / a connection made, queried, closed).
   Before timing, the floor's facts are checked against the listing's (turns, outcome, input tokens).
3. Replay of a ~10,000-event session read from Postgres, against reading its rows raw (psycopg,
   ``json.loads`` of each payload).
4. 100 concurrent appenders (threads, each its own connection) on one stream: rows per second, and
   the stream's ``stream_seq`` checked contiguous.

Medians of ``--repeat`` rounds, the two sides of a ratio interleaved round by round. The store is
generated as a directory (benchmarks/gen_store.py, or ``--source DIR`` for one generated before)
and moved in with the copy being measured; ``--schema NAME`` names the schema, and a schema that
already holds the store is used as it is (the copy is not run again). Without ``--dsn`` a throwaway
cluster is started (tests/servers.py).

    python benchmarks/bench_postgres.py [--dsn URL] [--sessions N] [--big N] [--source DIR]
                                        [--schema NAME] [--appenders N] [--repeat N] [--no-copy-back]
                                        [--measure listing,replay,appenders]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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

_USAGE = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
          "cache_creation_1h_input_tokens", "reasoning_tokens", "audio_input_tokens", "audio_output_tokens")
_SUMS = ", ".join(f"SUM((j #>> '{{data,usage,{f}}}')::float8)" for f in _USAGE)
# The facts `flux sessions` prints for the newest 30 sessions, in one statement.
_SAME_FACTS = f"""
WITH page AS (SELECT n, 's_' || n AS id, model, created_at, updated_at, last_seq, msg_count, account, agent_id,
                     agent_version, correlation_id
              FROM (SELECT * FROM streams ORDER BY updated_at DESC, n DESC LIMIT 30) newest),
t AS (SELECT stream, COUNT(*) AS turns, MAX(global_seq) AS newest FROM events
      WHERE kind = 'turn_started' AND stream IN (SELECT id FROM page) GROUP BY stream),
c AS (SELECT stream, jsonb_agg(jsonb_build_array(turn_id, m, r, rep, s)) AS calls FROM (
        SELECT stream, turn_id, j #>> '{{data,model}}' AS m,
               jsonb_typeof(j #> '{{data,usage,reported_cost_usd}}') = 'number' AS r,
               SUM(CASE WHEN jsonb_typeof(j #> '{{data,usage,reported_cost_usd}}') = 'number'
                   THEN (j #>> '{{data,usage,reported_cost_usd}}')::float8 END) AS rep,
               jsonb_build_array({_SUMS}) AS s
        FROM events CROSS JOIN LATERAL (SELECT payload::jsonb AS j OFFSET 0) x
        WHERE kind = 'call_usage' AND stream IN (SELECT id FROM page) GROUP BY stream, turn_id, m, r) g
      GROUP BY stream),
d AS (SELECT stream, jsonb_agg(jsonb_build_array(turn_id, j #> '{{data,outcome}}', j #> '{{data,usage}}')) AS ended
      FROM events CROSS JOIN LATERAL (SELECT payload::jsonb AS j OFFSET 0) x
      WHERE kind = 'turn_ended' AND stream IN (SELECT id FROM page) GROUP BY stream)
SELECT p.*, t.turns, t.newest, c.calls, d.ended
FROM page p LEFT JOIN t ON t.stream = p.id LEFT JOIN c ON c.stream = p.id LEFT JOIN d ON d.stream = p.id
ORDER BY p.updated_at DESC, p.n DESC
"""
# The rows the interrupted-turn check reads for the sessions whose newest turn is open.
_OPEN_TURNS = """
SELECT stream, kind, payload FROM events
WHERE stream = ANY(%(streams)s) AND (
  (kind = 'turn_started' AND global_seq = ANY(%(turns)s))
  OR (kind = 'plan_attempted' AND turn_id = ANY(%(turns)s))
  OR (kind = 'run' AND global_seq >= %(since)s AND payload::jsonb #>> '{data,event}'
      IN ('statement_completed', 'plan_resumed', 'checkpoint_reached')))
ORDER BY stream, stream_seq
"""
_RAW_ROWS = ("SELECT global_seq, stream, stream_seq, id, kind, ts, turn_id, payload FROM events"
             " WHERE stream = %s AND kind = ANY(%s) ORDER BY stream_seq")


def same_facts(conn) -> list[tuple]:
    """The floor: the page's facts, then the open newest turns' rows (the same server, one connection)."""
    page = conn.execute(_SAME_FACTS).fetchall()
    open_turns = {}
    for row in page:
        turns, newest, ended = row[11], row[12], row[14] or []
        if turns and newest not in {e[0] for e in ended}:
            open_turns[row[1]] = newest
    if open_turns:
        conn.execute(_OPEN_TURNS, {"streams": list(open_turns), "turns": list(open_turns.values()),
                                   "since": min(open_turns.values())}).fetchall()
    return page


def check_same_facts(page: list[tuple], summaries) -> None:
    """The floor reads the facts the listing prints: same sessions, turns, last outcome, input tokens."""
    assert [r[1] for r in page] == [s.id for s in summaries], "the floor lists other sessions"
    for row, s in zip(page, summaries):
        turns, newest, calls, ended = row[11] or 0, row[12], row[13] or [], row[14] or []
        called = {c[0] for c in calls}
        tokens = sum(c[4][0] or 0 for c in calls) + sum((e[2] or {}).get("input_tokens", 0)
                                                         for e in ended if e[0] not in called and isinstance(e[2], dict))
        outcome = next((e[1] for e in ended if e[0] == newest), "pending" if turns else None)
        assert (turns, outcome, int(tokens)) == (s.turns, s.last_outcome, s.usage.input_tokens), (row[1], s.to_json())


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1e3


def interleaved(repeat: int, *fns) -> list[list[float]]:
    """Each function timed ``repeat`` times, round by round."""
    out: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            out[i].append(time.perf_counter() - t0)
    return out


def bench_copy(src: Path, loc: Path, back: bool) -> dict:
    t0 = time.perf_counter()
    with StoreReader(src) as r, StoreWriter(loc) as w:
        report = copy_store(r, w)
    s = time.perf_counter() - t0
    out = {"rows": report.total_rows, "into postgres (s)": s, "into postgres (rows/s)": report.total_rows / s}
    if back:
        dest = Path(tempfile.mkdtemp(prefix="flux-bench-back-")) / "store"
        t0 = time.perf_counter()
        with StoreReader(loc) as r, StoreWriter(dest) as w:
            rows = copy_store(r, w).total_rows
        s = time.perf_counter() - t0
        out.update({"into a directory (s)": s, "into a directory (rows/s)": rows / s})
    return out


def bench_listing(loc: Path, url: str, repeat: int) -> dict:
    conn = connect(url, read_only=True)
    reader = StoreReader(loc)
    check_same_facts(same_facts(conn), list_sessions(reader, limit=30))

    def ours_open():
        assert len(list_sessions(reader, limit=30)) == 30

    def floor_open():
        assert len(same_facts(conn)) == 30

    def ours_whole():
        with StoreReader(loc) as r:
            assert len(list_sessions(r, limit=30)) == 30

    def floor_whole():
        c = connect(url, read_only=True)
        try:
            assert len(same_facts(c)) == 30
        finally:
            c.close()

    a, b, c, d = interleaved(repeat, ours_open, floor_open, ours_whole, floor_whole)
    reader.close()
    conn.close()
    out = {"open store: flux sessions (ms)": median_ms(a), "open connection: same-facts SQL (ms)": median_ms(b)}
    out["open: ratio"] = out["open store: flux sessions (ms)"] / out["open connection: same-facts SQL (ms)"]
    out.update({"open to close: flux sessions (ms)": median_ms(c), "connect to close: same-facts SQL (ms)": median_ms(d)})
    out["open to close: ratio"] = out["open to close: flux sessions (ms)"] / out["connect to close: same-facts SQL (ms)"]
    return out


def bench_replay(loc: Path, url: str, repeat: int) -> dict:
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

    a, b = interleaved(repeat, ours, floor)
    conn.close()
    out = {"events": n_rows, "replay (ms)": median_ms(a), "raw row read (ms)": median_ms(b)}
    out["ratio"] = out["replay (ms)"] / out["raw row read (ms)"]
    return out


def bench_appenders(loc: Path, appenders: int, each: int = 20) -> dict:
    with StoreWriter(loc) as w:
        sid = w.create_session("bench")
    barrier = threading.Barrier(appenders)
    errors: list[BaseException] = []

    def run(k: int) -> None:
        try:
            w = StoreWriter(loc)
            barrier.wait(timeout=300)
            for i in range(each):
                w.append(sid, Message.text("user", f"a{k}-{i}"))
            w.close()
        except BaseException as e:  # noqa: BLE001  (reported below)
            errors.append(e)
            barrier.abort()  # (the others stop waiting for an appender that will not come)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(appenders)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    assert not errors, [e for e in errors if not isinstance(e, threading.BrokenBarrierError)][:3] or errors[:3]
    with StoreReader(loc) as r:
        seqs = [e.stream_seq for e in r.events(sid)]
    assert seqs == list(range(1 + appenders * each)), "stream_seq is not contiguous"
    return {"appenders": appenders, "rows": appenders * each, "wall (s)": wall, "rows/s": appenders * each / wall}


def _has_store(url: str) -> bool:
    conn = connect(url, read_only=True)
    try:
        if conn.execute("SELECT to_regclass('streams') IS NULL").fetchone()[0]:
            return False
        return conn.execute("SELECT EXISTS (SELECT 1 FROM streams)").fetchone()[0]
    finally:
        conn.close()


def _print(name: str, res: dict) -> None:
    print(json.dumps({name: {k: round(v, 2) if isinstance(v, float) else v for k, v in res.items()}}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsn")
    ap.add_argument("--sessions", type=int, default=2_000)
    ap.add_argument("--big", type=int, default=10_000)
    ap.add_argument("--source", type=Path, help="a store generated before (benchmarks/gen_store.py)")
    ap.add_argument("--schema", help="the schema to copy into (one that holds the store already is used as it is)")
    ap.add_argument("--appenders", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--no-copy-back", action="store_true", help="skip timing the copy back into a directory")
    ap.add_argument("--measure", default="listing,replay,appenders", help="which of listing,replay,appenders to run")
    a = ap.parse_args()
    server = None
    if a.dsn is None:
        from tests.servers import PostgresServer

        server = PostgresServer().start()
        a.dsn = server.dsn
    os.environ.setdefault("FLUX_PG_LOCAL_DIR", tempfile.mkdtemp(prefix="flux-bench-pg-"))
    try:
        url = f"{a.dsn}?schema={a.schema or f'bench_{os.getpid()}'}"
        loc = store_location(url)
        if a.schema is None or not _has_store(url):
            src = a.source
            if src is None:
                src = Path(tempfile.mkdtemp(prefix="flux-bench-src-")) / "store"
                generate(src, a.sessions, a.big)
            _print("copy", bench_copy(src, loc, not a.no_copy_back))
        with StoreReader(loc) as r:
            print(json.dumps({"store": {"sessions": r.session_count(), "events": r.count_events()}}), flush=True)
        measures = set(a.measure.split(","))
        if "listing" in measures:
            _print("listing", bench_listing(loc, url, a.repeat))
        if "replay" in measures:
            _print("replay", bench_replay(loc, url, max(3, a.repeat // 3)))
        if "appenders" in measures:
            _print("appenders", bench_appenders(loc, a.appenders))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
