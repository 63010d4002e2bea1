"""A Flux-Lang interpreter that re-executes a plan for replay, fork and what-if, hashing each op
call as flux does and writing the run's events (``step_*``, ``statement_completed``,
``plan_halted``) in flux's order; the op host answers the calls. The constructs are
:mod:`flux.lang.constructs`, value reading :mod:`flux.lang.values`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from types import MappingProxyType
from typing import Any, Callable, Iterable, Optional

from flux.canonical import canonical_json, compact_json, sha256_hex

from . import ast as A
from .catalog import OpArgError, OpCatalog, map_args_to_input
from .clock import Clock, RealClock, ReplayClock
from .constructs import ConstructsMixin
from .hashes import flow_key as compute_flow_key
from .hashes import memo_symbol, once_key, step_id, stmt_hash16
from .ledger import LedgerEntry, ResumeLedger
from .outcomes import (FATAL_HALTS, AssertFailed, ConfirmDenied, Denied, EventSink, Halt, ListSink, OpFailed,
                       OpHost, OpOutcome, PlanHalt, ResumeError, ReturnSignal, RunResult, deny_all)
from .parser import ParseError, formula_tree
from .scheduler import Scheduler
from .session import MemoryBindings, SessionBindings
from .values import number_of, rust_debug_str, structured, truthy, walk_path

# Rust's `str::parse::<f64>` / `::<i64>` grammars, which flux's `parse(v, as: …)` uses.
_RUST_F64 = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf|infinity|nan))",
                       re.ASCII)
_RUST_I64 = re.compile(r"[+-]?[0-9]+", re.ASCII)

__all__ = [
    "OpOutcome", "OpHost", "EventSink", "ListSink", "PlanHalt", "RunResult", "Interpreter",
    "ResumeLedger", "LedgerEntry", "ResumeError", "interpolate", "interpolate_json", "PLACEHOLDER", "binder_of",
    "deny_all", "completed_work", "ledger_walk",
]


def _parallel_branch_names(node: Any) -> list[str]:
    """The branch names of every ``parallel`` inside ``node`` (any depth), in source order."""
    names: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, A.Parallel):
            names.extend(br.name for br in n.branches)
        if isinstance(n, (A.Node, A.Part)):
            for f in dataclasses.fields(n):
                stack.append(getattr(n, f.name))
        elif isinstance(n, tuple):
            stack.extend(reversed(n))
    return names


def _is_flux_error(e: BaseException) -> bool:
    """A branch's result (a Flux failure or a `return`), as opposed to an error that aborts."""
    return isinstance(e, (Halt, ReturnSignal))


def _same(outcome: Any) -> Any:
    return outcome


class completed_work:  # noqa: N801 - used like a function: `return completed_work(outcome)`
    """Work that is already done (an inline dispatch, a refusal): the scheduler completes it in
    dispatch order without a worker thread."""

    completed = True
    __slots__ = ("outcome",)

    def __init__(self, outcome: Any):
        self.outcome = outcome

    def __call__(self) -> Any:
        return self.outcome


def _clock_for(host: Any, sleep: Callable[[float], None]) -> Clock:
    """Replay never waits: a hermetic cassette player (or a recorder over one — it forwards
    attributes) gets the replay clock; every other host gets wall time with the given sleep."""
    if getattr(host, "hermetic", False) is True and getattr(host, "tape", None) is not None:
        return ReplayClock(host.tape)
    return RealClock(sleep)


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------

#: What :func:`interpolate` rewrites in a string: ``{{``, ``}}`` and ``{name}`` (the name its group 1).
PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _top_level_op(node: A.Node) -> Optional[str]:
    """The op a halted top-level statement names (flux's ``top_level_op``): a bare call's or a
    bind-of-call's; a control-flow statement names none."""
    if isinstance(node, A.Call):
        return node.op
    if isinstance(node, A.Bind) and isinstance(node.value, A.Call):
        return node.value.op
    return None


def _text_of(v: Any) -> str:
    return v if isinstance(v, str) else compact_json(v)


