"""Record and replay one agent run against the peers and the physical floors:

    pip install -e ".[bench]"          # rewind-llm, timewarp-llm from PyPI
    python benchmarks/bench_peers.py [--calls 1000] [--repeat 7]

The run: one model call that asks for ``--calls`` trivial tool calls (echo an integer), the calls,
then one model call that answers. Each tool records it through its own fast path and replays it
offline, in this process, interleaved round by round (so machine noise hits every tool alike):

Every side is timed over the same scope: the store opened, the run recorded (or replayed), the store
closed — flux-tui's ``Client`` created and closed, rewind-llm's ``Session`` created and its last
event appended, the floors' connection opened and closed.

* flux-tui — ``Client`` + scripted provider, a ``pure`` op (group-committed) and the same op
  declared ``write`` (a durable cell per op; ``auto_approve`` as ``--yes``, so each call runs — the
  default approver would deny every one); replay = ``replay_session`` (re-executes the plans).
* rewind-llm — ``Session(mode=RECORD)`` with ``session.model`` / ``session.tool``: one JSONL line
  per event, each with its own open/write/close; replay = ``Session(mode=REPLAY)``.
* timewarp-llm — ``LocalStore``: an input and an output blob file per step plus one SQLite row
  (``append_event``); replay = ``list_events`` + ``get_blob`` of every output.

Floors do exactly the work of the measured path, nothing more:

* write floor — the same rows (same count, same payload bytes), same schema and pragmas, raw
  ``sqlite3``, in the same transactions as the measured run (one per op: an effectful op's
  ``step_started`` ends a transaction, which also holds the previous op's cell — plus the turn's
  few), each one multi-row ``INSERT … VALUES`` per 64 rows (the writer's statement shape) — and
  again with one ``executemany`` per transaction; the floor is whichever of the two is faster — and
  the registry ``UPDATE`` the writer runs; the boundaries are read from the measured run's own
  ``COMMIT``s (``sqlite3`` trace callback, in the warm-up round only). Every row is made as any recorder must make it: its payload encoded from its value with
  the standard library (``json.dumps``, checked to give the recorded bytes), a ULID minted and a
  millisecond timestamp read. ``write floor (pre-encoded)`` is the same without making the rows
  (payload texts and ids copied from the recorded run: SQLite alone);
* read floor — the rows replay reads (the session's turn, plan-attempt and run rows, all eight
  columns, after the same ``last`` lookup) with raw ``sqlite3``, each payload ``json.loads``-ed:
  replay json-loads every one of those rows too (``benchmarks/bench_replay.py`` has the 10k and
  100k sizes and peak RSS).

Prints medians (ms), bytes on disk and the ratios of the issue's target table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# --core DIR measures another checkout's flux package with this harness (e.g. a detached worktree of
# main, interleaved with this one's runs for a before/after in the same minutes).
_CORE = sys.argv[sys.argv.index("--core") + 1] if "--core" in sys.argv[:-1] else str(ROOT / "core")
sys.path.insert(0, _CORE)

from flux.agent.client import Client  # noqa: E402
from flux.agent.ops import op  # noqa: E402
from flux.agent.providers.scripted import ScriptedProvider  # noqa: E402
from flux.store import schema  # noqa: E402
from flux.store.store import StoreReader  # noqa: E402
from flux.timemachine.replay import replay_session  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_replay  # noqa: E402


@op(effect="pure")
def echo(i: int) -> str:
    """Return the number as text."""
    return str(i)


@op(name="echo", effect="write")
def echo_write(i: int) -> str:
    """Return the number as text (declared as a write: its cell is made durable)."""
    return str(i)


def _responses(calls: int) -> list[dict]:
    return [{"tool_calls": [{"name": "echo", "input": {"i": i}} for i in range(calls)],
             "usage": {"input_tokens": 100, "output_tokens": 10 * calls}},
            {"text": "done", "usage": {"input_tokens": 100 + 5 * calls, "output_tokens": 2}}]


def _bytes(d: Path) -> int:
    return sum(p.stat().st_size for p in d.rglob("*") if p.is_file())


def _files(d: Path) -> int:
    return sum(1 for p in d.rglob("*") if p.is_file())


def _event_rows(store: Path) -> int:
    with sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True) as c:
        return c.execute("SELECT COUNT(*) FROM events").fetchone()[0]


def _payload_bytes(store: Path) -> int:
    with sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True) as c:
        return c.execute("SELECT SUM(LENGTH(CAST(payload AS BLOB))) FROM events").fetchone()[0]


# -- flux-tui -------------------------------------------------------------------------------------

LAST_CPU = [0.0]  # process time of the last timed region of flux_record / write_floor / rewind_run


def _timed(timed, finish) -> float:
    """The wall time of ``timed()`` (its process time in ``LAST_CPU``), then ``finish()`` untimed:
    the one timing of the recorder and of its floor."""
    t0, c0 = time.perf_counter(), time.process_time()
    timed()
    elapsed = time.perf_counter() - t0
    LAST_CPU[0] = time.process_time() - c0
    finish()
    return elapsed


def flux_record(d: Path, calls: int, ops, commits: list[int] | None = None) -> float:
    """Record the run; ``commits`` (if given) receives, per COMMIT, how many event rows were inserted
    before it (a trace callback — only in the untimed warm-up round)."""
    return _timed(*_flux_record_prepared(d, calls, ops, commits))


def _flux_record_prepared(d: Path, calls: int, ops, commits: list[int] | None = None):
    """(the timed part, the untimed rest: the checks) of :func:`flux_record` — split so that
    ``--instructions`` counts the timed part alone. The timed part is the store's whole life: the
    client opens the store, records the run and closes it (its last commit and WAL checkpoint), the
    same scope as rewind-llm's ``Session`` from its creation to its last event."""
    result = []

    def timed() -> None:
        client = Client(ScriptedProvider(responses=_responses(calls)), model="scripted", ops=ops, store=d / "store",
                        workspace=d, env_secrets=False, auto_approve=True)
        if commits is not None:  # rows in events at each COMMIT: the rows before, plus every row changed
            conn = client.writer.conn  # since, less the registry's one-row UPDATEs (an INSERT may hold many rows)
            base = [conn.execute("SELECT COUNT(*) FROM events").fetchone()[0] - conn.total_changes]

            def trace(sql: str) -> None:
                if sql.startswith("UPDATE streams"):
                    base[0] -= 1
                elif sql == "COMMIT":
                    commits.append(base[0] + conn.total_changes)
            conn.set_trace_callback(trace)
        try:
            result.append(client.session().send_sync(f"call echo {calls} times"))
        finally:
            client.close()

    def finish() -> None:
        out = result[0]
        assert out.outcome == "ok" and len(out.cells) == calls
        assert not any(c.is_error or c.denied for c in out.cells), "every call must run (not be refused)"
    return timed, finish


