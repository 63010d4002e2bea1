"""replay / show / diff by two versions of flux (old: --old core/, new: --new core/, default this
checkout) on stores *recorded* by `flux run -m scripted:FILE` (benchmarks/compat/record_diff.py's hostile
answers: adaptive turns, one host call per tool call — the detailed replay's fused case), some then
corrupted by raw SQL (benchmarks/compat/resurrect_diff.py's CORRUPT list, deleted rows, swapped payloads,
a cut turn): every verb and flag worker_cli.py answers, and replay_session(detail=True/False, per
turn) compared field by field through repr (types included).

  .venv/bin/python benchmarks/compat/replay_diff.py --old /tmp/old/core --n 40 --seed 1
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostplan_diff as G  # noqa: E402
import record_diff as RD  # noqa: E402
from resurrect_diff import CORRUPT, REPO  # noqa: E402
from resurrect_diff import Worker as CliWorker  # noqa: E402


def record(store: Path, ws: Path, rng, wk) -> None:
    """A session of 1-3 turns recorded by the new version from scripted hostile answers."""
    ws.mkdir()
    (ws / "bin.dat").write_bytes(b"\x00\xff bin")
    sid = None
    for t in range(rng.randint(1, 3)):
        sc = store.parent / f"script{t}.json"
        sc.write_text(json.dumps(RD.script(rng)))
        args = ["run", f"turn {t}", "-m", f"scripted:{sc}", "--store", str(store), "--workspace", str(ws), "-y"]
        if sid:
            args += ["--continue"]
        wk.cli(args)
        sid = "s_1"


def corrupt(store: Path, rng) -> None:
    con = sqlite3.connect(store / "events.db")
    try:
        rows = con.execute("SELECT global_seq, payload FROM events ORDER BY global_seq").fetchall()
        hot = [r for r in rows if "op_recorded" in r[1] or "plan_attempted" in r[1] or "statement_completed" in r[1]]
        for _ in range(rng.randint(1, 3)):
            gs, p = rng.choice(hot if hot and rng.random() < 0.85 else rows)
            how = rng.randrange(len(CORRUPT) + 3)
            if how == len(CORRUPT):
                con.execute("DELETE FROM events WHERE global_seq = ?", (gs,))
            elif how == len(CORRUPT) + 1:
                con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (rng.choice(rows)[1], gs))
            elif how == len(CORRUPT) + 2:  # the recording cut here (a kill): everything after it gone
                con.execute("DELETE FROM events WHERE global_seq >= ?", (gs,))
            else:
                con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (CORRUPT[how](p), gs))
        con.commit()
    finally:
        con.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", default=str(REPO / "core"))
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    recorder = CliWorker(a.new)
    old, new = G.Worker(a.old), G.Worker(a.new)
    tmp = Path(tempfile.mkdtemp(prefix="compat-rep-"))
    compared = differ = 0
    kinds = {}
    try:
        for n in range(a.n):
            rng = random.Random(a.seed * 4241 + n)
            store = tmp / "store"
            shutil.rmtree(store, ignore_errors=True)
            shutil.rmtree(tmp / "ws", ignore_errors=True)
            record(store, tmp / "ws", rng, recorder)
            if not (store / "events.db").exists():
                continue
            if rng.random() < 0.5:
                corrupt(store, rng)
            sid = "s_1"
            with sqlite3.connect(store / "events.db") as con:
                turns = con.execute("SELECT COUNT(*) FROM events WHERE kind='turn_started'").fetchone()[0]
            reqs = [{"op": "cli", "args": ["replay", sid, "--store", str(store)] + extra}
                    for extra in ([], ["--json"], ["--strict"], ["--json", "--strict"])]
            reqs += [{"op": "cli", "args": ["replay", sid, "--store", str(store), "--turn", str(t), "--json"]}
                     for t in range(0, turns + 2)]
            reqs += [{"op": "cli", "args": ["replay", sid, "--store", str(store), "--turn", str(t)]}
                     for t in range(1, turns + 1)]
            reqs += [{"op": "cli", "args": ["show", sid, "--store", str(store)]},
                     {"op": "cli", "args": ["show", sid, "--store", str(store), "--json"]},
                     {"op": "cli", "args": ["diff", sid, "last", "--store", str(store), "--json"]},
                     {"op": "cli", "args": ["diff", sid, "last", "--store", str(store)]}]
            reqs += [{"op": "api", "store": str(store), "sid": sid, "detail": d} for d in (True, False)]
            reqs += [{"op": "api", "store": str(store), "sid": sid, "detail": True, "turn": t} for t in range(1, turns + 1)]
            for req in reqs:
                x, y = old.ask(req), new.ask(req)
                compared += 1
                k = (req["op"], str(y)[:12])
                kinds[k] = kinds.get(k, 0) + 1
                crash = y[0] == "crash" if req["op"] == "api" else y[2] is not None
                if x != y or crash:
                    differ += 1
                    keep = Path(f"/tmp/compat-rep-keep-{a.seed}-{n}")
                    if not keep.exists():
                        shutil.copytree(store, keep)
                    print("DIFF" if x != y else "CRASH", keep, json.dumps(req)[:200])
                    print("  old:", str(x)[:700])
                    print("  new:", str(y)[:700])
    finally:
        for w in (old, new, recorder):
            w.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"compared {compared} requests on {a.n} recorded stores, {differ} differ/crash")
    for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])[:12]:
        print(" ", v, k)


if __name__ == "__main__":
    main()
