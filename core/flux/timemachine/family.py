"""A session's whole family as a tree: its root source, forks, what-ifs, checks, sub-agents and their
children, built from one registry read (``correlation_id``, ``agent_id``); what the lineage tree shows.

Cycles and runaway trees a hostile registry can make are cut, and said so. :func:`child_difference`
is a child's run diff against its parent reduced to counts and the first divergence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.lineage import Lineage, lineage_of
from ..store.store import SessionRow, StoreReader

__all__ = ["Family", "FamilyNode", "ChildDifference", "ResurrectedTurn", "family_of", "child_difference",
           "resurrected_turns", "DIFFABLE_KINDS"]

MAX_DEPTH = 12
MAX_NODES = 2000

#: Child kinds that re-run their source's plan, so a diff against the parent says what changed.
#: (A sub-agent ran a different task: a diff against its parent would only say "everything".)
DIFFABLE_KINDS = frozenset({"fork", "what-if", "check"})


@dataclass(frozen=True, slots=True)
class FamilyNode:
    row: SessionRow
    lineage: Lineage | None  # how it relates to its parent (None for the root)
    depth: int  # 0 for the root
    parent: str | None  # the parent session id (None for the root)
    last_child: bool  # the last of its parent's children (the tree draws └─ instead of ├─)
    open_ancestors: tuple[bool, ...] = ()  # per ancestor depth 1..depth-1: does a sibling follow below it (draw │)

    @property
    def id(self) -> str:
        return self.row.id

    @property
    def diffable(self) -> bool:
        return self.parent is not None and self.lineage is not None and self.lineage.kind in DIFFABLE_KINDS


@dataclass
class Family:
    focus: str  # the session the tree was asked for
    root: str
    nodes: list[FamilyNode]  # pre-order: every parent before its children, siblings by n
    missing_source: str | None = None  # the root names a source this store does not hold
    cut: list[str] = field(default_factory=list)  # why the tree is incomplete (cycles, limits)

    def node(self, session_id: str) -> FamilyNode | None:
        return next((n for n in self.nodes if n.id == session_id), None)

    def index_of(self, session_id: str) -> int | None:
        return next((i for i, n in enumerate(self.nodes) if n.id == session_id), None)


def family_of(reader: StoreReader, session_id: str, *, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> Family:
    """The family tree of ``session_id`` (``s_<n>`` or ``last``). Raises ``SessionNotFound``."""
    start = reader.resolve_session(session_id)
    rows = {r.id: r for r in reader.list_sessions()}
    rows.setdefault(start.id, start)
    children: dict[str, list[SessionRow]] = {}
    for r in rows.values():
        if r.correlation_id and r.correlation_id != r.id:
            children.setdefault(r.correlation_id, []).append(r)
    for kids in children.values():
        kids.sort(key=lambda r: r.n)

    cut: list[str] = []
    # Up: to the first ancestor without a source in this store.
    root = start
    seen_up = {root.id}
    missing: str | None = None
    while root.correlation_id and root.correlation_id != root.id:
        parent = rows.get(root.correlation_id)
        if parent is None:
            missing = root.correlation_id
            break
        if parent.id in seen_up:
            cut.append(f"the sources of {start.id} form a cycle through {parent.id}")
            break
        seen_up.add(parent.id)
        root = parent

    nodes: list[FamilyNode] = []
    seen: set[str] = set()

    def walk(row: SessionRow, depth: int, parent: str | None, last: bool, open_: tuple[bool, ...]) -> None:
        if len(nodes) >= max_nodes:
            if not any(c.startswith("more than") for c in cut):
                cut.append(f"more than {max_nodes} related sessions: the rest are not shown")
            return
        seen.add(row.id)
        nodes.append(FamilyNode(row, lineage_of(row) if parent is not None else None, depth, parent, last, open_))
        kids = [k for k in children.get(row.id, []) if k.id not in seen]
        if kids and depth + 1 > max_depth:
            cut.append(f"{row.id} has {len(kids)} more level(s) of children below depth {max_depth}")
            return
        for i, kid in enumerate(kids):
            if kid.id in seen:  # reached through a cycle meanwhile
                continue
            is_last = i == len(kids) - 1
            walk(kid, depth + 1, row.id, is_last, open_ + ((not last),) if depth >= 1 else open_)

    walk(root, 0, None, True, ())
    return Family(focus=start.id, root=root.id, nodes=nodes, missing_source=missing, cut=cut)


@dataclass(frozen=True, slots=True)
class ChildDifference:
    """A child against its parent, in one line's worth of facts."""

    same: int
    plan: int
    world: int
    first_divergence: int | None  # row index of the first non-``same`` row
    first_node: int | None  # the statement node at that row
    cell_rows: bool  # aligned cell by cell (a side had no statement rows)

    @property
    def identical(self) -> bool:
        return self.plan == 0 and self.world == 0


def child_difference(reader: StoreReader, parent: str, child: str) -> ChildDifference:
    """``run_diff(parent, child)`` reduced to counts and the first divergence."""
    from .diff import run_diff

    d = run_diff(reader, parent, reader, child)
    s = d.summary
    fd = d.first_divergence
    return ChildDifference(s["same"], s["plan"], s["output"], fd, d.rows[fd].node if fd is not None else None,
                           d.cell_rows)


@dataclass(frozen=True, slots=True)
class ResurrectedTurn:
    """A turn that was killed and then finished by resurrect: it lives in its own session."""

    session: str
    number: int  # 1-based, as the session screen numbers turns
    answer: str  # the resurrect's answer line


def resurrected_turns(reader: StoreReader, session_ids: list[str]) -> dict[str, list[ResurrectedTurn]]:
    """Per session, its resurrected turns: those whose ``turn_ended`` says ``resurrected`` (flux's
    outcome for a turn resurrect finished). Reads only the turn headers."""
    from ..model.session import fold_turns

    out: dict[str, list[ResurrectedTurn]] = {}
    for sid in session_ids:
        turns = fold_turns(reader.events(sid, kinds=("turn_started", "turn_ended")))
        found = [ResurrectedTurn(sid, t.number, t.answer or "") for t in turns if t.outcome == "resurrected"]
        if found:
            out[sid] = found
    return out
