"""kill -9 battery: record a 300-op flow with `flux flow run`, SIGKILL it at a random moment, and
check what it left (issue 7's crash figure; run by hand, numbers in the closing note).

    .venv/bin/python benchmarks/crash.py --trials 200 [--seed 7]

Each trial checks, on the store the killed writer left:
- ``PRAGMA integrity_check`` is ``ok``;
- every stream's ``stream_seq`` runs 0, 1, 2, … without a gap or a repeat, and ``global_seq`` grows;
- every payload is JSON whose ``kind`` equals the row's ``kind`` column;
- no acknowledged effect is lost: the workspace file has one line per ``append`` that ran, and the
  store holds a cell for every one of them but at most the one in flight at the kill;
- the read verbs (`flux sessions --json`, `flux show last --json`, `flux replay last --json`)
  answer without a traceback.
It prints the counts and exits 1 if any trial broke a rule.
"""

from __future__ import annotations

import argparse
import json
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

PLAN = 'flow\n  repeat 300\n    append({"path":"log.txt","content":"x\\n"})\n'
FLUX = [sys.executable, "-m", "flux.cli"] if os.environ.get("FLUX_CRASH_MODULE") else [
    str(Path(sys.executable).with_name("flux"))
]


def _open_for_check(store: Path, scratch: Path) -> sqlite3.Connection:
    """The killed writer's events.db, read-only — or, when SQLite must first roll back what the writer
    left (a hot ``-journal``: killed inside the bootstrap, before the store is in WAL mode; a
    ``mode=ro`` connection cannot, "attempt to write a readonly database", seen once in 40 kills),
    a copy of the database and its journal files opened read-write: the recovery happens on the copy."""
    db = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True)
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        return db
    except sqlite3.OperationalError:
        db.close()
    scratch.mkdir(parents=True, exist_ok=True)
    for name in ("events.db", "events.db-journal", "events.db-wal"):
        if (store / name).exists():
            shutil.copyfile(store / name, scratch / name)
    return sqlite3.connect(scratch / "events.db")


def check_store(store: Path, workspace: Path) -> list[str]:
    problems: list[str] = []
    db = _open_for_check(store, store.parent / "recovered")
    try:
        if db.execute("PRAGMA integrity_check").fetchone()[0] != "ok":
            problems.append("integrity_check failed")
        if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'events'").fetchone() is None:
            return problems  # killed inside the bootstrap transaction: no table, nothing half-written
        seqs: dict[str, int] = {}
        last_global = 0
        cells = 0
        for gseq, stream, sseq, kind, payload in db.execute(
            "SELECT global_seq, stream, stream_seq, kind, payload FROM events ORDER BY global_seq"
        ):
            if gseq <= last_global:
                problems.append(f"global_seq {gseq} does not grow")
            last_global = gseq
            want = seqs.get(stream, 0)
            if sseq != want:
                problems.append(f"{stream}: stream_seq {sseq}, expected {want}")
            seqs[stream] = sseq + 1
            body = json.loads(payload)
            if body.get("kind") != kind:
                problems.append(f"row {gseq}: payload kind {body.get('kind')!r} ≠ column {kind!r}")
            data = body.get("data")
            if kind == "run" and isinstance(data, dict) and data.get("event") == "op_recorded" and data.get("op") == "append":
                cells += 1
    finally:
        db.close()
    log = workspace / "log.txt"
    ran = log.read_text().count("\n") if log.exists() else 0
    if not (cells <= ran <= cells + 1):
        problems.append(f"{ran} append(s) ran but {cells} cell(s) recorded")
    return problems


def read_verbs_answer(store: Path) -> list[str]:
    problems = []
    for verb in (["sessions", "--json"], ["show", "last", "--json"], ["replay", "last", "--json"]):
        r = subprocess.run([*FLUX, *verb, "--store", str(store)], capture_output=True, text=True, timeout=60)
        if "Traceback" in r.stderr or len(r.stderr.strip().splitlines()) > 1:
            problems.append(f"flux {' '.join(verb)}: {r.stderr.strip()[:200]}")
    return problems


def trial(root: Path, rng: random.Random) -> tuple[bool, list[str]]:
    store, workspace = root / "store", root / "ws"
    workspace.mkdir(parents=True)
    plan = root / "p.flux"
    plan.write_text(PLAN)
    proc = subprocess.Popen(
        [*FLUX, "flow", "run", str(plan), "-y", "--store", str(store), "--workspace", str(workspace)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    time.sleep(rng.uniform(0.15, 0.9))
    killed = proc.poll() is None
    if killed:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)
    if not (store / "events.db").exists():
        return killed, []  # killed before the store existed: nothing to check
    # (a store killed during its bootstrap still has to open in the read verbs)
    return killed, check_store(store, workspace) + read_verbs_answer(store)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    killed = broken = 0
    with tempfile.TemporaryDirectory(prefix="flux-crash-") as tmp:
        for i in range(args.trials):
            was_killed, problems = trial(Path(tmp) / f"t{i}", rng)
            killed += was_killed
            if problems:
                broken += 1
                print(f"trial {i}: " + "; ".join(problems[:3]))
    print(f"{args.trials} trials · {killed} killed mid-run · {broken} with an integrity, sequence or durability violation")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
