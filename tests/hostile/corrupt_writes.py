"""Hostile stores and scenario directories × every write verb: the battery behind
``benchmarks/fuzz_writes.py`` and the regression tests under tests/hostile/.

A write verb reads before it writes; on bad input it must fail before the first write. Two bases:

* :func:`build_store_base` — the demo store (sessions to fork, what-if and export, an interrupted
  turn to resurrect), written by ``flux demo``;
* :func:`build_scenario_base` — a scenario directory recorded with ``flux record -m mock``.

Corruptions: every store mutation of :mod:`tests.hostile.corrupt` (applied to ``events.db`` /
``flow.db``) plus the scenario files' own (:data:`SCENARIO_MUTATIONS`: invalid UTF-8, deep JSON
and TOML, wrong types, out-of-range timestamps, values 100 KB long).

:func:`judge_write` runs one verb in-process and sorts what went wrong into classes: a traceback,
a hang, an error that is not one short line, a *partial write* (the verb failed and the bytes of
the source changed), a golden rewritten by a failing ``--update``, a store file still open after
the verb returned (before any garbage collection), a file left in ``TMPDIR``.
"""

from __future__ import annotations

import gc
import os
import random
import shutil
import signal
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from click.testing import CliRunner

from tests.hostile.corrupt import MUTATIONS, Hang, _db, _on_alarm, make_variant, tree_state

MAX_ERROR_LINE = 2_000  # an error line longer than this echoed a hostile value whole

STORE_VERBS: list[list[str]] = [
    ["fork", "s_7", "--at", "1", "--inject", '"x"', "--json"],
    ["fork", "s_7", "--at", "0", "--edit", "{edit}", "--yes"],
    ["what-if", "s_7", "--substitute", 'glob="nothing"', "--json"],
    ["resurrect", "s_9", "--yes", "--json"],
    ["export", "s_7", "--format", "atif", "-o", "{out}/atif.json"],
    ["golden", "update", "s_7", "{out}/golden.json"],
    ["sweep", "--all", "--json"],
]

SCENARIO_VERBS: list[list[str]] = [
    ["test", "{sc}"],
    ["test", "--update", "{sc}"],
    ["test", "--replay-only", "{sc}"],
    ["export", "{sc}", "--format", "atif", "-o", "{out}/atif.json"],
    ["golden", "check", "{sc}", "{sc}/trajectory.golden.json"],
]

# a sweep is one what-if per session: a session that fails is an error row (exit 1) while the others
# are written — its writes are judged per session (each what-if whole), not as one verb
BATCH_VERBS = ("sweep",)

EDIT_PLAN = 'flow\n  x = read({"path":"VERSION"})\n'


def _flux(args: list[str]) -> None:
    from flux.cli import main

    res = CliRunner().invoke(main, args, catch_exceptions=False)
    if res.exit_code != 0:
        raise RuntimeError(f"flux {' '.join(args)}: {res.output}")


def build_store_base(d: Path) -> Path:
    _flux(["demo", "--store", str(d)])
    for side in ("events.db-wal", "events.db-shm", "flow.db-wal", "flow.db-shm"):
        (d / side).unlink(missing_ok=True)
    return d


def build_scenario_base(d: Path) -> Path:
    _flux(["record", d.name, "write a quick note", "--dir", str(d.parent), "-m", "mock", "--yes"])
    for side in ("events.db-wal", "events.db-shm", "flow.db-wal", "flow.db-shm"):
        (d / side).unlink(missing_ok=True)
    return d


# --------------------------------------------------------------------------------- scenario files

def _deep(n: int, rng: random.Random) -> str:
    return rng.choice(["[" * n, "[" * n + "]" * n, '{"a":' * n + "1" + "}" * n])


def _read(p: Path) -> str:
    """A scenario file's text — as its bytes are, when an earlier mutation left it invalid UTF-8."""
    return p.read_bytes().decode("utf-8", "surrogateescape")


def _write(p: Path, text: str) -> None:
    p.write_bytes(text.encode("utf-8", "surrogateescape"))


def s_model_utf8(sc: Path, rng: random.Random) -> str:
    p = sc / "model.jsonl"
    data = bytearray(p.read_bytes())
    if data and rng.random() < 0.5:
        data[rng.randrange(len(data))] = rng.choice([0xFF, 0xC3, 0x80, 0xED])
    else:
        data += b'{"request":"\xff\xfe"}\n'
    p.write_bytes(bytes(data))
    return "model.jsonl invalid utf-8"