def flux_replay(store: Path, calls: int) -> float:
    t0 = time.perf_counter()
    with StoreReader(store) as r:
        rep = replay_session(r, "last")
    elapsed = time.perf_counter() - t0
    assert rep.diverged is None and rep.cells_consumed == calls, rep.diverged
    return elapsed


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [a + b for a in _CROCKFORD for b in _CROCKFORD]
_FLOOR_ULID = [-1, 0, ""]  # last ms, last random part, the text of the ms's 10 digits


def floor_ulid(ms: int) -> str:
    """The floor's ULID, whatever flux package is measured: random 80 bits per millisecond, plus one
    within it; the millisecond's 10 digits made once per millisecond, the rest by table lookups."""
    st = _FLOOR_ULID
    if ms == st[0]:
        st[1] = (st[1] + 1) & ((1 << 80) - 1)
    else:
        st[0], st[1] = ms, int.from_bytes(os.urandom(10), "big") >> 1
        st[2] = "".join([_PAIRS[(ms >> s) & 1023] for s in (40, 30, 20, 10, 0)])
    r = st[1]
    return st[2] + "".join([_PAIRS[(r >> s) & 1023] for s in (70, 60, 50, 40, 30, 20, 10, 0)])


def write_floor(src: Path, d: Path, commits: list[int], *, make_rows: bool = True, many: bool = False) -> float:
    """The recorded rows written with raw sqlite3 in the measured run's transactions (``commits``:
    the row count at each COMMIT), same schema and pragmas, the writer's registry UPDATE per
    transaction. ``make_rows``: each row's payload is encoded from its value (``json.dumps``), its
    id minted and its timestamp read inside the timed region, as a recorder must; otherwise the
    recorded texts and ids are inserted as they are (SQLite's share alone). ``many``: one
    ``executemany`` of the one-row INSERT per transaction instead of the writer's multi-row
    statements (the harness takes whichever is faster as the floor)."""
    return _timed(*_write_floor_prepared(src, d, commits, make_rows=make_rows, many=many))


