"""Fork: branch a recorded session at a statement into a new, linked session.

The prefix is re-executed from the source's tape, then the tail diverges: **inject** a value, **edit**
the plan, or **replan** live (the default). Beyond flux (docs/cli.md, ``flux fork``) positions run
across every execution, the prefix's cells are re-recorded on the child, and an offline fork is one
transaction. tests/core/test_fork_differential.py holds the host-plan path to replay's rows.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass, field
from hashlib import sha256 as _sha256
from typing import Any, Callable, Optional

from ..agent.approver import confirm_with
from ..agent.recording import EventTee, LiveHost, Recorder
from ..cassette.record import RecordingHost
from ..cassette.redact_plan import redacted_plan_source
from ..cassette.replay import ReplayHost, ReplayTape, TapeFirstHost
from ..errors import FluxError
from ..lang import ast as A
from ..lang.catalog import OpCatalog
from ..lang.formatter import format_flow
from ..lang.hashes import fingerprint, flow_key, stmt_hash16
from ..lang.interpreter import Interpreter, ResumeLedger, RunResult
from ..lang.parser import formula_tree, parse
from ..model.history import unanswered_tool_use
from ..model.session import TRACE_KINDS, SessionDetail, load_session
from ..store.events import Compacted, PlanAttempted, TurnEnded
from ..store.lease import SessionLease
from ..store.store import StoreReader
from .engine import (
    writes_ledger, Execution, HostBody, MemorySink, NotForkable, Position, catalog_for, executions_of, flush_events,
    live_effect, plan_ast, position_at, position_count, positions_of, predict_calls, simulate_serve,
)
from .conversation import call_of, conversation_at, conversation_before
from .gate import LiveOp, LivePreview
from .replay_direct import HostPlan, statements_key
from .replay_input import ReplayInput, read_replay_input
from .serve import PlanServer, gc_paused

__all__ = [
    "ForkPlan", "ForkPrefix", "ForkResult", "ForkCancelled", "prepare_fork", "plan_fork", "fork_session",
    "run_fork_prefix", "fork_points", "edit_template", "analyze_plan", "default_prompt", "MODES",
]

MODES = ("inject", "edit", "replan")
_UNSET: Any = object()


class ForkCancelled(FluxError):
    """The user declined the side-effect gate; nothing was written."""


def default_prompt(task: str | None) -> str:
    """flux's default re-plan instruction."""
    base = "Continue from the current forked state."
    return f"{base} The original task was: {task}" if task else base


@dataclass
class ForkPlan:
    """A validated fork, ready to run (``prepare_fork``); nothing has been written."""

    detail: ReplayInput  # S as read for the fork: turns, ledger executions, cells and their bodies, model
    source: str
    at: int
    mode: str
    position: Position
    executions: list[Execution]
    target: Execution
    tail_draft: Optional[A.DraftAst]  # inject/edit: what replaces the target execution
    prompt: Optional[str]
    model: str
    preview: Optional[LivePreview]  # None until computed (prepare_fork(preview=False))
    turn: Optional[int] = None
    catalog: Optional[OpCatalog] = None
    workspace: Optional[str] = None


def fork_points(detail: SessionDetail, turn: int | None = None) -> list[Position]:
    """Every position ``--at`` can name (``turn``: only that turn's, numbered from 0)."""
    return positions_of(executions_of(detail, turn=turn))


def _load(reader: StoreReader, session: str) -> SessionDetail:
    return load_session(reader, session, kinds=TRACE_KINDS)


# ------------------------------------------------------------------------------------------------
# Static analysis of an edited plan


_BINDER_FIELDS = ("name", "collect", "bind", "item", "catch")


def _names_bound(obj: Any, out: set[str]) -> None:
    if isinstance(obj, (tuple, list)):
        for x in obj:
            _names_bound(x, out)
        return
    if not hasattr(obj, "__dataclass_fields__") or isinstance(obj, type):
        return
    if isinstance(obj, (A.Bind, A.Memo, A.Each, A.Repeat, A.Seq, A.Pipe, A.Retry, A.Fallback, A.Once, A.Try,
                        A.Branch)):
        for f in _BINDER_FIELDS:
            v = getattr(obj, f, None)
            if isinstance(v, str):
                out.add(v)
    for f in obj.__dataclass_fields__:
        _names_bound(getattr(obj, f), out)


