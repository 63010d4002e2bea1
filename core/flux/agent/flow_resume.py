"""Halt, fix, resume: flux's resumable stored flows (``flux flow run --resumable``, ``--resume S|last``,
``--resume-value``).

:func:`halt_report` prints an open halt; a resume runs the corrected flow as a new turn on that
session, fast-forwarding the unchanged leading statements and serving a matching recorded cell once,
so a completed side effect is not repeated. Nothing is written before every check passes (docs/agent.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from ..canonical import compact_json
from ..cassette.replay import TapeCell
from ..errors import FluxError
from ..lang import ast as A
from ..lang.formatter import format_flow
from ..lang.hashes import stmt_hash16
from ..lang.interpreter import Interpreter, LedgerEntry, ResumeLedger
from ..store.events import OpRecorded, PlanHalted, PlanResumed, Run, StatementCompleted, StepSucceeded
from ..store.store import StoreReader
from .loop import escape_braces

__all__ = ["FlowResume", "OpenHalt", "open_halt", "session_halt", "resolve_resume_session", "prepare_resume", "halt_report",
           "statement_line"]

_DENIED = ("denied", "confirm_denied")


@dataclass(frozen=True)
class OpenHalt:
    plan: str  # the halted plan's flow key
    node: int
    stmt: str
    kind: str
    error: str
    op: Optional[str]

    def to_json(self, session: str) -> dict:
        return {"node": self.node, "stmt": self.stmt, "op": self.op, "kind": self.kind,
                "fatal": self.kind not in ("awaiting",), "message": self.error, "plan": self.plan, "session": session}


@dataclass
class FlowResume:
    """What a resumed run needs (:func:`prepare_resume`); nothing written yet."""

    session: str
    draft: A.DraftAst  # the flow to run (an answered await replaced by its value)
    ledger: Optional[ResumeLedger]  # the statements that fast-forward
    values: dict[str, Any]  # their values, by value id
    cells: list[TapeCell]  # the session's recorded cells, served before anything runs live
    halt: OpenHalt
    bound: Optional[str] = None  # the symbol --resume-value bound


def _run_rows(reader: StoreReader, sid: str) -> list[Any]:
    return [e.body.event for e in reader.events(sid, kinds=("run",)) if isinstance(e.body, Run)]


def open_halt(rows: list[Any]) -> Optional[OpenHalt]:
    """The session's open halt latch — the last ``plan_halted`` no later ``plan_resumed`` names as
    its prior — or None."""
    resumed: set[str] = set()
    for r in reversed(rows):
        if isinstance(r, PlanResumed):
            resumed.add(r.prior)
        elif isinstance(r, PlanHalted) and r.plan not in resumed:
            return OpenHalt(r.plan, r.node, r.stmt, r.kind, r.error, r.op)
    return None


def session_halt(reader: StoreReader, sid: str) -> Optional[OpenHalt]:
    """``sid``'s open halt latch, or None."""
    return open_halt(_run_rows(reader, sid))


def resolve_resume_session(reader: StoreReader, draft: A.DraftAst, arg: str) -> str:
    """``--resume S`` names S (it must exist); ``last``, the newest session whose open halt is of a
    flow declaring this flow's name — an unnamed flow needs the explicit id."""
    if arg != "last":
        return reader.resolve_session(arg).id
    name = (draft.name or "").strip()
    if not name:
        raise FluxError("`--resume last` needs the flow to declare a name (`flow <name> -> …`) to find its halted "
                        "session unambiguously — pass the explicit session id the halt report printed instead")
    prefix = f"{name}#"
    for row in reader.list_sessions():  # newest first
        halt = session_halt(reader, row.id)
        if halt is not None and halt.plan.startswith(prefix):
            return row.id
    raise FluxError(f"no halted `flow run` session found for flow `{name}` — nothing to resume")


def _literal(node: A.Node) -> tuple[bool, Any]:
    """A bind of a plain literal (no ``{placeholder}`` text): its value is the literal itself."""
    if isinstance(node, A.Bind) and isinstance(node.value, A.Lit):
        v = node.value.value
        if "{" not in compact_json(v) and "}" not in compact_json(v):
            return True, v
    return False, None