def s_model_shape(sc: Path, rng: random.Random) -> str:
    p = sc / "model.jsonl"
    lines = _read(p).splitlines()
    c = rng.randrange(6)
    line = [_deep(rng.choice([600, 5_000]), rng), "5", '{"request": 5, "chunks": "x"}', '{"chunks": [5, null]}',
            '{"request": {"model": []}, "request_hash": 7, "chunks": [{"t": 5}]}', "x" * 200_000][c]
    if lines and rng.random() < 0.5:
        lines[rng.randrange(len(lines))] = line
    else:
        lines.insert(0, line)
    _write(p, "\n".join(lines) + "\n")
    return f"model.jsonl shape #{c}"


def s_model_truncate(sc: Path, rng: random.Random) -> str:
    p = sc / "model.jsonl"
    size = p.stat().st_size
    cut = rng.randrange(max(size, 1))
    with open(p, "r+b") as fh:
        fh.truncate(cut)
    return f"model.jsonl cut at {cut}"


def s_toml(sc: Path, rng: random.Random) -> str:
    p = sc / "scenario.toml"
    text = _read(p)
    c = rng.randrange(6)
    if c == 0:
        _write(p, "a = " + "[" * 3_000 + "]" * 3_000 + "\n" + text)
    elif c == 1:
        _write(p, "a = " + "{b = " * 3_000 + "1" + "}" * 3_000 + "\n" + text)
    elif c == 2:
        p.write_bytes(b"\xff\xfe" + text.encode("utf-8", "surrogateescape"))
    elif c == 3:
        _write(p, text.replace('session = "s_1"', "session = " + "9" * 100_000))
    elif c == 4:
        _write(p, text.replace('session = "s_1"', 'session = "' + "s" * 100_000 + '"'))
    else:
        _write(p, text.replace("recorded_at_ms = ", "recorded_at_ms = 99999999999999999").replace(
            "cassette_max_bytes = ", "cassette_max_bytes = -"))
    return f"scenario.toml #{c}"


def s_override(sc: Path, rng: random.Random) -> str:
    c = rng.randrange(6)
    text = ["[" * 5_000, _deep(5_000, rng), "5", '{"calls": {"x": 5}}', '[{"kind": "chunks", "chunks": 5}]',
            '{"calls": {"1": {"kind": "throw", "status": "x", "chunks": [{"t": []}]}}}'][c]
    (sc / "replay.override.json").write_text(text, encoding="utf-8")
    return f"replay.override.json #{c}"


def s_golden(sc: Path, rng: random.Random) -> str:
    c = rng.randrange(7)
    text = ['{"steps": 5}', '{"schema_version": "ATIF-v1.8", "steps": 5}', '{"schema_version": "ATIF-v1.8", "steps": [5, null]}',
            "[" * 5_000, '{"schema_version": 5, "steps": [{"step_id": []}]}', "\xff", "{" + '"a":1,' * 50_000 + '"b":2}'][c]
    p = sc / "trajectory.golden.json"
    if c == 5:
        p.write_bytes(b"\xff\xfe{}")
    else:
        p.write_text(text, encoding="utf-8")
    return f"trajectory.golden.json #{c}"


def s_snap(sc: Path, rng: random.Random) -> str:
    p = sc / "plan.flux.snap"
    c = rng.randrange(3)
    if c == 0:
        p.write_bytes(b"\xff\xfe" + p.read_bytes())
    elif c == 1:
        p.write_text("x" * 200_000, encoding="utf-8")
    else:
        p.unlink()
    return f"plan.flux.snap #{c}"


def m_ts(store: Path, rng: random.Random) -> str:
    """An event timestamp out of every calendar's range (year 10000, negative, 2**63-1)."""
    con = _db(store)
    try:
        v = rng.choice([253402300800000, -62135596800001, 2 ** 63 - 1, -(2 ** 63)])
        col = rng.choice(["events.ts", "streams.created_at", "streams.updated_at"])
        table, c = col.split(".")
        con.execute(f"UPDATE {table} SET {c} = ?", (v,))
        return f"{col} = {v}"
    finally:
        con.close()


def m_usage_null(store: Path, rng: random.Random) -> str:
    """A ``call_usage`` or ``turn_ended`` whose usage is null, a number or a list."""
    con = _db(store)
    try:
        v = rng.choice(["null", "5", "[]", '"x"', '{"input_tokens": "many"}'])
        con.execute(f"UPDATE events SET payload = json_set(payload, '$.data.usage', json('{v}')) "
                    "WHERE kind IN ('call_usage', 'turn_ended')")
        return f"usage = {v}"
    finally:
        con.close()


STORE_MUTATIONS = {**MUTATIONS, "ts": m_ts, "usage_null": m_usage_null}
_STORE_SQL = ("ts", "usage_null")

SCENARIO_MUTATIONS = {
    "model_utf8": s_model_utf8, "model_shape": s_model_shape, "model_truncate": s_model_truncate, "toml": s_toml,
    "override": s_override, "golden": s_golden, "snap": s_snap,
}