def _refs(obj: Any, out: list[str], ops: list[A.Call]) -> None:
    if isinstance(obj, (tuple, list)):
        for x in obj:
            _refs(x, out, ops)
        return
    if not hasattr(obj, "__dataclass_fields__") or isinstance(obj, type):
        return
    if isinstance(obj, A.Var):
        out.append(obj.name)
    elif isinstance(obj, A.Call):
        ops.append(obj)
    elif isinstance(obj, A.Expr):
        try:
            tree = formula_tree(obj.formula)
        except FluxError:
            tree = None
        mapped = {k for k, _ in obj.vars}
        found: list[str] = []
        _refs(tree, found, [])
        out.extend(n for n in found if n not in mapped)
    for f in obj.__dataclass_fields__:
        _refs(getattr(obj, f), out, ops)


_PROBLEMS_SHOWN = 12  # analysis problems an edit's refusal lists before "… and N more"


def analyze_plan(draft: A.DraftAst, catalog: OpCatalog | None, bound: set[str] = frozenset(),
                 known_ops: set[str] = frozenset()) -> list[str]:
    """Problems that would make the plan fail before it does anything useful: ops neither the
    catalog declares nor the recording knows, positional arguments that do not map onto an op's
    parameters, symbols nothing binds. Empty list: the plan passes."""
    problems: list[str] = []
    names = set(bound) | {p.name for p in draft.params if hasattr(p, "name")}
    _names_bound(draft.body, names)
    refs: list[str] = []
    calls: list[A.Call] = []
    _refs(draft.body, refs, calls)
    for n in dict.fromkeys(refs):
        if n not in names:
            problems.append(f"symbol `{n}` is not bound by the prefix or the plan")
    declared = {s.name: s for s in catalog} if catalog is not None else {}
    told_known = False  # the known ops are listed once, on the first unknown one
    for c in calls:
        spec = declared.get(c.op)
        if spec is None and c.op not in known_ops:
            if any(p.startswith(f"unknown op `{c.op}`") for p in problems):
                continue
            have = ", ".join(sorted(set(declared) | set(known_ops))) or "none"
            problems.append(f"unknown op `{c.op}`" + ("" if told_known else f" (known: {have})"))
            told_known = True
            continue
        if spec is not None and len(c.args) > 1 and len(c.args) > len(spec.params):
            problems.append(f"op `{c.op}` takes {len(spec.params)} positional argument(s), got {len(c.args)}")
    return list(dict.fromkeys(problems))


def edit_template(reader: StoreReader, session: str, at: int, turn: int | None = None) -> str:
    """The Flux-Lang text the edit mode starts from: the execution holding position ``at``."""
    detail = _load(reader, session)
    execs = executions_of(detail, turn=turn)
    pos = position_at(execs, at)
    if pos is None:
        raise NotForkable(_past_end(detail.id, at, position_count(execs), turn))
    return format_flow(execs[pos.execution].draft)


def refuse_unforkable_history(reader: StoreReader, sid: str) -> None:
    """flux's check before a fork mints anything: no call of the parent's conversation may have
    gone unanswered (:mod:`flux.model.history`) — the child would start from a world nobody
    recorded. One line naming the call; nothing is written."""
    problem = unanswered_tool_use(conversation_before(reader, sid, None))
    if problem is not None:
        raise NotForkable(f"session `{sid}` cannot be forked: {problem} — a turn killed while that call ran "
                          f"leaves this, and what the call did was never recorded (`flux show {sid}` shows the turn); "
                          "nothing was written")


def _past_end(sid: str, at: int, n: int, turn: int | None) -> str:
    where = f"turn {turn} of session {sid}" if turn is not None else f"session {sid}"
    return f"--at {at} is past the end: {where} has {n} statement(s), numbered 0–{n - 1}" if n else \
        f"{where} has no statements to fork at"


# ------------------------------------------------------------------------------------------------
# Planning (validation + the gate's preview), nothing written