def _write_floor_prepared(src: Path, d: Path, commits: list[int], *, make_rows: bool = True, many: bool = False):
    """(the timed part, the untimed rest: nothing) of :func:`write_floor`. The timed part is the
    store's whole life, as the recorder's: connect, pragmas, schema, the run's transactions, close."""
    with sqlite3.connect(f"file:{src / 'events.db'}?mode=ro", uri=True) as c:
        rows = c.execute("SELECT stream, stream_seq, id, kind, schema_version, ts, payload, turn_id FROM events"
                         " ORDER BY global_seq").fetchall()
    values = [json.loads(r[6]) for r in rows]
    for r, v in zip(rows, values):  # the floor writes the same bytes
        assert json.dumps(v, ensure_ascii=False, separators=(",", ":")) == r[6], r[6][:200]
    cuts = sorted({n for n in commits if 0 < n <= len(rows)} | {len(rows)})
    d.mkdir()
    one_row = ("INSERT INTO events (stream, stream_seq, id, kind, schema_version, ts, payload, turn_id)"
               " VALUES (?, ?, ?, ?, 1, ?, ?, ?)")
    update = "UPDATE streams SET updated_at = ?, last_seq = ?, model = COALESCE(?, model), msg_count = msg_count + ? WHERE n = 1"
    dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    now = time.time
    flat_rows = [(r[0], r[1], r[2], r[3], r[5], r[6], r[7]) for r in rows]  # pre-encoded: the recorded values

    def timed(rows=rows, values=values, cuts=cuts, update=update, dumps=dumps, now=now,
              flat_rows=flat_rows, one_row=one_row, many=many, make_rows=make_rows) -> None:
        # (everything bound as a local, as when this loop was write_floor's own body)
        con = sqlite3.connect(str(d / "events.db"), isolation_level=None)
        con.execute("PRAGMA journal_mode = WAL")
        con.execute("PRAGMA synchronous = NORMAL")
        for stmt in schema.EVENTS_DDL.split(";"):
            if stmt.strip():
                con.execute(stmt)
        con.execute("INSERT INTO streams (model, created_at, updated_at, last_seq, msg_count)"
                    " VALUES ('scripted', 0, 0, 0, 0)")
        inserts: dict[int, str] = {}  # rows -> the INSERT of that many rows (the writer's shape: up to 64 a statement)

        def insert(flat: list) -> None:  # 7 values a row (schema_version is the literal 1, as the writer's)
            n = len(flat) // 7
            for k in range(0, n, 64):
                m = min(64, n - k)
                sql = inserts.get(m)
                if sql is None:
                    sql = inserts[m] = ("INSERT INTO events (stream, stream_seq, id, kind, schema_version, ts,"
                                        " payload, turn_id) VALUES " + ",".join(["(?, ?, ?, ?, 1, ?, ?, ?)"] * m))
                con.execute(sql, flat if m == n else flat[7 * k:7 * (k + m)])
        start = 0
        for end in cuts:
            con.execute("BEGIN IMMEDIATE")
            messages = 0
            if many:  # the rows as tuples, one executemany
                batch = []
                if make_rows:
                    for r, v in zip(rows[start:end], values[start:end]):
                        ms = int(now() * 1000)
                        batch.append((r[0], r[1], floor_ulid(ms), r[3], ms, dumps(v), r[7]))
                else:
                    batch = flat_rows[start:end]
                con.executemany(one_row, batch)
                messages = sum(1 for r in batch if r[3] == "message")
                last = batch[-1]
                con.execute(update, (last[4], last[1], None, messages))
                con.execute("COMMIT")
                start = end
                continue
            flat: list = []  # the rows' values, flat: the writer's multi-row statements
            if make_rows:
                for r, v in zip(rows[start:end], values[start:end]):
                    ms = int(now() * 1000)
                    flat += (r[0], r[1], floor_ulid(ms), r[3], ms, dumps(v), r[7])
                    messages += r[3] == "message"
            else:
                for r in flat_rows[start:end]:
                    flat += r
                    messages += r[3] == "message"
            insert(flat)
            con.execute(update, (flat[-3], flat[-6], None, messages))
            con.execute("COMMIT")
            start = end
        con.close()
    return timed, lambda: None


