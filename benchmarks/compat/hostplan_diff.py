"""hostile resumably recorded sessions replayed by two versions of flux (old: a core/ given by
--old, new: this checkout), compared command by command: `flux replay` (text, --json, --strict,
--turn N), `flux show`, `flux diff`, and replay_session(detail=True/False).

  .venv/bin/python benchmarks/compat/hostplan_diff.py --old /tmp/old/core --n 200 --seed 1
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from flux.canonical import canonical_json, sha256_hex  # noqa: E402
from flux.lang import ast as A  # noqa: E402
from flux.lang.hashes import flow_key, stmt_hash16  # noqa: E402
from flux.lang.interpreter import interpolate  # noqa: E402
from flux.lang.parser import parse  # noqa: E402
from flux.timemachine.replay_direct import HostPlan, direct_plan  # noqa: E402
PLANS = [0, 0]
KINDS = {}
from flux.store import (  # noqa: E402
    OpRecorded, PlanAttempted, PlanHalted, Run, StatementCompleted, StoreWriter, TurnEnded,
)

NAMES = ["a", "b", "c"] * 6 + ["$a", "_x", "when", "$when", "a1"]
OPS = ["read", "grep", "bash", "write"] * 8 + ["fs.read-all", "fmt", "each"]
STRS = ["x", "{a}", "{b}", "{c}", "{{a}}", "a}}", "{zz}", "{a", "{", "}", "é", "\u2028", "\x7f", 'q"t', "b\\s",
        "\n", "\t", "[redacted]", "{_x}", "{a1}", "", "\ufffd", "😀", "{when}"]
NUMS = [0, 1, -5, 10 ** 17, -(10 ** 17), 1.5, -0.0, 0.1, 1e300, 2.5e-300]
KEYS = ["path", "q", "n", "a", "z", "é", "{a}", "", "A", "b"]


def value(rng, depth=0):
    r = rng.random()
    if depth < 3 and r < 0.15:
        return {rng.choice(KEYS): value(rng, depth + 1) for _ in range(rng.randint(0, 2))}
    if depth < 3 and r < 0.22:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 2))]
    if r < 0.7:
        return rng.choice(STRS) + (rng.choice(STRS) if rng.random() < 0.3 else "")
    if r < 0.9:
        return rng.choice(NUMS)
    return rng.choice([True, False, None])


ONE = [False]  # --one : one-statement host calls too (an adaptive turn's plans; the fused detailed replay's case)
CLEAN = [False]  # a session replay and fork take in full: canonical plans, a faithful tape, rows as recorded


def spell(rng, obj):
    text = canonical_json(obj)
    how = 0.0 if CLEAN[0] else rng.random()
    if how < 0.88:
        return text
    alts = [
        lambda t: t.replace(":", ": ", 1),
        lambda t: t.replace("é", "\\u00e9", 1),
        lambda t: t[:-1] + ',"path":1}' if len(t) > 2 else t,  # a duplicate / unsorted key maybe
        lambda t: t.replace("1.5", "1.50", 1).replace("0.1", "1e-1", 1),
        lambda t: t.replace('"x"', '"""x"""', 1),
        lambda t: t.replace('"x"', '"\\ud800"', 1),
        lambda t: t.replace('"x"', '"\\u0078"', 1),
        lambda t: t.replace("0", "-0", 1),
        lambda t: t.replace("1", "1e400", 1),
        lambda t: t.replace("100000000000000000", "1000000000000000000", 1),
        lambda t: t[:-1] + ',"zz":{"x":' + "[" * 130 + "]" * 130 + "}}" if len(t) > 2 else t,
    ]
    return rng.choice(alts)(text)


def plan_text(rng, stmts):
    lines = [f"  {n} = {op}({arg})" for n, op, arg in stmts]
    text = "flow\n" + "\n".join(lines) + ("\n" if rng.random() < 0.9 else "")
    r = 1.0 if CLEAN[0] else rng.random()
    if r < 0.03:
        text = text.replace("\n  ", "\n  # c\n  ", 1)
    elif r < 0.05:
        text = text + "\n"
    elif r < 0.07:
        i = rng.randrange(len(text))
        text = text[:i] + rng.choice(['"', "{", "}", "\\", "\r", " ", "\n", "\ud800"]) + text[i:]
    return text


def content(rng, name, n):
    return rng.choice([f"out-{name}-{n}", "{a}", "é{b}", '{"k":1}', "[redacted]", "", "x}}{{y", "\ud800z",
                       f"v{n}" * rng.randint(1, 3)])


def build_session(w, rng):
    sid = w.create_session("mock")
    bound = {}
    pool = []
    for _ in range(rng.randint(1, 3)):
        stmts = []
        for _ in range(rng.randint(1, 4) if ONE[0] and rng.random() < 0.6 else rng.randint(2, 4)):
            obj = {rng.choice(KEYS): value(rng) for _ in range(rng.randint(0, 3))}
            ops = ["read", "grep"] if CLEAN[0] else OPS
            names = ["a", "b", "c", "$a", "_x", "a1"] if CLEAN[0] else NAMES
            stmts.append((rng.choice(names), rng.choice(ops), spell(rng, obj)))
        pool.append(plan_text(rng, stmts))
        if rng.random() < 0.5:  # a sibling sharing a prefix (a fast-forward over another plan's latch)
            cut = rng.randint(1, len(stmts))
            more = [(rng.choice(NAMES), rng.choice(OPS), spell(rng, {rng.choice(KEYS): value(rng)}))
                    for _ in range(rng.randint(0, 2))]
            pool.append(plan_text(rng, stmts[:cut] + more))
        if rng.random() < 0.15:  # a checkpointed plan (the interpreter's), its latch read by the direct path
            lines = [f"  {n} = {op}({arg})" for n, op, arg in stmts]
            lines.insert(rng.randint(0, len(lines)), '  checkpoint "c"')
            pool.append("flow\n" + "\n".join(lines) + "\n")
    for t in range(rng.randint(1, 3)):
        tid = w.begin_turn(sid, f"turn {t}", "mock")
        for k in range(rng.randint(1, 4)):
            text = rng.choice(pool)
            try:
                draft = parse(text)
                key = flow_key(draft.name, draft.body)
            except Exception:  # noqa: BLE001 - a plan the parser refuses: stored anyway
                draft, key = None, "h:" + "ab" * 8
            stored = text
            if rng.random() < 0.05 and not CLEAN[0]:
                stored = text.replace('"x"', '"[redacted]"', 1)
            outcome = rng.choice(["accepted"] * 8 + ["rejected"])
            w.append(sid, PlanAttempted(step=k + 1, outcome=outcome, plan_source=stored), turn_id=tid)
            if draft is None or outcome != "accepted":
                continue
            rows = []
            n_ok = 0
            for i, node in enumerate(draft.body):
                if isinstance(node, A.Checkpoint):
                    continue
                if not (isinstance(node, A.Bind) and isinstance(node.value, A.Call) and node.value.args
                        and isinstance(node.value.args[0], A.Lit) and isinstance(node.value.args[0].value, dict)):
                    break
                inp = interpolate_json(node.value.args[0].value, bound)
                oc = rng.choice(["ok"] * 8 + ["error", "denied", "truncated", "wrong", "twice", "missing", "drop"]) \
                    if not CLEAN[0] else rng.choice(["ok"] * 12 + ["error", "denied"])
                if oc == "missing":
                    break
                if oc == "wrong":
                    inp = {"other": 1}
                c = content(rng, node.name, len(bound))
                ih = sha256_hex(canonical_json(inp))
                ev = OpRecorded(step=f"step_{node.value.op}_{ih[:16]}", op=node.value.op, input_hash=ih,
                                input_view=canonical_json(inp), content=c, is_error=oc == "error",
                                denied=oc == "denied", truncated=oc == "truncated")
                if oc != "drop":
                    for _ in range(2 if oc == "twice" else 1):
                        w.append(sid, Run(ev))
                stmt = stmt_hash16(node)
                if oc in ("ok", "twice", "drop"):
                    bound[node.name] = c
                    n_ok += 1
                    rows.append(StatementCompleted(plan=key, node=i, stmt=stmt, value=f"v_{len(bound)}"))
                else:
                    rows.append(PlanHalted(plan=key, node=i, stmt=stmt, op=node.value.op, kind="runtime", error="e"))
                    break
            # ledger rows that disagree with the plan
            r = 1.0 if CLEAN[0] else rng.random()
            if r < 0.06 and rows:
                rows.append(rows[-1])  # duplicated
            elif r < 0.12 and rows:
                rows.reverse()
            elif r < 0.17:
                rows.append(StatementCompleted(plan=key, node=len(draft.body) + rng.randint(0, 2), stmt="0" * 16))
            elif r < 0.22 and rows:
                rows[0] = StatementCompleted(plan=key, node=0, stmt="1" * 16, skipped=True)
            elif r < 0.27 and rows:
                rows.insert(rng.randrange(len(rows)), PlanHalted(plan=key, node=0, stmt=rows[0].stmt, op="read"))
            elif r < 0.31 and rows:
                rows = rows[:-1]
            elif r < 0.35:
                rows.append(StatementCompleted(plan=key, node=0, stmt=getattr(rows[0], "stmt", "2" * 16) if rows
                                               else "2" * 16, skipped=True))
            for row in rows:
                w.append(sid, Run(row))
            if rng.random() < 0.1 and not CLEAN[0]:  # a retry of the same plan, all ok
                w.append(sid, PlanAttempted(step=k + 1, outcome="accepted", plan_source=stored), turn_id=tid)
        if rng.random() < 0.75:
            w.append(sid, TurnEnded(outcome=rng.choice(["ok", "ok", "error", "interrupted"]), answer="done"),
                     turn_id=tid)
    return sid


def interpolate_json(v, bound):
    if isinstance(v, str):
        return interpolate(v, bound)
    if isinstance(v, list):
        return [interpolate_json(x, bound) for x in v]
    if isinstance(v, dict):
        return {k: interpolate_json(x, bound) for k, x in v.items()}
    return v


class Worker:
    def __init__(self, core):
        env = dict(os.environ, PYTHONPATH=core)
        self.p = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "compat" / "worker_cli.py")], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=env, cwd="/tmp")

    def ask(self, req):
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", default=str(REPO / "core"), help="the core/ of the new version (default: this checkout)")
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", default=None)
    ap.add_argument("--one", action="store_true", help="also one-statement plans (host calls)")
    args = ap.parse_args()
    ONE[0] = args.one
    old, new = Worker(args.old), Worker(args.new)
    tmp = Path(tempfile.mkdtemp(prefix="compat-hostplan-"))
    rng = random.Random(args.seed)
    compared = differ = 0
    try:
        for n in range(args.n):
            store = tmp / f"s{n}"
            with StoreWriter(store) as w:
                sids = [build_session(w, rng) for _ in range(rng.randint(1, 2))]
            with sqlite3.connect(store / "events.db") as con:
                for (p,) in con.execute("SELECT payload FROM events WHERE kind = 'plan_attempted'"):
                    src = json.loads(p)["data"].get("plan_source")
                    PLANS[0] += 1
                    PLANS[1] += type(direct_plan(src)) is HostPlan
            for sid in sids:
                with sqlite3.connect(store / "events.db") as con:
                    turns = con.execute("SELECT COUNT(*) FROM events WHERE stream=? AND kind='turn_started'",
                                        (sid,)).fetchone()[0]
                reqs = [{"op": "cli", "args": ["replay", sid, "--store", str(store)] + extra}
                        for extra in ([], ["--json"], ["--strict"], ["--json", "--strict"])]
                reqs += [{"op": "cli", "args": ["replay", sid, "--store", str(store), "--turn", str(t), "--json"]}
                         for t in range(0, turns + 2)]
                cat = store / "catalog.json"
                cat.write_text(json.dumps(rng.choice([{"read": {}, "grep": {"required": ["q"]}, "bash": {}, "write": {}},
                                                      {"read": {"optional": ["path"]}, "grep": {}}])))
                reqs += [{"op": "cli", "args": ["replay", sid, "--store", str(store), "--catalog", str(cat)] + extra}
                         for extra in ([], ["--json", "--strict"])]
                reqs += [{"op": "cli", "args": ["show", sid, "--store", str(store)]},
                         {"op": "cli", "args": ["diff", sid, "last", "--store", str(store), "--json"]}]
                reqs += [{"op": "api", "store": str(store), "sid": sid, "detail": d} for d in (True, False)]
                reqs += [{"op": "api", "store": str(store), "sid": sid, "detail": True, "turn": t}
                         for t in range(1, turns + 1)]
                for req in reqs:
                    a, b = old.ask(req), new.ask(req)
                    compared += 1
                    if req["op"] == "api":
                        KINDS[str(b)[:8]] = KINDS.get(str(b)[:8], 0) + 1
                    crash = b[0] == "crash" if req["op"] == "api" else b[2] is not None
                    if a != b or crash:
                        differ += 1
                        keep = Path(args.keep or "/tmp/compat-hostplan-keep") / f"s{args.seed}_{n}"
                        if not keep.exists():
                            shutil.copytree(store, keep)
                        print("DIFF" if a != b else "CRASH", keep, sid, json.dumps(req)[:200])
                        print("  old:", str(a)[:600])
                        print("  new:", str(b)[:600])
            shutil.rmtree(store)
    finally:
        old.close()
        new.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"compared {compared} requests on {args.n} stores, {differ} differ/crash; plans {PLANS[0]}, host plans {PLANS[1]}", KINDS)


if __name__ == "__main__":
    main()
