"""What fork, resurrect and what-if share: a recorded session's executions and their flat statement
positions (what ``flux fork --at N`` names: every top-level statement of the executions laid end to
end, see docs/cli.md), op effects for the side-effect gate, the static prediction of what a plan
will dispatch, and writing a re-executed run into a session."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Callable, Iterable, Sequence

from ..canonical import canonical_json, compact_json, scrub_text, sha256_hex
from ..cassette.replay import ReplayTape
from ..errors import FluxError
from ..lang import ast as A
from ..lang.catalog import OpArgError, OpCatalog, OpSpec, map_args_to_input
from ..lang.formatter import format_statement
from ..lang.hashes import flow_key as fk, stmt_hash16
from ..lang.host_plans import host_statement
from ..lang.interpreter import PLACEHOLDER, binder_of, interpolate_json
from ..lang.parser import parse
from ..model.session import SessionDetail
from ..store.events import PlanHalted, Run, StatementCompleted
from ..store.payload_encode import encode_run_bodies
from ..store.store import StoreWriter
from .plans import accepted_plans, plans_by_key, redacted_standins

__all__ = [
    "NotForkable", "Execution", "Position", "executions_of", "positions_of", "live_effect", "spec_of",
    "PredictedCall", "predict_calls", "binder_of", "MemorySink", "flush_events",
    "catalog_for", "writes_ledger", "position_at", "position_count", "BufferedRunSink", "run_row",
]



def _has_placeholder(v: Any) -> bool:
    if isinstance(v, str):  # every placeholder spelling starts with "{"
        return "{" in v and any(m.group(1) for m in PLACEHOLDER.finditer(v))
    if isinstance(v, list):
        return any(_has_placeholder(x) for x in v)
    if isinstance(v, dict):
        return any(_has_placeholder(x) for x in v.values())
    return False


class NotForkable(FluxError):
    """The session cannot be forked / resurrected / asked a what-if (one line, what to do)."""


@dataclass(frozen=True, slots=True)
class Execution:
    index: int  # in the execution list
    key: str  # flow_key
    draft: A.DraftAst
    turn: int | None  # 1-based turn whose acceptance it is


@dataclass(frozen=True, slots=True)
class Position:
    """One top-level statement of one execution: what ``--at N`` names."""

    index: int  # flat, 0-based
    execution: int
    node: int  # top-level index inside the execution's plan
    flow_key: str
    stmt: str  # stmt_hash16
    text: str  # one line (``⏎``-joined)
    binder: str | None  # the symbol a `bind` statement binds (None: not a bind, inject refuses)
    turn: int | None
    op: str | None  # the first op the statement calls, if any

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "execution": self.execution, "node": self.node, "flow_key": self.flow_key,
                "stmt": self.stmt, "text": self.text, "binder": self.binder, "turn": self.turn, "op": self.op}


def writes_ledger(detail: SessionDetail) -> bool:
    """Did the source run its plans in resumable mode (statement rows)? A re-execution into a new
    session follows the source: an adaptive session's host plans write no ledger, and a
    child that mixed ledger rows with ledger-less plans would replay only the former."""
    lean = getattr(detail, "executions", None)  # a ReplayInput: it keeps only the ledger's executions
    if lean is not None:
        return bool(lean)  # every ledger row sequence starts at least one execution
    return any(isinstance(e.body.event, (StatementCompleted, PlanHalted)) for e in detail.run_events)


def executions_in_trace(run_events: Iterable[Any]) -> list[tuple[str, int]]:
    """(flow_key, global_seq of its first row) per execution (a new one where the plan changes or its node does not grow), with one addition: a resumption
    that fast-forwards (its first row is ``skipped``) a run of the same plan that was *killed* —
    it ended with neither ``plan_halted`` nor its last statement — continues that execution
    instead of starting a new one. A resurrected turn then replays as the one run it became
    (flux would re-run the plan from the top, and diverge on the ops the first run already used)."""
    def rows():
        for ev in run_events:
            r = ev.body.event if isinstance(ev.body, Run) else None
            if isinstance(r, StatementCompleted):
                yield r.plan, r.node, bool(r.skipped), False, ev.global_seq
            elif isinstance(r, PlanHalted):
                yield r.plan, r.node, False, True, ev.global_seq

    return executions_from_rows(rows())


def executions_from_rows(rows: Iterable[tuple[str, int, bool, bool, int]]) -> list[tuple[str, int]]:
    """:func:`executions_in_trace` over the ledger rows alone: ``(plan, node, skipped, halted,
    global_seq)`` per ``statement_completed`` (halted False) or ``plan_halted`` (skipped False)."""
    out: list[tuple[str, int]] = []
    ExecutionFold().feed(rows, lambda plan, global_seq: out.append((plan, global_seq)))
    return out


class ExecutionFold:
    """The one rule that turns ledger rows into executions, fed a batch of rows at a time (the
    streamed replay folds the rows as it reads them; :func:`executions_from_rows` feeds them all).

    A new execution begins where the plan changes or its node does not grow — except a ``skipped``
    node 0 right after the same plan stopped without halting: the killed run going on."""

    __slots__ = ("cur", "last", "halted", "resuming")

    def __init__(self) -> None:
        self.cur: str | None = None
        self.last = -1
        self.halted = False
        self.resuming = False

    def feed(self, rows: Iterable[tuple[str, int, bool, bool, int]], begun: Callable[[str, int], object]) -> None:
        """Fold ``rows``; ``begun(plan, global_seq)`` for each execution they begin, in order."""
        cur, last, halted, resuming = self.cur, self.last, self.halted, self.resuming
        for plan, node, skipped, is_halt, global_seq in rows:
            if plan != cur or node <= last:
                if plan == cur and skipped and not halted and node == 0:
                    resuming = True  # the killed run goes on: not a new execution
                else:
                    begun(plan, global_seq)
                    resuming = False
                cur = plan
                halted = False
            elif resuming and not skipped:
                resuming = False
            last = node
            halted = is_halt
        self.cur, self.last, self.halted, self.resuming = cur, last, halted, resuming


def _keyed_executions(detail: SessionDetail, executions: Sequence[tuple[str, int]]) -> list[tuple[str, int | None]]:
    """(flow_key, turn number) per execution: from the ledger rows, each placed in its turn
    by position; else the acceptance order with each acceptance's own turn."""
    ids = [t.turn_id for t in detail.turns]
    out: list[tuple[str, int | None]] = []
    for key, seq in executions:
        ti = bisect_right(ids, seq) - 1
        out.append((key, detail.turns[ti].number if ti >= 0 else None))
    if out:
        return out
    for t in detail.turns:
        for att in t.accepted_plans:
            try:
                d = parse(att.plan_source or "")
            except FluxError:
                continue
            out.append((fk(d.name, d.body), t.number))
    return out