def prepare_fork(reader: StoreReader, session: str, at: int, *, inject: Any = _UNSET, edit: str | None = None,
                 prompt: str | None = None, turn: int | None = None, catalog: OpCatalog | None = None,
                 model: str | None = None, workspace: str | None = None, mode: str | None = None,
                 preview: bool = True) -> ForkPlan:
    """Validate a fork and compute its :class:`LivePreview`. Raises a one-line :class:`FluxError`
    (unknown session, not forkable, ``--at`` past the end, inject on a non-bind, an edit that does
    not parse or fails analysis) — all before anything is written. ``preview=False`` leaves
    ``plan.preview`` None (:func:`fork_session` computes it from the prefix it actually ran)."""
    if mode is None:
        mode = "inject" if inject is not _UNSET else ("edit" if edit is not None else "replan")
    if mode not in MODES:
        raise FluxError(f"unknown fork mode {mode!r} — use inject, edit or replan")
    if mode == "inject" and inject is _UNSET:
        raise FluxError("inject mode needs a value (--inject JSON)")
    if mode == "edit" and edit is None:
        raise FluxError("edit mode needs a plan (--edit FILE)")
    if at < 0:
        raise FluxError(f"--at is a 0-based statement position: got {at}")
    # The lean read replay uses (turns, ledger executions, cells), with each cell's body as recorded:
    # the prefix re-records them on F. Fork needs nothing else of S (the re-plan turn's
    # conversation is read on its own, by _conversation).
    skipped_before = reader.skipped_rows
    detail = read_replay_input(reader, session, full_cells=True)
    sid = detail.id
    refuse_partly_read(sid, reader.skipped_rows - skipped_before, "fork")
    refuse_unforkable_history(reader, sid)
    if not detail.cells:
        raise NotForkable(f"session {sid} is not forkable: no cassette cells recorded (pre-C-43 run, or "
                          "FLUX_CASSETTE=0) — the prefix could not come from tape")
    # a host plan as replay's direct path reads it: not parsed (a HostBody builds the statements asked for)
    execs = executions_of(detail, turn=turn, direct=True)
    pos = position_at(execs, at)
    if pos is None:
        raise NotForkable(_past_end(sid, at, position_count(execs), turn))
    if turn is not None:  # --turn T: N counts inside that turn; the rest of the session stays the prefix
        all_execs = executions_of(detail, direct=True)
        offset = next((i for i, e in enumerate(all_execs) if e.key == execs[0].key), 0)
        flat = position_count(all_execs[:offset + pos.execution]) + pos.node
        execs = all_execs
        pos = position_at(execs, flat)
        assert pos is not None
    target = execs[pos.execution]
    body = target.draft.body
    node = body[pos.node]
    cat = catalog
    known_ops = {c.op for c in detail.cells}
    tail_draft: Optional[A.DraftAst] = None
    if mode == "inject":
        if not isinstance(node, A.Bind):
            raise FluxError(f"statement {at} is `{pos.text[:60]}` — --inject needs a top-level `bind` statement "
                            "(name = …); use --edit to change any other statement")
        tail_draft = A.DraftAst(name=None, params=target.draft.params, returns=target.draft.returns,
                                body=(A.Bind(name=node.name, value=A.Lit(value=_escape(inject)), ty=node.ty),)
                                + tuple(body[pos.node + 1:]))
    elif mode == "edit":
        try:
            edited = parse(edit or "")
        except FluxError as e:
            raise FluxError(f"the edited plan does not parse: {e}") from None
        if not edited.body:
            raise FluxError("the edited plan has no statements — write the statements to run from the fork point")
        prefix_hashes = [stmt_hash16(n) for n in body[:pos.node]]
        lead = [stmt_hash16(n) for n in edited.body[:pos.node]]
        if pos.node and lead != prefix_hashes:  # the text is the tail: put the prefix in front of it
            edited = A.DraftAst(name=edited.name, params=edited.params or target.draft.params,
                                returns=edited.returns, body=tuple(body[:pos.node]) + tuple(edited.body))
        bound: set[str] = set()
        for ex in execs[:pos.execution]:
            _names_bound(tuple(ex.draft.body), bound)
        problems = analyze_plan(edited, cat, bound, known_ops)
        if problems:
            shown = problems[:_PROBLEMS_SHOWN]
            more = f"; … and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
            raise FluxError(f"the edited plan fails analysis: {'; '.join(shown)}{more} — nothing was written")
        tail_draft = edited
    task = None
    if pos.turn is not None and pos.turn <= len(detail.turns):
        task = detail.turns[pos.turn - 1].user_input
    elif detail.turns:
        task = detail.turns[-1].user_input
    the_prompt = (prompt if prompt is not None else default_prompt(task)) if mode == "replan" else None
    model_name = model or detail.model or "mock"
    plan = ForkPlan(detail, sid, at, mode, pos, execs, target, tail_draft, the_prompt, model_name, None, turn,
                    cat, workspace)
    if preview:
        plan.preview = _preview(plan)
    return plan