def read_floor(store: Path) -> float:
    """What replay cannot do without: the same rows it reads, json-loaded (as bench_replay.py's floor)."""
    t0 = time.perf_counter()
    count = bench_replay.read_floor(store)
    elapsed = time.perf_counter() - t0
    assert count > 0
    return elapsed


# -- rewind-llm ---------------------------------------------------------------------------------

def rewind_run(path: Path, calls: int, record: bool) -> float:
    from rewind.session import Mode, Session

    responses = _responses(calls)
    t0, c0 = time.perf_counter(), time.process_time()
    sess = Session(mode=Mode.RECORD if record else Mode.REPLAY, trace_path=path)
    tool = sess.tool(lambda i: str(i), name="echo")
    first = sess.model(lambda **kw: responses[0], "model", messages=[{"role": "user", "content": "go"}])
    outs = [tool(i=c["input"]["i"]) for c in first["tool_calls"]]
    last = sess.model(lambda **kw: responses[1], "model", messages=[{"role": "user", "content": "go"}, {"tool_results": outs}])
    elapsed = time.perf_counter() - t0
    LAST_CPU[0] = time.process_time() - c0
    assert last["text"] == "done" and len(outs) == calls
    return elapsed


# -- timewarp-llm -------------------------------------------------------------------------------

def timewarp_record(d: Path, calls: int) -> tuple[float, str]:
    from timewarp import ActionType, BlobKind, Event, Run, to_bytes
    from timewarp.store import LocalStore

    responses = _responses(calls)
    t0 = time.perf_counter()
    store = LocalStore(db_path=d / "tw.sqlite3", blobs_root=d / "blobs")
    run = Run(project="bench", name="echo")
    store.create_run(run)
    step = 0

    def record(kind, actor, inp, out) -> None:
        nonlocal step
        ir = store.put_blob(run.run_id, step, BlobKind.INPUT, to_bytes(inp))
        orf = store.put_blob(run.run_id, step, BlobKind.OUTPUT, to_bytes(out))
        store.append_event(Event(run_id=run.run_id, step=step, action_type=kind, actor=actor, input_ref=ir, output_ref=orf,
                                 tool_name=actor if kind == ActionType.TOOL else None))
        step += 1

    record(ActionType.LLM, "model", {"messages": ["go"]}, responses[0])
    outs = []
    for c in responses[0]["tool_calls"]:
        out = str(c["input"]["i"])
        record(ActionType.TOOL, "echo", c["input"], {"content": out})
        outs.append(out)
    record(ActionType.LLM, "model", {"messages": ["go", outs]}, responses[1])
    return time.perf_counter() - t0, str(run.run_id)


