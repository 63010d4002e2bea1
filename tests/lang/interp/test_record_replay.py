"""Plans using every construct, recorded by the runtime's RecordingHost into a real store, then
replayed hermetically: the replay is faithful, halts where the recording halted, writes the same
run events (§2.3) and never sleeps for real."""

from __future__ import annotations

import time

import pytest

from flux.cassette.record import RecordingHost
from flux.errors import NotReplayable
from flux.cassette.redactor import Redactor
from flux.lang import parse
from flux.lang.clock import ManualClock
from flux.lang.formatter import format_flow
from flux.lang.interpreter import Interpreter, ResumeLedger
from flux.model.session import load_session
from flux.store.events import Message, PlanAttempted, Run, TurnEnded, decode_run
from flux.store.payload_decode import decode_payload
from flux.store.store import StoreReader, StoreWriter
from flux.timemachine.replay import replay_session

from .harness import CASES, CATALOG, World


class StoreSink:
    def __init__(self, w: StoreWriter, sid: str):
        self.w, self.sid = w, sid

    def emit(self, body: dict) -> None:
        self.w.append(self.sid, Run(decode_run(body)))


def run_bodies(w: StoreWriter, sid: str) -> list[dict]:
    rows = w.conn.execute("SELECT kind, payload FROM events WHERE stream = ? AND kind = 'run' "
                        "ORDER BY stream_seq", (sid,))
    return [decode_payload(k, p).event.to_body() for k, p in rows]


def record(tmp_path, plans: list[str], clock: ManualClock, denied=(), approve=True):
    """One live turn of ``plans`` through Interpreter + RecordingHost (the engine's write order)."""
    store = tmp_path / "store"
    world = World(clock, denied)
    red = Redactor()
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        w.append(sid, Message.text("user", "go"))
        tid = w.begin_turn(sid, "go", "mock")
        sink = StoreSink(w, sid)
        interp = Interpreter(CATALOG, RecordingHost(world, sink, red, env={}), sink,
                             lambda m, r: approve, clock=clock)
        results = []
        for step, text in enumerate(plans, 1):
            draft = parse(text)
            w.append(sid, PlanAttempted(step=step, outcome="accepted",
                                        plan_source=red.redact(format_flow(draft))), turn_id=tid)
            ledger = ResumeLedger.fold(run_bodies(w, sid))
            results.append(interp.run(draft, resumable=True, ledger=ledger))
        w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
        w.append(sid, Message.text("assistant", "done"))
        recorded = run_bodies(w, sid)
    return store, sid, results, recorded, world


def replay_checked(store, sid, results, recorded, monkeypatch, tmp_path):
    def no_real_sleep(seconds):
        raise AssertionError(f"replay slept for real ({seconds}s)")

    monkeypatch.setattr(time, "sleep", no_real_sleep)
    rep = replay_session(StoreReader(store), sid, catalog=CATALOG, scratch_dir=tmp_path / "scratch")
    assert rep.diverged is None, rep.diverged
    assert rep.faithful, rep.unfaithful_reason()
    assert [p.halted for p in rep.plans] == [r.halted.error if r.halted else None for r in results]
    scratch = load_session(StoreReader(tmp_path / "scratch"), rep.scratch_session)
    replayed = [e.body.event.to_body() for e in scratch.run_events]
    assert replayed == [e for e in recorded if e["event"] != "op_recorded"]
    return rep


