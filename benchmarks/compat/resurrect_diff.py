"""`flux resurrect` by two versions of flux (old: a core/ given by --old, new: this checkout) on
generated interrupted sessions that use the real coding ops (read/write/append/edit/grep/bash) in a
temp workspace: the same stdout/stderr/exit code, the same rows (ULIDs and timestamps aside), the
same workspace afterwards; a failing resurrect (exit 1) writes no row.

Sessions: canonical host plans (the direct path) and not (spaces, `$` names, triple quotes),
resumable or not, killed anywhere in the plan (the op in flight with or without its cell), cells
spoiled (error, denied, truncated, diverged, redacted), hostile content (lone surrogates, NUL, huge
numbers, deep nesting, JSON-looking text), placeholders into earlier statements, and corruption
made by raw SQL on the stored rows (payloads not JSON, wrong types, a plan_source not text, junk).
Each session is resurrected with and without -y, as text and --json.

  .venv/bin/python benchmarks/compat/resurrect_diff.py --old /tmp/old/core --n 100 --seed 1
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

from flux.canonical import canonical_json, sha256_hex  # noqa: E402
from flux.errors import FluxError  # noqa: E402
from flux.lang.hashes import flow_key, stmt_hash16  # noqa: E402
from flux.lang.interpreter import interpolate_json  # noqa: E402
from flux.lang.parser import parse  # noqa: E402
from flux.store import (  # noqa: E402
    CheckpointReached, Message, OpRecorded, PlanAttempted, Run, StatementCompleted, StepFailed, StepStarted,
    StepSucceeded, StoreWriter, TurnEnded,
)

HOSTILE = ["plain", "lone \udc80 surrogate", "hi \ud800", "ctl \x00\x1b[31m\x7f", '{"json":"looking","n":[1,2]}',
           "é ü\n\ttab", "", "{{braces}} {x}", "x" * 300, "\u2028\u2029\x85", "1e400", "-0", "[" * 50]
SECRET = "compat-SECRETSECRET-98765"  # registered through the environment (COMPAT_API_KEY): in no row, before or after
_ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")
_TS = re.compile(r"\b1[0-9]{12}\b")
_DUR = re.compile(r'"(\w+_us|\w+_ms|elapsed\w*)":[0-9.]+')


def stmt_for(rng, k, bound):
    """(op, input dict) of statement k: a real coding op on the temp workspace."""
    ref = ("{" + rng.choice(bound) + "}") if bound and rng.random() < 0.25 else ""
    c = rng.choice(["x", "two words\n", 'q"uote', "é", "tab\tstop", "line\nbreak", "\u2028", "NUL?", SECRET]) + ref
    r = rng.random()
    if r < 0.3:
        return "append", {"path": rng.choice(["log.txt", "d/log.txt", "sub/../log2.txt"]), "content": f"{k}:{c}\n"}
    if r < 0.5:
        return "write", {"path": f"out/{k}.txt", "content": c}
    if r < 0.65:
        return "read", {"path": rng.choice(["seed.txt", "out/0.txt", "missing.txt", "log.txt"])}
    if r < 0.75:
        return "grep", {"pattern": rng.choice(["seed", "x", "("]), "path": "."}
    if r < 0.85:
        return "bash", {"command": rng.choice([f"echo {k} >> bash.log", "exit 3", f"printf 'b{k}\\n' >> bash.log",
                                               "echo $COMPAT_API_KEY", "printf '\\000\\377'"])}
    return "edit", {"path": "seed.txt", "old": rng.choice(["seed", "nope"]), "new": f"SEED{k}"}


def line(rng, name, op_, value, canonical, one):
    arg = canonical_json(value)
    style = rng.randrange(1, 8) if canonical else rng.randrange(3)
    if style == 0:
        arg = "{" + ", ".join(f"{canonical_json(k)}: {canonical_json(x)}" for k, x in value.items()) + "}"
    elif style == 2 and one and "path" in value and "\n" not in value["path"]:
        arg = arg.replace('"path":' + canonical_json(value["path"]), '"path":"""' + value["path"] + '"""', 1)
    sym = "$" + name if style == 1 else name
    return f"  {sym} = {op_}({arg})\n"


def cell(rng, op_, inp, k):
    ij = canonical_json(inp)
    h = sha256_hex(ij)
    kind = rng.choices(("ok", "error", "denied", "truncated", "diverged", "redacted"), (10, 1, 1, 1, 1, 1))[0]
    content = rng.choice(HOSTILE) + f" #{k}"
    if kind == "diverged":
        h = sha256_hex(ij + "old")
    red = None
    if kind == "redacted":
        red, h = h, sha256_hex(ij + "secret")
    return OpRecorded(seq=k, step=f"step_{op_}_{h[:16]}", op=op_, input_hash=h, input_hash_redacted=red,
                      input_view=ij, content=content, is_error=kind == "error", denied=kind == "denied",
                      truncated=kind == "truncated", redacted=red is not None), kind


def session(w, rng):
    sid = w.create_session("mock")
    if rng.random() < 0.3:
        w.append(sid, Message.text("user", "before"))
        t0 = w.begin_turn(sid, "before", "mock")
        w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=t0)
    w.append(sid, Message.text("user", "build"))
    tid = w.begin_turn(sid, "build", "mock")
    resumable = rng.random() < 0.5
    n = rng.choice((1, 2, 3, 5, 8))
    canonical = rng.random() < 0.8
    lines, stmts, bound = [], [], []
    for k in range(n):
        name = rng.choice(("a", "out_", "_x", "Data")) + str(k)
        op_, value = stmt_for(rng, k, bound)
        lines.append(line(rng, name, op_, value, canonical, n == 1))
        stmts.append((op_, value))
        bound.append(name)
    text = "flow\n" + "".join(lines)
    if rng.random() < 0.04:
        text = text[:-3]
    if rng.random() < 0.15:
        w.append(sid, PlanAttempted(step=1, outcome="rejected", plan_source="flow\n  nope"), turn_id=tid)
    w.append(sid, PlanAttempted(step=2, outcome="accepted", plan_source=text), turn_id=tid)
    try:
        draft = parse(text)
    except FluxError:
        return sid
    key = flow_key(draft.name, draft.body)
    symbols = {}
    killed = rng.randrange(n + 1)
    vid = 0
    for k in range(killed + 1):
        if k == n:
            break
        op_ = stmts[k][0]
        inp = interpolate_json(draft.body[k].value.args[0].value, symbols)
        h = sha256_hex(canonical_json(inp))
        step = f"step_{op_}_{h[:16]}"
        w.append(sid, Run(StepStarted(step=step, op=op_, input_hash=h)))
        if k == killed:
            if rng.random() < 0.5:
                w.append(sid, Run(cell(rng, op_, inp, k)[0]))
            break
        c, kind = cell(rng, op_, inp, k)
        w.append(sid, Run(c))
        if c.is_error or c.denied:
            w.append(sid, Run(StepFailed(step=step, error=c.content)))
            break
        vid += 1
        w.append(sid, Run(StepSucceeded(step=step, output=f"v_{vid}")))
        symbols[draft.body[k].name] = c.content
        if resumable and rng.random() < 0.9:
            w.append(sid, Run(StatementCompleted(plan=key, node=k, stmt=stmt_hash16(draft.body[k]), value=f"v_{vid}")))
    if resumable and rng.random() < 0.3:
        w.append(sid, Run(CheckpointReached(flow_key=key, label="cp", node=rng.randrange(min(killed, n - 1), n))))
    return sid


CORRUPT = [
    lambda p: "not json",
    lambda p: p[:-5],
    lambda p: p.replace('"content":"', '"content":"\\ud800', 1),
    lambda p: p.replace('"content":"', '"content":"\\u0000', 1),
    lambda p: re.sub(r'"content":"[^"]*"', '"content":12', p, 1),
    lambda p: re.sub(r'"step":"[^"]*"', '"step":7', p, 1),
    lambda p: re.sub(r'"input_hash":"[^"]*"', '"input_hash":null', p, 1),
    lambda p: re.sub(r'"is_error":(true|false)', '"is_error":"no"', p, 1),
    lambda p: p.replace('"seq":', '"seq":1e400,"x":', 1),
    lambda p: p.replace('"data":{', '"data":{"deep":' + "[" * 3000 + "]" * 3000 + ",", 1),
    lambda p: p.replace('"data":{', '"data":{"n":123456789012345678901234567890,', 1),
    lambda p: p.replace('"event":"', '"event":"x', 1),
    lambda p: p.replace('"plan_source":"', '"plan_source":"\\u0000', 1),
    lambda p: re.sub(r'"plan_source":"[^"]*"', '"plan_source":5', p, 1),
    lambda p: p.replace('"plan_source":"', '"plan_source":"\\ud800', 1),
    lambda p: p.replace('"kind":"run"', '"kind":"message"', 1),
    lambda p: p.replace('"outcome":"accepted"', '"outcome":"accepted ', 1),
    lambda p: p.replace('"node":', '"node":-', 1),
    lambda p: p.replace('"stmt":"', '"stmt":"0', 1),
    lambda p: p.replace('"value":"v_', '"value":"w_', 1),
    # what a decoder sees first (ledger6's scan_once read): whitespace, BOM, trailing data, NaN, duplicates, depth
    lambda p: " " + p,
    lambda p: p + "\n",
    lambda p: p + " x",
    lambda p: p + p,
    lambda p: "\ufeff" + p,
    lambda p: p.replace('"data":{', '"data":{"nan":NaN,"inf":-Infinity,', 1),
    lambda p: p.replace('"event":', '"event":"plan_halted","event":', 1),
    lambda p: p.replace('"kind":', '"kind":"run","kind":', 1),
    lambda p: p.replace('"data":{', '"data":{"\\ud800":1,', 1),
    lambda p: p.replace('"data":{', '"data":{"d":' + "[" * 510 + "]" * 510 + ",", 1),
    lambda p: p.replace('"data":{', '"data":{"d":' + "[" * 511 + "]" * 511 + ",", 1),
    lambda p: p.replace('"data":{', '"data":{"d":' + "[" * 700 + "]" * 700 + ",", 1),
    lambda p: p.replace('"data":{', '"data":{"d":"' + "[" * 600 + '",', 1),
    lambda p: p.replace('"data":{', '"data":{"n":' + "9" * 5000 + ",", 1),
    lambda p: p.replace('"content":"', '"content":"\\', 1),
    lambda p: p.replace('"content":"', '"content":"\\\\u', 1),
]


def corrupt(store: Path, rng):
    con = sqlite3.connect(store / "events.db")
    try:
        rows = con.execute("SELECT global_seq, payload FROM events ORDER BY global_seq").fetchall()
        hot = [r for r in rows if '"run"' in r[1] or "plan_attempted" in r[1]]
        for _ in range(rng.randint(1, 3)):
            gs, p = rng.choice(hot if hot and rng.random() < 0.85 else rows)
            if type(p) is not str:
                continue
            how = rng.randrange(len(CORRUPT) + 4)
            if how == len(CORRUPT) + 2:
                con.execute("DELETE FROM events WHERE global_seq = ?", (gs,))
            elif how == len(CORRUPT) + 3:
                con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (rng.choice(rows)[1], gs))
            elif how == len(CORRUPT):
                con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (p.encode(), gs))
            elif how == len(CORRUPT) + 1:
                con.execute("UPDATE events SET stream_seq = 'x' WHERE global_seq = ?", (gs,))
            else:
                con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (CORRUPT[how](p), gs))
        con.commit()
    finally:
        con.close()


def dump(store: Path):
    con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True)
    ids = {}

    def norm(x):
        if isinstance(x, str):
            x = _ULID.sub(lambda m: ids.setdefault(m.group(0), f"<id{len(ids)}>"), x)
            return _DUR.sub(r'"\1":0', _TS.sub("<ts>", x))
        if type(x) is int and x > 10 ** 12:
            return "<ts>"
        return x
    try:
        ev = [tuple(norm(v) for v in r) for r in con.execute(
            "SELECT global_seq, stream, stream_seq, kind, schema_version, turn_id, payload FROM events ORDER BY global_seq")]
        st = [tuple(norm(v) for v in r) for r in con.execute("SELECT * FROM streams ORDER BY rowid")]
    finally:
        con.close()
    return ev, st


def tree(ws: Path):
    out = {}
    for p in sorted(ws.rglob("*")):
        rel = str(p.relative_to(ws))
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_file():
            out[rel] = p.read_bytes()
        else:
            out[rel] = "dir"
    return out


class Worker:
    def __init__(self, core: str | None):
        env = dict(os.environ)
        if core:
            env["PYTHONPATH"] = core
        env["NO_COLOR"] = "1"
        self.p = subprocess.Popen([sys.executable, str(REPO / "benchmarks/compat/worker_resurrect.py")], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=env)

    def cli(self, args):
        self.p.stdin.write(json.dumps({"op": "cli", "args": args}) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.environ["COMPAT_API_KEY"] = SECRET
    old, new = Worker(a.old), Worker(str(REPO / "core"))
    diffs = cases = wrote_on_fail = 0
    stats = {}
    tmp = Path(tempfile.mkdtemp(prefix="compat-res-"))
    try:
        for i in range(a.n):
            rng = random.Random(a.seed * 100003 + i)
            master = tmp / f"m{i}"
            with StoreWriter(master) as w:
                sid = session(w, rng)
            if rng.random() < 0.6:
                corrupt(master, rng)
            wsm = tmp / f"wsm{i}"
            (wsm / "out").mkdir(parents=True)
            (wsm / "seed.txt").write_text("seed line\n")
            (wsm / "out/0.txt").write_text("zero\n")
            for flags in (["-y"], [], ["-y", "--json"], ["--json"], ["run", "-y"], ["run"], ["sdk", "yes"], ["sdk", "no"]):
                got = {}
                for side, wk in (("old", old), ("new", new)):
                    st, ws = tmp / f"{side}{i}", tmp / f"ws{side}{i}"
                    shutil.rmtree(st, ignore_errors=True)
                    shutil.rmtree(ws, ignore_errors=True)
                    shutil.copytree(master, st)
                    shutil.copytree(wsm, ws)
                    before = dump(st)
                    if flags[:1] == ["sdk"]:  # Session.resurrect(confirm=…) with an approving client, or not
                        out = wk.cli(["sdk", str(st), str(ws), sid, flags[1]])
                    elif flags[:1] == ["run"]:  # auto-resurrect on open (FLUX_AUTO_RESURRECT unset), then a null-model turn
                        args = ["run", "hi", "--session", sid, "-m", "null", *flags[1:]]
                    else:
                        args = ["resurrect", sid, *flags]
                    if flags[:1] != ["sdk"]:
                        out = wk.cli([*args, "--store", str(st), "--workspace", str(ws)])
                    out[0] = out[0].replace(str(st), "<store>").replace(str(ws), "<ws>")
                    out = out[:3]  # the module's file names the version
                    after = dump(st)
                    failed = out[1] != 0 and ("error:" in out[0] or flags[:1] == ["sdk"])
                    if failed and "resumed turn halted" not in out[0] and "turn ended error" not in out[0] and after != before:
                        wrote_on_fail += 1
                        print(f"WROTE ON FAIL seed={a.seed} i={i} {side} {flags}: {out[0][-300:]!r}")
                    if sum(SECRET in repr(r) for r in after[0]) > sum(SECRET in repr(r) for r in before[0]):  # a new row holds it
                        print(f"LEAK seed={a.seed} i={i} {side} {flags}")
                    got[side] = (out, after, tree(ws))
                cases += 1
                key = (got["new"][0][1], got["new"][0][0].strip().splitlines()[-1][:40] if got["new"][0][0].strip() else "")
                stats[key] = stats.get(key, 0) + 1
                if got["old"] != got["new"]:
                    diffs += 1
                    print(f"DIFF seed={a.seed} i={i} {flags}")
                    for part, (x, y) in enumerate(zip(got["old"], got["new"])):
                        if x != y:
                            if part == 1:
                                for r1, r2 in zip(x[0], y[0]):
                                    if r1 != r2:
                                        print("  old row:", r1)
                                        print("  new row:", r2)
                                        break
                                print("  rows", len(x[0]), len(y[0]))
                            else:
                                print(f"  part {part}: old={x!r:.600}\n          new={y!r:.600}")
                    keep = tmp.parent / f"compat-res-keep-{a.seed}-{i}"
                    if not keep.exists():
                        shutil.copytree(master, keep / "store")
                        shutil.copytree(wsm, keep / "ws")
                        print("  kept", keep, sid)
            for p in tmp.glob(f"*{i}"):
                shutil.rmtree(p, ignore_errors=True)
    finally:
        old.close()
        new.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"cases={cases} diffs={diffs} wrote_on_fail={wrote_on_fail}")
    for k, v in sorted(stats.items(), key=lambda kv: -kv[1])[:25]:
        print(" ", v, k)


if __name__ == "__main__":
    main()