def _escape(v: Any) -> Any:
    from ..agent.loop import escape_braces

    return escape_braces(v)


def _preview(plan: ForkPlan, after_prefix: ReplayTape | None = None) -> LivePreview:
    """The gate's preview. The prefix's cells are predicted statically — or, given the tape as the
    prefix run left it (``after_prefix``), taken from that run exactly; the tail is predicted
    against what is left on tape."""
    detail, execs, pos, mode, tail_draft = plan.detail, plan.executions, plan.position, plan.mode, plan.tail_draft
    catalog, model, workspace, at = plan.catalog, plan.model, plan.workspace, plan.at
    target = execs[pos.execution]
    prefix_len = position_count(execs[:pos.execution]) + pos.node
    if after_prefix is not None:
        tape = after_prefix.copy()
        prefix_served = after_prefix.consumed
    else:
        prefix_nodes = [n for ex in execs[:pos.execution] for n in ex.draft.body] + list(target.draft.body[:pos.node])
        tape = ReplayTape(detail.cells)
        prefix_served, _ = simulate_serve(tape, predict_calls(prefix_nodes, catalog))
    later = [n for ex in execs[pos.execution + 1:] for n in ex.draft.body]
    ops: list[LiveOp] = []
    tail_served = 0
    if mode == "replan":
        tail_nodes = []  # the model decides what runs after the fork point
        names = sorted(s.name for s in catalog) if catalog is not None else []
        for name in names:
            ops.append(LiveOp(name, live_effect(catalog, name), "(the model decides)", workspace, "re-plan"))
        offline = False
        model_call: str | None = model
    else:
        assert tail_draft is not None
        start = pos.node if mode == "edit" else 0
        # edit: the statements equal to the prefix fast-forward; inject: the bind is a literal
        tail_nodes = list(tail_draft.body[start:]) + later
        tail_served, misses = simulate_serve(tape, predict_calls(tail_nodes, catalog))
        for m in misses:
            ops.append(LiveOp(m.op, live_effect(catalog, m.op), m.detail, workspace, "tail"))
        offline = not ops
        model_call = None
    title = f"fork {detail.id} @ statement {at} ({mode})"
    notes = (f"statement {at}   {pos.text[:90]}",)
    return LivePreview("fork", detail.id, offline, tuple(ops), model_call, prefix_len, prefix_served,
                       len(tail_nodes), tail_served, workspace, notes, title,
                       {"at": at, "mode": mode, "position": pos.to_json()})


def plan_fork(reader: StoreReader, session: str, at: int, **kw: Any) -> LivePreview:
    """The gate's preview of a fork (see :func:`prepare_fork` for the arguments)."""
    preview = prepare_fork(reader, session, at, **kw).preview
    assert preview is not None
    return preview


# ------------------------------------------------------------------------------------------------
# Running


@dataclass
class ForkResult:
    source: str
    session: str
    at: int
    mode: str
    preview: LivePreview
    prefix_served: int = 0  # cells the prefix consumed
    tail_served: int = 0  # tail dispatches served from tape
    live_ops: list[str] = field(default_factory=list)
    halted: Optional[str] = None
    answer: str = ""
    turn: Any = None  # the re-plan turn's TurnOutput

    @property
    def hermetic(self) -> bool:
        return not self.live_ops and self.turn is None

    @property
    def replayable(self) -> bool:
        """The child recorded a cell (prefix, tail or re-planned turn), so ``flux replay`` has a
        tape to play; a fork at 0 whose injected tail dispatches nothing has none."""
        return bool(self.prefix_served or self.tail_served or self.live_ops)

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "session": self.session, "at": self.at, "mode": self.mode,
                "prefix_served": self.prefix_served, "tail_served": self.tail_served, "live_ops": self.live_ops,
                "halted": self.halted, "answer": self.answer, "hermetic": self.hermetic,
                "replayable": self.replayable,
                "turn": self.turn.to_json() if self.turn is not None else None}