class HostBody(Sequence):
    """The body of a host plan replay's direct path recognised (a
    :class:`~flux.timemachine.replay_direct.HostPlan` or ``HostCall``), as the sequence of AST nodes
    the parser gives for it — each built from its line (the parser's own
    :func:`~flux.lang.host_plans.host_statement`, which reads a host plan's lines) the first time it is asked
    for, so a fork reads the statements it needs without parsing the plan. Slicing gives a tuple."""

    __slots__ = ("plan", "_stmts", "_nodes")

    def __init__(self, plan: Any):
        self.plan = plan
        self._stmts = plan.stmts if hasattr(plan, "stmts") else (plan,)
        self._nodes: dict[int, A.Node] = {}

    def __len__(self) -> int:
        return len(self._stmts)

    @property
    def statements(self) -> tuple:
        """The direct plan's statements in order (each a ``HostStatement``, or its one ``HostCall``)."""
        return self._stmts

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self._stmts))))
        n = len(self._stmts)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        node = self._nodes.get(i)
        if node is None:
            st = self._stmts[i]
            node = host_statement("", st.name, st.op, st.arg)
            if node is None:  # (never: a direct plan's line is one the parser's host path reads)
                raise FluxError(f"statement {i} of a host plan does not parse")
            self._nodes[i] = node
        return node