def interpolate(s: str, symbols: dict[str, Any]) -> str:
    """``{name}`` → the bound symbol's text; ``{{``/``}}`` → braces; unbound stays literal."""
    if "{" not in s and "}" not in s:  # nothing to substitute (most literal strings)
        return s

    def sub(m: re.Match) -> str:
        tok = m.group(0)
        if tok == "{{":
            return "{"
        if tok == "}}":
            return "}"
        name = m.group(1)
        return _text_of(symbols[name]) if name in symbols else tok
    return PLACEHOLDER.sub(sub, s)


def interpolate_json(v: Any, symbols: dict[str, Any]) -> Any:
    """A JSON value with :func:`interpolate` applied to every string in it (keys stay as they are)."""
    if isinstance(v, str):
        return interpolate(v, symbols)
    if isinstance(v, list):
        return [interpolate_json(x, symbols) for x in v]
    if isinstance(v, dict):
        return {k: interpolate_json(x, symbols) for k, x in v.items()}
    return v


def binder_of(node: A.Node) -> Optional[str]:
    """The single symbol a top-level statement binds (what a resume re-binds)."""
    if isinstance(node, (A.Bind, A.Memo)):
        return node.name
    if isinstance(node, A.Each):
        return node.collect
    if isinstance(node, A.Repeat):
        return node.collect
    if isinstance(node, (A.Seq, A.Pipe, A.Retry, A.Fallback, A.Once, A.Loop, A.Race,
                         A.Timeout, A.Budget, A.CapScope, A.Scope)):
        return node.bind
    if isinstance(node, A.Ctx):  # flux: the pack's value is the statement's value
        return node.name
    if isinstance(node, A.CtxAppend):
        return node.ctx
    return None


# ---------------------------------------------------------------------------------------------
# The interpreter
# ---------------------------------------------------------------------------------------------

_PASS_THROUGH = (A.Checkpoint, A.Await)  # statements the ledger walk steps over (Interpreter.PASS_THROUGH)


def ledger_walk(body: tuple, ledger: Any) -> tuple[list[tuple[int, "LedgerEntry"]], int]:
    """The first steps of a resume: the statements of ``body`` the ledger proves done, as ``(index, entry)``,
    and the index where the walk stops (the first statement with no entry, or whose entry records
    another statement). Checkpoints and awaits are stepped over."""
    i = 0
    matched: list[tuple[int, LedgerEntry]] = []
    while i < len(body):
        node = body[i]
        if isinstance(node, _PASS_THROUGH):
            i += 1
            continue
        entry = ledger.entry(i)
        if entry is None or entry.stmt != stmt_hash16(node):
            break
        matched.append((i, entry))
        i += 1
    return matched, i


