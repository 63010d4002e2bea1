"""`flux run -m scripted:FILE -y` recorded by two versions of flux (old: --old core/, new: --new
core/, default this checkout) on generated hostile model answers and real coding ops in a temp
workspace: the same output and exit code, the same rows (ULIDs, timestamps and durations aside), the
same workspace afterwards, and no registered secret (an env var COMPAT_API_KEY) in any row of either.

Answers: tool calls whose inputs carry lone surrogates, NULs, U+2028, huge/odd numbers, deep
nesting, the secret (whole, split, escaped), unknown ops, wrong argument types, many calls in one
answer (more than 64 rows in a flush), ops that fail; tool output made hostile by files written
first (bytes that are not UTF-8, NULs) and by bash (printf of odd bytes); final text answers with
the secret and surrogates; scripted provider errors and retries; answers that never end (max-iter).

  .venv/bin/python benchmarks/compat/record_diff.py --old /tmp/old/core --n 80 --seed 1
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from resurrect_diff import REPO, Worker, dump, tree  # noqa: E402

SECRET = "compat-SECRETSECRET-98765"
TEXTS = ["plain", "lone \ud800 high", "low \udfff", "nul\x00nul", "sep\u2028\u2029\x85", "é✓😀", "", "{x} {{y}}",
         f"key={SECRET}", f"split {SECRET[:5]}\ud800{SECRET[5:]}", f'esc \\"{SECRET}\\"', "x" * 70000, "\r\n\t",
         '{"json":1}', "[redacted]", "\\u0000"]
NUMS = [0, -0.0, 1e300, 10 ** 30, -(2 ** 63), 2 ** 64, 1.5, 1e-300, 123456789012345678901]


def val(rng, d=0):
    r = rng.random()
    if d < 40 and r < 0.08:
        return [val(rng, d + 1)]
    if d < 4 and r < 0.2:
        return {rng.choice(["a", "é", "", SECRET, "\ud800"]): val(rng, d + 1) for _ in range(rng.randint(0, 2))}
    if r < 0.7:
        return rng.choice(TEXTS)
    if r < 0.9:
        return rng.choice(NUMS)
    return rng.choice([True, False, None])


def call(rng, k):
    r = rng.random()
    p = rng.choice(["a.txt", "d/b.txt", "bin.dat", "nope.txt", "é.txt", "../out.txt", "loop/x", "a.txt\x00x"])
    if r < 0.25:
        return {"name": "write", "input": {"path": p, "content": rng.choice(TEXTS)}}
    if r < 0.4:
        return {"name": "append", "input": {"path": p, "content": rng.choice(TEXTS) + str(k)}}
    if r < 0.55:
        return {"name": "read", "input": {"path": p}}
    if r < 0.62:
        return {"name": "grep", "input": {"pattern": rng.choice(["x", "SECRET", "(", "nul"]), "path": "."}}
    if r < 0.72:
        return {"name": "bash", "input": {"command": rng.choice(["printf 'a\\000b\\377c\\n'", f"echo {SECRET}",
                                                                 "echo $COMPAT_API_KEY", "exit 2", "printf '\\xed\\xa0\\x80'",
                                                                 "seq 1 3000"])}}
    if r < 0.8:
        return {"name": "edit", "input": {"path": p, "old": rng.choice(TEXTS), "new": rng.choice(TEXTS)}}
    if r < 0.86:
        return {"name": rng.choice(["nosuch", "read", "write"]), "input": val(rng)}
    if r < 0.92:
        return {"name": "glob", "input": {"pattern": rng.choice(["*", "**/*", "["])}}
    return {"name": "read_many", "input": {"paths": [p, "a.txt", "bin.dat"]}}


def script(rng):
    out = []
    for turn in range(rng.randint(1, 4)):
        r = rng.random()
        if r < 0.08:
            out.append({"error": rng.choice(TEXTS) or "boom", "status": 429, "retryable": True})
            continue
        n = rng.choice([1, 2, 3, 5, 40, 70]) if r < 0.85 else 0
        entry = {"text": rng.choice(TEXTS) if rng.random() < 0.4 else "",
                 "tool_calls": [dict(call(rng, k), id=f"t{turn}_{k}") for k in range(n)]}
        if rng.random() < 0.2:
            entry["thinking"] = rng.choice(TEXTS)
        out.append(entry)
    out.append({"text": rng.choice(TEXTS) + " done"})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", default=str(REPO / "core"))
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    os.environ["COMPAT_API_KEY"] = SECRET
    old, new = Worker(a.old), Worker(a.new)
    diffs = leaks = 0
    tmp = Path(tempfile.mkdtemp(prefix="compat-rec-"))
    try:
        for i in range(a.n):
            rng = random.Random(a.seed * 7919 + i)
            sc = tmp / f"script{i}.json"
            sc.write_text(json.dumps(script(rng)))
            flags = rng.choice([["-y"], ["-y", "--json"], [], ["--max-iter", "2", "-y"]])
            got = {}
            for side, wk in (("old", old), ("new", new)):
                st, ws = tmp / "store", tmp / "ws"  # the same paths on both sides (error texts name them)
                shutil.rmtree(st, ignore_errors=True)
                shutil.rmtree(ws, ignore_errors=True)
                ws.mkdir()
                (ws / "bin.dat").write_bytes(b"\x00\xff\xfe bin \xed\xa0\x80 " + SECRET.encode())
                os.symlink("loop", ws / "loop")
                out = wk.cli(["run", "go", "-m", f"scripted:{sc}", "--store", str(st), "--workspace", str(ws), *flags])[:3]
                out[0] = out[0].replace(str(st), "<store>").replace(str(ws), "<ws>").replace(str(sc), "<script>")
                rows = dump(st) if (st / "events.db").exists() else None
                blob = repr(rows) + "".join(p.read_bytes().decode("latin-1") for p in st.rglob("*") if p.is_file()) \
                    if rows is not None else ""
                if SECRET in blob:  # (the live console echoes the model's own text and tool inputs unredacted, both versions)
                    leaks += 1
                    where = [str(p) for p in st.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
                    print(f"LEAK seed={a.seed} i={i} {side} out={SECRET in out[0]} rows={SECRET in repr(rows)} files={where}")
                got[side] = (out, rows, tree(ws))
            if got["old"] != got["new"]:
                diffs += 1
                print(f"DIFF seed={a.seed} i={i} {flags}")
                for part, (x, y) in enumerate(zip(got["old"], got["new"])):
                    if x != y:
                        if part == 1 and x and y:
                            for r1, r2 in zip(x[0], y[0]):
                                if r1 != r2:
                                    print("  old row:", repr(r1)[:700])
                                    print("  new row:", repr(r2)[:700])
                                    break
                            print("  rows", len(x[0]), len(y[0]))
                        else:
                            print(f"  part {part}: old={x!r:.500}\n          new={y!r:.500}")
                keep = tmp.parent / f"compat-rec-keep-{a.seed}-{i}.json"
                shutil.copy(sc, keep)
                print("  kept", keep, flags)
            for p in tmp.glob(f"*{i}"):
                shutil.rmtree(p, ignore_errors=True)
    finally:
        old.close()
        new.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"runs={a.n} diffs={diffs} leaks={leaks}")


if __name__ == "__main__":
    main()