def plan_ast(draft: A.DraftAst) -> A.DraftAst:
    """``draft`` with a tuple body (a :class:`HostBody` built in full): what the interpreter runs."""
    if type(draft.body) is HostBody:
        return A.DraftAst(name=draft.name, params=draft.params, returns=draft.returns, body=tuple(draft.body))
    return draft


def executions_of(detail: SessionDetail, *, turn: int | None = None, verb: str = "forkable",
                  direct: bool = False) -> list[Execution]:
    """The session's executions with their parsed plans (the last acceptance of a key wins), optionally one turn's only.
    ``direct``: a host plan that replay's direct path runs
    (:func:`~flux.timemachine.replay_direct.direct_plan`) is not parsed — its draft is unnamed, with
    no params, and its body a :class:`HostBody` over the direct plan (the same key and statements)."""
    sid = detail.id
    if direct:
        plans: dict[str, A.DraftAst] = {}
        for _turn, key, d in accepted_plans(detail, direct=True):  # as plans_by_key: the last acceptance wins
            plans[key] = d if isinstance(d, A.DraftAst) else A.DraftAst(body=HostBody(d))
    else:
        plans, _order = plans_by_key(detail)
    lean = getattr(detail, "executions", None)  # a ReplayInput has them already
    ledger_execs = lean if lean is not None else executions_in_trace(detail.run_events)
    if turn is not None:
        if turn < 1 or turn > len(detail.turns):
            have = f"it has {len(detail.turns)} turn(s)" if detail.turns else "it has no turns"
            raise NotForkable(f"session {sid} has no turn {turn} ({have}) — turns are numbered from 1")
        pairs = [p for p in _keyed_executions(detail, ledger_execs) if p[1] == turn]
    else:
        pairs = _keyed_executions(detail, ledger_execs)
    if not pairs:
        where = f"turn {turn} of session {sid}" if turn is not None else f"session {sid}"
        raise NotForkable(f"{where} is not {verb}: no executed statements and no accepted plan_source recorded")
    keys = [k for k, _ in pairs]
    standins = redacted_standins(detail, keys, plans) if any(k not in plans for k in keys) else {}
    out = []
    for i, (k, t) in enumerate(pairs):
        d = plans.get(k) or standins.get(k)
        if d is None:
            raise NotForkable(f"session {sid} is not {verb}: execution {i + 1} ({k}) has no stored plan_source "
                              "(pre-L-38 or oversized) — there is nothing to re-execute")
        out.append(Execution(i, k, d, t))
    return out


def _first_op(node: Any) -> str | None:
    calls = calls_in(node)
    return calls[0].op if calls else None


_FIELDS: dict[type, tuple[str, ...]] = {}


def calls_in(obj: Any) -> list[A.Call]:
    """Every op call in an AST value, in source order (depth first, fields in declared order)."""
    out: list[A.Call] = []
    stack = [obj]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is tuple or t is list:
            stack.extend(reversed(x))
            continue
        names = _FIELDS.get(t)
        if names is None:
            names = tuple(getattr(t, "__dataclass_fields__", {})) if not isinstance(x, type) else ()
            _FIELDS[t] = names
        if not names:
            continue
        if t is A.Call:
            out.append(x)
        stack.extend(getattr(x, f) for f in reversed(names))
    return out


def _one_line(node: A.Node) -> str:
    try:
        lines = format_statement(node).strip().splitlines()
        if len(lines) > 1 and lines[0].strip() == "flow":
            lines = [ln[2:] if ln.startswith("  ") else ln for ln in lines[1:]]
        return " ⏎ ".join(lines)
    except Exception:
        return f"<{stmt_hash16(node)}>"


def _position(ex: Execution, i: int, index: int) -> Position:
    node = ex.draft.body[i]
    return Position(index, ex.index, i, ex.key, stmt_hash16(node), _one_line(node),
                    node.name if isinstance(node, A.Bind) else None, ex.turn, _first_op(node))


