"""Saved-case benchmarks, run by hand:

    python benchmarks/bench_cases.py [--repeat 7] [--calls 10000] [--bundles 10000] [--only file|postgres]

Measures, reporting medians (each measured side and its raw floor run alternately):

1. **save** of one bundle of ``--calls`` recorded calls (half op cells, half model calls) —
   ``FixtureStore.put`` (gzip + write + summary) vs writing the same canonical bytes raw (a file
   write; a bytea INSERT);
2. **load** of it — ``FixtureStore.get`` (read + inflate + parse + validate + hash check) vs
   reading the same compressed bytes raw (a file read; a bytea SELECT), and vs the floor any JSON
   bundle reader pays (read + gunzip + ``json.loads``);
3. **list** of ``--bundles`` small bundles — ``FixtureStore.list`` vs reading the same summary
   bytes raw (every summary file; a SELECT of the summary column as text).

On a directory store (a temp dir) and on a real PostgreSQL server started the way the tests start
it (``tests/servers.py``: a throwaway cluster on 127.0.0.1; needs Debian's postgresql package).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "core"))
sys.path.insert(0, str(ROOT))

from flux.cases import Bundle, FileStore  # noqa: E402
from flux.cases.bundle import FORMAT, compress  # noqa: E402
from flux.cases.stores import FixtureStore  # noqa: E402


def manifest(n_ops: int, n_models: int, tag: str) -> dict:
    return {
        "format": FORMAT, "kind": "agent", "target_name": f"bench-{tag}", "code_version": "0" * 16,
        "product_version": "flux-tui bench", "recorded_by": "bench",
        "registration": {"tools": [{"name": "read", "effect": "read", "writes": False}]},
        "recorded_config": {"model": "bench", "system": "You are a benchmark."},
        "source": {"store": "/bench", "session": "s_1", "turn": 1, "turn_id": 3},
        "fork": {"at": 0, "fork_after_seq": 3, "prefix_model_calls": 0},
        "capture": {"complete": True, "missing": [], "truncated": []},
        "inputs": {"input": f"benchmark input {tag}", "conversation": [], "plans": []},
    }


def big_bundle(calls: int) -> Bundle:
    n_ops = calls // 2
    results: list[dict] = []
    for i in range(n_ops):
        results.append({"kind": "op", "key": str(i), "op": "read", "fingerprint": f"{i:064x}",
                        "fingerprint_redacted": None, "input_view": f'{{"path":"src/file_{i}.py"}}', "global_seq": 10 + i,
                        "truncated": False, "redacted": False,
                        "result": {"content": f"line {i}: def f_{i}(x): return x * {i}\n" * 4, "view": None}})
    for i in range(1, calls - n_ops + 1):
        results.append({"kind": "model", "key": str(i), "model": "bench", "fingerprint": f"{i:064x}",
                        "request": {"model": "bench", "messages": [{"role": "user", "content": f"step {i}"}]},
                        "result": {"chunks": [{"t": "text_delta", "c": f"calling read for file {i}"},
                                              {"t": "usage", "c": {"input_tokens": 100 + i, "output_tokens": 7}}]}})
    history = [{"global_seq": 1, "stream_seq": 0, "kind": "session_started", "ts": 0, "turn_id": None,
                "data": {"model": "bench"}}]
    return Bundle.build(manifest(n_ops, calls - n_ops, "big"), history, results)


def small_bundle(n: int) -> Bundle:
    results = [{"kind": "op", "key": "0", "op": "read", "fingerprint": f"{n:064x}", "truncated": False,
                "result": {"content": f"content {n}", "view": None}}]
    return Bundle.build(manifest(1, 0, str(n)), [], results)


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def alternate(repeat: int, measured: Callable[[], Any], floor: Callable[[], Any],
              before: Callable[[], Any] = lambda: None) -> tuple[float, float]:
    a, b = [], []
    for _ in range(repeat):
        before()
        a.append(timed(measured))
        before()
        b.append(timed(floor))
    return statistics.median(a), statistics.median(b)


def report(what: str, m: float, f: float) -> None:
    print(f"  {what:44} {m * 1000:9.2f} ms   raw {f * 1000:9.2f} ms   ratio {m / f:6.2f}×", flush=True)


def bench_file(big: Bundle, smalls: list[Bundle], repeat: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="flux-bench-cases-"))
    try:
        print(f"file store ({root})")
        d = root / "save"
        raw_dir = root / "raw"
        raw_dir.mkdir()
        blob = compress(big.data)

        def reset() -> None:
            shutil.rmtree(d, ignore_errors=True)
            for p in raw_dir.iterdir():
                p.unlink()

        def raw_save() -> None:
            (raw_dir / "x").write_bytes(big.data)

        m, f = alternate(repeat, lambda: FileStore(d).put(big), raw_save, reset)
        report(f"save {len(big.results):,}-call bundle ({big.size / 1e6:.1f} MB)", m, f)
        st = FileStore(d)
        st.put(big)
        (raw_dir / "x").write_bytes(blob)
        m, f = alternate(repeat, lambda: st.get(big.hash), lambda: (raw_dir / "x").read_bytes())
        report(f"load it ({len(blob) / 1e6:.2f} MB stored)", m, f)
        m, f = alternate(repeat, lambda: st.get(big.hash),
                         lambda: json.loads(gzip.decompress((raw_dir / "x").read_bytes())))
        report("load it vs read + gunzip + json.loads", m, f)
        lst = FileStore(root / "many")
        for b in smalls:
            lst.put(b)
        assert len(lst.list()) == len(smalls)

        def raw_list() -> list[bytes]:
            return [open(e.path, "rb").read() for e in os.scandir(lst.dir) if e.name.endswith(".summary.json")]

        m, f = alternate(repeat, lst.list, raw_list)
        report(f"list {len(smalls):,} bundles", m, f)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def bench_postgres(big: Bundle, smalls: list[Bundle], repeat: int) -> None:
    from flux.cases.postgres import PostgresStore, migrate

    from tests.servers import PostgresServer

    with PostgresServer() as pg:
        print(f"postgres store ({pg.dsn})")
        migrate(pg.dsn)
        st = PostgresStore(pg.dsn)
        conn = st.conn
        conn.execute("CREATE TABLE raw (k TEXT PRIMARY KEY, v BYTEA)")
        blob = compress(big.data)

        def reset() -> None:
            conn.execute("DELETE FROM flux_cases.bundles")
            conn.execute("DELETE FROM raw")

        m, f = alternate(repeat, lambda: st.put(big),
                         lambda: conn.execute("INSERT INTO raw VALUES ('x', %s)", (big.data,)), reset)
        report(f"save {len(big.results):,}-call bundle ({big.size / 1e6:.1f} MB)", m, f)
        reset()
        st.put(big)
        conn.execute("INSERT INTO raw VALUES ('x', %s)", (blob,))
        m, f = alternate(repeat, lambda: st.get(big.hash),
                         lambda: bytes(conn.execute("SELECT v FROM raw WHERE k = 'x'").fetchone()[0]))
        report(f"load it ({len(blob) / 1e6:.2f} MB stored)", m, f)
        m, f = alternate(repeat, lambda: st.get(big.hash), lambda: json.loads(gzip.decompress(bytes(
            conn.execute("SELECT v FROM raw WHERE k = 'x'").fetchone()[0]))))
        report("load it vs SELECT + gunzip + json.loads", m, f)
        reset()
        with conn.transaction():
            for b in smalls:
                st._write(b.hash, compress(b.data), b.summary())
        assert len(st.list()) == len(smalls)
        m, f = alternate(repeat, st.list,
                         lambda: conn.execute("SELECT hash, stored_bytes, summary::text FROM flux_cases.bundles").fetchall())
        report(f"list {len(smalls):,} bundles", m, f)
        st.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--bundles", type=int, default=10_000)
    ap.add_argument("--only", choices=["file", "postgres"], default=None)
    args = ap.parse_args()
    big = big_bundle(args.calls)
    smalls = [small_bundle(n) for n in range(args.bundles)]
    print(f"{args.calls:,}-call bundle: {big.size / 1e6:.1f} MB canonical, {len(compress(big.data)) / 1e6:.2f} MB "
          f"gzip; {args.bundles:,} small bundles; medians of {args.repeat}")
    if args.only in (None, "file"):
        bench_file(big, smalls, args.repeat)
    if args.only in (None, "postgres"):
        bench_postgres(big, smalls, args.repeat)


if __name__ == "__main__":
    main()
