"""`flux fork` by two versions of flux (old: a core/ given by --old, new: this checkout) on hostile
generated sessions (benchmarks/compat/hostplan_diff.py's), for every --at N (and one past the end): the
same output and exit code, and the same child rows (ids and timestamps aside), and the source
session's rows untouched.

  .venv/bin/python benchmarks/compat/fork_diff.py --old /tmp/old/core --n 30 --seed 1
"""
from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hostplan_diff as G  # noqa: E402
from hostplan_diff import REPO, Worker, build_session  # noqa: E402

from flux.store import StoreWriter  # noqa: E402

ERRS = {}
WROTE = {}
INJECT = [json.dumps(v) for v in ["X", "{a}", "é\u2028", {"k": [1, -0.0]}, 10 ** 17, "a\nb", 'x"""y', "\n\"\"\"\n", "\x00",
                                  {"b": 1, "a": {"z": None, "": "q"}}, 2 ** 64, 10 ** 30, 1e300, [], "{{x}}", "\ud800"]] + [
    '"\\ud800"', "1e400", "-0", "01", '{"a":1,"a":2}', "NaN", "[" * 200 + "]" * 200, "not json", ""]
_ULID = re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")


def dump(store: Path, source: str):
    con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True)
    try:
        src = con.execute("SELECT stream_seq, id, kind, ts, payload, turn_id FROM events WHERE stream = ? ORDER BY global_seq",
                          (source,)).fetchall()
        ids = {}
        def norm(text):
            return _ULID.sub(lambda m: ids.setdefault(m.group(0), f"<id{len(ids)}>"), text) if isinstance(text, str) else text
        other = [(s, q, k, norm(p), t) for s, q, k, p, t in con.execute(
            "SELECT stream, stream_seq, kind, payload, turn_id FROM events WHERE stream != ? ORDER BY global_seq", (source,))]
        streams = [tuple(norm(x) if isinstance(x, str) else ("<ts>" if type(x) is int and x > 10 ** 12 else x) for x in r)
                   for r in con.execute("SELECT * FROM streams ORDER BY rowid")]
    finally:
        con.close()
    flow = []
    if (store / "flow.db").exists():
        con = sqlite3.connect(f"file:{store / 'flow.db'}?mode=ro", uri=True)
        try:
            for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
                flow.append((name, [tuple(norm(x) if isinstance(x, str) else x for x in r)
                                    for r in con.execute(f'SELECT * FROM "{name}"')]))
        finally:
            con.close()
    return src, other, streams, flow


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-at", type=int, default=12)
    ap.add_argument("--new", default=str(REPO / "core"))
    args = ap.parse_args()
    old, new = Worker(args.old), Worker(args.new)
    tmp = Path(tempfile.mkdtemp(prefix="compat-fork-"))
    rng = random.Random(args.seed)
    compared = differ = forked = 0
    try:
        for n in range(args.n):
            master = tmp / "master"
            G.CLEAN[0] = rng.random() < 0.7
            with StoreWriter(master) as w:
                sid = build_session(w, rng)
            for at in range(0, args.max_at):
                mode = rng.choice(["inject", "inject", "edit", "turn"])
                extra = ["--inject", rng.choice(INJECT)]
                if mode == "edit":
                    (tmp / "edit.flux").write_text(rng.choice([
                        'flow\n  a = read({"path":"x"})\n  b = grep({"q":"{a}"})\n',
                        'flow\n  z = read({"path":"{a}"})\n',
                        'flow\n  $z = read({"path":"""x\n"""})\n  when = read({})\n',
                        'flow\n  z = read({"path":"\\ud800"})\n', 'flow\n  checkpoint "c"\n  z = read({"q":1e400})\n',
                        'flow\n  z = fmt("{a}")\n', '']))
                    extra = ["--edit", str(tmp / "edit.flux")]
                elif mode == "turn":
                    extra += ["--turn", str(rng.randint(1, 3))]
                outs = []
                for worker in (old, new):
                    store = tmp / "s"
                    shutil.rmtree(store, ignore_errors=True)
                    shutil.copytree(master, store)
                    ws = tmp / "ws"
                    shutil.rmtree(ws, ignore_errors=True)
                    ws.mkdir()
                    before = dump(store, sid)[0]
                    ans = worker.ask({"op": "cli", "args": ["fork", sid, "--at", str(at), "--store", str(store),
                                                            "--workspace", str(ws), "--json"] + (["-y"] if G.CLEAN[0] else []) + extra})
                    d = dump(store, sid)
                    assert d[0] == before, f"the source session changed: {sid} at {at}"
                    outs.append((ans, d[1:]))
                compared += 1
                for side, o in zip(("old", "new"), outs):
                    if o[0][1] != 0 and o[0][0].startswith("error:") and o[1][0]:
                        WROTE[side] = WROTE.get(side, 0) + 1
                        if side == "new" and WROTE[side] <= 3:
                            print("WROTE on error:", o[0][0][:200], len(o[1][0]), "rows")
                forked += outs[1][0][1] == 0
                if outs[1][0][1] != 0:
                    ERRS[outs[1][0][0][:70]] = ERRS.get(outs[1][0][0][:70], 0) + 1
                    if "no longer parses" in outs[1][0][0] and G.CLEAN[0] and len(ERRS) < 30:
                        print(outs[1][0][0][:300])
                if outs[0] != outs[1] or outs[1][0][2] is not None:
                    differ += 1
                    keep = Path("/tmp/compat-fork-keep") / f"s{args.seed}_{n}"
                    if not keep.exists():
                        shutil.copytree(master, keep)
                    print("DIFF", keep, sid, at, extra)
                    for side, o in zip(("old", "new"), outs):
                        print(f"  {side}:", str(o[0])[:400])
                    if outs[0][1] != outs[1][1]:
                        for a, b in zip(outs[0][1], outs[1][1]):
                            if a != b:
                                for x, y in zip(a, b):
                                    if x != y:
                                        print("   first row diff\n    old:", str(x)[:400], "\n    new:", str(y)[:400])
                                        break
                                print("   lengths", len(a), len(b))
            shutil.rmtree(master)
    finally:
        old.close()
        new.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"compared {compared} forks on {args.n} sessions ({forked} forked, rc 0), {differ} differ")
    print("child rows written by a fork that failed with error:", WROTE)
    for k, v in sorted(ERRS.items(), key=lambda x: -x[1])[:8]:
        print(v, k)


if __name__ == "__main__":
    main()
