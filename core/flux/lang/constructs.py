"""How the interpreter runs Flux-Lang's concurrency, reliability, time and context constructs.

One method per construct, mixed into :class:`flux.lang.interpreter.Interpreter` and reached from
its dispatch through :data:`ConstructsMixin.CONSTRUCTS`. Semantics follow the Rust flux runtime
(``flux_lang::runtime::exec_body``); error messages are worded as flux words them.

Scheduling. flux runs ``parallel`` and ``race`` branches as concurrent futures. This interpreter is
synchronous and runs branches with a deterministic scheduler, in declaration order:

- ``parallel``: every branch runs to completion (flux's ``join_all``: a failing sibling does not stop
  the others); each branch binds its value to its name; the first error in declaration order is
  raised afterwards. Run events are written branch after branch, which is one of the orders flux can
  record (replay matches cells by ``(op, input_hash)`` scanning forward, so any order replays).
- ``race``: branches start in declaration order and the first *success* wins; later branches never
  start (flux cancels the losers; here they are cancelled before they begin). So the winner is the
  first successful branch in declaration order, not the fastest one.

Time. Every deadline and sleep goes through the interpreter's :class:`~flux.lang.clock.Clock`.
Deadlines (``timeout``, ``race``) are enforced at op-dispatch boundaries: an op that would start
after the deadline does not start and the construct fails with flux's message; an op already
running when the deadline passes is allowed to finish (flux would drop its future mid-flight).
Under replay (:class:`~flux.lang.clock.ReplayClock`) those decisions are read back from the tape:
an op the live run never dispatched has no cell, so

- a dispatch inside a ``timeout``/``race`` that has no cell is where the deadline struck;
- a ``loop`` iteration (after the first) whose first dispatch has no cell never ran live: the loop
  ended there by its deadline. The iteration's pure prefix is rolled back (symbols, minted values and
  any buffered run events) — see :class:`_Gate`;
- in a ``throttle``, a statement whose first dispatch has no cell is the one the window refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from flux.canonical import compact_json

from . import ast as A
from . import interpreter as I  # noqa: N812 - the module that mixes this in (imported lazily)
from .astjson import _thing_to_json

__all__ = ["ConstructsMixin"]


# ---------------------------------------------------------------------------------------------
# Internal signals (deliberately not `_Halt`s: `try`/`retry`/`fallback`/`saga`/`scope` handlers
# must not catch a deadline or a replay gate — flux cancels the whole body future)
# ---------------------------------------------------------------------------------------------

@dataclass(eq=False)
class _Deadline:
    at_ms: float
    what: str  # "timeout" | "race"


class _Expired(Exception):
    def __init__(self, deadline: _Deadline):
        super().__init__(deadline.what)
        self.deadline = deadline


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
    def _init_constructs(self, clock: Any, throttle: Optional[dict], debounce: Optional[dict]) -> None:
        self.clock = clock
        self.steps = 0  # op dispatches so far (what `budget` and `throttle` count)
        self.throttle_buckets: dict[str, list[float]] = throttle if throttle is not None else {}
        self.debounce_tokens: dict[str, str] = debounce if debounce is not None else {}
        self._debounce_seq = 0
        self._deadlines: list[_Deadline] = []
        self._cap_scopes: list[frozenset] = []
        self._gate: Optional[_Gate] = None

    def _construct(self, node: A.Node) -> Any:
        """Run ``node`` if it is one of this module's constructs; ``NotImplemented`` otherwise."""
        name = self.CONSTRUCTS.get(type(node))
        if name is None:
            return NotImplemented
        return getattr(self, name)(node)

    # ------------------------------------------------------------------ the dispatch hook
    def _before_dispatch(self, op: str, input_json: str) -> Optional[str]:
        """Checks made before an op starts. Returns a denial message (capability scope) or None;
        raises :class:`_GateClosed` / :class:`_Expired` when the op must not start."""
        if self._cap_scopes and op not in self._cap_scopes[-1]:
            allowed = ", ".join(sorted(self._cap_scopes[-1])) or "nothing"
            return f"op `{op}` is outside the `with_tools` capability scope (allowed: {allowed})"
        recorded = None
        if self._gate is not None:
            recorded = self.clock.recorded(op, input_json)
            if recorded is False:
                raise _GateClosed(self._gate)
            self._pass_gate()
        if self._deadlines:
            if self.clock.replaying:
                if recorded is None:
                    recorded = self.clock.recorded(op, input_json)
                if recorded is False:
                    raise _Expired(self._deadlines[-1])
            else:
                now = self.clock.now_ms()
                for d in self._deadlines:
                    if now >= d.at_ms:
                        raise _Expired(d)
        return None

    # ------------------------------------------------------------------ replay gates
    def _arm_gate(self, owner: str) -> Optional[_Gate]:
        """Open a gate when replaying and none is open (the outermost open gate decides)."""
        if not self.clock.replaying or self._gate is not None:
            return None
        self._gate = _Gate(owner, dict(self.symbols), self._next_vid)
        return self._gate

    def _pass_gate(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            for ev in gate.buf:
                self.sink.emit(ev)

    def _roll_back(self, gate: _Gate) -> None:
        """The gated part never ran live: forget what its pure prefix did."""
        self._gate = None
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
    def _cond(self, node: A.Node) -> bool:
        """A `when`/`unless`/`until`/`assert` condition (flux's ``eval_cond``): a call whose op
        fails reads as false — the op ran and said no — but a denial stays fatal."""
        if isinstance(node, A.Call):
            try:
                return I._truthy(self._eval(node))
            except I._OpFailed:
                return False
        return I._truthy(self._eval(node))

    # ------------------------------------------------------------------ loop
    def _loop(self, node: A.Loop) -> Any:
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
                    v = self._block(node.body)
                except I._FATAL:
                    raise
                except I._Halt as h:
                    raise I._Halt(f"`loop` body failed: {h.error}", h.op) from None
                stop = node.until is not None and self._cond(node.until)
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
                clock.sleep_ms(node.every_ms)
            elif not isinstance(clock, I.RealClock):
                clock.advance(1)  # virtual time must move, or a pure `every 0` loop never ends
        self._bind_result(node.bind, value)
        return value

    # ------------------------------------------------------------------ deadlines
    def _push_deadline(self, ms: int, what: str) -> _Deadline:
        d = _Deadline(self.clock.now_ms() + ms, what)
        self._deadlines.append(d)
        return d

    def _pop_deadline(self, d: _Deadline) -> None:
        if self._deadlines and self._deadlines[-1] is d:
            self._deadlines.pop()
        elif d in self._deadlines:
            self._deadlines.remove(d)

    def _timeout(self, node: A.Timeout) -> Any:
        if node.ms == 0:
            raise I._Halt("`timeout` of 0ms cannot complete any work")
        d = self._push_deadline(node.ms, "timeout")
        try:
            value = self._block(node.body)
        except _Expired as e:
            if e.deadline is not d:
                raise
            raise I._Halt(f"`timeout` exceeded {node.ms}ms") from None
        finally:
            self._pop_deadline(d)
        self._bind_result(node.bind, value)
        return value

    def _race(self, node: A.Race) -> Any:
        timed_out = f"`race` timed out after {node.timeout_ms}ms with no successful branch"
        if node.timeout_ms == 0:
            raise I._Halt(timed_out)
        d = self._push_deadline(node.timeout_ms, "race")
        errors: list[str] = []
        try:
            for br in node.branches:
                try:
                    value = self._block(br.body)
                except _Expired as e:
                    if e.deadline is not d:
                        raise
                    raise I._Halt(timed_out) from None
                except I._Halt as h:
                    errors.append(f"`{br.name}`: {h.error}")
                    continue
                self._bind_result(node.bind, value)
                return value
        finally:
            self._pop_deadline(d)
        if node.branches and len(errors) == len(node.branches):
            raise I._Halt(f"`race` failed: all {len(node.branches)} branch(es) errored: "
                          + "; ".join(errors))
        raise I._Halt(timed_out)

    # ------------------------------------------------------------------ parallel
    def _parallel(self, node: A.Parallel) -> Any:
        outcomes: list[tuple[A.Branch, Any, Optional[BaseException]]] = []
        for br in node.branches:
            try:
                outcomes.append((br, self._block(br.body), None))
            except I._Return as ret:
                outcomes.append((br, None, ret))
            except I._Halt as h:
                outcomes.append((br, None, h))
        last = None
        first_error: Optional[I._Halt] = None
        for br, value, err in outcomes:
            if isinstance(err, I._Return):
                raise I._Halt("`return` is not allowed inside a `parallel` branch")
            if err is not None:
                first_error = first_error or err
                continue
            if value is not None:
                self.symbols[br.name] = value
                last = value
        if first_error is not None:
            raise first_error
        return last

    # ------------------------------------------------------------------ reliability
    def _budget(self, node: A.Budget) -> Any:
        start, value = self.steps, None
        for stmt in node.body:
            if self.steps - start >= node.limit:
                raise I._Halt(f"`budget` exceeded: at most {node.limit} op dispatch(es) allowed "
                              "in this scope")
            v = self._block((stmt,))
            if v is not None:
                value = v
        self._bind_result(node.bind, value)
        return value

    def _cap_scope(self, node: A.CapScope) -> Any:
        """``with_tools [..]``: only the listed ops may dispatch inside; nested scopes only narrow."""
        tools = frozenset(node.tools)
        if self._cap_scopes:
            tools &= self._cap_scopes[-1]
        self._cap_scopes.append(tools)
        try:
            value = self._block(node.body)
        finally:
            self._cap_scopes.pop()
        self._bind_result(node.bind, value)
        return value

    def _throttle(self, node: A.Throttle) -> Any:
        """At most ``max`` op dispatches per sliding ``per`` window, checked before each statement;
        the bucket is keyed by name and lives as long as the caller keeps ``throttle_buckets``."""
        bucket = self.throttle_buckets.setdefault(node.name, [])
        refused = f"`throttle` limit of {node.max} per {node.window_ms}ms exceeded"
        value = None
        for stmt in node.body:
            now = self.clock.now_ms()
            bucket[:] = [t for t in bucket if t >= now - node.window_ms]
            gate = self._arm_gate("throttle")
            if gate is None and len(bucket) >= node.max:
                raise I._Halt(refused)
            start = self.steps
            try:
                v = self._block((stmt,))
            except _GateClosed as closed:
                if closed.gate is not gate:
                    raise
                self._roll_back(gate)
                raise I._Halt(refused) from None
            finally:
                self._settle(gate)
            dispatched = self.steps - start
            if dispatched:
                bucket.extend([self.clock.now_ms()] * dispatched)
            if v is not None:
                value = v
        return value

    def _debounce(self, node: A.Debounce) -> Any:
        """Record a trigger, wait, and run the body only if no newer trigger of the same name came
        meanwhile (with the sequential scheduler none can within one run)."""
        self._debounce_seq += 1
        token = f"{int(self.clock.now_ms())}:{self._debounce_seq}"
        self.debounce_tokens[node.name] = token
        if node.wait_ms > 0:
            self.clock.sleep_ms(node.wait_ms)
        if self.debounce_tokens.get(node.name) != token:
            return None  # coalesced into the newer trigger
        return self._block(node.body)

    def _verify(self, node: A.Verify) -> Any:
        cmd = node.cmd
        if isinstance(cmd, (A.Call, A.Var, A.Lit, A.Obj, A.ListExpr)):
            text = self._eval(cmd)
            if isinstance(cmd, A.Lit) and cmd.value is None:
                text = ""
        else:
            raise I._Halt(f"unsupported return expression `{cmd.kind}`")
        text = _label_text(text)
        expect = self._eval(node.expect)
        pattern = _label_text(expect)
        if pattern not in text:
            detail = node.message if node.message is not None else \
                f"output did not contain {json.dumps(pattern, ensure_ascii=False)}"
            raise I._Halt(f"verify failed: {detail}")
        return None

    def _scope(self, node: A.Scope) -> Any:
        """acquire → body → ``finally`` always (unless acquire failed); the body's error wins."""
        if node.acquire is not None:
            acquired = self._exec(node.acquire)
            self._bind_result(node.bind, acquired)
        try:
            value = self._block(node.body)
        except I._Halt:
            try:
                self._block(node.finally_)
            except I._Halt:
                pass  # cleanup is best-effort when the body already failed: its error wins
            raise
        except I._Return:
            self._block(node.finally_)  # a `return` still cleans up; a cleanup failure wins
            raise
        self._block(node.finally_)
        return value

    def _saga(self, node: A.Saga) -> Any:
        """Steps in order; on a failure, the undo blocks of completed steps run in reverse,
        best-effort, and the failure propagates. A ``return`` in a step is a successful exit."""
        undos: list[tuple] = []
        value = None
        for step in node.steps:
            try:
                v = self._block(step.body)
            except I._Halt:
                for undo in reversed(undos):
                    try:
                        self._block(undo)
                    except I._Halt:
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

    def _ctx(self, node: A.Ctx) -> Any:
        members = [s for s in node.include if s not in node.exclude]
        return self._pack(node.name, node.purpose, members, node.budget)

    def _ctx_append(self, node: A.CtxAppend) -> Any:
        pack = self.symbols.get(node.ctx)
        if pack is None:
            raise I._Halt(f"ctx_append: unknown context pack `{node.ctx}`")
        if not isinstance(pack, dict) or not isinstance(pack.get("members"), list):
            raise I._Halt(f"ctx_append: `{node.ctx}` is not a context pack")
        members = [m for m in pack["members"] if isinstance(m, str)]
        members += [a for a in node.add if a not in members]
        budget = pack.get("budget")
        return self._pack(node.ctx, pack.get("purpose"), members,
                          int(budget) if isinstance(budget, (int, float)) else None)

    def _route(self, node: A.Route) -> Any:
        sel = node.selector
        if isinstance(sel, A.Call):
            label = _label_text(self._eval(sel)).strip()
        else:
            label = _label_text(self._eval(sel))
        for case in node.cases:
            if case.label == label:
                return self._block(case.body)
        if node.default:
            return self._block(node.default)
        raise I._Halt(f"`route` selector returned `{label}`, which matches no case and there is "
                      "no default")

    def _thing(self, node: A.Thing) -> Any:
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
            kind = (f"Custom({I.rust_debug_str(t.kind)})" if t.custom
                    else "".join(part.title() for part in t.kind.split("_")))
            selector = f"{t.selector.title()}({I.rust_debug_str(t.value)})"
            raise I._Halt(f"no deterministic resolution for a {kind} by {selector} — a Name/Query "
                          "selector needs a host resolver")
        ref = _thing_to_json(t)
        resolved = {"id": ident, "kind": ref["kind"], "display": ident,
                    "source": "deterministic", "confidence": 1.0}
        self._emit({"event": "thing_resolved", "thing": ref, "resolved": resolved})
        return resolved