def positions_of(executions: Sequence[Execution]) -> list[Position]:
    out: list[Position] = []
    for ex in executions:
        for i in range(len(ex.draft.body)):
            out.append(_position(ex, i, len(out)))
    return out


def position_count(executions: Sequence[Execution]) -> int:
    """``len(positions_of(executions))`` without hashing and formatting every statement."""
    return sum(len(ex.draft.body) for ex in executions)


def position_at(executions: Sequence[Execution], at: int) -> Position | None:
    """``positions_of(executions)[at]`` (None past the end), computing that one position only."""
    if at < 0:
        return None
    offset = 0
    for ex in executions:
        n = len(ex.draft.body)
        if at < offset + n:
            return _position(ex, at - offset, at)
        offset += n
    return None


# ------------------------------------------------------------------------------------------------
# Effects (the side-effect gate)

_EFFECT_CLASS = {"pure": "none", "read": "none", "write": "write", "delete": "write", "network": "network",
                 "exec": "exec"}


def spec_of(catalog: OpCatalog | None, op: str) -> OpSpec | None:
    """The op's *declared* spec (a permissive catalog's invented specs do not count)."""
    if catalog is None:
        return None
    for s in catalog:
        if s.name == op:
            return s
    return None


def live_effect(catalog: OpCatalog | None, op: str) -> str:
    """``write`` | ``exec`` | ``network`` | ``none`` — an undeclared op counts as ``write``."""
    spec = spec_of(catalog, op)
    if spec is None:
        return "write"
    return _EFFECT_CLASS.get(spec.effect, "write")


def catalog_for(toolbox_catalog: OpCatalog | None) -> OpCatalog:
    """For re-execution: the declared signatures, and any other name accepted (one object argument
    is the input), as replay does."""
    return OpCatalog.permissive(list(toolbox_catalog) if toolbox_catalog is not None else [])


# ------------------------------------------------------------------------------------------------
# Static prediction of dispatches (for the gate's preview)


@dataclass(frozen=True, slots=True)
class PredictedCall:
    op: str
    input_json: str | None  # None: the input depends on run-time values
    detail: str


def _static(node: A.Node) -> tuple[bool, Any]:
    if isinstance(node, A.Lit):
        if _has_placeholder(node.value):
            return False, None  # `{name}` is filled from the symbols at run time
        return True, interpolate_json(node.value, {})
    if isinstance(node, A.Obj):
        out = {}
        for k, v in node.fields:
            ok, val = _static(v)
            if not ok:
                return False, None
            out[k] = val
        return True, out
    if isinstance(node, A.ListExpr):
        items = []
        for v in node.items:
            ok, val = _static(v)
            if not ok:
                return False, None
            items.append(val)
        return True, items
    return False, None


def _detail(input_obj: Any) -> str:
    if isinstance(input_obj, dict):
        for k in ("command", "path", "pattern", "repository", "url"):
            v = input_obj.get(k)
            if isinstance(v, str):
                return v if len(v) <= 60 else v[:59] + "…"
    text = compact_json(input_obj)
    return text if len(text) <= 60 else text[:59] + "…"


def predict_calls(nodes: Iterable[A.Node], catalog: OpCatalog | None) -> list[PredictedCall]:
    """Every op call in ``nodes`` with its input when it is known before running."""
    calls = calls_in(tuple(nodes))
    out = []
    for c in calls:
        vals = []
        static = True
        for a in c.args:
            ok, v = _static(a)
            if not ok:
                static = False
                break
            vals.append(v)
        if static:
            spec = (catalog.get(c.op) if catalog is not None else None) or OpSpec(c.op)
            try:
                inp = map_args_to_input(spec, vals)
            except OpArgError:
                out.append(PredictedCall(c.op, None, "(arguments do not map)"))
                continue
            out.append(PredictedCall(c.op, canonical_json(inp), _detail(inp)))
        else:
            out.append(PredictedCall(c.op, None, "(input computed at run time)"))
    return out