def _result_text(res: RunResult | None) -> str:
    if res is None:
        return ""
    if res.halted is not None:
        return ""
    v = res.value
    if v is None:
        return ""
    return v if isinstance(v, str) else __import__("json").dumps(v, ensure_ascii=False)


def refuse_partly_read(sid: str, skipped: int, verb: str) -> None:
    """A session whose rows could not all be read (corrupt rows the reader skipped) is no source for
    a ``verb`` — it would re-run a fragment of the recording as if it were whole: one line, before
    anything is written."""
    if skipped:
        raise NotForkable(f"session {sid} has {skipped} corrupt event row(s) that cannot be read — a {verb} would "
                          "re-run only part of it; restore the store from a copy (nothing was written)")


@gc_paused()  # a fork allocates acyclic rows and values: the cyclic collector only slows it (as replay)
def fork_session(client: Any, session: str, at: int, *, inject: Any = _UNSET, edit: str | None = None,
                 prompt: str | None = None, turn: int | None = None, mode: str | None = None,
                 confirm: Callable[[LivePreview], bool] | None = None,
                 on_progress: Callable[[str, int, int], None] | None = None,
                 on_event: Callable[[dict], None] | None = None, plan: ForkPlan | None = None,
                 prefix: ForkPrefix | None = None) -> ForkResult:
    """Fork ``session`` of ``client``'s store at position ``at`` (docs/cli.md, "flux fork").

    ``confirm(preview)`` is asked when the preview is not offline (the gate); ``False`` raises
    :class:`ForkCancelled` with nothing written. Live dispatches go through ``client.approver``.
    ``plan``: a :func:`prepare_fork` result for the same fork, so the session is not loaded and
    validated twice. ``prefix``: a :func:`run_fork_prefix` result for that plan (the CLI ran the
    prefix and showed its gate already), so the prefix is not run twice. Without one, the prefix
    runs in memory first and the gate's preview (when the plan has none) counts the cells it
    really consumed — before anything is written."""
    if prefix is not None:
        if plan is not None and plan is not prefix.plan:
            raise ValueError("fork_session: prefix= was run for another plan")
        if prefix.used:
            raise ValueError("fork_session: this prefix= was forked already — run_fork_prefix again")
        plan = prefix.plan
    reader = StoreReader(client.store_dir)
    try:
        if plan is None:
            plan = prepare_fork(reader, session, at, inject=inject, edit=edit, prompt=prompt, turn=turn,
                                catalog=client.toolbox.catalog(), model=client.model,
                                workspace=str(client.workspace), mode=mode, preview=False)
        conv = _conversation(reader, plan)
    finally:
        reader.close()

    if prefix is None:
        prefix = run_fork_prefix(plan, client.toolbox.catalog(), on_progress=on_progress)
    detail, pos = plan.detail, plan.position
    interp, tape, mem, items = prefix.interp, prefix.tape, prefix.mem, prefix.items
    resumable, trunc_key, prefix_served = prefix.resumable, prefix.trunc_key, prefix.served
    assert plan.preview is not None
    if confirm is not None and plan.preview.needs_confirm and not confirm(plan.preview):
        raise ForkCancelled("fork cancelled at the side-effect gate — nothing was written")
    prefix.used = True

    w = client.writer
    red = client.redactor
    model = detail.model or client.model
    # An offline fork (inject/edit, every tail dispatch answered from tape) is one transaction: the
    # child commits whole — its prefix, tail and turn_ended — or, when any write fails (a malformed
    # store, a full disk), not at all; a concurrent writer sees no half child. A tail that goes live
    # is a recorded turn like any other: durable before each effect, resumable if killed.
    # The child's liveness lease is held from its creation to its turn_ended (released after the
    # commit), as a recorded turn's is: a live tail's child is "recording" to every other process —
    # never resurrected beside it — and reads as interrupted only once its writer is dead.
    whole = ExitStack()
    leased = ExitStack()
    if plan.mode in ("inject", "edit") and plan.preview.offline:
        whole.enter_context(w.transaction())
    with leased, whole:
        fid, tid, step = _write_child_head(client, plan, at, model, conv, items, leased)

        result = ForkResult(plan.source, fid, at, plan.mode, plan.preview, prefix_served)
        rec = Recorder(w, fid, red, client.cap)
        tail_events: list[dict] = []
        sink = EventTee(rec, tail_events)
        live = LiveHost(client.toolbox, client.approver, client._timer,
                         concurrent=getattr(client, "concurrent_ops", True))
        tail_host = TapeFirstHost(tape, live)
        interp.host = RecordingHost(tail_host, sink, red, client.cap, enabled=client.cassette)
        interp.sink = sink
        interp.approver = confirm_with(client.approver)
        outcome, answer = "ok", ""
        try:
            if plan.mode in ("inject", "edit"):
                assert plan.tail_draft is not None
                ledger = None
                if plan.mode == "edit" and trunc_key is not None:
                    ledger = ResumeLedger.from_interrupted(mem.events, trunc_key)
                step += 1
                rec.append(accepted_attempt(step, plan.tail_draft, red), turn_id=tid)
                res = interp.run(plan.tail_draft, resumable=resumable or ledger is not None, ledger=ledger)
                if res.halted is not None:
                    result.halted = res.halted.error
                answer = _result_text(res)
                halted_now = res.halted is not None
                later = plan.executions[pos.execution + 1:]
                for n, ex in enumerate(later, 1):
                    step += 1
                    rec.append(accepted_attempt(step, ex.draft, red), turn_id=tid)
                    lg = ResumeLedger.fold(mem.events + tail_events) if halted_now else None
                    r = interp.run(plan_ast(ex.draft), resumable=resumable, ledger=lg)
                    halted_now = halted_now or r.halted is not None
                    answer = _result_text(r) or answer
                    if on_progress is not None:
                        on_progress("tail", n, len(later))
                if result.halted is not None:
                    outcome = "halted"
                    answer = f"The fork's tail halted — {result.halted}"
        finally:
            result.tail_served = tail_host.served
            result.live_ops = list(tail_host.live_ops)
            rec.append(TurnEnded(outcome=outcome, iterations=step, answer=red.redact(answer)), turn_id=tid)
    result.answer = answer
    if plan.mode == "replan":
        _replan_turn(client, fid, plan, result, on_event)
    return result


