"""The interpreter's scheduler: drives its tree of coroutines, ``parallel``/``race`` branches concurrently and
deadlines that cancel them, in one deterministic order whether time is real (recording: ops in worker
threads), virtual (tests) or replayed (completions in tape order). With one live branch and no deadline an
op runs inline. The ordering, cancellation and replay rules are in docs/flux-lang.md ("Interpreter")."""

from __future__ import annotations

import heapq
import itertools
import queue
import threading
import time
from typing import Any, Callable, Coroutine, Optional

from flux.canonical import sha256_hex

__all__ = ["Cancelled", "DeadlineExceeded", "Scheduler", "BranchOutcome"]


class Cancelled(BaseException):
    """Thrown into a branch that lost a ``race`` or outlived a deadline (not a Flux error)."""


class DeadlineExceeded(Exception):
    """A :meth:`Scheduler.within` body did not finish before its deadline."""


class _Trap:
    """An awaitable that hands ``req`` to the driver and resumes with what the driver sends."""

    __slots__ = ("req",)

    def __init__(self, req: tuple):
        self.req = req

    def __await__(self):
        return (yield self.req)


class BranchOutcome:
    """How one spawned branch ended: ``value`` or ``error`` (an exception)."""

    __slots__ = ("value", "error")

    def __init__(self, value: Any = None, error: Optional[BaseException] = None):
        self.value, self.error = value, error

    @property
    def ok(self) -> bool:
        return self.error is None


class _Task:
    __slots__ = ("coro", "parent", "children", "done", "outcome", "steps", "cap_scopes", "wait",
                 "group", "seq", "cancelled", "gate")

    def __init__(self, coro: Coroutine, parent: Optional["_Task"], seq: int):
        self.coro = coro
        self.parent = parent
        self.children: list[_Task] = []
        self.done = False
        self.outcome: Optional[BranchOutcome] = None
        self.steps = 0  # op dispatches of this branch (flux: each branch counts its own, merged at join)
        self.cap_scopes: tuple = parent.cap_scopes if parent is not None else ()
        self.gate: Any = parent.gate if parent is not None else None  # the interpreter's replay gate
        self.wait: Optional[_Wait] = None  # what the task is blocked on
        self.group: Optional[_Group] = None  # the group this task is a member of
        self.seq = seq
        self.cancelled = False


class _Wait:
    """One blocking point: a dispatch (``kind`` dispatch), a sleep, or a join over a group."""

    __slots__ = ("kind", "task", "timer", "future", "run_op", "settle", "cell", "group")
    # run_op: the dispatch's start phase (returns the work)

    def __init__(self, kind: str, task: _Task):
        self.kind, self.task = kind, task
        self.timer: Optional[list] = None
        self.future: Any = None
        self.run_op: Optional[Callable[[], Any]] = None
        self.settle: Optional[Callable[[Any], Any]] = None
        self.cell: Optional[int] = None  # replay: tape index of the cell (None: no cell)
        self.group: Optional[_Group] = None


class _Group:
    """Children spawned together: ``all`` (parallel), ``first`` (race), ``within`` (timeout)."""

    __slots__ = ("mode", "owner", "tasks", "outcomes", "errors", "winner", "deadline", "expired",
                 "finished", "abort")

    def __init__(self, mode: str, owner: _Task):
        self.mode, self.owner = mode, owner
        self.tasks: list[_Task] = []
        self.outcomes: list[Optional[BranchOutcome]] = []
        self.errors: list[tuple[int, BaseException]] = []  # in completion order
        self.winner: Optional[int] = None
        self.deadline: Optional[list] = None  # the timer entry
        self.expired = False
        self.finished = False
        self.abort: Optional[BaseException] = None  # a non-Flux error that ends the group


