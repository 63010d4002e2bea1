"""The side-effect gate: before anything runs live, say what would run.

Every write of the time machine first computes a :class:`LivePreview` from the recording alone: the
prefix served from tape, each op that may go live with its declared effect and workspace, and the
model a re-plan would call. The prediction is static; every live dispatch still passes the approver.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ..agent.registry import model_effect

__all__ = ["LiveOp", "LivePreview", "EFFECT_ORDER"]

EFFECT_ORDER = ("write", "exec", "network", "none")


_DETAIL_WIDTH = 48  # the gate table's input column, at most


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 1] + "…"


@dataclass(frozen=True, slots=True)
class LiveOp:
    """One op the live part may dispatch."""

    op: str
    effect: str  # write | exec | network | none (undeclared counts as write)
    detail: str  # the input's gist: a path, a command, … or "(input computed at run time)"
    workspace: str | None = None
    why: str = "tail"  # tail | in flight | off tape | re-plan
    denied: str | None = None  # the policy's refusal, when a policy would deny it

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "effect": self.effect, "detail": self.detail, "workspace": self.workspace,
                "why": self.why, "denied": self.denied}


@dataclass(frozen=True)
class LivePreview:
    """What a write action would do, computed before it does anything."""

    action: str  # fork | resurrect | what-if | sweep
    session: str  # the source session
    offline: bool  # no model call and no op can go live
    ops: tuple[LiveOp, ...] = ()
    model: str | None = None  # a model a live turn would call (None: no model call)
    prefix_statements: int = 0  # replayed from tape before the boundary
    prefix_cells: int = 0  # cells the prefix serves
    tail_statements: int = 0  # statements after the boundary
    tail_served: int = 0  # tail dispatches a recorded cell will serve
    workspace: str | None = None
    notes: tuple[str, ...] = ()
    title: str = ""  # "fork s_4 @ 2 (inject)", "resurrect s_9 · turn 1", …
    extra: dict = field(default_factory=dict)  # action-specific facts (the position, the turn, …)

    @property
    def needs_confirm(self) -> bool:
        return not self.offline

    @property
    def effects(self) -> list[str]:
        """Distinct effects of the live ops, most dangerous first."""
        have = {o.effect for o in self.ops}
        return [e for e in EFFECT_ORDER if e in have]

    def with_policy(self, approver: Any) -> "LivePreview":
        """Mark the ops a policy approver would deny (``denied by policy``)."""
        from ..agent.approver import ApprovalRequest

        if approver is None:
            return self
        eff = {"none": "read"}
        ops = []
        for o in self.ops:
            try:
                d = approver.decide(ApprovalRequest(op=o.op, effect=eff.get(o.effect, o.effect), input=None))
            except Exception:  # an interactive ask is not answered at preview time
                ops.append(o)
                continue
            ops.append(o if d.allowed else replace(o, denied=d.reason or "denied by policy"))
        return replace(self, ops=tuple(ops))

    def covers(self, run: "LivePreview") -> bool:
        """Whether what was confirmed at the gate (``self``) covers what an action is about to do
        (``run``): every live op with its effect was listed, and any model call is the one shown."""
        seen = {(o.op, o.effect) for o in self.ops}
        return all((o.op, o.effect) in seen for o in run.ops) and (run.model is None or run.model == self.model)

    def unimplemented(self, catalog: Any) -> list[str]:
        """Ops the live part may dispatch that ``catalog`` (the toolbox the action would run with)
        has no implementation of, in the order listed — a live run would halt on the first one."""
        known = {s.name for s in (catalog or ())}
        out: list[str] = []
        for o in self.ops:
            if o.op not in known and o.op not in out:
                out.append(o.op)
        return out

    def refusal(self, catalog: Any) -> str | None:
        """One line refusing the action up front when an op it may run live has no implementation
        here (``None``: every live op can run). Never pretend: such an op is refused, not faked."""
        missing = self.unimplemented(catalog)
        if not missing:
            return None
        names = ", ".join(f"`{m}`" for m in missing)
        what = self.title or f"{self.action} {self.session}"
        return (f"{what} would dispatch {names} live, and this toolbox has no implementation of "
                f"{'it' if len(missing) == 1 else 'them'} — run it with the toolbox the session was recorded "
                "with (a store names it in toolbox.json; demo stores use the demo toolbox); nothing was written")

    def tail_line(self) -> str:
        if self.offline:
            return "offline: no model call, no side effect"
        parts = []
        seen = set()
        for o in self.ops:
            if (o.op, o.effect) in seen:
                continue
            seen.add((o.op, o.effect))
            parts.append(f"{o.op} ({o.effect})")
        if self.model:
            parts.append(f"model {self.model} ({model_effect(self.model)})")
        ws = f"   workspace {self.workspace}" if self.workspace else ""
        return "runs live: " + " · ".join(parts) + ws

    def lines(self) -> list[str]:
        """The gate as text (CLI and the app's modal body)."""
        out = []
        if self.title:
            out.append(self.title)
        if self.prefix_statements or self.prefix_cells:
            out.append(f"prefix   {self.prefix_statements} statement(s) from tape: {self.prefix_cells} cell(s) served, "
                       "no model call, no side effect")
        if self.tail_statements or self.tail_served:
            out.append(f"tail     {self.tail_statements} statement(s): {self.tail_served} dispatch(es) served from tape")
        out.extend(self.notes)
        if self.offline:
            out.append("offline: no model call, no side effect")
            return out
        # One table: op, effect, input, then where it runs. Columns are as wide as their longest
        # cell (an input longer than _DETAIL_WIDTH is cut with …); a workspace every op shares is
        # said once in the heading instead of on every row.
        spaces = {o.workspace for o in self.ops}
        shared = next(iter(spaces)) if len(spaces) == 1 else None
        out.append("This will dispatch, for real" + (f" (workspace {shared}):" if shared else ":"))
        rows = [(o.op, o.effect, _cut(o.detail, _DETAIL_WIDTH),
                 "" if shared or not o.workspace else f"workspace {o.workspace}",
                 "denied by policy" if o.denied else "") for o in self.ops]
        if self.model:
            rows.append(("model", "network", self.model, "", ""))
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        for row in rows:
            cells = [c.ljust(w) for c, w in zip(row[:3], widths)] + [c for c in row[3:] if c]
            out.append(("  " + "  ".join(cells)).rstrip())
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action, "session": self.session, "offline": self.offline,
            "ops": [o.to_json() for o in self.ops], "model": self.model,
            "prefix_statements": self.prefix_statements, "prefix_cells": self.prefix_cells,
            "tail_statements": self.tail_statements, "tail_served": self.tail_served,
            "workspace": self.workspace, "notes": list(self.notes), "title": self.title, **self.extra,
        }