def _write_child_head(client: Any, plan: ForkPlan, at: int, model: str, conv: list, items: list,
                      leased: ExitStack) -> tuple[str, int, int]:
    """The child session, its lease (held by ``leased``), its conversation and its turn's header
    and prefix rows, in one transaction: ``(child id, turn id, steps written)``."""
    w, red = client.writer, client.redactor
    with w.transaction():
        fid = w.create_session(model, context={"correlation_id": plan.source, "agent_id": f"fork:{plan.source}@{at}"})
        leased.enter_context(SessionLease.acquire(client.store_dir, fid))
        if conv:
            w.append(fid, Compacted(messages=conv))
        tid = w.begin_turn(fid, f"<fork {plan.source} @ {at}>", model)
        step = 0
        for kind, x in items:
            if kind == "attempt":
                step += 1
                w.append(fid, accepted_attempt(step, x, red), turn_id=tid)
            else:
                flush_events(w, fid, x, red)
    return fid, tid, step


def _replan_turn(client: Any, fid: str, plan: ForkPlan, result: ForkResult, on_event: Callable[[dict], None] | None) -> None:
    """A re-plan fork's tail: a live turn of the model on the child, its outcome into ``result``."""
    from ..agent.session import Session

    out = Session(client, fid).send_sync(plan.prompt or default_prompt(None), on_event=on_event, resurrect=False)
    result.turn = out
    result.answer = out.answer
    result.live_ops = [t.name for t in out.tool_calls]
    if not out.ok:
        result.halted = out.error or f"the re-planned turn ended {out.outcome}"


@dataclass
class ForkPrefix:
    """A fork's prefix, run in memory from S's tape (:func:`run_fork_prefix`); nothing written.
    :func:`fork_session` writes it and runs the tail on the same interpreter and tape."""

    plan: ForkPlan
    interp: Interpreter
    tape: ReplayTape
    mem: MemorySink
    items: list  # ("attempt", draft) | ("run", [bodies]), in order
    resumable: bool
    trunc_key: Any  # edit mode: the truncated target's flow key (the tail fast-forwards from its ledger)
    served: int  # cells the prefix consumed
    used: bool = False  # fork_session ran the tail on it (the interpreter and tape move on: one use)