def timewarp_replay(d: Path, run_id: str, calls: int) -> float:
    from uuid import UUID

    from timewarp import from_bytes
    from timewarp.store import LocalStore

    t0 = time.perf_counter()
    store = LocalStore(db_path=d / "tw.sqlite3", blobs_root=d / "blobs")
    events = store.list_events(UUID(run_id))
    outs = [from_bytes(store.get_blob(e.output_ref)) for e in events]
    elapsed = time.perf_counter() - t0
    assert len(outs) == calls + 2
    return elapsed


# -- the harness --------------------------------------------------------------------------------

def replay_only(n: int, repeat: int) -> None:
    """Replay side only: one recording per tool, then replays interleaved round by round."""
    t: dict[str, list[tuple[float, float]]] = {"flux replay": [], "read floor": [], "rewind replay": []}
    with tempfile.TemporaryDirectory(prefix="flux-peers-") as tmp:
        base = Path(tmp)
        (base / "fp").mkdir()
        flux_record(base / "fp", n, [echo])
        rewind_run(base / "rw.jsonl", n, True)
        fns = {"flux replay": lambda: flux_replay(base / "fp" / "store", n),
               "read floor": lambda: read_floor(base / "fp" / "store"),
               "rewind replay": lambda: rewind_run(base / "rw.jsonl", n, False)}
        for rnd in range(repeat + 1):  # round 0 warms imports and caches, not counted
            for k, fn in fns.items():
                c = time.process_time()
                w = fn()
                if rnd:
                    t[k].append((w, time.process_time() - c))
    m = {k: (statistics.median(x[0] for x in v) * 1000, statistics.median(x[1] for x in v) * 1000) for k, v in t.items()}
    print(f"replay of one run of {n} tool calls + 2 model calls, in-process, median of {repeat} interleaved rounds "
          f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
    for k, (w, c) in m.items():
        print(f"  {k:<14} wall {w:8.1f} ms   cpu {c:8.1f} ms")
    for other in ("rewind replay", "read floor"):
        print(f"  flux replay vs {other:<14} wall {m['flux replay'][0] / m[other][0]:5.2f}×   "
              f"cpu {m['flux replay'][1] / m[other][1]:5.2f}×   (≤ 2×)")


# -- instruction counts (--instructions) ----------------------------------------------------------

_IR_WHAT = ("record write", "write floor", "write floor (executemany)")


def _ir_worker(what: str, timed_rounds: int, calls: int, tmp: Path) -> None:
    """One process counted by valgrind: the write run recorded once untimed (the floor's rows and
    COMMIT boundaries, and every import warmed), then three rounds of ``what`` set up, of which the
    first ``timed_rounds`` run their timed part. Ends with ``os._exit`` (no close, no checkpoint, no
    teardown), so two such processes differ by the timed parts alone. ``time.time`` (the recorder's
    and the floor's row stamps) advances 40 us a read, as in a run at full speed."""
    # Under valgrind the process runs ~50x slower, so nearly every clock read would be a new
    # millisecond (a fresh random draw for every id minted, the recorder's and the floor's alike):
    # the wall clock is replaced by one that moves 40 us a read, about what a real run sees.
    fake = [time.time()]

    def slow_time() -> float:
        fake[0] += 40e-6
        return fake[0]
    time.time = slow_time
    commits: list[int] = []
    (tmp / "src").mkdir()
    flux_record(tmp / "src", calls, [echo_write], commits)
    src = tmp / "src" / "store"
    keep = []  # the untimed rest of each round (its checks), run after the counted parts
    for r in range(3):
        if what == "record write":
            (tmp / f"r{r}").mkdir()
            timed, finish = _flux_record_prepared(tmp / f"r{r}", calls, [echo_write])
        else:
            timed, finish = _write_floor_prepared(src, tmp / f"f{r}", commits, many=what != "write floor")
        keep.append(finish)
        if r < timed_rounds:
            timed()
    sys.stdout.flush()
    os._exit(0)


def instructions(what: str, calls: int, core: str) -> int:
    """Instructions of one timed part of ``what`` (a process running it three times less one
    running it once, halved; ``valgrind --tool=cachegrind --cache-sim=no``): the figure that does
    not move with the machine's load (user-space instructions: the kernel's share of a COMMIT's
    writes is not in it, the same for every side)."""
    import shutil
    import subprocess

    counts = []
    for k in (1, 3):
        tmp = Path(tempfile.mkdtemp(prefix="flux-peers-ir-"))
        try:
            out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                                  sys.executable, str(Path(__file__).resolve()), "--core", core, "--calls", str(calls),
                                  "--ir-worker", what, str(k), str(tmp)],
                                 env={**os.environ, "PYTHONHASHSEED": "0"}, capture_output=True, text=True, check=True).stderr
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        line = next(x for x in out.splitlines() if "I" in x and "refs:" in x)
        counts.append(int(line.split()[-1].replace(",", "")))
    return (counts[1] - counts[0]) // 2