# A plan per construct group, chosen so every time-bound decision is exercised: the loop's slow
# body gets fewer iterations live than virtual time would allow, the timeout and the race strike
# between two ops, the throttle refuses a statement.
PLANS = {
    "loop every / until": ['flow\n  loop for 10s, every: 2s -> last\n    echo("tick")\n'
                           '  loop for 1m, every: 1s, until: done\n    done = pick("yes")\n'],
    "loop with a slow body": ['flow\n  loop for 1s, every: 200ms\n    x = echo("pre")\n    slow()\n'
                              '  echo("after the loop")\n'],
    "timeout cancels the op in flight": ['flow\n  timeout 20ms\n    echo("before")\n    slow()\n'
                                         '    echo("after")\n'],
    "timeout that holds": ['flow\n  timeout 1s -> t\n    echo("a")\n    echo("b")\n  echo(t)\n'],
    "race": ['flow\n  race 5s -> w\n    branch a\n      boom()\n    branch b\n      echo("fast")\n'
             '  race 100ms\n    branch c\n      slow()\n      echo("x")\n'],
    "parallel": ['flow\n  parallel\n    branch left\n      echo("l")\n      echo("l2")\n'
                 '    branch right\n      echo("r")\n  echo("{left}+{right}")\n'],
    "parallel: completion order": ['flow\n  parallel\n    branch a\n      nap()\n      echo("a2")\n'
                                   '    branch b\n      slow()\n      echo("b2")\n  echo("{a}+{b}")\n'],
    "parallel: a sleeper wakes between completions": [
        'flow\n  parallel\n    branch a\n      debounce "x", wait: 100ms\n        echo("late")\n'
        '    branch b\n      slow()\n      echo("b")\n'],
    "race: the fastest wins, the loser is cancelled": [
        'flow\n  race 1s -> w\n    branch a\n      nap()\n    branch b\n      slow()\n      echo("b")\n'
        '  echo(w)\n'],
    "a gated loop in one branch, ops in the other": [
        'flow\n  parallel\n    branch a\n      loop for 1s, every: 200ms\n        x = echo("pre")\n'
        '        slow()\n    branch b\n      nap()\n      echo("b")\n      nap()\n  echo("{b} done")\n'],
    "timeout cancels a branch of a parallel": [
        'flow\n  try\n    parallel\n      branch a\n        timeout 200ms\n          echo("a1")\n'
        '          nap()\n      branch b\n        slow()\n  catch e\n    echo("caught")\n'],
    "budget and with_tools": ['flow\n  budget 5 -> b\n    echo("one")\n    echo("two")\n'
                              '  with_tools ["echo"] -> c\n    echo("scoped")\n  budget 1\n'
                              '    echo("x")\n    echo("y")\n'],
    "throttle refuses": ['flow\n  throttle "t1", max: 2, per: 1m\n    echo("one")\n    echo("two")\n'
                         '    echo("three")\n'],
    "debounce, verify, route": ['flow\n  debounce "d", wait: 250ms\n    echo("saved")\n'
                                '  verify echo("hello world") contains "world"\n'
                                '  route pick("b")\n    case "a"\n      echo("A")\n    case "b"\n'
                                '      echo("B")\n'],
    "scope, saga, once, memo": ['flow\n  scope h = echo("acq")\n    echo("body {h}")\n  finally\n'
                                '    echo("cleanup")\n  once "welcome" -> w\n    echo("sent")\n'
                                '  memo m = echo("big")\n  saga\n    step\n      echo("s1")\n'
                                '    undo\n      echo("r1")\n    step\n      boom()\n'],
    "ctx and thing": ['flow\n  a = echo("' + "x" * 40 + '")\n  b = echo("' + "y" * 80 + '")\n'
                      '  ctx pack\n    purpose "review"\n    budget 100\n    include a, b\n'
                      '  f = thing file path "README.md"\n  echo("{pack}")\n'],
    "a halted plan and its revision": [
        'flow\n  a = echo("in")\n  loop for 1s, every: 300ms\n    echo("poll {a}")\n  boom()\n',
        'flow\n  a = echo("in")\n  loop for 1s, every: 300ms\n    echo("poll {a}")\n  echo("fixed")\n'],
}


@pytest.mark.parametrize("name", sorted(PLANS))
def test_recorded_plan_replays_faithfully(name, tmp_path, monkeypatch):
    store, sid, results, recorded, world = record(tmp_path, PLANS[name], ManualClock())
    assert world.marks  # the recording did dispatch
    replay_checked(store, sid, results, recorded, monkeypatch, tmp_path)


def test_the_slow_loop_really_exercises_the_replay_gate(tmp_path, monkeypatch):
    """Live, the slow body leaves room for 3 iterations; in virtual time 5 would fit, so only the
    tape can tell the replay to stop after 3."""
    store, sid, results, recorded, world = record(tmp_path, PLANS["loop with a slow body"],
                                                  ManualClock())
    assert world.marks.count("slow") == 3
    rep = replay_checked(store, sid, results, recorded, monkeypatch, tmp_path)
    assert rep.cells_consumed == rep.cells_total == 7


@pytest.mark.parametrize("case", [c for c in CASES if len(c["sources"]) == 1],
                         ids=[c["name"] for c in CASES if len(c["sources"]) == 1])
def test_every_behaviour_case_replays_faithfully(case, tmp_path, monkeypatch):
    store, sid, results, recorded, world = record(tmp_path, case["sources"], ManualClock(),
                                                  case.get("denied", ()), case.get("approve", True))
    if not any(e["event"] == "op_recorded" for e in recorded):
        # Nothing was dispatched, so there is no tape: replay must refuse loudly, never pass.
        with pytest.raises(NotReplayable, match="no cassette cells"):
            replay_session(StoreReader(store), sid, catalog=CATALOG, scratch_dir=tmp_path / "scratch")
        return
    replay_checked(store, sid, results, recorded, monkeypatch, tmp_path)
