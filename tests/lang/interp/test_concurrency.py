"""Concurrent `parallel`/`race` branches and cancelling deadlines (flux.lang.scheduler).

Virtual time (ManualClock): an op's cost is the time the World charges for it; branches overlap.
Real time: a host that opts in with `begin` runs its ops in worker threads — proven by a barrier
both branches must reach together, and by a deadline that abandons an op still blocked."""

from __future__ import annotations

import threading

from flux.cassette.record import RecordingHost
from flux.cassette.redactor import Redactor
from flux.lang import parse
from flux.lang.clock import ManualClock
from flux.lang.interpreter import Interpreter, ListSink, OpOutcome

from .harness import CATALOG, World


def run(src: str, clock: ManualClock | None = None, host=None):
    clock = clock or ManualClock()
    world = host or World(clock)
    sink = ListSink()
    rec = RecordingHost(world, sink, Redactor(), env={})
    interp = Interpreter(CATALOG, rec, sink, lambda m, r: True, clock=clock)
    result = interp.run(parse(src), resumable=True)
    return result, sink.events, world, clock, interp


def trail(events: list[dict]) -> list[tuple[str, str]]:
    """(event, op) per step event, the op read from the step id."""
    out = []
    for e in events:
        if e["event"] in ("step_started", "op_recorded", "step_succeeded", "step_failed"):
            out.append((e["event"], e["step"].split("_")[1]))
    return out


def test_parallel_branches_overlap_and_record_in_completion_order():
    res, events, world, clock, _ = run(
        'flow\n  parallel\n    branch a\n      nap()\n    branch b\n      slow()\n  echo("{a}|{b}")\n')
    assert res.halted is None
    assert clock.t == 400.0  # nap (400) and slow (150) overlapped: not 550
    # both branches start in declaration order; slow finishes first and is recorded first; a
    # cell and its step_succeeded stay adjacent (flux's order under join_all)
    assert trail(events)[:6] == [
        ("step_started", "nap"), ("step_started", "slow"),
        ("op_recorded", "slow"), ("step_succeeded", "slow"),
        ("op_recorded", "nap"), ("step_succeeded", "nap")]
    assert res.symbols["a"] == "nap done" and res.symbols["b"] == "slow done"
    assert world.marks[-1] == "nap done|slow done"


def test_race_the_fastest_branch_wins_and_the_loser_is_cancelled():
    res, events, world, clock, interp = run(
        'flow\n  race 1s -> w\n    branch a\n      nap()\n      echo("a")\n'
        '    branch b\n      slow()\n      echo("b")\n')
    assert res.halted is None and res.symbols["w"] == "b"
    assert clock.t == 150.0
    assert world.marks == ["nap", "slow", "b"]  # the loser's op ran; its follow-up never started
    # the cancelled op leaves only its step_started (flux drops the future: no cell, no result)
    assert [e for e in trail(events) if e[1] == "nap"] == [("step_started", "nap")]
    assert interp.steps == 2  # slow + echo; the cancelled nap never returned


def test_race_all_branches_failing_joins_errors_in_completion_order():
    res, *_ = run('flow\n  race 1s\n    branch a\n      slow()\n      boom()\n    branch b\n      boom()\n')
    assert res.halted.error == ("`race` failed: all 2 branch(es) errored: `b`: boom failed; "
                                "`a`: boom failed")


def test_timeout_cancels_the_op_in_flight():
    res, events, world, clock, interp = run('flow\n  echo("x")\n  timeout 100ms\n    slow()\n    echo("y")\n')
    assert res.halted.error == "`timeout` exceeded 100ms" and res.halted.node == 1
    assert clock.t == 100.0  # the deadline, not the op's end (150)
    assert [e for e in trail(events) if e[1] == "slow"] == [("step_started", "slow")]
    assert [e["event"] for e in events][-1] == "plan_halted"
    assert interp.steps == 1


def test_a_cancelled_branch_runs_no_flux_handlers():
    res, events, world, *_ = run(
        'flow\n  race 1s\n    branch a\n      scope h = echo("acq")\n        nap()\n      finally\n'
        '        echo("cleanup")\n    branch b\n      slow()\n')
    assert res.halted is None
    assert "cleanup" not in world.marks  # flux drops the loser's future: `finally` never runs


def test_a_timeout_inside_a_branch_fails_only_that_branch():
    res, events, world, clock, _ = run(
        'flow\n  try\n    parallel\n      branch a\n        timeout 100ms\n          nap()\n'
        '      branch b\n        slow()\n        echo("b done")\n  catch e\n    echo("caught: {e}")\n')
    assert world.marks == ["nap", "slow", "b done", "caught: `timeout` exceeded 100ms"]
    assert res.symbols["b"] == "b done"


def test_debounce_retrigger_in_a_concurrent_branch_coalesces():
    res, events, world, clock, _ = run(
        'flow\n  parallel\n    branch a\n      debounce "save", wait: 250ms\n        echo("first")\n'
        '    branch b\n      debounce "save", wait: 250ms\n        echo("second")\n')
    assert res.halted is None
    assert world.marks == ["second"]  # the older trigger saw the newer token and coalesced
    assert clock.sleeps == [250, 250] and clock.t == 250.0


class BarrierHost:
    """Opts into concurrent dispatch (`begin`): each op waits until `parties` ops are in flight."""

    def __init__(self, parties: int):
        self.barrier = threading.Barrier(parties, timeout=10)
        self.release = threading.Event()
        self.threads: set[str] = set()

    def dispatch(self, op, input, input_json):
        return self.begin(op, input, input_json)()

    def begin(self, op, input, input_json):
        def work():
            self.threads.add(threading.current_thread().name)
            if op == "boom":  # "blocks": only the deadline ends it
                self.release.wait(10)
                return OpOutcome("late", is_error=True)
            self.barrier.wait()  # raises BrokenBarrierError unless the other branch is in flight too
            return OpOutcome(f"{op} done")
        return work


def test_real_time_branches_run_at_the_same_time():
    host = BarrierHost(2)
    sink = ListSink()
    interp = Interpreter(CATALOG, RecordingHost(host, sink, Redactor(), env={}), sink)
    res = interp.run(parse('flow\n  parallel\n    branch a\n      slow()\n    branch b\n      nap()\n'))
    assert res.halted is None, res.halted
    assert res.symbols["a"] == "slow done" and res.symbols["b"] == "nap done"
    assert len(host.threads) == 2 and not any(t == threading.main_thread().name for t in host.threads)
    assert sum(e["event"] == "op_recorded" for e in sink.events) == 2


def test_real_time_deadline_abandons_a_blocked_op_without_recording_it():
    host = BarrierHost(1)
    sink = ListSink()
    interp = Interpreter(CATALOG, RecordingHost(host, sink, Redactor(), env={}), sink)
    try:
        res = interp.run(parse('flow\n  slow()\n  timeout 50ms\n    boom()\n'))
    finally:
        host.release.set()
    assert res.halted is not None and res.halted.error == "`timeout` exceeded 50ms"
    cells = [e["op"] for e in sink.events if e["event"] == "op_recorded"]
    assert cells == ["slow"]  # the abandoned op has no cell and no step result
    assert [e["event"] for e in sink.events if e.get("step", "").startswith("step_boom")] == ["step_started"]