class Interpreter(ConstructsMixin):
    """Executes a :class:`DraftAst` against an op host, writing run events to a sink.

    ``values`` is the value store (value id → JSON); resumes read recorded values from it.
    ``memo`` (memo key → value) and ``once_done`` (once key → value) are session state that
    survive across runs when the caller passes the same dicts in.
    """

    PASS_THROUGH = _PASS_THROUGH

    def __init__(
        self,
        catalog: OpCatalog,
        host: OpHost,
        sink: EventSink,
        approver: Callable[[str, str], bool] = deny_all,
        *,
        values: Optional[dict[str, Any]] = None,
        memo: Optional[dict[str, Any]] = None,
        once_done: Optional[dict[str, Any]] = None,
        run_id: str = "run",
        sleep: Callable[[float], None] = time.sleep,
        clock: Optional[Clock] = None,
        session: Optional[SessionBindings] = None,
    ):
        self.catalog, self.host, self.sink, self.approver = catalog, host, sink, approver
        self.values: dict[str, Any] = values if values is not None else {}
        self.memo: dict[str, Any] = memo if memo is not None else {}
        self.once_done: dict[str, Any] = once_done if once_done is not None else {}
        self.run_id = run_id
        self.sleep = sleep
        self.symbols: dict[str, Any] = {}
        self._next_vid = max((int(k[2:]) for k in self.values
                              if k.startswith("v_") and k[2:].isdigit()), default=0) + 1
        self._last_vid: Optional[str] = None
        self._host_phases: Optional[tuple] = None
        self._init_constructs(clock if clock is not None else _clock_for(host, sleep),
                              session if session is not None else MemoryBindings())

    # ------------------------------------------------------------------ values
    def _mint(self, value: Any) -> str:
        vid = f"v_{self._next_vid}"
        self._next_vid += 1
        self.values[vid] = value
        return vid

    # ------------------------------------------------------------------ statements run outside the walk
    # What a caller that runs a plan's op statements itself (replay's direct path for host plans)
    # tells the interpreter, so that it is left as its own walk leaves it: the step count, the
    # value ids and values, the last value's id. Only while no plan is running (``plan_running``).

    @property
    def plan_running(self) -> bool:
        """Whether a plan is being run (by :meth:`run` or :meth:`run_call`): its scheduler is busy."""
        return self._sched is not None

    def record_completed(self, value: Any) -> str:
        """A top-level statement's op dispatch returned ``value``: one more step, the value stored
        under a new value id, which is now the last value's; that id."""
        self._steps_base += 1
        vid = self._last_vid = self._mint(value)
        return vid

    def record_failed(self) -> None:
        """A top-level statement's op dispatch failed or was denied: one more step, no value."""
        self._steps_base += 1
        self._last_vid = None

    def record_completed_unkept(self, count: int) -> None:
        """``count`` (one or more) top-level statements' op dispatches returned values nobody
        keeps: as many steps, their value ids used up as :meth:`record_completed` mints them
        but nothing stored, the last of them the last value's id."""
        self._steps_base += count
        self._next_vid += count
        self._last_vid = f"v_{self._next_vid - 1}"

    def _emit(self, ev: dict) -> None:
        if self._gate is not None:  # a replay decision is pending (constructs._Gate)
            self._gate.buf.append(ev)
            return
        self.sink.emit(ev)

    # ------------------------------------------------------------------ top level
    def run(self, draft: A.DraftAst, resumable: bool = True,
            ledger: Optional[ResumeLedger] = None, flow_key: Optional[str] = None) -> RunResult:
        """Run ``draft``; ``flow_key`` may pass its already computed key (replay keys every plan first).

        Synchronous for callers; inside, the plan is a coroutine driven by a fresh
        :class:`~flux.lang.scheduler.Scheduler` (concurrent ``parallel``/``race`` branches,
        cancelling deadlines)."""
        self._sched = Scheduler(self.clock, _is_flux_error)
        try:
            return self._sched.run(self._run(draft, resumable, ledger, flow_key))
        finally:
            self._sched = None

    async def _run(self, draft: A.DraftAst, resumable: bool, ledger: Optional[ResumeLedger],
                   flow_key: Optional[str]) -> RunResult:
        self._sched.current.steps = self._steps_base
        try:
            return await self._run_body(draft, resumable, ledger, flow_key)
        finally:
            self._steps_base = self._sched.current.steps

    async def _run_body(self, draft: A.DraftAst, resumable: bool, ledger: Optional[ResumeLedger],
                        flow_key: Optional[str]) -> RunResult:
        key = flow_key or compute_flow_key(draft.name, draft.body)
        body = draft.body
        start = 0
        if ledger is not None:
            start = self._fast_forward(body, key, ledger, resumable)
        result = RunResult(flow_key=key)
        for i in range(start, len(body)):
            node = body[i]
            stmt = stmt_hash16(node)
            if isinstance(node, A.Checkpoint):
                self._emit({"event": "checkpoint_reached", "flow_key": key, "label": node.label,
                            "node": i})
                continue
            if isinstance(node, A.Await):
                err = f"plan paused: awaiting `{node.source}`"
                self._emit({"event": "awaiting", "run": f"{self.run_id}:{i}", "node": i})
                result.halted = PlanHalt("awaiting", err, i, stmt)
                if resumable:
                    self._emit({"event": "plan_halted", "plan": key, "node": i, "stmt": stmt,
                                "kind": "awaiting", "error": err})
                break
            self._last_vid = None
            try:
                value, vid = await self._statement(node)
            except ReturnSignal as ret:
                if resumable:
                    self._completed(key, i, stmt, ret.vid)
                self._emit({"event": "flow_returned", "value": ret.vid})
                result.value, result.returned = ret.value, True
                break
            except Halt as h:
                result.halted = PlanHalt(h.kind, h.error, i, stmt, _top_level_op(node))
                if resumable:
                    ev = {"event": "plan_halted", "plan": key, "node": i, "stmt": stmt}
                    if h.op is not None:
                        ev["op"] = h.op
                    ev["kind"] = h.kind
                    ev["error"] = h.error
                    self._emit(ev)
                break
            if resumable:
                self._completed(key, i, stmt, vid)
        # A read-only view, not a copy: one interpreter runs every plan of a replay, and copying a
        # growing symbol table per plan made long replays quadratic.
        result.symbols = MappingProxyType(self.symbols)
        result.values = self.values
        return result

    def _completed(self, key: str, i: int, stmt: str, vid: Optional[str],
                   skipped: bool = False) -> None:
        ev: dict[str, Any] = {"event": "statement_completed", "plan": key, "node": i,
                              "stmt": stmt}
        if vid is not None:
            ev["value"] = vid
        ev["skipped"] = skipped
        self._emit(ev)

    def _fast_forward(self, body: tuple, key: str, ledger: ResumeLedger,
                      resumable: bool) -> int:
        """Resume: skip the statements the ledger proves done, re-binding their values."""
        matched, ledger_end = ledger_walk(body, ledger)
        for idx, entry in matched:
            binder = binder_of(body[idx])
            if entry.value is not None and binder is not None:
                if entry.value not in self.values:
                    raise ResumeError(
                        f"recorded value {entry.value} of statement {idx} is missing from the "
                        "value store; resume from a store that holds it")
                self.symbols[binder] = self.values[entry.value]
            self._rebind_durable(body[idx])
        if resumable:
            for idx, entry in matched:
                self._completed(key, idx, entry.stmt, entry.value, skipped=True)
            self._emit({"event": "plan_resumed", "plan": key, "prior": ledger.plan,
                        "skipped": ledger_end})
        cp = ledger.checkpoint
        return max(ledger_end, cp + 1 if cp is not None else 0)

    def _phases(self, op: str, input_obj: Any, input_json: str) -> tuple:
        """A dispatch as the scheduler runs it: ``start()`` (on the interpreter's thread) returns
        the work; ``settle(outcome)`` is the bookkeeping once the run takes the result.

        A host opts into concurrent dispatch with ``begin(op, input, input_json) -> work`` (the
        work must be safe to run in a worker thread) and ``settle(op, input_json, outcome) ->
        outcome``. A host with only ``dispatch`` runs inline on the interpreter's thread: nothing is
        assumed thread-safe that did not say so. (The host's methods are looked up once per host:
        ``host`` may be swapped between runs, e.g. a fork's tail.)"""
        host = self.host
        cached = self._host_phases
        if cached is None or cached[0] is not host:
            cached = self._host_phases = (host, getattr(host, "begin", None),
                                          getattr(host, "settle", None))
        _, begin, settle_host = cached
        if begin is not None:
            def start() -> Callable[[], Any]:
                return begin(op, input_obj, input_json)
        else:
            def start() -> Callable[[], Any]:
                return completed_work(host.dispatch(op, input_obj, input_json))
        if settle_host is None:
            return start, _same
        return start, lambda outcome: settle_host(op, input_json, outcome)

    def _rebind_durable(self, node: A.Node) -> None:
        """Rebind what a fast-forwarded statement bound beyond its single binder — the branch names
        of every ``parallel`` in it — from the durable session bindings, as flux does on resume."""
        for name in _parallel_branch_names(node):
            value = self.session.get(name)
            if value is not None:
                self.symbols[name] = value

    # ------------------------------------------------------------------ statements
    async def _statement(self, node: A.Node) -> tuple[Any, Optional[str]]:
        """Run one statement; returns its value and that value's id (if it has one)."""
        value = await self._exec(node)
        binder = binder_of(node)
        if isinstance(node, (A.Bind, A.Memo)) or isinstance(node, A.Call):
            vid = self._last_vid if self._last_vid is not None and \
                self.values.get(self._last_vid) is value else None
            if vid is None and (binder is not None or isinstance(node, A.Call)):
                vid = self._mint(value)
            return value, vid
        if binder is not None and binder in self.symbols:
            return value, self._mint(self.symbols[binder])
        return value, None

    async def _block(self, body: Iterable[A.Node]) -> Any:
        """Run a nested body; its value is the last statement's value."""
        last = None
        for node in body:
            if isinstance(node, (A.Await, A.Checkpoint)):
                raise Halt(f"`{node.kind}` is only allowed at the top level of a flow")
            last = await self._exec(node)
        return last

    async def _exec(self, node: A.Node) -> Any:  # noqa: C901 - one arm per construct
        S = self.symbols
        if isinstance(node, (A.Bind, A.Memo)):
            if isinstance(node, A.Memo):
                mkey = memo_symbol(node.value.op, node.value.args) \
                    if isinstance(node.value, A.Call) else node.name
                if mkey in self.memo:
                    S[node.name] = self.memo[mkey]
                    return S[node.name]
                value = await self._eval(node.value)
                self.memo[mkey] = value
            else:
                value = await self._eval(node.value)
            S[node.name] = value
            return value
        if isinstance(node, A.Return):
            self._last_vid = None
            value = await self._eval(node.value)
            vid = self._last_vid if isinstance(node.value, A.Call) and self._last_vid else \
                self._mint(value)
            raise ReturnSignal(value, vid)
        if isinstance(node, A.When):
            return await self._block(node.then if await self._cond(node.cond) else node.otherwise)
        if isinstance(node, A.Unless):
            return None if await self._cond(node.cond) else await self._block(node.body)
        if isinstance(node, A.Each):
            return await self._each(node)
        if isinstance(node, A.Repeat):
            results = []
            for _ in range(node.max):
                results.append(await self._block(node.body))
                if node.until is not None and await self._cond(node.until):
                    break
            if node.collect is not None:
                S[node.collect] = results
            return results[-1] if results else None
        if isinstance(node, A.Seq):
            value = await self._block(node.body)
            if node.bind is not None:
                S[node.bind] = value
            return value
        if isinstance(node, A.Pipe):
            return await self._pipe(node)
        if isinstance(node, A.Try):
            try:
                return await self._block(node.body)
            except FATAL_HALTS:
                raise
            except Halt as h:
                if node.catch is not None:
                    S[node.catch] = h.error
                return await self._block(node.handler)
        if isinstance(node, A.Retry):
            return await self._retry(node)
        if isinstance(node, A.Fallback):
            last_error: Optional[Halt] = None
            for br in node.branches:
                try:
                    value = await self._block(br.body)
                except FATAL_HALTS:
                    raise
                except Halt as h:
                    last_error = h
                    continue
                if node.bind is not None:
                    S[node.bind] = value
                return value
            raise last_error or Halt("fallback has no branches")
        if isinstance(node, A.Match):
            subject = structured(await self._eval(node.subject))
            for case in node.cases:
                cv = structured(await self._eval(case.value))
                if A.json_key(cv) == A.json_key(subject):
                    return await self._block(case.body)
            if not node.default:
                raise Halt(f"`match` had no case for `{compact_json(subject)}` and no default")
            return await self._block(node.default)
        if isinstance(node, A.Assert):
            if not await self._cond(node.cond):
                raise AssertFailed(node.message or "assertion failed")
            return None
        if isinstance(node, A.Confirm):
            if not self.approver(node.message, node.risk or "medium"):
                raise ConfirmDenied(f"confirmation denied: {node.message}")
            return await self._block(node.body)
        if isinstance(node, A.Once):
            key = once_key(node.label, node.body)
            if key in self.once_done:
                value = self.once_done[key]
            else:
                value = await self._block(node.body)
                self.once_done[key] = value
                ev: dict[str, Any] = {"event": "once_completed", "label": key}
                if value is not None:
                    ev["value"] = self._mint(value)
                ev["summary"] = ""
                self._emit(ev)
            if node.bind is not None:
                S[node.bind] = value
            return value
        if isinstance(node, (A.Await, A.Checkpoint)):
            raise Halt(f"`{node.kind}` is only allowed at the top level of a flow")
        if isinstance(node, (A.Call, A.Var, A.Lit, A.Fmt, A.Jq, A.Expr, A.Obj, A.ListExpr,
                             A.Peek, A.Parse)):
            return await self._eval(node)
        value = await self._construct(node)  # constructs.py: loop, race, parallel, timeout, …
        if value is not NotImplemented:
            return value
        raise Halt(f"not supported: {node.kind}")

    async def _each(self, node: A.Each) -> Any:
        items = structured(await self._eval(node.source))
        if not isinstance(items, list):
            raise Halt(f"`each` needs a list, got {compact_json(items)}")
        results = []
        for item in items:
            self.symbols[node.item] = item
            results.append(await self._block(node.body))
        if node.collect is not None:
            if node.flat:
                flat: list = []
                for r in results:
                    r = structured(r)
                    if not isinstance(r, list):
                        raise Halt("`each … -> flat` needs every iteration to produce a list")
                    flat.extend(r)
                results = flat
            self.symbols[node.collect] = results
        return results

    async def _pipe(self, node: A.Pipe) -> Any:
        """Each step is a call; the previous step's output is prepended as its first argument."""
        value: Any = None
        for i, step in enumerate(node.steps):
            if not isinstance(step, A.Call):
                raise Halt("every `pipe` step must be an op call")
            args = [await self._eval(a) for a in step.args]
            if i > 0:
                args.insert(0, value)
            value = await self._dispatch(step.op, args)
        if node.bind is not None:
            self.symbols[node.bind] = value
        return value

    async def _retry(self, node: A.Retry) -> Any:
        """flux's retry: up to ``max`` attempts; before attempt k>0 wait ``delay`` (default 500 ms),
        ×k when linear, ×2^(k-1) when exponential; fatal failures are never retried."""
        base = node.delay_ms if node.delay_ms is not None else 500
        last_error = ""
        for attempt in range(node.max):
            if attempt > 0:
                wait = base
                if node.backoff == "linear":
                    wait = base * attempt
                elif node.backoff == "exponential":
                    wait = base * 2 ** min(attempt - 1, 10)
                if wait > 0:
                    await self._sched.sleep(wait)
            try:
                value = await self._block(node.body)
            except FATAL_HALTS:
                raise
            except Halt as h:
                last_error = h.error
                continue
            if node.bind is not None:
                self.symbols[node.bind] = value
            return value
        raise Halt(f"`retry` exhausted {node.max} attempt(s): {last_error}")

    # ------------------------------------------------------------------ expressions
    async def _eval(self, node: A.Node) -> Any:
        S = self.symbols
        if isinstance(node, A.Lit):
            return interpolate_json(node.value, S)
        if isinstance(node, A.Var):
            if node.name not in S:
                raise Halt(f"unbound symbol `{node.name}`")
            return S[node.name]
        if isinstance(node, A.Call):
            return await self._dispatch(node.op, [await self._eval(a) for a in node.args])
        if isinstance(node, A.Fmt):
            return interpolate(node.template, S)
        if isinstance(node, A.Obj):
            return {k: await self._eval(v) for k, v in node.fields}
        if isinstance(node, A.ListExpr):
            return [await self._eval(v) for v in node.items]
        if isinstance(node, A.Jq):
            return walk_path(await self._eval(node.input), node.path, node.optional)
        if isinstance(node, A.Peek):
            return S.get(node.name)
        if isinstance(node, A.Expr):
            try:
                tree = formula_tree(node.formula)
            except ParseError as exc:
                raise Halt(f"bad formula `{node.formula}`: {exc.what}") from None
            return await self._formula(tree, dict(node.vars))
        if isinstance(node, A.Parse):
            return self._parse_value(await self._eval(node.value), node.as_type)
        if isinstance(node, A.Thing):
            return await self._thing(node)
        raise Halt(f"not supported: {node.kind}")

    async def _formula(self, t: Any, vars_: dict[str, A.Node]) -> Any:
        if isinstance(t, A.Var):
            return structured(await self._eval(vars_.get(t.name, t)))
        if isinstance(t, A.Jq) and isinstance(t.input, A.Var):
            base = await self._eval(vars_.get(t.input.name, t.input))
            return walk_path(base, t.path, t.optional)
        if isinstance(t, A.Lit):
            return t.value
        op, args = t.op, t.args
        if op == "&&":
            return truthy(await self._formula(args[0], vars_)) and \
                truthy(await self._formula(args[1], vars_))
        if op == "||":
            return truthy(await self._formula(args[0], vars_)) or \
                truthy(await self._formula(args[1], vars_))
        vals = [await self._formula(a, vars_) for a in args]
        if op == "!":
            return not truthy(vals[0])
        if op == "neg":
            return -number_of(vals[0], "-")
        if op in ("==", "!="):
            eq = A.json_key(vals[0]) == A.json_key(vals[1]) or (
                all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)
                and vals[0] == vals[1])
            return eq if op == "==" else not eq
        if op in ("<", "<=", ">", ">="):
            a, b = vals
            if not (isinstance(a, str) and isinstance(b, str)):
                a, b = number_of(a, op), number_of(b, op)
            return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        if op == "+" and isinstance(vals[0], str) and isinstance(vals[1], str):
            return vals[0] + vals[1]
        if op in ("+", "-", "*", "/", "%"):
            a, b = number_of(vals[0], op), number_of(vals[1], op)
            if op in ("/", "%") and b == 0:
                raise Halt("division by zero")
            return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
                    "/": lambda: a / b, "%": lambda: a % b}[op]()
        if op == "abs":
            return abs(number_of(vals[0], op))
        if op == "len":  # formula `len(x)`, as flux's parser reads it
            v = structured(vals[0]) if vals else None
            if not isinstance(v, (str, list, dict)):
                raise Halt(f"`len` needs a string, list or object, got {compact_json(v)}")
            return len(v)
        if op in ("min", "max"):
            nums = [number_of(v, op) for v in vals]
            return min(nums) if op == "min" else max(nums)
        if op == "round":
            digits = int(number_of(vals[1], op)) if len(vals) > 1 else 0
            return round(number_of(vals[0], op), digits)
        raise Halt(f"unknown formula operator `{op}`")

    @staticmethod
    def _parse_value(v: Any, as_type: str) -> Any:
        """flux's ``coerce_parse`` (crates/flux-lang/src/runtime.rs): the value as text (a string is
        itself, anything else its compact JSON); ``f64``/``i64`` read the trimmed text with Rust's
        number grammar, ``bool`` is true exactly for ``true``/``1`` (never an error), ``json`` must
        parse; every other target (``string``, ``form``, any other word) passes the text through
        unchanged. A non-finite f64 is flux's text for it (``inf``, ``-inf``, ``NaN``)."""
        text = v if isinstance(v, str) else compact_json(v)
        if as_type in ("f64", "i64"):
            word = text.strip()
            if not (_RUST_F64 if as_type == "f64" else _RUST_I64).fullmatch(word):
                raise Halt(f"parse: cannot coerce {rust_debug_str(text)} to {as_type}")
            if as_type == "i64":
                number = int(word)
                if not -(2 ** 63) <= number < 2 ** 63:
                    raise Halt(f"parse: cannot coerce {rust_debug_str(text)} to i64")
                return number
            value = float(word)
            if value != value:
                return "NaN"
            if value in (float("inf"), float("-inf")):
                return "inf" if value > 0 else "-inf"
            return value
        if as_type == "bool":
            return text.strip() in ("true", "1")
        if as_type == "json":
            try:
                return json.loads(text)
            except ValueError as exc:
                raise Halt(f"parse: invalid JSON: {exc}") from None
        return text

    # ------------------------------------------------------------------ dispatch
    async def _dispatch(self, op: str, values: list[Any]) -> Any:
        """One op call: map, hash, ``step_started``, host dispatch, ``step_succeeded|failed``."""
        sid, input_obj, input_json, denial = self._dispatch_start(op, values)
        if denial is not None:
            outcome = OpOutcome(denial, denied=True)
        else:
            outcome = await self._sched.dispatch(*self._phases(op, input_obj, input_json),
                                                 op, input_json)
        return self._dispatch_end(op, sid, outcome)

    def _dispatch_start(self, op: str, values: list[Any]) -> tuple[str, Any, str, Optional[str]]:
        """A dispatch up to its ``step_started``: ``(step id, input, input JSON, denial or None)``."""
        spec = self.catalog.get(op)
        if spec is None:
            raise Halt(f"unknown op `{op}`", op)
        try:
            input_obj = map_args_to_input(spec, values)
        except OpArgError as exc:
            raise Halt(str(exc), op) from None
        input_json = canonical_json(input_obj)
        ih = sha256_hex(input_json)  # = input_hash(input_obj), without serializing the input twice
        sid = step_id(op, ih)
        denial = self._before_dispatch(op, input_json)  # capability scope, replay gates
        self._emit({"event": "step_started", "step": sid, "op": op, "input_hash": ih})
        return sid, input_obj, input_json, denial

    def _dispatch_end(self, op: str, sid: str, outcome: Any) -> Any:
        """A dispatch once its outcome is in: the step count, ``step_succeeded|failed``, the value."""
        self._sched.current.steps += 1  # counted once it returned (a cancelled op never does)
        if outcome.denied or outcome.is_error:
            self._emit({"event": "step_failed", "step": sid, "error": outcome.content})
            raise (Denied if outcome.denied else OpFailed)(outcome.content, op)
        value = outcome.content
        vid = self._mint(value)
        self._last_vid = vid
        self._emit({"event": "step_succeeded", "step": sid, "output": vid})
        return value

    # ------------------------------------------------------------------ the one-call plan
    def run_call(self, name: str, op: str, value: Any) -> None:
        """``run(DraftAst(body=(Bind(name, Call(op, (Lit(value),))),)), resumable=False)`` — the
        one-statement plan an adaptive turn records per tool call — without the AST walk and the
        coroutine tree: the same events to the sink, the same host calls, the same values, symbols
        and step count; a halt ends it as it ends that plan (nothing more is emitted, the binding is
        not made). A differential test (tests/agent/test_direct_call.py) records turns both ways.
        Only for a run with nothing else in flight: no replay gate, no capability scope."""
        sched = self._sched = Scheduler(self.clock, _is_flux_error)
        task = sched.current = sched.root_task()
        task.steps = self._steps_base
        try:
            self._last_vid = None
            try:
                sid, input_obj, input_json, denial = self._dispatch_start(op, [interpolate_json(value, self.symbols)])
                if denial is not None:
                    outcome = OpOutcome(denial, denied=True)
                else:
                    start, settle = self._phases(op, input_obj, input_json)
                    outcome = settle(start()())  # the scheduler's solo dispatch (one branch, no deadline)
                    self.clock.dispatched()
                self.symbols[name] = self._dispatch_end(op, sid, outcome)
            except Halt:
                pass
        finally:
            self._steps_base = task.steps
            self._sched = None
