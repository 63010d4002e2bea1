"""How the interpreter runs Flux-Lang's concurrency, reliability, time and context constructs: one method
per construct, mixed into :class:`flux.lang.interpreter.Interpreter` and reached through
:data:`ConstructsMixin.CONSTRUCTS`, with the Rust runtime's semantics and error wording. What each does,
and how replay reads time-bound decisions back from the tape: docs/flux-lang.md ("Interpreter")."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from flux.canonical import compact_json
from flux.errors import FluxError

from . import ast as A
from .astjson import thing_to_json
from .clock import RealClock
from .outcomes import FATAL_HALTS, Halt, OpFailed, ReturnSignal
from .scheduler import DeadlineExceeded, Scheduler
from .session import SessionBindings, debounce_key, next_debounce_seq, throttle_key
from .values import rust_debug_str, truthy

__all__ = ["ConstructsMixin"]


# ---------------------------------------------------------------------------------------------
# Internal signals (deliberately not `_Halt`s: `try`/`retry`/`fallback`/`saga`/`scope` handlers
# must not catch a deadline or a replay gate — flux cancels the whole body future)
# ---------------------------------------------------------------------------------------------

class _BranchFailed(Halt):
    """A race branch's failure, carrying the branch name for flux's joined error."""

    def __init__(self, name: str, halt: "Halt"):
        super().__init__(halt.error, halt.op)
        self.name, self.halt = name, halt


@dataclass(eq=False)
class _Gate:
    """A replay decision waiting for its first dispatch: did this part of the plan run live?

    While a gate is open the interpreter buffers run events instead of writing them; the first
    dispatch either passes it (the tape has the cell: flush the buffer, carry on) or closes it (no
    cell: the owner rolls back to ``snapshot`` and takes the branch the live run took)."""

    owner: str
    symbols: dict
    next_vid: int
    buf: list = field(default_factory=list)
    open: bool = True  # False once passed or closed (a branch spawned under it shares the object)


class _GateClosed(Exception):
    def __init__(self, gate: _Gate):
        super().__init__(gate.owner)
        self.gate = gate


def _label_text(v: Any) -> str:
    return v if isinstance(v, str) else compact_json(v)


class ConstructsMixin:
    """Construct execution for :class:`~flux.lang.interpreter.Interpreter` (see the module doc)."""

    CONSTRUCTS = {
        A.Loop: "_loop", A.Race: "_race", A.Parallel: "_parallel", A.Timeout: "_timeout",
        A.Budget: "_budget", A.CapScope: "_cap_scope", A.Throttle: "_throttle",
        A.Debounce: "_debounce", A.Verify: "_verify", A.Scope: "_scope", A.Saga: "_saga",
        A.Ctx: "_ctx", A.CtxAppend: "_ctx_append", A.Route: "_route", A.Thing: "_thing",
    }

    # ------------------------------------------------------------------ state
    def _init_constructs(self, clock: Any, session: SessionBindings) -> None:
        self.clock = clock
        self._sched: Optional[Scheduler] = None  # set while a plan runs (Interpreter.run)
        self._steps_base = 0  # op dispatches of the runs so far
        self.session = session  # durable session bindings (flux.lang.session)

    @property
    def steps(self) -> int:
        """Op dispatches that returned — of the running branch while a plan runs (flux counts per
        branch and merges every branch's count, losers' included, at the join), else of all runs."""
        if self._sched is not None and self._sched.current is not None:
            return self._sched.current.steps
        return self._steps_base

    async def _construct(self, node: A.Node) -> Any:
        """Run ``node`` if it is one of this module's constructs; ``NotImplemented`` otherwise."""
        name = self.CONSTRUCTS.get(type(node))
        if name is None:
            return NotImplemented
        return await getattr(self, name)(node)

    # ------------------------------------------------------------------ the dispatch hook
    def _before_dispatch(self, op: str, input_json: str) -> Optional[str]:
        """Checks made before an op starts. Returns a denial message (capability scope) or None;
        raises :class:`_GateClosed` when the op must not start (a replay gate closed)."""
        scopes = self._sched.current.cap_scopes
        if scopes and op not in scopes[-1]:
            allowed = ", ".join(sorted(scopes[-1])) or "nothing"
            return f"op `{op}` is outside the `with_tools` capability scope (allowed: {allowed})"
        recorded = None
        if self._gate is not None:
            recorded = self.clock.recorded(op, input_json)
            if recorded is False:
                raise _GateClosed(self._gate)
            self._pass_gate()
        return None

    # ------------------------------------------------------------------ replay gates
    @property
    def _gate(self) -> Optional[_Gate]:
        """The open gate of the running branch: a gate belongs to the branch that armed it and the
        branches it spawns, never to a concurrent sibling."""
        sched = self._sched
        task = sched.current if sched is not None else None
        gate = task.gate if task is not None else None
        return gate if gate is not None and gate.open else None

    def _arm_gate(self, owner: str) -> Optional[_Gate]:
        """Open a gate when replaying and none is open (the outermost open gate decides)."""
        if not self.clock.replaying or self._gate is not None:
            return None
        gate = _Gate(owner, dict(self.symbols), self._next_vid)
        self._sched.current.gate = gate
        return gate

    def _pass_gate(self) -> None:
        gate = self._gate
        if gate is not None:
            gate.open = False
            buf, gate.buf = gate.buf, []
            for ev in buf:
                self.sink.emit(ev)

    def _roll_back(self, gate: _Gate) -> None:
        """The gated part never ran live: forget what its pure prefix did."""
        gate.open = False
        self.symbols.clear()
        self.symbols.update(gate.symbols)
        for n in range(gate.next_vid, self._next_vid):
            self.values.pop(f"v_{n}", None)
        self._next_vid = gate.next_vid

    def _settle(self, gate: Optional[_Gate]) -> None:
        """A gated part finished without dispatching anything: it ran (flush its events)."""
        if gate is not None and self._gate is gate:
            self._pass_gate()

    def _bind_result(self, name: Optional[str], value: Any) -> None:
        if name is not None and value is not None:
            self.symbols[name] = value

    # ------------------------------------------------------------------ conditions
    async def _cond(self, node: A.Node) -> bool:
        """A `when`/`unless`/`until`/`assert` condition (flux's ``eval_cond``): a call whose op
        fails reads as false — the op ran and said no — but a denial stays fatal."""
        if isinstance(node, A.Call):
            try:
                return truthy(await self._eval(node))
            except OpFailed:
                return False
        return truthy(await self._eval(node))

    # ------------------------------------------------------------------ loop
    async def _loop(self, node: A.Loop) -> Any:
        """``loop for D[, every: E][, until: c]``: iterate until the deadline or ``until``."""
        clock = self.clock
        deadline = clock.now_ms() + node.for_ms
        value = None
        first = True
        while clock.now_ms() < deadline:
            gate = None if first else self._arm_gate("loop")
            first = False
            try:
                try:
                    v = await self._block(node.body)
                except FATAL_HALTS:
                    raise
                except Halt as h:
                    raise Halt(f"`loop` body failed: {h.error}", h.op) from None
                stop = node.until is not None and await self._cond(node.until)
            except _GateClosed as closed:
                if closed.gate is not gate:
                    raise
                self._roll_back(gate)
                break
            finally:
                self._settle(gate)
            if v is not None:
                value = v
            if stop:
                break
            if node.every_ms > 0:
                await self._sched.sleep(node.every_ms)
            elif not isinstance(clock, RealClock):
                clock.advance(1)  # virtual time must move, or a pure `every 0` loop never ends
        self._bind_result(node.bind, value)
        return value

    # ------------------------------------------------------------------ deadlines and branches
    async def _timeout(self, node: A.Timeout) -> Any:
        """The body runs under a deadline; when it strikes, the body (and the op in flight) is
        cancelled — flux drops the future — and the statement fails."""
        if node.ms == 0:
            raise Halt("`timeout` of 0ms cannot complete any work")
        try:
            value = await self._sched.within(self._block(node.body), node.ms)
        except DeadlineExceeded:
            raise Halt(f"`timeout` exceeded {node.ms}ms") from None
        self._bind_result(node.bind, value)
        return value

    async def _race(self, node: A.Race) -> Any:
        """Every branch starts; the first to *succeed* wins and the others are cancelled (their
        in-flight ops abandoned). All failing is a joined error; none succeeding in time a timeout."""
        timed_out = f"`race` timed out after {node.timeout_ms}ms with no successful branch"
        if node.timeout_ms == 0:
            raise Halt(timed_out)
        win, value, errors, _expired = await self._sched.first(
            [self._branch(br) for br in node.branches], node.timeout_ms)
        if win is None:
            if node.branches and len(errors) == len(node.branches):
                by_name = [f"`{e.name}`: {e.error}" for e in errors]
                raise Halt(f"`race` failed: all {len(node.branches)} branch(es) errored: "
                              + "; ".join(by_name))
            raise Halt(timed_out)
        if isinstance(value, ReturnSignal):
            raise value  # a `return` inside the winning branch returns from the flow
        self._bind_result(node.bind, value)
        return value

    async def _branch(self, br: A.Branch) -> Any:
        """One race branch: its value, a `return` (as a value: it wins), or its named failure."""
        try:
            return await self._block(br.body)
        except ReturnSignal as ret:
            return ret
        except Halt as h:
            raise _BranchFailed(br.name, h) from None

    async def _parallel(self, node: A.Parallel) -> Any:
        """Every branch runs concurrently to completion (flux's ``join_all``: a failing sibling does
        not stop the others); after the join, branches bind their values to their names in
        declaration order, and the first error in declaration order is raised."""
        outcomes = await self._sched.gather([self._block(br.body) for br in node.branches])
        last = None
        first_error: Optional[BaseException] = None
        for br, out in zip(node.branches, outcomes):
            if isinstance(out.error, ReturnSignal):
                raise Halt("`return` is not allowed inside a `parallel` branch")
            if out.error is not None:
                first_error = first_error or out.error
                continue
            if out.value is not None:
                self.symbols[br.name] = out.value
                self._bind_durable(br.name, out.value)  # what a resume past it rebinds
                last = out.value
        if first_error is not None:
            raise first_error
        return last

    # ------------------------------------------------------------------ reliability
    async def _budget(self, node: A.Budget) -> Any:
        start, value = self.steps, None
        for stmt in node.body:
            if self.steps - start >= node.limit:
                raise Halt(f"`budget` exceeded: at most {node.limit} op dispatch(es) allowed "
                              "in this scope")
            v = await self._block((stmt,))
            if v is not None:
                value = v
        self._bind_result(node.bind, value)
        return value

    async def _cap_scope(self, node: A.CapScope) -> Any:
        """``with_tools [..]``: only the listed ops may dispatch inside; nested scopes only narrow."""
        task = self._sched.current
        saved = task.cap_scopes
        tools = frozenset(node.tools)
        if saved:
            tools &= saved[-1]
        task.cap_scopes = saved + (tools,)  # per branch: spawned branches inherit the scope
        try:
            value = await self._block(node.body)
        finally:
            task.cap_scopes = saved
        self._bind_result(node.bind, value)
        return value

    # ------------------------------------------------------------------ session state
    def _bind_durable(self, name: str, value: Any, hidden: bool = False) -> None:
        try:
            self.session.bind(name, value, hidden=hidden)
        except FluxError as e:  # the session store failed: the statement fails (flux: `store.bind(...)?`)
            raise Halt(str(e)) from None

    def _session_get(self, name: str) -> Any:
        try:
            return self.session.get(name)
        except FluxError as e:
            raise Halt(str(e)) from None

    def _bucket(self, key: str, window_start: float) -> list[int]:
        """The throttle bucket's in-window timestamps (flux: JSON text of epoch-ms integers)."""
        raw = self._session_get(key)
        try:
            times = json.loads(raw) if isinstance(raw, str) else []
        except ValueError:
            times = []
        if not isinstance(times, list):
            return []
        return [t for t in times if isinstance(t, int) and not isinstance(t, bool) and t >= window_start]

    async def _throttle(self, node: A.Throttle) -> Any:
        """At most ``max`` op dispatches per sliding ``per`` window, checked before each statement;
        the bucket lives in the session bindings under ``__throttle_bucket_<name>`` (flux keeps it
        in the session store: it persists across plans, turns and — with a store — processes)."""
        key = throttle_key(node.name)
        refused = f"`throttle` limit of {node.max} per {node.window_ms}ms exceeded"
        value = None
        for stmt in node.body:
            in_window = len(self._bucket(key, int(self.clock.wall_ms()) - node.window_ms))
            gate = self._arm_gate("throttle")
            if gate is None and in_window >= node.max:
                raise Halt(refused)
            start = self.steps
            try:
                v = await self._block((stmt,))
            except _GateClosed as closed:
                if closed.gate is not gate:
                    raise
                self._roll_back(gate)
                raise Halt(refused) from None
            finally:
                self._settle(gate)
            dispatched = self.steps - start
            if dispatched:
                now = int(self.clock.wall_ms())
                times = self._bucket(key, now - node.window_ms) + [now] * dispatched
                self._bind_durable(key, compact_json(times), hidden=True)
            if v is not None:
                value = v
        return value

    async def _debounce(self, node: A.Debounce) -> Any:
        """Record a trigger (a token under ``__debounce_last_<name>`` in the session bindings),
        wait, and run the body only if no newer trigger of the same name came meanwhile — e.g. the
        same debounce in a concurrent branch, or in another turn; the older trigger coalesces."""
        key = debounce_key(node.name)
        token = f"{int(self.clock.wall_ms())}:{next_debounce_seq()}"
        self._bind_durable(key, token, hidden=True)
        if node.wait_ms > 0:
            await self._sched.sleep(node.wait_ms)
        if self._session_get(key) != token:
            return None  # coalesced into the newer trigger
        return await self._block(node.body)

    async def _verify(self, node: A.Verify) -> Any:
        cmd = node.cmd
        if isinstance(cmd, (A.Call, A.Var, A.Lit, A.Obj, A.ListExpr)):
            text = await self._eval(cmd)
            if isinstance(cmd, A.Lit) and cmd.value is None:
                text = ""
        else:
            raise Halt(f"unsupported return expression `{cmd.kind}`")
        text = _label_text(text)
        expect = await self._eval(node.expect)
        pattern = _label_text(expect)
        if pattern not in text:
            detail = node.message if node.message is not None else \
                f"output did not contain {json.dumps(pattern, ensure_ascii=False)}"
            raise Halt(f"verify failed: {detail}")
        return None

    async def _scope(self, node: A.Scope) -> Any:
        """acquire → body → ``finally`` always (unless acquire failed); the body's error wins."""
        if node.acquire is not None:
            acquired = await self._exec(node.acquire)
            self._bind_result(node.bind, acquired)
        try:
            value = await self._block(node.body)
        except Halt:
            try:
                await self._block(node.finally_)
            except Halt:
                pass  # cleanup is best-effort when the body already failed: its error wins
            raise
        except ReturnSignal:
            await self._block(node.finally_)  # a `return` still cleans up; a cleanup failure wins
            raise
        await self._block(node.finally_)
        return value

    async def _saga(self, node: A.Saga) -> Any:
        """Steps in order; on a failure, the undo blocks of completed steps run in reverse,
        best-effort, and the failure propagates. A ``return`` in a step is a successful exit."""
        undos: list[tuple] = []
        value = None
        for step in node.steps:
            try:
                v = await self._block(step.body)
            except Halt:
                for undo in reversed(undos):
                    try:
                        await self._block(undo)
                    except Halt:
                        pass
                raise
            if v is not None:
                value = v
            if step.undo:
                undos.append(step.undo)
        return value

    # ------------------------------------------------------------------ context and selection
    def _pack(self, name: str, purpose: Optional[str], members: list[str],
              budget: Optional[int]) -> dict:
        """A context pack: members kept in declared order while their JSON sizes fit the budget
        (drop-and-continue); a budgeted pack writes ``ctx_shrunk``."""
        seen: set = set()
        members = [m for m in members if not (m in seen or seen.add(m))]
        kept, dropped, used = [], [], 0
        for m in members:
            size = len(compact_json(self.symbols[m])) if m in self.symbols else 0
            if budget is None or used + size <= budget:
                used += size
                kept.append(m)
            else:
                dropped.append(m)
        if budget is not None:
            self._emit({"event": "ctx_shrunk", "ctx": name, "kept": kept, "dropped": dropped,
                        "budget": budget})
        pack: dict[str, Any] = {"name": name}
        if purpose is not None:
            pack["purpose"] = purpose
        pack["members"] = kept
        if budget is not None:
            pack["budget"] = float(budget)
        self.symbols[name] = pack
        return pack

    async def _ctx(self, node: A.Ctx) -> Any:
        members = [s for s in node.include if s not in node.exclude]
        return self._pack(node.name, node.purpose, members, node.budget)

    async def _ctx_append(self, node: A.CtxAppend) -> Any:
        pack = self.symbols.get(node.ctx)
        if pack is None:
            raise Halt(f"ctx_append: unknown context pack `{node.ctx}`")
        if not isinstance(pack, dict) or not isinstance(pack.get("members"), list):
            raise Halt(f"ctx_append: `{node.ctx}` is not a context pack")
        members = [m for m in pack["members"] if isinstance(m, str)]
        members += [a for a in node.add if a not in members]
        budget = pack.get("budget")
        return self._pack(node.ctx, pack.get("purpose"), members,
                          int(budget) if isinstance(budget, (int, float)) else None)

    async def _route(self, node: A.Route) -> Any:
        sel = node.selector
        if isinstance(sel, A.Call):
            label = _label_text(await self._eval(sel)).strip()
        else:
            label = _label_text(await self._eval(sel))
        for case in node.cases:
            if case.label == label:
                return await self._block(case.body)
        if node.default:
            return await self._block(node.default)
        raise Halt(f"`route` selector returned `{label}`, which matches no case and there is "
                      "no default")

    async def _thing(self, node: A.Thing) -> Any:
        """Resolve a thing reference with flux's deterministic resolver (``default_resolve_thing``,
        crates/flux-lang/src/host.rs) and write ``thing_resolved``. Only self-identifying selectors
        resolve. A `name`/`query` selector fails with flux's own error: flux's ``OpHost`` lets a
        host override ``resolve_thing``, but its production host (flux-flow's ``ExecutorHost``)
        does not, so flux itself halts there too — and records nothing a replay could serve."""
        t = node.thing
        ident: Optional[str] = None
        if t.selector in ("id", "key"):
            ident = t.value
        elif not t.custom and t.kind == "file" and t.selector == "path":
            ident = t.value
        elif not t.custom and t.kind == "url" and t.selector in ("path", "name"):
            ident = t.value
        if ident is None:
            kind = (f"Custom({rust_debug_str(t.kind)})" if t.custom
                    else "".join(part.title() for part in t.kind.split("_")))
            selector = f"{t.selector.title()}({rust_debug_str(t.value)})"
            raise Halt(f"no deterministic resolution for a {kind} by {selector} — a Name/Query "
                          "selector needs a host resolver")
        ref = thing_to_json(t)
        resolved = {"id": ident, "kind": ref["kind"], "display": ident,
                    "source": "deterministic", "confidence": 1.0}
        self._emit({"event": "thing_resolved", "thing": ref, "resolved": resolved})
        return resolved
