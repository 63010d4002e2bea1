"""Hostile stores and the battery every read verb must survive (issue 7).

Shared by the hypothesis tests under tests/hostile/ (small budgets) and by ``benchmarks/fuzz.py``
(long runs). Three pieces:

* :func:`build_base` writes a synthetic store through our own writer (sessions, turns, an
  accepted plan, cells, usage, an open turn, a correlated child);
* :data:`MUTATIONS` — named corruptions of a store directory, each taking a ``random.Random``:
  cell values of every column (NULL, BLOB, wrong types, invalid UTF-8, huge and deep JSON),
  payload fields of the wrong type, hostile ``plan_source``, dropped tables and columns,
  truncated and garbage files, garbage ``-wal``/``-shm`` sidecars, a FIFO / directory / symlink
  in place of ``events.db``, a deeply nested ``prices.json``;
* :func:`run_verb` runs one ``flux`` read verb in-process with a hang alarm and
  :func:`check_invocation` judges it: no traceback, no hang, exit 0/1, an error is one line,
  the store is byte- and mtime-identical, and no file appeared under ``TMPDIR``.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from click.testing import CliRunner

from flux.store import (
    CallUsage, Message, OpRecorded, PlanAttempted, Run, StepStarted, StepSucceeded, StoreWriter, TurnEnded, Usage,
)
from flux.canonical import canonical_json, sha256_hex

READ_VERBS: list[list[str]] = [
    ["sessions"], ["sessions", "--json"],
    ["show"], ["show", "--json"], ["show", "s_1"],
    ["replay"], ["replay", "--json"], ["replay", "s_1"],
    ["diff", "s_1", "last"], ["diff", "s_1", "last", "--json"],
]

PLAN = 'flow\n  adaptive_gather_1 = read({"path":"a.txt"})\n'


def _cell(op: str, inp: dict, content: str) -> Run:
    ih = sha256_hex(canonical_json(inp))
    return Run(event=OpRecorded(step=f"step_{op}_{ih[:16]}", op=op, input_hash=ih, input_view=canonical_json(inp),
                                content=content))


def build_base(d: Path) -> Path:
    """A small store with every row shape the read verbs look at; checkpointed, no sidecars."""
    with StoreWriter(d, clock=lambda: 1_700_000_000_000) as w:
        ts = 1_700_000_000_000
        for n in range(2):
            sid = w.create_session("mock", ts=ts)
            w.append(sid, Message.text("user", f"read a.txt {n}"), ts=ts + 1)
            tid = w.begin_turn(sid, f"read a.txt {n}", "mock", ts=ts + 2)
            w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=PLAN), turn_id=tid, ts=ts + 3)
            inp = {"path": "a.txt"}
            ih = sha256_hex(canonical_json(inp))
            w.append(sid, Run(event=StepStarted(step=f"step_read_{ih[:16]}", op="read", input_hash=ih)), ts=ts + 4)
            w.append(sid, _cell("read", inp, f"hello {n}"), ts=ts + 5)
            w.append(sid, Run(event=StepSucceeded(step=f"step_read_{ih[:16]}")), ts=ts + 6)
            u = Usage(input_tokens=10 + n, output_tokens=5)
            w.append(sid, CallUsage(model="mock", usage=u), turn_id=tid, ts=ts + 7)
            w.append(sid, TurnEnded(outcome="ok", answer=f"hello {n}", usage=u), turn_id=tid, ts=ts + 8)
            w.append(sid, Message.text("assistant", f"hello {n}"), ts=ts + 9)
        # an open (interrupted) turn with an accepted plan, in a child correlated to s_1
        sid = w.create_session("mock", context={"correlation_id": "s_1", "agent_id": "fork"}, ts=ts + 20)
        w.append(sid, Message.text("user", "again"), ts=ts + 21)
        tid = w.begin_turn(sid, "again", "mock", ts=ts + 22)
        w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=PLAN), turn_id=tid, ts=ts + 23)
    for side in ("events.db-wal", "events.db-shm", "flow.db-wal", "flow.db-shm"):
        (d / side).unlink(missing_ok=True)
    return d


# --------------------------------------------------------------------------------- hostile values

def _deep_json(rng: random.Random) -> str:
    depth = rng.choice([200, 1_000, 5_000, 50_000])
    kind = rng.choice(["[", "{"])
    if kind == "[":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


def hostile_plans(rng: random.Random) -> str:
    n = rng.choice([100, 300, 1_000, 5_000])
    return rng.choice([
        "flow\n  x = " + "f(" * n + "1" + ")" * n + "\n",
        "flow\n  x = " + "[" * n + "]" * n + "\n",
        "flow\n  x = " + "{\"a\":" * n + "1" + "}" * n + "\n",
        "flow\n  x = " + "1 + " * n + "1\n",
        "flow\n  x = " + "9" * rng.choice([4_301, 20_000]) + "\n",
        "flow\n  x = \"\ud83d\"\n",
        "flow\n  x = 1e400\n",
        "flow\n  x = read({\"path\":\"\ud800\"})\n",
        "\x00" * 10,
        rng.choice(["", "flow", "flow\n  ", "}{", "flow\n  x = when " * 50]),
    ])


def hostile_value(rng: random.Random):
    """A value for one SQLite cell (bound as a parameter; bytes become a BLOB)."""
    return rng.choice([
        None, b"\x00\xff\xfe", bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))),
        -1, 0, 2 ** 63 - 1, -(2 ** 63), 1.5, float("inf"), -0.0, "", "s_x", "s_99999", "garbage",
        "x" * 100_000, "\ufffd", "1e400", "[]", "{}", "null", _deep_json(rng), "9" * 5_000,
    ])


def hostile_json_node(rng: random.Random):
    return rng.choice([
        None, True, False, 0, -1, 2 ** 70, 1.5e308, "", "x", [], {}, [1, "a", None], {"k": []},
        "s_1", -2 ** 63, "\u202e\u0000", {"kind": "run"}, "9" * 5_000,
    ])


# --------------------------------------------------------------------------------- mutations

def _db(store: Path) -> sqlite3.Connection:
    con = sqlite3.connect(store / "events.db", isolation_level=None)
    con.execute("PRAGMA journal_mode = DELETE")  # no sidecars left behind by the corruptor
    return con


def _random_rowid(con: sqlite3.Connection, table: str, rng: random.Random) -> int | None:
    rows = [r[0] for r in con.execute(f"SELECT rowid FROM {table}")]
    return rng.choice(rows) if rows else None


def m_cell(store: Path, rng: random.Random) -> str:
    con = _db(store)
    try:
        table = rng.choice(["events", "streams"])
        cols = [r[1] for r in con.execute(f"PRAGMA table_info({table})")]
        col = rng.choice(cols)
        rid = _random_rowid(con, table, rng)
        v = hostile_value(rng)
        try:
            con.execute(f"UPDATE {table} SET {col} = ? WHERE rowid = ?", (v, rid))
        except sqlite3.Error:
            return f"cell {table}.{col} (refused by sqlite)"
        return f"cell {table}.{col}={str(v)[:20]!r}"
    finally:
        con.close()


def m_invalid_utf8(store: Path, rng: random.Random) -> str:
    con = _db(store)
    try:
        table, col = rng.choice([("events", "payload"), ("events", "kind"), ("events", "stream"), ("events", "id"),
                                 ("streams", "model"), ("streams", "agent_id"), ("streams", "correlation_id")])
        rid = _random_rowid(con, table, rng)
        raw = rng.choice([b"\xff\xfe", b'{"kind":"message","data":{"role":"user","content":"\xc3\x28"}}', b"\xed\xa0\x80"])
        con.execute(f"UPDATE {table} SET {col} = CAST(? AS TEXT) WHERE rowid = ?", (raw, rid))
        return f"invalid utf-8 in {table}.{col}"
    finally:
        con.close()


def _payload_paths(v, path=()):
    yield path
    if isinstance(v, dict):
        for k, x in v.items():
            yield from _payload_paths(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from _payload_paths(x, path + (i,))


def m_payload_type(store: Path, rng: random.Random) -> str:
    con = _db(store)
    try:
        rid = _random_rowid(con, "events", rng)
        (payload,) = con.execute("SELECT payload FROM events WHERE rowid = ?", (rid,)).fetchone()
        try:
            obj = json.loads(payload)
        except (TypeError, ValueError):
            return "payload (not json already)"
        paths = [p for p in _payload_paths(obj) if p]
        if not paths:
            return "payload (flat)"
        path = rng.choice(paths)
        node = obj
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = hostile_json_node(rng)
        con.execute("UPDATE events SET payload = ? WHERE rowid = ?", (json.dumps(obj), rid))
        return f"payload {'.'.join(map(str, path))}"
    finally:
        con.close()


def m_payload_text(store: Path, rng: random.Random) -> str:
    con = _db(store)
    try:
        rid = _random_rowid(con, "events", rng)
        (payload,) = con.execute("SELECT payload FROM events WHERE rowid = ?", (rid,)).fetchone()
        text = payload if isinstance(payload, str) else ""
        choice = rng.randrange(4)
        if choice == 0 and text:
            text = text[: rng.randrange(len(text))]
        elif choice == 1:
            text = '{"kind":"message","data":' + _deep_json(rng) + "}"
        elif choice == 2:
            text = '{"kind":"turn_ended","data":{"outcome":"ok","iterations":' + "9" * 5_000 + "}}"
        else:
            text = '{"kind":"message","data":{"role":"user","content":[{"type":"text","text":"\\ud83d"}]}}'
        con.execute("UPDATE events SET payload = ? WHERE rowid = ?", (text, rid))
        return f"payload text #{choice}"
    finally:
        con.close()


def m_plan_source(store: Path, rng: random.Random) -> str:
    con = _db(store)
    try:
        rows = [r[0] for r in con.execute("SELECT rowid FROM events WHERE kind = 'plan_attempted'")]
        if not rows:
            return "plan (none)"
        rid = rng.choice(rows)
        plan = hostile_plans(rng)
        obj = {"kind": "plan_attempted", "data": {"step": 1, "outcome": "accepted", "plan_source": plan}}
        con.execute("UPDATE events SET payload = ? WHERE rowid = ?", (json.dumps(obj), rid))
        return f"plan_source {plan[:30]!r}"
    finally:
        con.close()


def m_rows(store: Path, rng: random.Random) -> str:
    con = _db(store)
    try:
        c = rng.randrange(5)
        if c == 0:
            con.execute("DELETE FROM events WHERE rowid = ?", (_random_rowid(con, "events", rng),))
            return "delete an event"
        if c == 1:
            con.execute("DELETE FROM streams WHERE rowid = ?", (_random_rowid(con, "streams", rng),))
            return "delete a registry row"
        if c == 2:
            con.execute("INSERT INTO events (stream, stream_seq, id, kind, ts, payload, turn_id) VALUES (?,?,?,?,?,?,?)",
                        (rng.choice(["s_1", "s_3", "s_9", "x"]), rng.choice([0, 5, -1, 10 ** 6]), "dup",
                         rng.choice(["run", "message", "turn_ended", "turn_started", "weird"]), rng.choice([0, -5, 2 ** 62]),
                         rng.choice(['{"kind":"run","data":{"event":"op_recorded"}}', "{}", "[]", '{"kind":1}']),
                         rng.choice([None, 1, 99999, -1])))
            return "insert a hostile event"
        if c == 3:
            con.execute("INSERT INTO streams (model, created_at, updated_at, last_seq, msg_count) VALUES (?,?,?,?,?)",
                        (hostile_value(rng), hostile_value(rng), hostile_value(rng), hostile_value(rng), hostile_value(rng)))
            return "insert a hostile registry row"
        con.execute("UPDATE events SET turn_id = ? WHERE rowid = ?", (rng.choice([1, 5, 10 ** 9, -3]), _random_rowid(con, "events", rng)))
        return "re-scope an event"
    except sqlite3.Error as e:
        return f"rows (refused: {e})"
    finally:
        con.close()


def m_schema(store: Path, rng: random.Random) -> str:
    con = _db(store)
    try:
        c = rng.randrange(5)
        stmt = [
            "DROP TABLE streams",
            "ALTER TABLE events RENAME TO events_old",
            "ALTER TABLE streams DROP COLUMN correlation_id",
            "ALTER TABLE events DROP COLUMN turn_id",
            "CREATE TABLE IF NOT EXISTS extra (x)",
        ][c]
        try:
            con.execute(stmt)
        except sqlite3.Error as e:
            return f"schema (refused: {e})"
        return f"schema: {stmt}"
    finally:
        con.close()


def m_truncate(store: Path, rng: random.Random) -> str:
    p = store / "events.db"
    size = p.stat().st_size
    cut = rng.choice([0, 50, 100, 4096, rng.randrange(max(size, 1))])
    with open(p, "r+b") as fh:
        fh.truncate(cut)
    return f"truncate events.db at {cut}"


def m_flip(store: Path, rng: random.Random) -> str:
    p = store / rng.choice(["events.db", "events.db", "flow.db"])
    data = bytearray(p.read_bytes())
    n = rng.randrange(1, 24)
    header = rng.random() < 0.3
    for _ in range(n):
        i = rng.randrange(min(len(data), 100) if header else len(data))
        data[i] = rng.randrange(256)
    p.write_bytes(bytes(data))
    return f"flip {n} bytes of {p.name}{' header' if header else ''}"


def _garbage(rng: random.Random) -> bytes:
    size = rng.choice([1, 31, 32, 100, 4096, 32_768, 40_000])
    kind = rng.randrange(3)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(min(size, 4096))) * (size // 4096 + 1)
    if kind == 1:
        return b"\x00" * size
    # a WAL-looking header (magic) followed by garbage
    return bytes.fromhex("377f0682002de218") + bytes(rng.randrange(256) for _ in range(min(size, 4096)))


def m_sidecars(store: Path, rng: random.Random) -> str:
    which = rng.choice([("-wal",), ("-shm",), ("-wal", "-shm")])
    for suffix in which:
        (store / f"events.db{suffix}").write_bytes(_garbage(rng))
    return "garbage " + "+".join(which)


def m_crashed_writer(store: Path, rng: random.Random) -> str:
    """The files a killed writer leaves: a WAL with committed frames, with or without its -shm."""
    w = StoreWriter(store)
    w.conn.execute("PRAGMA wal_autocheckpoint = 0")
    sid = w.create_session("mock")
    w.append(sid, Message.text("user", "written by a writer that was then killed"))
    keep_shm = rng.random() < 0.5
    saved = {name: (store / name).read_bytes() for name in ("events.db", "events.db-wal", "events.db-shm")
             if (store / name).exists()}
    w.close()
    for name in ("events.db-wal", "events.db-shm"):
        (store / name).unlink(missing_ok=True)
    for name, data in saved.items():
        if name == "events.db-shm" and not keep_shm:
            continue
        (store / name).write_bytes(data)
    return f"crashed writer ({'with' if keep_shm else 'no'} -shm)"


def m_special(store: Path, rng: random.Random) -> str:
    p = store / "events.db"
    c = rng.randrange(6)
    p.unlink()
    if c == 0:
        os.mkfifo(p)
        return "events.db is a FIFO"
    if c == 1:
        p.mkdir()
        return "events.db is a directory"
    if c == 2:
        os.symlink("/dev/zero", p)
        return "events.db -> /dev/zero"
    if c == 3:
        os.symlink(p, p)
        return "events.db is a symlink loop"
    if c == 4:
        p.write_bytes(b"")
        return "events.db is empty"
    s = socket_path = p
    import socket
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(socket_path))
    except OSError:
        p.write_bytes(b"SQLite format 3\x00")
        return "events.db is a bare header"
    finally:
        sock.close()
    return f"events.db is a socket ({s.name})"


def m_prices(store: Path, rng: random.Random) -> str:
    c = rng.randrange(4)
    text = [
        '{"m":' * 100_000 + "1" + "}" * 100_000,
        "[" * 50_000 + "]" * 50_000,
        '{"mock": {"input": "cheap", "output": null}}',
        "\xff not json",
    ][c]
    (store / "prices.json").write_bytes(text.encode("utf-8", "surrogateescape") if c != 3 else b"\xff not json")
    return f"prices.json #{c}"


def m_flow(store: Path, rng: random.Random) -> str:
    (store / "flow.db").write_bytes(_garbage(rng))
    return "garbage flow.db"


MUTATIONS: dict[str, Callable[[Path, random.Random], str]] = {
    "cell": m_cell, "invalid_utf8": m_invalid_utf8, "payload_type": m_payload_type, "payload_text": m_payload_text,
    "plan_source": m_plan_source, "rows": m_rows, "schema": m_schema, "truncate": m_truncate, "flip": m_flip,
    "sidecars": m_sidecars, "crashed_writer": m_crashed_writer, "special": m_special, "prices": m_prices,
    "flow": m_flow,
}
# mutations that need a readable SQLite file: applied before the file-level ones
_SQL = ("cell", "invalid_utf8", "payload_type", "payload_text", "plan_source", "rows", "schema", "crashed_writer")


def make_variant(base: Path, dst: Path, seed: int, names: list[str] | None = None) -> list[str]:
    """Copy ``base`` to ``dst`` and apply 1–3 mutations (or the named ones). Returns what was done."""
    rng = random.Random(seed)
    shutil.copytree(base, dst, symlinks=True)
    if names is None:
        names = [rng.choice(list(MUTATIONS)) for _ in range(rng.randrange(1, 4))]
    names = sorted(names, key=lambda n: (n not in _SQL, n == "special"))
    done = []
    restored = False
    for name in names:
        if name not in _SQL and not restored:
            _back_to_wal(dst)
            restored = True
        try:
            done.append(MUTATIONS[name](dst, rng))
        except Exception as e:  # noqa: BLE001 - an earlier mutation broke the file: fine
            done.append(f"{name} (skipped: {type(e).__name__})")
    # A mutation that failed half-way left its connection to a traceback's frames (a cycle): it is
    # closed now — outside the except block, where the exception is gone — not during a verb.
    gc.collect()
    if not restored:
        _back_to_wal(dst)
    return done


def _back_to_wal(store: Path) -> None:
    """The corruptor edits in rollback mode; flux stores are WAL databases, so switch back
    (unless a crashed-writer WAL is deliberately left in place)."""
    if (store / "events.db-wal").exists():
        return
    try:
        con = sqlite3.connect(store / "events.db", isolation_level=None)
        con.execute("PRAGMA journal_mode = WAL")
        con.close()
    except sqlite3.Error:
        pass
    for side in ("events.db-wal", "events.db-shm"):
        (store / side).unlink(missing_ok=True)


# --------------------------------------------------------------------------------- observing

def tree_state(d: Path) -> dict[str, tuple]:
    """Every entry under ``d`` (not following symlinks): type, size, mtime and content digest."""
    out: dict[str, tuple] = {}
    if not os.path.lexists(d):
        return out
    for root, dirs, files in os.walk(d, followlinks=False):
        for name in dirs + files:
            p = os.path.join(root, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, d)
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as fh:
                    digest = hashlib.sha256(fh.read()).hexdigest()
                out[rel] = ("file", st.st_size, st.st_mtime_ns, digest)
            elif stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            else:
                out[rel] = (stat.S_IFMT(st.st_mode), st.st_mtime_ns)
    return out


class Hang(Exception):
    pass


def _on_alarm(signum, frame):
    raise Hang()


@dataclass
class Invocation:
    verb: list[str]
    exit_code: int | None
    stdout: str
    stderr: str
    exception: BaseException | None
    hung: bool
    seconds: float


def run_verb(main, store: Path, verb: list[str], timeout_s: int = 20) -> Invocation:
    """One ``flux`` verb in-process (click's runner), interrupted after ``timeout_s`` seconds."""
    runner = CliRunner()
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(timeout_s)
    t0 = time.monotonic()
    hung = False
    try:
        res = runner.invoke(main, [*verb, "--store", str(store)], catch_exceptions=True)
        exc = res.exception
        if isinstance(exc, Hang):
            hung = True
        out, err, code = res.stdout, res.stderr, res.exit_code
    except Hang:
        hung, out, err, code, exc = True, "", "", None, None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return Invocation(verb, code, out, err, None if hung or isinstance(exc, SystemExit) else exc, hung,
                      time.monotonic() - t0)


def check_invocation(inv: Invocation) -> list[str]:
    """What is wrong with one invocation (empty when it kept the contract)."""
    problems = []
    if inv.hung:
        problems.append("hang")
    if inv.exception is not None:
        problems.append(f"traceback {type(inv.exception).__name__}: {str(inv.exception)[:120]}")
    if not inv.hung and inv.exit_code not in (0, 1):
        problems.append(f"exit {inv.exit_code}")
    if "Traceback (most recent call last)" in inv.stdout + inv.stderr:
        problems.append("traceback text")
    if "internal error" in inv.stderr:
        problems.append("internal error: " + inv.stderr.strip()[:160])
    if "error:" in inv.stderr:
        lines = [ln for ln in inv.stderr.splitlines() if ln.strip()]
        if len(lines) != 1 or not lines[0].startswith("error: "):
            problems.append(f"error not one line: {inv.stderr.strip()[:200]!r}")
    return problems


@dataclass
class Tally:
    variants: int = 0
    invocations: int = 0
    tracebacks: int = 0
    hangs: int = 0
    bad_errors: int = 0
    stores_changed: int = 0
    bytes_written: int = 0
    temp_leaks: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, what: str, detail: str) -> None:
        if len(self.examples) < 40:
            self.examples.append(f"{what}: {detail}")