def run_fork_prefix(plan: ForkPlan, toolbox_catalog: OpCatalog | None, *,
                    on_progress: Callable[[str, int, int], None] | None = None) -> ForkPrefix:
    """Run ``plan``'s prefix in memory from S's tape (no model call, no side effect, nothing
    written) and, when ``plan.preview`` is None, compute the gate's preview from the tape as the
    prefix left it — the cells it really consumed, the tail predicted against what is left. A
    prefix that diverges from the recording raises :class:`NotForkable`. The CLI runs this, shows
    the gate, then hands the result to :func:`fork_session` (``prefix=``), so the session is read,
    run and predicted once."""
    with gc_paused():
        return _run_fork_prefix(plan, toolbox_catalog, on_progress)


def _run_fork_prefix(plan: ForkPlan, toolbox_catalog: OpCatalog | None,
                     on_progress: Callable[[str, int, int], None] | None) -> ForkPrefix:
    detail, pos, at = plan.detail, plan.position, plan.at
    cat = catalog_for(toolbox_catalog)
    tape = ReplayTape(detail.cells)
    mem = MemorySink()
    items: list[tuple[str, Any]] = []  # ("attempt", draft) | ("run", [bodies])
    host = _PrefixHost(tape, mem, detail.cell_bodies)
    interp = Interpreter(cat, host, mem, approver=lambda m, r: True, run_id=f"fork:{plan.source}@{at}")
    prefix_execs = plan.executions[:pos.execution]
    resumable = writes_ledger(detail)
    # A plan runs as replay runs it (a host plan on the direct path when the run is resumable),
    # each served cell re-recorded by the host.
    server = PlanServer(interp, on_served=host.rerecord)
    total = len(prefix_execs) + (1 if pos.node else 0)
    halted_open = False

    def run_prefix(draft: A.DraftAst) -> None:
        nonlocal halted_open
        mark = len(mem.events)
        ledger = ResumeLedger.fold(mem.events) if halted_open else None
        h = server.run(draft, ledger, resumable=resumable)
        halted_open = halted_open or h is not None
        items.append(("attempt", draft))
        items.append(("run", mem.events[mark:]))
        if tape.diverged is not None:
            raise NotForkable(f"the fork prefix diverged from the recording of {plan.source}: {tape.diverged} — "
                              "nothing was written")

    for n, ex in enumerate(prefix_execs, 1):
        run_prefix(ex.draft)
        if on_progress is not None:
            on_progress("prefix", n, total)
    target = plan.target
    trunc_key = None
    if pos.node:
        trunc = _truncated(target.draft, pos.node)
        if plan.mode == "edit":  # the edited plan fast-forwards from the truncated target's ledger
            trunc_key = trunc.body.plan.flow_key if type(trunc.body) is HostBody else flow_key(None, trunc.body)
        run_prefix(trunc)
        if on_progress is not None:
            on_progress("prefix", total, total)
    prefix_served = tape.consumed
    if plan.preview is None:
        plan.preview = _preview(plan, after_prefix=tape)
    return ForkPrefix(plan, interp, tape, mem, items, resumable, trunc_key, prefix_served)


class _PrefixHost(ReplayHost):
    """The prefix's scope: every dispatch is served from S's tape (flux's Replay scope), and the
    cell that served it is re-recorded on F as S recorded it — same op, hashes, views, content and
    flags; only ``seq`` counts F's cells — so F replays on its own and ``flux diff S F`` pairs the
    prefix's cells. (Rebuilding the cell from the served outcome would redact and cap text that
    was redacted and capped when S recorded it.)"""

    def __init__(self, tape: ReplayTape, sink: MemorySink, bodies: list[dict] | None = None):
        super().__init__(tape)
        self.sink = sink
        self.seq = 0
        self.bodies = bodies  # each tape cell's body as recorded (read_replay_input(full_cells=True))

    def dispatch(self, op: str, input: Any, input_json: str | None = None) -> Any:
        served = len(self.tape.served)
        outcome = super().dispatch(op, input, input_json)
        if len(self.tape.served) > served:  # a miss or a refusal latches: the fork stops before writing
            self.rerecord(self.tape.served[-1])
        return outcome

    def rerecord(self, i: int) -> None:
        """Re-record tape cell ``i``, just served, on F (F's next ``seq``): the interpreter's
        dispatch calls it, and replay's direct path (``DirectRunner(on_served=…)``)."""
        body = dict(self.bodies[i]) if self.bodies is not None else self.tape.cells[i].to_body()
        body["seq"] = self.seq
        self.seq += 1
        self.sink.emit(body)


