"""Test helpers: where the real flux fixture is, copying stores, digesting a directory."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
_SHARED_FIXTURE = Path("shared") / "fixtures" / "flux" / "coding-agent-note"
FIXTURE_ENV = "FLUX_FIXTURE_DIR"

#: the one reason every test needing the real fixture skips with, in a clone without shared/ beside it
FIXTURE_SKIP_REASON = (f"the real flux 0.26.0 fixture is not here — set {FIXTURE_ENV} to a copy of "
                       "shared/fixtures/flux/coding-agent-note, or put shared/ beside the checkout")


def locate_fixture(repo: Path = REPO, environ=os.environ) -> tuple[Path | None, bool]:
    """Where the real fixture should be, and whether it is required there.

    ``$FLUX_FIXTURE_DIR`` when set (required: CI sets it, so a wrong path fails rather than skips);
    else ``shared/`` beside the checkout, or beside a directory holding it (a git worktree under
    ``wt/``) — optional: ``None`` when there is none."""
    explicit = environ.get(FIXTURE_ENV)
    if explicit:
        return Path(explicit).expanduser(), True
    for up in repo.parents:
        if (up / _SHARED_FIXTURE / "events.db").is_file():
            return up / _SHARED_FIXTURE, False
    return None, False


def fixture_dir() -> Path:
    """The real fixture directory. Without one (a fresh clone) the calling test skips with
    :data:`FIXTURE_SKIP_REASON`; a ``$FLUX_FIXTURE_DIR`` that holds no store fails it."""
    where, required = locate_fixture()
    if where is not None and (where / "events.db").is_file():
        return where
    if required:
        pytest.fail(f"{FIXTURE_ENV}={where} holds no flux store (no events.db) — point it at a copy of "
                    "shared/fixtures/flux/coding-agent-note (the store flux 0.26.0 wrote)", pytrace=False)
    pytest.skip(FIXTURE_SKIP_REASON)


def copy_fixture(dst: Path) -> Path:
    """A writable copy of the real fixture at ``dst`` (the original is never touched)."""
    return copy_store(fixture_dir(), dst)


def copy_store(src: Path, dst: Path) -> Path:
    """Copy a store directory, making the copy writable (the shared fixture is read-only)."""
    shutil.copytree(src, dst)
    for p in [dst, *dst.iterdir()]:
        p.chmod(p.stat().st_mode | stat.S_IWUSR)
    return dst


def tree_digest(d: Path) -> dict[str, str]:
    """Every file in a directory with its sha256 — to prove a browse changed nothing."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir()) if p.is_file()}


# ---- small synthetic stores, written through our writer ------------------------------------------

from flux.canonical import canonical_json, sha256_hex  # noqa: E402
from flux.store import (  # noqa: E402
    CallUsage, Message, OpRecorded, PlanAttempted, PlanHalted, PlanResumed, Run, StatementCompleted,
    StepStarted, StepSucceeded, StoreWriter, TurnEnded, Usage,
)

HOST_PLAN = 'flow\n  adaptive_gather_1 = read({{"path":"{path}"}})\n'


def cell(op: str, inp: dict, content: str, **flags) -> Run:
    ih = sha256_hex(canonical_json(inp))
    return Run(event=OpRecorded(step=f"step_{op}_{ih[:16]}", op=op, input_hash=ih, input_view=canonical_json(inp),
                                content=content, **flags))


def write_turn(w: StoreWriter, sid: str, text: str, *, plan: str | None = None, cells=(), ledger=(), end: str | None = "ok",
               ts: int = 1_700_000_000_000, usage: Usage | None = None, model: str = "mock") -> int:
    """One turn: user message, turn_started, an optional accepted plan, cells, ledger rows, and an end."""
    w.append(sid, Message.text("user", text), ts=ts)
    tid = w.begin_turn(sid, text, model, ts=ts + 1)
    if plan is not None:
        w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=plan), turn_id=tid, ts=ts + 2)
    for c in cells:
        w.append(sid, c, ts=ts + 3)
    for row in ledger:
        w.append(sid, Run(event=row), ts=ts + 4)
    if usage is not None:
        w.append(sid, CallUsage(model=model, usage=usage), turn_id=tid, ts=ts + 5)
    if end is not None:
        w.append(sid, TurnEnded(outcome=end, answer=f"answer to {text}", usage=usage), turn_id=tid, ts=ts + 6)
        w.append(sid, Message.text("assistant", f"answer to {text}"), ts=ts + 7)
    return tid


def rewrite(store: Path, fn) -> None:
    """Tamper with a store copy: ``fn(body) -> body | None`` per row (None deletes the row)."""
    import sqlite3

    from flux.store import decode_payload, encode_payload

    con = sqlite3.connect(store / "events.db")
    try:
        for gs, kind, payload in con.execute("SELECT global_seq, kind, payload FROM events").fetchall():
            body = decode_payload(kind, payload)
            new = fn(body)
            if new is None:
                con.execute("DELETE FROM events WHERE global_seq = ?", (gs,))
            elif new is not body:
                con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (encode_payload(new), gs))
        con.commit()
    finally:
        con.close()


def on_cell(fn):
    """Adapt ``fn(OpRecorded) -> body | None`` into a :func:`rewrite` callback for cassette cells."""
    def go(body):
        if isinstance(body, Run) and isinstance(body.event, OpRecorded):
            return fn(body.event)
        return body
    return go


def descendants(pid: int) -> list[tuple[int, str]]:
    """``(pid, command name)`` of every live process under ``pid`` (read from /proc: an op's
    subprocess runs in a process group of its own, so a group id does not find it)."""
    parent: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name, rest = text.split("(", 1)[1].rsplit(")", 1)
        parent[int(entry)] = int(rest.split()[1])
        names[int(entry)] = name
    out: list[tuple[int, str]] = []
    todo = [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += [(c, names[c]) for c in kids]
        todo += kids
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and everything under it (the writer first, so nothing it runs outlives it)."""
    import signal

    below = descendants(pid)
    for p in [pid, *(c for c, _ in below)]:
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def pg_admin(url: str):
    """A plain autocommit connection to the test PostgreSQL server, the schema of ``url`` first on
    its search_path (for what a test does beside the product: end a backend, take a key)."""
    import psycopg

    from flux.store.location import url_schema

    conn = psycopg.connect(url.split("?")[0], autocommit=True)
    conn.execute(f'SET search_path TO "{url_schema(url)}"')
    return conn


def wait_until(cond, what: str, proc=None, limit: float = 90) -> None:
    """Poll ``cond`` until true; fail naming ``what`` when ``limit`` s pass or ``proc`` (a writer
    the test waits on) exits first."""
    import time

    deadline = time.monotonic() + limit
    while not cond():
        assert proc is None or proc.poll() is None, f"the writer exited before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"never reached {what}"
        time.sleep(0.05)