def _changed_bytes(before: dict, after: dict) -> int:
    n = 0
    for k in set(before) | set(after):
        a, b = before.get(k), after.get(k)
        if a != b:
            n += max((a[1] if a and a[0] == "file" else 0), (b[1] if b and b[0] == "file" else 0), 1)
    return n


def battery(main, store: Path, tmpdir: Path, verbs=READ_VERBS, tally: Tally | None = None, label: str = "",
            timeout_s: int = 20) -> Tally:
    """Run every read verb on one store; count every broken promise into ``tally``."""
    tally = tally or Tally()
    tally.variants += 1
    for verb in verbs:
        before = tree_state(store)
        inv = run_verb(main, store, verb, timeout_s)
        after = tree_state(store)
        tally.invocations += 1
        for p in check_invocation(inv):
            if p == "hang":
                tally.hangs += 1
            elif p.startswith("traceback") or p.startswith("internal error") or p.startswith("exit "):
                tally.tracebacks += 1
            else:
                tally.bad_errors += 1
            tally.add(p, f"{label} {' '.join(verb)}")
        if after != before:
            tally.stores_changed += 1
            tally.bytes_written += _changed_bytes(before, after)
            diff = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            tally.add("store changed", f"{label} {' '.join(verb)} {diff}")
        leftovers = os.listdir(tmpdir)
        if leftovers:
            tally.temp_leaks += len(leftovers)
            tally.add("temp leak", f"{label} {' '.join(verb)} {leftovers}")
            for name in leftovers:
                p = tmpdir / name
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    return tally


def isolated_tmpdir(root: Path) -> Path:
    """Point ``TMPDIR`` (and Python's cached temp dir) at a fresh empty directory."""
    t = root / "tmp-watch"
    t.mkdir(exist_ok=True)
    os.environ["TMPDIR"] = str(t)
    tempfile.tempdir = str(t)
    return t