def _truncated(draft: A.DraftAst, n: int) -> A.DraftAst:
    """The plan of ``draft``'s first ``n`` statements (unnamed, no return type, as flux truncates it). A host
    plan's stays a direct plan: its first ``n`` statements, its text cut after line ``n`` and its
    key :func:`~.replay_direct.statements_key`, as parsing that text keys it."""
    body = draft.body
    if type(body) is HostBody and type(body.plan) is HostPlan:
        hp = body.plan
        stmts = hp.stmts[:n]
        src, cut = hp.source, 5  # after "flow\n": one line a statement
        for _ in range(n):
            cut = src.index("\n", cut) + 1
        return A.DraftAst(name=None, params=draft.params, returns=None,
                          body=HostBody(HostPlan(statements_key(stmts), stmts, src[:cut])))
    return A.DraftAst(name=None, params=draft.params, returns=None, body=tuple(body[:n]))


def _conversation(reader: StoreReader, plan: ForkPlan) -> list[dict]:
    """F's conversation: S's as it stood at the fork point (:mod:`.conversation` — unlike flux,
    which copies all of it, the child is not shown the calls and answers it branches away from)."""
    pos = plan.position
    in_turn = [e for e in plan.executions[:pos.execution + 1] if e.turn == pos.turn] if pos.turn is not None else []
    calls = [call_of(e.draft) for e in in_turn]
    return conversation_at(reader, plan.source, _turn_id(plan), calls, len(calls) - 1)


def _turn_id(plan: ForkPlan) -> int | None:
    t = plan.position.turn
    if t is None or t > len(plan.detail.turns):
        return None
    return plan.detail.turns[t - 1].turn_id


def accepted_attempt(step: int, draft: A.DraftAst, redactor: Any) -> PlanAttempted:
    """The accepted ``plan_attempted`` row of ``draft`` at ``step``: its fingerprint and its redacted source."""
    text = _host_text(draft)
    if text is not None:  # a host plan's text is format_flow's (_host_text); its fingerprint from its statements
        texts = _node_texts(draft.body.plan)
        fp = _sha256(b'{"params":[],"body":[' + b",".join(texts) + b"]}").hexdigest()
        if not (redactor.finds_nothing(text) and redactor.sees_all_of(text)):  # (the AST only when needed)
            text = redacted_plan_source(text, redactor, plan_ast(draft))
        return PlanAttempted(step=step, outcome="accepted", fingerprint=fp, plan_source=text)
    draft = plan_ast(draft)
    return PlanAttempted(step=step, outcome="accepted", fingerprint=fingerprint(draft),
                         plan_source=redacted_plan_source(format_flow(draft), redactor, draft))


def _node_texts(dp: Any) -> list[bytes]:
    """Each statement's AST JSON text (``node_json_text``) of a direct plan: a HostPlan's, a HostCall's one."""
    return [st.text for st in dp.stmts] if type(dp) is HostPlan else [dp.body_text[1:-1]]


def _host_text(draft: A.DraftAst) -> str | None:
    """``format_flow(draft)`` for a host plan read by the direct path (a :class:`HostBody`) whose
    stored text provably is that, else None (the caller formats the AST). The text is ``flow`` and
    one line ``  name = op(<arg>)`` a statement, each name and op plain and not reserved, each
    argument canonical JSON (``canonical_json(json.loads(arg)) == arg``: what the direct path
    requires). format_flow writes ``  name = op(<compact_value(value)>)`` for such a statement, and
    compact_value writes what canonical_json writes (same key order, escapes, numbers) except a
    string holding a line break, which it spells with triple quotes. So the two are equal unless a
    line spells its name with ``$``, an argument holds a ``\\n`` escape (a line break in canonical
    JSON) or a triple-quoted string (a host call reads one as the JSON string it spells, so its
    text is not canonical JSON) — or the last line has no line end."""
    body = draft.body
    if type(body) is not HostBody or draft.name is not None or draft.params or draft.returns is not None:
        return None
    text = body.plan.source
    if not text.startswith("flow\n  ") or "\n  $" in text or "\\n" in text or '"""' in text \
            or not text.endswith("\n") or text.count("\n") != len(body) + 1:
        return None  # (a host call reads a triple-quoted string as the JSON string it spells: not its text)
    return text