def simulate_serve(tape: ReplayTape, calls: Iterable[PredictedCall]) -> tuple[int, list[PredictedCall]]:
    """Consume ``calls`` on ``tape``: (how many a cell would serve, the ones that would miss)."""
    served = 0
    misses = []
    for c in calls:
        if c.input_json is None:
            misses.append(c)
            continue
        h = sha256_hex(c.input_json)
        i = tape.find(c.op, h)
        if i is None or tape.cells[i].truncated:
            misses.append(c)
        else:
            tape.take(c.op, h, i)
            served += 1
    return served, misses


# ------------------------------------------------------------------------------------------------
# Conversation and sinks


class MemorySink:
    """An interpreter/cassette sink that keeps run bodies in memory until :func:`flush_events`."""

    def __init__(self) -> None:
        self.events: list[dict] = []
        self._open_halts = 0

    def emit(self, ev: dict) -> None:
        self.events.append(ev)


def run_row(ev: dict, redactor: Any = None, cap: int | None = None) -> dict:
    """A run body as it is stored: a ``step_failed``/``plan_halted`` error is scrubbed, redacted
    and capped like every recorded free text (the live recorder's rule)."""
    if ev.get("event") in _FREE_TEXT_ERRORS and isinstance(ev.get("error"), str):
        ev = dict(ev)
        err = scrub_text(ev["error"])
        if redactor is not None:
            err = redactor.redact(err)
        if cap is not None and len(err.encode("utf-8")) > cap:
            err = err.encode("utf-8")[:cap].decode("utf-8", "ignore")
        ev["error"] = err
    return ev


def flush_events(writer: StoreWriter, sid: str, bodies: Sequence[dict], redactor: Any = None,
                 cap: int | None = None) -> None:
    """Append run bodies to ``sid`` in one transaction (a prefix lands whole or not at all): the
    rows :meth:`StoreWriter.append_runs` writes, through its bulk twin
    :meth:`StoreWriter.append_run_texts` (multi-row inserts, ids minted in one go), the payloads
    written by :func:`~flux.store.payload_encode.encode_run_bodies` (the same texts as ``encode_run_body``)."""
    writer.append_run_texts(sid, encode_run_bodies(_stored_rows(bodies, redactor, cap)))


_FREE_TEXT_ERRORS = ("step_failed", "plan_halted")  # the run bodies run_row may rewrite; any other is stored as it is
_FREE_TEXT_ERROR_SET = frozenset(_FREE_TEXT_ERRORS)


def _stored_rows(bodies: Sequence[dict], redactor: Any, cap: int | None) -> Sequence[dict]:
    """``[run_row(ev, redactor, cap) for ev in bodies]``: ``bodies`` itself when none of them is a
    row run_row rewrites (the tags looked up in C, no call per row), else each such row rewritten."""
    try:
        if _FREE_TEXT_ERROR_SET.isdisjoint(map(dict.get, bodies, repeat("event"))):
            return bodies
    except TypeError:  # a body that is no dict, or an unhashable tag: the row by row path decides
        pass
    return [run_row(ev, redactor, cap) if ev.get("event") in _FREE_TEXT_ERRORS else ev for ev in bodies]


class BufferedRunSink:
    """An interpreter/cassette sink for a run whose rows may land in batches: bodies wait in memory
    and :meth:`flush` writes them in one multi-row transaction. The caller flushes before anything
    that must be durable (a live dispatch, its cell); rows served from tape can wait — a crash
    loses nothing that is not still on tape."""

    def __init__(self, writer: StoreWriter, sid: str, redactor: Any = None, cap: int | None = None,
                 durable: Any = None):
        self.writer, self.sid, self.redactor, self.cap = writer, sid, redactor, cap
        self.durable = durable or (lambda ev: False)
        self.pending: list[dict] = []

    def emit(self, ev: dict) -> None:
        self.pending.append(ev)
        if self.durable(ev):
            self.flush()

    def flush(self) -> None:
        if self.pending:
            pending, self.pending = self.pending, []
            flush_events(self.writer, self.sid, pending, self.redactor, self.cap)


@dataclass
class Counts:
    served: int = 0
    live: int = 0
    live_ops: list[str] = field(default_factory=list)