class Scheduler:
    """Drives one coroutine tree. ``clock`` decides the mode (see the module doc); ``is_flux_error``
    tells a Flux failure (a branch result) from an error that aborts the whole group."""

    def __init__(self, clock: Any, is_flux_error: Callable[[BaseException], bool]):
        self.clock = clock
        self.is_flux_error = is_flux_error
        self.replaying = bool(getattr(clock, "replaying", False))
        self.virtual = hasattr(clock, "t")  # ManualClock and ReplayClock keep virtual time in `t`
        self.tape = getattr(clock, "tape", None) if self.replaying else None
        self.current: Optional[_Task] = None
        self._ready: list[_Task] = []
        self._timers: list[list] = []  # heap of [at, seq, kind, payload, live]
        self._pending: list[_Wait] = []  # replay dispatches waiting for their turn
        self._live = 0  # tasks not done
        self._seq = itertools.count()
        # Made with the first worker dispatch (a Queue is three Conditions; most runs never need one).
        self._done: "Optional[queue.Queue[tuple[_Wait, tuple]]]" = None  # real mode: finished work
        self._inflight = 0  # real mode: worker dispatches not yet delivered
        self._first_unconsumed = 0

    def _done_queue(self) -> "queue.Queue[tuple[_Wait, tuple]]":
        if self._done is None:
            self._done = queue.Queue()
        return self._done

    # ------------------------------------------------------------------ the awaitable API
    def solo(self) -> bool:
        """One live branch and no deadline: ops and sleeps may run inline."""
        return self._live <= 1 and not self._timers

    async def dispatch(self, start: Callable[[], Callable[[], Any]], settle: Callable[[Any], Any],
                       op: str = "", input_json: str = "") -> Any:
        """Run one op and return its settled outcome. ``start()`` runs on this thread when the op
        starts (approval, flushes) and returns the work, which may run in a worker thread;
        ``settle(outcome)`` is the bookkeeping on completion (the cassette cell), on this thread.
        A cancelled op is abandoned unsettled."""
        if self.solo():
            result = settle(start()())
            self.clock.dispatched()
            return result
        return await _Trap(("dispatch", start, settle, op, input_json))

    async def sleep(self, ms: float) -> None:
        sleeps = getattr(self.clock, "sleeps", None)
        if self.solo() or ms <= 0:
            self.clock.sleep_ms(ms)
            return
        if sleeps is not None:
            sleeps.append(ms)
        await _Trap(("sleep", ms))

    async def gather(self, coros: list[Coroutine]) -> list[BranchOutcome]:
        """``parallel``: run every branch to completion; outcomes in declaration order."""
        return await _Trap(("group", "all", coros, None))

    async def first(self, coros: list[Coroutine], timeout_ms: float) -> tuple:
        """``race``: the first branch to succeed wins and the others are cancelled. Returns
        ``(winner index or None, winner value, errors in completion order, expired)``."""
        return await _Trap(("group", "first", coros, timeout_ms))

    async def within(self, coro: Coroutine, timeout_ms: float) -> Any:
        """``timeout``: the body's value, or :class:`DeadlineExceeded` after cancelling it."""
        return await _Trap(("group", "within", [coro], timeout_ms))

    # ------------------------------------------------------------------ driving
    def run(self, coro: Coroutine) -> Any:
        """Run ``coro`` (and every branch it spawns) to completion; return its value or raise."""
        root = self._spawn(coro, None)
        root.steps = 0
        while not root.done:
            if self._ready:
                self._step(self._ready.pop(0), None, None)
                continue
            self._idle()
        assert root.outcome is not None
        if root.outcome.error is not None:
            raise root.outcome.error
        return root.outcome.value

    def root_task(self) -> _Task:
        """The root branch of a run with no coroutine (Interpreter.run_call): steps 0, no parent."""
        t = _Task(None, None, next(self._seq))  # type: ignore[arg-type]
        t.steps = 0
        return t

    def _spawn(self, coro: Coroutine, parent: Optional[_Task],
               into: Optional[list] = None) -> _Task:
        t = _Task(coro, parent, next(self._seq))
        self._live += 1
        (self._ready if into is None else into).append(t)
        return t

    def _step(self, task: _Task, value: Any, exc: Optional[BaseException]) -> None:
        """Resume ``task`` until it blocks or ends."""
        if task.done:
            return
        prev, self.current = self.current, task
        try:
            req = task.coro.throw(exc) if exc is not None else task.coro.send(value)
        except StopIteration as stop:
            self._finish(task, BranchOutcome(stop.value))
            return
        except BaseException as e:  # noqa: BLE001 - a branch's error is its outcome
            self._finish(task, BranchOutcome(error=e))
            return
        finally:
            self.current = prev
        self._block(task, req)

    def _block(self, task: _Task, req: tuple) -> None:
        kind = req[0]
        if kind == "dispatch":
            _, start, settle, op, input_json = req
            w = _Wait("dispatch", task)
            w.run_op, w.settle = start, settle
            task.wait = w
            self._start_dispatch(w, op, input_json)
        elif kind == "sleep":
            w = _Wait("sleep", task)
            task.wait = w
            w.timer = self._timer(self._now() + req[1], "wake", w)
        else:
            _, mode, coros, timeout_ms = req
            g = _Group(mode, task)
            w = _Wait("join", task)
            w.group = g
            task.wait = w
            front: list[_Task] = []
            for c in coros:
                child = self._spawn(c, task, front)
                child.group = g
                task.children.append(child)
                g.tasks.append(child)
                g.outcomes.append(None)
            # children run first, in order (flux polls a new future as soon as its parent is polled)
            self._ready[:0] = front
            if timeout_ms is not None:
                g.deadline = self._timer(self._now() + timeout_ms, "deadline", g)
            if not coros:
                self._group_done(g)

    # ------------------------------------------------------------------ dispatches
    def _start_dispatch(self, w: _Wait, op: str, input_json: str) -> None:
        if self.replaying:
            cell = self.tape.find(op, sha256_hex(input_json)) if self.tape is not None else None
            w.cell = cell
            if cell is not None:  # served now (consumes the cell), completed in tape order
                w.future = self._call(lambda: w.run_op()())
            self._pending.append(w)
            return
        if self.virtual:
            t0 = self.clock.t
            result = self._call(lambda: w.run_op()())
            self.clock.dispatched()
            cost = max(0.0, self.clock.t - t0)
            self.clock.t = t0
            w.future = result
            w.timer = self._timer(t0 + cost, "complete", w)
            return
        work, err = self._call(w.run_op)  # the start phase runs here, on the interpreter's thread
        if err is not None or getattr(work, "completed", False):
            # failed to start, or done already (a host that runs inline): complete in dispatch order
            w.future = (None, err) if err is not None else (work(), None)
            w.timer = self._timer(self._now(), "complete", w)
            return
        done = self._done_queue()
        self._inflight += 1

        def run_work() -> None:
            done.put((w, self._call(work)))

        # a daemon thread per op in flight: an abandoned op (cancelled) must not hold the process
        # open at exit — flux drops the future; a thread cannot be dropped, only left behind
        threading.Thread(target=run_work, name=f"flux-op-{op}", daemon=True).start()

    @staticmethod
    def _call(fn: Callable[[], Any]) -> tuple:
        try:
            return (fn(), None)
        except Exception as e:  # noqa: BLE001 - delivered to the branch that dispatched
            return (None, e)

    def _complete(self, w: _Wait, result: tuple) -> None:
        """Deliver a finished dispatch: settle it, then resume its branch immediately."""
        task = w.task
        if task.done or task.wait is not w:
            return  # abandoned (cancelled)
        task.wait = None
        value, err = result
        if err is None:
            try:
                value = w.settle(value)
            except Exception as e:  # noqa: BLE001
                err = e
        self._step(task, value, err)

    # ------------------------------------------------------------------ time
    def _now(self) -> float:
        return self.clock.now_ms()

    def _timer(self, at: float, kind: str, payload: Any) -> list:
        entry = [at, next(self._seq), kind, payload, True]
        heapq.heappush(self._timers, entry)
        return entry

    def _drop_timer(self, entry: Optional[list]) -> None:
        """Forget a timer (lazily: dead entries are pruned from the heap's head, so ``solo()`` and
        ``_timers[0]`` only ever see live ones)."""
        if entry is not None:
            entry[4] = False
        while self._timers and not self._timers[0][4]:
            heapq.heappop(self._timers)

    def _trigger(self, entry: list) -> None:
        """Fire one timer (the earliest in virtual/real time; replay may pick by rule)."""
        self._drop_timer(entry)
        if self.virtual and entry[0] > self.clock.t:
            self.clock.t = entry[0]
        kind, payload = entry[2], entry[3]
        if kind == "wake":
            w: _Wait = payload
            if w.task.wait is w and not w.task.done:
                w.task.wait = None
                self._step(w.task, None, None)
        elif kind == "complete":
            self._complete(payload, payload.future)
        else:  # a deadline
            g: _Group = payload
            if not g.finished:
                g.expired = True
                self._cancel_group(g)
                self._group_done(g)

    def _idle(self) -> None:
        """Nothing is ready: advance to the next event for this mode."""
        if self.replaying:
            self._idle_replay()
            return
        if self.virtual:
            if not self._timers:
                raise RuntimeError("scheduler deadlock: no branch can make progress")
            self._trigger(self._timers[0])
            return
        # real time: the next due timer, else wait for a worker (or until the next timer is due)
        if self._timers and self._timers[0][0] <= self._now():
            self._trigger(self._timers[0])
            return
        timeout = None
        if self._timers:
            timeout = max(0.0, (self._timers[0][0] - self._now()) / 1000.0)
        elif self._inflight == 0:
            raise RuntimeError("scheduler deadlock: no branch can make progress")
        try:
            w, result = self._done_queue().get(timeout=timeout)
        except queue.Empty:
            return
        self._inflight -= 1
        self._complete(w, result)

    def _idle_replay(self) -> None:
        pending = [w for w in self._pending if w.task.wait is w and not w.task.done]
        self._pending = pending
        hits = [w for w in pending if w.cell is not None]
        sleepers = [e for e in self._timers if e[4] and e[2] == "wake"]
        first_sleeper = min(sleepers, key=lambda e: (e[0], e[1])) if sleepers else None
        nxt = min(hits, key=lambda w: w.cell) if hits else None
        if nxt is not None:
            eu = self._earliest_unconsumed()
            # the cell is provably next when no unconsumed cell precedes it (served cells of
            # pending dispatches are consumed already; they complete in index order)
            if first_sleeper is None or eu is None or nxt.cell < eu:
                self._pending.remove(nxt)
                self._complete(nxt, nxt.future)
                return
        # a deadline whose every branch is stuck on a cell-less dispatch struck there live
        stuck = {id(w.task) for w in pending if w.cell is None}
        deadlines = sorted((e for e in self._timers if e[4] and e[2] == "deadline"),
                           key=lambda e: (e[0], e[1]))
        for e in deadlines:
            if first_sleeper is not None and e[0] > first_sleeper[0]:
                break
            if self._all_stuck(e[3], stuck):
                self._trigger(e)
                return
        if first_sleeper is not None:
            self._trigger(first_sleeper)
            return
        if nxt is not None:
            self._pending.remove(nxt)
            self._complete(nxt, nxt.future)
            return
        for e in deadlines:
            if self._all_stuck(e[3], stuck):
                self._trigger(e)
                return
        misses = [w for w in pending if w.cell is None]
        if not misses:
            raise RuntimeError("scheduler deadlock: no branch can make progress")
        w = misses[0]  # no deadline or race settles it: a divergence — the host answers the miss
        self._pending.remove(w)
        self._complete(w, self._call(lambda: w.run_op()()))

    def _all_stuck(self, g: _Group, stuck: set) -> bool:
        """Every live branch under ``g`` waits on a dispatch that has no cell."""
        def leaves_stuck(t: _Task) -> bool:
            if t.done:
                return True
            w = t.wait
            if w is None:
                return False
            if w.kind == "join":
                return all(leaves_stuck(c) for c in w.group.tasks)
            return w.kind == "dispatch" and id(t) in stuck
        return any(not t.done for t in g.tasks) and all(leaves_stuck(t) for t in g.tasks)

    def _earliest_unconsumed(self) -> Optional[int]:
        tape = self.tape
        if tape is None:
            return None
        i = self._first_unconsumed
        while i < tape.total and tape.is_consumed(i):
            i += 1
        self._first_unconsumed = i
        return i if i < tape.total else None

    # ------------------------------------------------------------------ endings
    def _finish(self, task: _Task, outcome: BranchOutcome) -> None:
        task.done = True
        task.outcome = outcome
        task.wait = None
        self._live -= 1
        parent = task.parent
        if parent is not None:
            parent.steps += task.steps
        g = task.group
        if g is None or g.finished:
            return
        idx = g.tasks.index(task)
        g.outcomes[idx] = outcome
        err = outcome.error
        if task.cancelled:
            pass
        elif err is not None and not self.is_flux_error(err):
            g.abort = err  # not a branch result: end the group and re-raise in its owner
            self._cancel_group(g)
        elif g.mode == "first":
            if err is None:
                g.winner = idx
                self._cancel_group(g)
            else:
                g.errors.append((idx, err))
        if all(t.done for t in g.tasks):
            self._group_done(g)

    def _cancel_group(self, g: _Group) -> None:
        for t in g.tasks:
            if not t.done:
                self._cancel(t)

    def _cancel(self, task: _Task) -> None:
        """Throw :class:`Cancelled` into ``task`` (children first) and run it to its end."""
        task.cancelled = True
        w = task.wait
        if w is not None and w.kind == "join" and w.group is not None:
            w.group.finished = True
            self._drop_timer(w.group.deadline)
            for c in w.group.tasks:
                if not c.done:
                    self._cancel(c)
        if w is not None:
            self._drop_timer(w.timer)
        task.wait = None
        if task in self._ready:
            self._ready.remove(task)
        prev, self.current = self.current, task
        try:
            task.coro.throw(Cancelled())
        except (StopIteration, Cancelled):
            pass
        except BaseException:  # noqa: BLE001 - a cancelled branch's own error is moot
            pass
        else:
            task.coro.close()  # it tried to block while cancelled: stop it for good
        finally:
            self.current = prev
        if not task.done:
            self._finish(task, BranchOutcome(error=Cancelled()))

    def _group_done(self, g: _Group) -> None:
        """Resume the group's owner with the group's result (once)."""
        if g.finished:
            return
        owner = g.owner
        if owner.done or owner.wait is None or owner.wait.group is not g:
            return
        g.finished = True
        self._drop_timer(g.deadline)
        owner.wait = None
        if g.abort is not None:
            self._step(owner, None, g.abort)
            return
        if g.mode == "all":
            self._step(owner, list(g.outcomes), None)
        elif g.mode == "first":
            win = g.winner
            value = g.outcomes[win].value if win is not None else None
            self._step(owner, (win, value, [e for _, e in g.errors], g.expired), None)
        else:
            if g.expired:
                self._step(owner, None, DeadlineExceeded())
                return
            out = g.outcomes[0]
            if out.error is not None:
                self._step(owner, None, out.error)
            else:
                self._step(owner, out.value, None)
