"""SIGKILL during `flux resurrect -y` (a real process, real `bash`/`append` ops in a temp
workspace), then resurrect again until the turn is finished. After every kill: the store is
readable (`flux show`, `flux sessions` exit 0, no traceback); every op whose cell was durable at the
kill is never run again (its side effect stays exactly once); at most the one op in flight at the
kill runs twice. At the end, every statement's side effect is there at least once and the session
replays.

  .venv/bin/python benchmarks/compat/resurrect_kill.py --trials 10 --seed 1
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from flux.canonical import canonical_json, sha256_hex
from flux.lang.hashes import flow_key, stmt_hash16
from flux.lang.parser import parse
from flux.store import Message, OpRecorded, PlanAttempted, Run, StatementCompleted, StepStarted, StepSucceeded, StoreWriter

FLUX = str(Path(sys.executable).parent / "flux")


def build(store: Path, rng, n: int) -> str:
    ops = []
    for k in range(n):
        if rng.random() < 0.5:
            ops.append(("bash", {"command": f"sleep 0.0{rng.randrange(1, 6)}; echo L{k} >> kill.log"}))
        else:
            ops.append(("append", {"path": "kill.log", "content": f"L{k}\n"}))
    text = "flow\n" + "".join(f"  s{k} = {op}({canonical_json(v)})\n" for k, (op, v) in enumerate(ops))
    draft = parse(text)
    key = flow_key(draft.name, draft.body)
    resumable = rng.random() < 0.5
    done = rng.randrange(n)
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        w.append(sid, Message.text("user", "go"))
        tid = w.begin_turn(sid, "go", "mock")
        w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=text), turn_id=tid)
        for k in range(done):
            op, v = ops[k]
            h = sha256_hex(canonical_json(v))
            step = f"step_{op}_{h[:16]}"
            w.append(sid, Run(StepStarted(step=step, op=op, input_hash=h)))
            w.append(sid, Run(OpRecorded(seq=k, step=step, op=op, input_hash=h, input_view=canonical_json(v),
                                         content="ok")))
            w.append(sid, Run(StepSucceeded(step=step, output=f"v_{k + 1}")))
            if resumable:
                w.append(sid, Run(StatementCompleted(plan=key, node=k, stmt=stmt_hash16(draft.body[k]), value=f"v_{k + 1}")))
    return sid, ops, done


def cells(store: Path) -> set:
    con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True)
    try:
        out = set()
        for (p,) in con.execute("SELECT payload FROM events WHERE payload LIKE '%op_recorded%'"):
            import json
            d = json.loads(p)["data"]
            out.add(d["input_hash"])
        return out
    finally:
        con.close()


def lines(ws: Path) -> collections.Counter:
    p = ws / "kill.log"
    return collections.Counter(p.read_text().split()) if p.exists() else collections.Counter()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="compat-kill-"))
    bad = kills = 0
    try:
        for t in range(a.trials):
            rng = random.Random(a.seed * 1000 + t)
            store, ws = tmp / f"s{t}", tmp / f"w{t}"
            ws.mkdir()
            n = rng.randrange(6, 16)
            sid, ops, done = build(store, rng, n)
            hashes = {f"L{k}": sha256_hex(canonical_json(v)) for k, (op, v) in enumerate(ops)}
            # the pre-recorded cells' side effects happened before the crash
            with open(ws / "kill.log", "w") as f:
                f.write("".join(f"L{k}\n" for k in range(done)))
            rounds = 0
            while True:
                rounds += 1
                before_cells = cells(store)
                before = lines(ws)
                p = subprocess.Popen([FLUX, "resurrect", sid, "-y", "--store", str(store), "--workspace", str(ws)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
                killed = False
                if rounds < 6 and rng.random() < 0.8:
                    time.sleep(rng.uniform(0.15, 0.9))
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)
                        killed = True
                        kills += 1
                out, err = p.communicate()
                if not killed and p.returncode != 0:
                    print(f"trial {t} round {rounds}: rc {p.returncode} {err[-400:]!r}")
                    bad += 1
                    break
                if "Traceback" in err:
                    print(f"trial {t}: traceback {err[-400:]!r}")
                    bad += 1
                after = lines(ws)
                for name, h in hashes.items():
                    if h in before_cells and after[name] != before[name]:
                        print(f"trial {t} round {rounds}: {name} had a cell but ran again ({before[name]} -> {after[name]})")
                        bad += 1
                reran = [x for x in after if after[x] - before[x] > 1]
                if reran:
                    print(f"trial {t} round {rounds}: ran more than once in one resurrect: {reran}")
                    bad += 1
                for verb in (["show", sid], ["sessions"]):
                    r = subprocess.run([FLUX, *verb, "--store", str(store)], capture_output=True, text=True)
                    if r.returncode != 0 or "Traceback" in r.stderr:
                        print(f"trial {t} round {rounds}: {verb[0]} rc {r.returncode} {r.stderr[-300:]!r}")
                        bad += 1
                if not killed:
                    break
                # one op at most was in flight at the kill: its effect may be there without its cell
            final = lines(ws)
            missing = [f"L{k}" for k in range(n) if final[f"L{k}"] < 1]
            dup = {x: c for x, c in final.items() if c > 1}
            r = subprocess.run([FLUX, "replay", sid, "--store", str(store)], capture_output=True, text=True)
            if missing or len(dup) > rounds - 1 or r.returncode != 0:
                print(f"trial {t}: missing {missing} dup {dup} rounds {rounds} replay rc {r.returncode} {r.stdout[-200:]!r}"
                      f"{r.stderr[-300:]!r}")
                bad += 1
            print(f"trial {t}: n={n} done={done} rounds={rounds} dup={dup}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"trials={a.trials} kills={kills} violations={bad}")


if __name__ == "__main__":
    main()