def prepare_resume(reader: StoreReader, sid: str, draft: A.DraftAst, resume_value: Optional[str]) -> FlowResume:
    """Check a resume of ``sid`` with ``draft`` and gather what it runs with (docs/agent.md)."""
    rows = _run_rows(reader, sid)
    halt = open_halt(rows)
    if halt is None:
        raise FluxError(f"session {sid} has no open halt to resume — nothing to fast-forward "
                        "(a flow run that completed, or a session no `flux flow run` halted)")
    body = tuple(draft.body)
    if halt.kind in _DENIED and any(stmt_hash16(n) == halt.stmt for n in body if not isinstance(n, Interpreter.PASS_THROUGH)):
        raise FluxError(f"session {sid} halted because statement {halt.node} was refused ({halt.kind}), and this "
                        "file still has that statement unchanged — it was not run again; edit it to a different "
                        "approach, or pass --yes / --policy that allow it; nothing was written")
    bound = None
    awaited = body[halt.node] if halt.kind == "awaiting" and halt.node < len(body) else None
    if isinstance(awaited, A.Await) and awaited.binding:
        if resume_value is None:
            raise FluxError(f"session {sid} halted awaiting a value for `${awaited.binding}` — pass --resume-value "
                            "<json> (e.g. --resume-value '\"hello\"', --resume-value 42); nothing was written")
        try:
            value = json.loads(resume_value.strip())
        except ValueError:
            value = resume_value
        body = body[:halt.node] + (A.Bind(name=awaited.binding, value=A.Lit(value=escape_braces(value)),
                                          ty=awaited.as_type),) + body[halt.node + 1:]
        bound = awaited.binding
    # the values a fast-forward re-binds: op outputs (a cell's content, by its step's output id)
    values: dict[str, Any] = {}
    pending: dict[str, str] = {}
    cells: list[tuple[int, Any]] = []  # (row index, op_recorded)
    completed: list[LedgerEntry] = []
    done_at: dict[int, int] = {}  # node -> the row index of its (last) statement_completed
    for at, r in enumerate(rows):
        if isinstance(r, OpRecorded):
            pending[r.step] = r.content
            cells.append((at, r))
        elif isinstance(r, StepSucceeded) and r.step in pending:
            values[r.output] = pending.pop(r.step)
        elif isinstance(r, StatementCompleted) and r.plan == halt.plan:
            completed.append(LedgerEntry(r.node, r.stmt, r.value))
            done_at[r.node] = at
    by_node = {e.node: e for e in completed}
    kept: list[LedgerEntry] = []
    for i, node in enumerate(body):
        if isinstance(node, Interpreter.PASS_THROUGH):
            continue
        entry = by_node.get(i)
        if entry is None or entry.stmt != stmt_hash16(node):
            break
        if entry.value is not None and entry.value not in values:
            ok, v = _literal(node)
            if not ok:
                break  # cannot re-bind: run again from here, its dispatches served from the cells
            values[entry.value] = v
        kept.append(entry)
    ledger = ResumeLedger(halt.plan, kept) if kept else None
    # What may be served: the cells recorded after the last statement that fast-forwards (those
    # before it belong to statements that do not run again), and never a failed or refused call —
    # the statement that halted runs again, live.
    boundary = done_at.get(kept[-1].node, -1) if kept else -1
    tape = [TapeCell.of(r) for at, r in cells if at > boundary and not r.is_error and not r.denied]
    out = A.DraftAst(name=draft.name, params=draft.params, returns=draft.returns, body=body)
    return FlowResume(sid, out, ledger, values, tape, halt, bound)


def statement_line(node: A.Node) -> str:
    """One top-level statement as one line of Flux-Lang (its first line, ``…`` when it goes on)."""
    text = format_flow(A.DraftAst(body=(node,)))
    lines = [ln.strip() for ln in text.splitlines()[1:] if ln.strip()]
    if not lines:
        return ""
    return lines[0] + (" …" if len(lines) > 1 else "")


def halt_report(draft: A.DraftAst, halt: OpenHalt, session: str, label: str = "<file>") -> str:
    """flux's halt report (docs/agent.md)."""
    marked = []
    for i, node in enumerate(draft.body):
        mark = "✗" if i == halt.node else ("✓" if i < halt.node else "·")
        marked.append(f"{mark} {i}: {statement_line(node)}")
    failure = json.dumps(halt.to_json(session), ensure_ascii=False, separators=(",", ":"))
    return ("\n".join(marked) + f"\n\n[flow halted at step {halt.node + 1} of {len(draft.body)}] {halt.error}\n"
            f"{failure}\n\nCorrect the flow and continue: `flux flow run {label} --resume {session}` "
            "(or `--resume last`).")
