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


def _default_fixture() -> Path:
    # shared/ sits next to the checkout (or next to the directory holding a git worktree).
    for up in REPO.parents:
        if (up / _SHARED_FIXTURE).is_dir():
            return up / _SHARED_FIXTURE
    return REPO.parent / _SHARED_FIXTURE


# The one place that says where the real flux 0.26.0 fixture is: $FLUX_FIXTURE_DIR, else shared/.
FIXTURE = Path(os.environ["FLUX_FIXTURE_DIR"]) if os.environ.get("FLUX_FIXTURE_DIR") else _default_fixture()


def fixture_dir() -> Path:
    """The real fixture directory; a missing one fails the calling test (never skips) with what to do."""
    if not (FIXTURE / "events.db").is_file():
        pytest.fail(f"the real flux fixture is not at {FIXTURE} — point FLUX_FIXTURE_DIR at a copy of "
                    "shared/fixtures/flux/coding-agent-note (the store flux 0.26.0 wrote)", pytrace=False)
    return FIXTURE


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