def instructions_report(calls: int, core: str) -> None:
    ir = {what: instructions(what, calls, core) for what in _IR_WHAT}
    floor = min(ir["write floor"], ir["write floor (executemany)"])
    print(f"instructions of one timed part ({calls} write-effect calls; valgrind, flux from {core}):")
    for what, n in ir.items():
        print(f"  {what:<26} {n / 1e6:9.1f} M")
    print(f"  record write vs commit floor {ir['record write'] / floor:6.2f}×  (≤ 1.3×; floor: the smaller of the two shapes)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-timewarp", action="store_true", help="skip timewarp-llm (file-system bound: seconds a round)")
    ap.add_argument("--replay-only", action="store_true",
                    help="record once (flux-tui pure, rewind-llm), then time only the replays and the read floor")
    ap.add_argument("--core", default=_CORE, help="the core/ directory whose flux package is measured (default: this checkout's)")
    ap.add_argument("--instructions", action="store_true",
                    help="count the write row's instructions (valgrind: record write and both floor shapes) instead of timing")
    ap.add_argument("--ir-worker", nargs=3, metavar=("WHAT", "ROUNDS", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.ir_worker:
        _ir_worker(args.ir_worker[0], int(args.ir_worker[1]), args.calls, Path(args.ir_worker[2]))
    if args.instructions:
        instructions_report(args.calls, args.core)
        return
    n = args.calls
    if args.replay_only:
        replay_only(n, args.repeat)
        return
    t: dict[str, list[float]] = {k: [] for k in (
        "flux record pure", "flux record write", "write floor", "write floor (executemany)", "write floor (pre-encoded)",
        "rewind record",
        "timewarp record",
        "flux replay", "read floor", "rewind replay", "timewarp replay")}
    if args.no_timewarp:
        del t["timewarp record"], t["timewarp replay"]
    tc: dict[str, list[float]] = {}  # CPU (process time) of the record measurements
    size: dict[str, str] = {}
    commits: list[int] = []  # the write run's COMMIT boundaries (rows before each), from round 0
    for rnd in range(args.repeat + 1):  # round 0 warms imports and caches, not counted
        with tempfile.TemporaryDirectory(prefix="flux-peers-") as tmp:
            base = Path(tmp)
            res: dict[str, float] = {}
            cpu: dict[str, float] = {}
            gc.collect()
            (base / "fp").mkdir()
            res["flux record pure"] = flux_record(base / "fp", n, [echo])
            cpu["flux record pure"] = LAST_CPU[0]
            (base / "fw").mkdir()
            if not rnd:
                commits.clear()
            res["flux record write"] = flux_record(base / "fw", n, [echo_write], commits if not rnd else None)
            cpu["flux record write"] = LAST_CPU[0]
            res["write floor"] = write_floor(base / "fw" / "store", base / "floor", commits)
            cpu["write floor"] = LAST_CPU[0]
            res["write floor (executemany)"] = write_floor(base / "fw" / "store", base / "floor-many", commits,
                                                           many=True)
            cpu["write floor (executemany)"] = LAST_CPU[0]
            res["write floor (pre-encoded)"] = write_floor(base / "fw" / "store", base / "floor-raw", commits,
                                                           make_rows=False)
            cpu["write floor (pre-encoded)"] = LAST_CPU[0]
            res["rewind record"] = rewind_run(base / "rw.jsonl", n, True)
            cpu["rewind record"] = LAST_CPU[0]
            if not args.no_timewarp:
                (base / "tw").mkdir()
                res["timewarp record"], run_id = timewarp_record(base / "tw", n)
            res["flux replay"] = flux_replay(base / "fp" / "store", n)
            res["read floor"] = read_floor(base / "fp" / "store")
            res["rewind replay"] = rewind_run(base / "rw.jsonl", n, False)
            if not args.no_timewarp:
                res["timewarp replay"] = timewarp_replay(base / "tw", run_id, n)
            if rnd:
                for k, v in res.items():
                    t[k].append(v)
                for k, v in cpu.items():
                    tc.setdefault(k, []).append(v)
            else:
                size = {"flux (pure)": f"{_bytes(base / 'fp' / 'store') / 1e6:.2f} MB in {_files(base / 'fp' / 'store')} files",
                        "flux (write)": f"{_bytes(base / 'fw' / 'store') / 1e6:.2f} MB",
                        "rewind": f"{(base / 'rw.jsonl').stat().st_size / 1e6:.2f} MB in 1 file"}
                if not args.no_timewarp:
                    size["timewarp"] = f"{_bytes(base / 'tw') / 1e6:.2f} MB in {_files(base / 'tw')} files"
                rows = _event_rows(base / "fp" / "store")
                payload = _payload_bytes(base / "fp" / "store")
                size["per call"] = f"{rows / n:.2f} rows, {payload / n:.0f} payload bytes"
                size["per write call"] = (f"{_event_rows(base / 'fw' / 'store') / n:.2f} rows, "
                                          f"{_payload_bytes(base / 'fw' / 'store') / n:.0f} payload bytes")
    m = {k: statistics.median(v) * 1000 for k, v in t.items()}
    print(f"one run of {n} tool calls + 2 model calls, in-process, median of {args.repeat} interleaved rounds "
          f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; flux from {args.core})")
    mc = {k: statistics.median(v) * 1000 for k, v in tc.items()}
    for k, v in m.items():
        print(f"  {k:<26} {v:9.1f} ms" + (f"   cpu {mc[k]:8.1f} ms" if k in mc else ""))
    print("bytes on disk: " + " · ".join(f"{k} {v}" for k, v in size.items()))
    print(f"write run: {len(commits)} commits for {n} write-effect calls")
    print("ratios (target in brackets):")
    print(f"  record pure vs rewind        {m['flux record pure'] / m['rewind record']:6.2f}×  (≤ 2×)"
          f"   cpu {mc['flux record pure'] / mc['rewind record']:5.2f}×")
    if not args.no_timewarp:
        print(f"  record pure vs timewarp      {m['flux record pure'] / m['timewarp record']:6.2f}×")
    # The floor is whichever statement shape was faster (multi-row, as the writer; or executemany).
    fw, fc = min(m["write floor"], m["write floor (executemany)"]), min(mc["write floor"], mc["write floor (executemany)"])
    print(f"  record write vs commit floor {m['flux record write'] / fw:6.2f}×  (≤ 1.3×)"
          f"   cpu {mc['flux record write'] / fc:5.2f}×   (floor: the faster of the two statement shapes)")
    print(f"    (vs the pre-encoded floor  {m['flux record write'] / m['write floor (pre-encoded)']:6.2f}×"
          f"            cpu {mc['flux record write'] / mc['write floor (pre-encoded)']:5.2f}×)")
    print(f"  replay vs rewind             {m['flux replay'] / m['rewind replay']:6.2f}×  (≤ 2×)")
    if not args.no_timewarp:
        print(f"  replay vs timewarp           {m['flux replay'] / m['timewarp replay']:6.2f}×")
    print(f"  replay vs read floor         {m['flux replay'] / m['read floor']:6.2f}×  (≤ 2×)")


if __name__ == "__main__":
    main()
