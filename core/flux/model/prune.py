"""``flux sessions --prune``: delete the sessions that recorded nothing (flux's rule), never one that
is live, just created, or named as another session's source.

:func:`plan_prune` only reads; :func:`prune_sessions` re-checks inside its one deleting transaction,
so a session that changed since the plan stops it and nothing is deleted (docs/cli.md, ``--prune``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from ..errors import FluxError
from ..records import Record
from ..store.lease import LeaseHolder, lease_holder_on
from ..store.store import SessionRow, StoreReader, StoreWriter

__all__ = ["GRACE_MS", "PrunePlan", "plan_prune", "prune_sessions", "SessionIsLive"]

GRACE_MS = 60_000

_NON_EMPTY = "SELECT DISTINCT stream FROM events WHERE kind != 'session_started'"


class SessionIsLive(FluxError):
    """A session the prune would delete is being recorded right now: nothing was pruned."""


class PrunePlan(Record):
    __slots__ = ("pruned", "kept")
    pruned: list[SessionRow]  # oldest first
    kept: list[tuple[SessionRow, str]]  # an empty session that stays, and why

    def __init__(self, pruned: list[SessionRow], kept: list[tuple[SessionRow, str]]) -> None:
        self.pruned = pruned
        self.kept = kept

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.pruned]

    def to_json(self) -> dict:
        return {"pruned": self.ids, "kept": [{"id": r.id, "reason": why} for r, why in self.kept]}


def _live_error(sid: str, holder: LeaseHolder) -> SessionIsLive:
    return SessionIsLive(f"{sid} is being recorded by {holder.words()} right now — nothing was pruned; "
                         "run `flux sessions --prune` again when its turn is done")


def plan_prune(reader: StoreReader, now_ms: int, *, store_dir: Optional[os.PathLike] = None) -> PrunePlan:
    """What ``--prune`` would delete, and the empty sessions it keeps with the reason (docs/cli.md, ``--prune``).
    Raises :class:`SessionIsLive` for an empty session a live process is recording into."""
    where = Path(store_dir) if store_dir is not None else reader.dir
    rows = reader.list_sessions()
    busy = {s for (s,) in reader.query(_NON_EMPTY)}
    empty = sorted((r for r in rows if r.id not in busy), key=lambda r: r.n)
    kept: dict[str, str] = {}
    for r in empty:
        holder = lease_holder_on(where, r.id)
        if holder is not None:
            raise _live_error(r.id, holder)
        age = now_ms - r.created_at
        if age < GRACE_MS:
            secs = max(0, age // 1000)
            kept[r.id] = f"created {secs} s ago — it may be a run that has not started its turn yet"
    children: dict[str, list[SessionRow]] = {}
    for r in rows:
        if r.correlation_id and r.correlation_id != r.id:
            children.setdefault(r.correlation_id, []).append(r)
    candidates = {r.id for r in empty if r.id not in kept}
    changed = True
    while changed:  # a source stays while any child of it stays (a chain of empty ones goes together)
        changed = False
        for sid in sorted(candidates):
            staying = [c for c in children.get(sid, ()) if c.id not in candidates]
            if staying:
                candidates.discard(sid)
                c = min(staying, key=lambda x: x.n)
                more = f" and {len(staying) - 1} more" if len(staying) > 1 else ""
                kept[sid] = f"the source of {c.id}{more} — pruning it would leave that child pointing at nothing"
                changed = True
    pruned = [r for r in empty if r.id in candidates]
    return PrunePlan(pruned, [(r, kept[r.id]) for r in empty if r.id in kept])


def prune_sessions(store_dir: os.PathLike, plan: PrunePlan) -> dict[str, int]:
    """Delete ``plan.pruned`` in one transaction, re-checking each is still empty and not live;
    returns each id's deleted event count. Raises (nothing deleted) when one changed."""
    if not plan.pruned:
        return {}
    with StoreWriter(store_dir, create=False) as w:
        with w.transaction():
            for r in plan.pruned:
                holder = lease_holder_on(store_dir, r.id)
                if holder is not None:
                    raise _live_error(r.id, holder)
                got = w.conn.execute("SELECT 1 FROM events WHERE stream = ? AND kind != 'session_started' LIMIT 1",
                                     (r.id,)).fetchone()
                if got is not None:
                    raise FluxError(f"{r.id} recorded events while the prune ran — nothing was pruned; "
                                    "run `flux sessions --prune` again")
            return w.delete_sessions(plan.ids)
