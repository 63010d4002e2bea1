"""every path of up to --depth segments over a hostile workspace (symlink loops of several
shapes, a link to the parent, dangling links in and out, links made by a previous op, a FIFO), sent
through every file op (read, read_many, glob, grep, write, append, edit): nothing outside the
workspace may be read, created or changed, and no op may crash ("raised"). Run it with PYTHONPATH
at the core/ under test.

  PYTHONPATH=core .venv/bin/python benchmarks/compat/workspace_paths.py --depth 4
"""
from __future__ import annotations

import argparse
import itertools
import os
import shutil
import tempfile
from pathlib import Path

from flux.agent.builtin_ops import Workspace, coding_ops

OUTSIDE = "OUTSIDE-CONTENT-compat"
SEGS = ["..", ".", "", "src", "dir-out", "loop-a", "self", "grow", "up", "dot", "back", "dang", "dang-in",
        "chain1", "x", "sub", "new"]


def world(tmp: Path):
    outside = tmp / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "secret.txt").write_text(OUTSIDE)
    (outside / "sub" / "x").write_text(OUTSIDE)
    ws = tmp / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "x").write_text("in")
    os.symlink(outside / "sub", ws / "dir-out")
    os.symlink(ws / "loop-b", ws / "loop-a")
    os.symlink(ws / "loop-a", ws / "loop-b")
    os.symlink("self", ws / "self")  # a one-link loop
    os.symlink("grow/x", ws / "grow")  # a loop through its own child
    os.symlink("..", ws / "up")  # the parent: out
    os.symlink(".", ws / "dot")
    os.symlink("../dir-out", ws / "src" / "back")  # inside, onto a link out
    os.symlink("../outside/new.txt", ws / "dang")  # dangling, out
    os.symlink("src/newfile", ws / "dang-in")  # dangling, in
    os.symlink("chain2", ws / "chain1")
    os.symlink("chain3", ws / "chain2")
    os.symlink("up/outside", ws / "chain3")
    os.mkfifo(ws / "fifo")
    return ws, outside


def snapshot(tmp: Path, ws: Path):
    out = {}
    for dirpath, dirnames, filenames in os.walk(tmp, followlinks=False):
        d = Path(dirpath)
        if d == ws or ws in d.parents:
            continue
        for f in filenames + dirnames:
            p = d / f
            try:
                out[str(p)] = ("L", os.readlink(p)) if p.is_symlink() else p.read_bytes() if p.is_file() else "d"
            except OSError:
                out[str(p)] = "?"
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--segs", default=None, help="comma-separated segments instead of the full set")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="compat-ws-"))
    bad = n = 0
    try:
        ws, outside = world(tmp)
        ops = {o.name: o for o in coding_ops(Workspace(ws), bash_timeout_s=5)}
        # a link made by a previous op (bash is exec: unconfined by design; the file ops must still refuse it)
        ops["bash"].call({"command": "ln -s ../outside made-out && ln -s made-out made-chain"})
        SEGS.extend(["made-out", "made-chain"])
        if a.segs:
            SEGS[:] = a.segs.split(",")
        before = snapshot(tmp, ws)
        paths = ["/" + str(outside / "secret.txt"), str(ws / "up" / "outside" / "secret.txt"), "x" * 5000,
                 "/".join(["src"] * 2000), "src/" + "a" * 300, "\ud800", "src\x00x", "~", "~/x"]
        for k in range(1, a.depth + 1):
            for segs in itertools.product(SEGS, repeat=k):
                paths.append("/".join(segs))
        paths = [p for p in dict.fromkeys(paths) if p.strip()]
        for p in paths:
            for name, inp in (("read", {"path": p}), ("read_many", {"paths": [p]}), ("glob", {"pattern": "*", "path": p}),
                              ("grep", {"pattern": "OUTSIDE|in", "path": p}), ("write", {"path": p, "content": "W"}),
                              ("append", {"path": p, "content": "A"}), ("edit", {"path": p, "old": "OUTSIDE", "new": "E"})):
                n += 1
                out = ops[name].call(inp)
                if OUTSIDE in out.content or "raised" in out.content or "Traceback" in out.content:
                    bad += 1
                    print(f"BAD {name} {p!r}: {out.content[:200]!r}")
            now = snapshot(tmp, ws)
            if now != before:
                bad += 1
                print(f"OUTSIDE CHANGED after {p!r}: {set(now.items()) ^ set(before.items())}")
                before = now
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"calls={n} paths={len(paths)} violations={bad}")


if __name__ == "__main__":
    main()