def make_store_variant(base: Path, dst: Path, seed: int) -> list[str]:
    """A copy of the store base with 1–2 corruptions (the SQL-level ones first)."""
    rng = random.Random(seed)
    names = [rng.choice(list(STORE_MUTATIONS)) for _ in range(rng.randrange(1, 3))]
    extra = [n for n in names if n in _STORE_SQL]
    done = make_variant(base, dst, seed, [n for n in names if n not in _STORE_SQL] or ["rows"])
    for n in extra:
        try:
            done.append(STORE_MUTATIONS[n](dst, rng))
        except Exception as e:  # noqa: BLE001 - an earlier corruption broke the file
            done.append(f"{n} (skipped: {type(e).__name__})")
    gc.collect()  # the failed corruption's connection (held by its traceback's frames) is closed before a verb runs
    return done


def make_scenario_variant(base: Path, dst: Path, seed: int) -> list[str]:
    """A copy of the scenario base with a corrupted scenario file, a corrupted store, or both."""
    rng = random.Random(seed)
    shutil.copytree(base, dst, symlinks=True)
    done = []
    pick = rng.random()
    if pick < 0.6:
        for _ in range(rng.randrange(1, 3)):
            name = rng.choice(list(SCENARIO_MUTATIONS))
            done.append(SCENARIO_MUTATIONS[name](dst, rng))
    if pick >= 0.4:
        tmp = dst.with_name(dst.name + "-store")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for f in ("events.db", "flow.db"):
            shutil.copyfile(dst / f, tmp / f)
        store = tmp.with_name(tmp.name + "-v")
        shutil.rmtree(store, ignore_errors=True)
        done += make_store_variant(tmp, store, seed)
        for f in ("events.db", "flow.db", "events.db-wal", "events.db-shm"):
            if os.path.lexists(dst / f):
                shutil.rmtree(dst / f) if (dst / f).is_dir() and not (dst / f).is_symlink() else (dst / f).unlink()
            src = store / f
            if src.is_file() and not src.is_symlink():
                shutil.copyfile(src, dst / f)
            elif os.path.lexists(src):
                os.rename(src, dst / f)
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(store, ignore_errors=True)
    return done


# --------------------------------------------------------------------------------- judging

CLASSES = ("traceback", "hang", "bad_error", "long_error", "partial_write", "golden_rewritten", "open_handle",
           "temp_leak")


@dataclass
class WriteTally:
    variants: int = 0
    runs: int = 0
    failures: dict[str, int] = field(default_factory=lambda: {c: 0 for c in CLASSES})
    examples: list[str] = field(default_factory=list)

    def add(self, cls: str, detail: str) -> None:
        self.failures[cls] += 1
        if len(self.examples) < 60:
            self.examples.append(f"{cls}: {detail}")

    @property
    def total(self) -> int:
        return sum(self.failures.values())

    def lines(self) -> list[str]:
        return [f"{c} {n}" for c, n in self.failures.items()]


def _source_bytes(d: Path) -> dict[str, tuple]:
    """What a failing verb must not change: every entry but the SQLite shared-memory index (a reader
    may need to map one) — store files, their WAL, the scenario's files."""
    return {k: _content(v) for k, v in tree_state(d).items() if not k.endswith("-shm")}


def _content(entry: tuple) -> tuple:
    """An entry without its mtime: a golden put back byte for byte after a failed --update is unchanged."""
    return (entry[0], entry[1], entry[3]) if entry[0] == "file" else entry[:1]


def _open_under(d: Path) -> list[str]:
    """Files under ``d`` this process still holds open."""
    out = []
    root = str(d.resolve()) if d.exists() else str(d)
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(root + os.sep):
            out.append(os.path.relpath(target, root))
    return out


def judge_write(main, verb: list[str], source: Path, out_dir: Path, tmpdir: Path, tally: WriteTally, label: str,
                timeout_s: int = 30, store: Path | None = None, golden_files: tuple[str, ...] = ()) -> None:
    """Run one write verb in-process and count every broken promise into ``tally``."""
    args = list(verb) + (["--store", str(store)] if store is not None else [])
    before = _source_bytes(source)
    before_golden = {g: _content(tree_state(source)[g]) if g in tree_state(source) else None for g in golden_files}
    runner = CliRunner()
    old = signal.signal(signal.SIGALRM, _on_alarm)
    gc.disable()
    signal.alarm(timeout_s)
    hung = False
    code, stdout, stderr, exc = None, "", "", None
    try:
        res = runner.invoke(main, args, catch_exceptions=True)
        code, stdout, stderr = res.exit_code, res.stdout, res.stderr
        exc = res.exception if not isinstance(res.exception, SystemExit) else None
        if isinstance(exc, Hang):
            hung, exc = True, None
        del res
    except Hang:
        hung = True
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    tally.runs += 1
    what = f"{label} {' '.join(verb)} (exit {code}: {stderr.strip()[-160:]!r})"
    exc_text = f"{type(exc).__name__}: {str(exc)[:160]}" if exc is not None else ""
    if exc is not None and os.environ.get("FLUX_BATTERY_TRACE"):
        import traceback
        traceback.print_exception(exc)
    exc = None
    held = _open_under(source)
    gc.enable()
    gc.collect()
    if held and not hung:
        tally.add("open_handle", f"{what} {held}")
    if hung:
        tally.add("hang", what)
    if exc_text or (code not in (0, 1) and not hung) or "Traceback (most recent call last)" in stderr:
        tally.add("traceback", f"{what} → {exc_text or stderr.strip()[-200:] or f'exit {code}'}")
    lines = [ln for ln in stderr.splitlines() if ln.startswith("error:")]
    if code == 1 and not exc_text:
        # one `error:` line — or none, when the verb reports failures on stdout (flux test's table)
        if len(lines) > 1 or (not lines and not stdout.strip()):
            tally.add("bad_error", f"{what} → {stderr.strip()[:200]!r}")
    # a --json verb prints one JSON line (sweep's rows, each with its error): not an error line
    text_lines = stderr.splitlines() + [ln for ln in stdout.splitlines() if not ln.startswith("{")]
    longest = max((len(ln) for ln in text_lines), default=0)
    if longest > MAX_ERROR_LINE and (code != 0 or lines):
        tally.add("long_error", f"{what} → a line of {longest} chars")
    after = _source_bytes(source)
    if code != 0 and after != before and verb[0] not in BATCH_VERBS:
        changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        tally.add("partial_write", f"{what} → changed {changed}")
    if golden_files and code != 0:
        now = tree_state(source)
        for g in golden_files:
            if (_content(now[g]) if g in now else None) != before_golden[g]:
                tally.add("golden_rewritten", f"{what} → {g}")
    left = os.listdir(tmpdir)
    if left:
        tally.add("temp_leak", f"{what} {left[:3]}")
        for name in left:
            p = tmpdir / name
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
    for p in out_dir.iterdir():
        shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)


def fill(verb: list[str], **kw: str) -> list[str]:
    return [a.format(**kw) for a in verb]


def store_battery(main, base: Path, work: Path, tmpdir: Path, seed: int, tally: WriteTally, timeout_s: int = 30) -> None:
    """One corrupted copy of the store base × every store write verb (a fresh copy per verb: a
    verb that succeeds writes, and the next must see the corruption, not the last verb's session)."""
    tally.variants += 1
    out = work / "out"
    out.mkdir(exist_ok=True)
    edit = work / "edit.flux"
    edit.write_text(EDIT_PLAN, encoding="utf-8")
    for verb in STORE_VERBS:
        dst = work / "v"
        shutil.rmtree(dst, ignore_errors=True)
        done = make_store_variant(base, dst, seed)
        judge_write(main, fill(verb, edit=str(edit), out=str(out)), dst, out, tmpdir, tally,
                    f"#{seed} [{'; '.join(done)}]", timeout_s, store=dst)
        shutil.rmtree(dst, ignore_errors=True)


def scenario_battery(main, base: Path, work: Path, tmpdir: Path, seed: int, tally: WriteTally,
                     timeout_s: int = 30) -> None:
    """One corrupted copy of the scenario base × every scenario verb (a fresh copy per verb)."""
    tally.variants += 1
    out = work / "out"
    out.mkdir(exist_ok=True)
    for verb in SCENARIO_VERBS:
        dst = work / "sc"
        shutil.rmtree(dst, ignore_errors=True)
        done = make_scenario_variant(base, dst, seed)
        judge_write(main, fill(verb, sc=str(dst), out=str(out)), dst, out, tmpdir, tally,
                    f"#{seed} [{'; '.join(done)}]", timeout_s,
                    golden_files=("plan.flux.snap", "trajectory.golden.json") if "--update" in verb else ())
        shutil.rmtree(dst, ignore_errors=True)


def row_counts(store: Path) -> tuple[int, int]:
    """(streams, events) of a store, read from a copy so the store itself is not touched."""
    con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True)
    try:
        return (con.execute("SELECT COUNT(*) FROM streams").fetchone()[0],
                con.execute("SELECT COUNT(*) FROM events").fetchone()[0])
    finally:
        con.close()


__all__ = ["build_store_base", "build_scenario_base", "make_store_variant", "make_scenario_variant", "judge_write",
           "WriteTally", "store_battery", "scenario_battery", "STORE_VERBS", "SCENARIO_VERBS", "CLASSES", "row_counts"]
