"""Durable session bindings (flux.lang.session, flux.store.bindings): throttle buckets and debounce
tokens live in the store's flow.db as flux keeps them (hidden symbols over values_store rows), so
they hold across interpreters (turns, processes); a resume past a `parallel` rebinds its branch
names from there (§4.10)."""

from __future__ import annotations

import json
import re
import sqlite3

from flux.cassette.record import RecordingHost
from flux.cassette.redactor import Redactor
from flux.lang import parse
from flux.lang.clock import ManualClock
from flux.lang.interpreter import Interpreter, ListSink, ResumeLedger
from flux.lang.session import MemoryBindings
from flux.store.bindings import FlowDbBindings, from_flux_value, to_flux_value
from flux.store.events import Run, decode_run
from flux.store.store import StoreWriter

from .harness import CATALOG, World


def new_store(tmp_path):
    w = StoreWriter(tmp_path / "store")
    sid = w.create_session("mock")
    return w, sid


def symbols(store_dir, sid):
    db = sqlite3.connect(store_dir / "flow.db")
    try:
        return {name: (vid, ty, summary, vis, json.loads(data)) for name, vid, ty, summary, vis, data in db.execute(
            "SELECT s.name, s.value_id, s.ty, s.summary, s.visibility, v.data FROM symbols s "
            "JOIN values_store v ON 'v_' || v.n = s.value_id WHERE s.session_id = ?", (sid,))}
    finally:
        db.close()


def interp_at(ms: float, bindings, world=None):
    clock = ManualClock(start_ms=ms)
    world = world or World(clock)
    return Interpreter(CATALOG, world, ListSink(), clock=clock, session=bindings), world


def test_flux_values_round_trip():
    for v in ["text", 3, 2.5, True, None, [1, "a", [False]], {"b": 1, "a": {"c": "d"}}]:
        assert from_flux_value(json.loads(json.dumps(to_flux_value(v)))) == v
    assert to_flux_value({"b": 1, "a": "x"}) == {"struct": {"a": {"string": "x"}, "b": {"number": 1.0}}}


def test_throttle_bucket_persists_across_interpreters_in_flow_db(tmp_path):
    w, sid = new_store(tmp_path)
    t0 = 1_700_000_000_000
    first, world = interp_at(t0, FlowDbBindings(w.dir, sid))
    res = first.run(parse('flow\n  throttle "api", max: 2, per: 1m\n    echo("one")\n    echo("two")\n'))
    assert res.halted is None
    vid, ty, summary, vis, data = symbols(w.dir, sid)["__throttle_bucket_api"]
    assert (ty, summary, vis) == (None, "", "hidden") and re.fullmatch(r"v_\d+", vid)
    assert data == {"string": f"[{t0},{t0}]"}  # flux's shape: the JSON text of epoch-ms integers

    # a later turn (a new interpreter, a new process would be the same) inside the window: refused
    second, world2 = interp_at(t0 + 1_000, FlowDbBindings(w.dir, sid))
    res = second.run(parse('flow\n  throttle "api", max: 2, per: 1m\n    echo("three")\n'))
    assert res.halted.error == "`throttle` limit of 2 per 60000ms exceeded" and world2.marks == []
    # another session's bucket of the same name is its own
    other = w.create_session("mock")
    third, world3 = interp_at(t0 + 1_000, FlowDbBindings(w.dir, other))
    assert third.run(parse('flow\n  throttle "api", max: 2, per: 1m\n    echo("x")\n')).halted is None
    # once the window has slid, admitted again; the bucket keeps only the in-window stamps
    fourth, world4 = interp_at(t0 + 61_000, FlowDbBindings(w.dir, sid))
    assert fourth.run(parse('flow\n  throttle "api", max: 2, per: 1m\n    echo("four")\n')).halted is None
    assert symbols(w.dir, sid)["__throttle_bucket_api"][4] == {"string": f"[{t0 + 61_000}]"}
    w.close()


class TriggeringClock(ManualClock):
    """While the debounce waits, another turn triggers the same debounce (a newer token)."""

    def __init__(self, start_ms, other):
        super().__init__(start_ms)
        self.other = other

    def sleep_ms(self, ms):
        super().sleep_ms(ms)
        self.other.bind("__debounce_last_save", f"{int(self.t)}:999999", hidden=True)


def test_debounce_token_is_a_hidden_session_symbol_and_a_newer_trigger_coalesces(tmp_path):
    w, sid = new_store(tmp_path)
    t0 = 1_700_000_000_000
    first, world = interp_at(t0, FlowDbBindings(w.dir, sid))
    assert first.run(parse('flow\n  debounce "save", wait: 200ms\n    echo("saved")\n')).halted is None
    assert world.marks == ["saved"]
    vid, ty, summary, vis, data = symbols(w.dir, sid)["__debounce_last_save"]
    assert vis == "hidden" and re.fullmatch(rf"{t0}:\d+", data["string"])

    clock = TriggeringClock(t0 + 5_000, FlowDbBindings(w.dir, sid))
    world2 = World(clock)
    second = Interpreter(CATALOG, world2, ListSink(), clock=clock, session=FlowDbBindings(w.dir, sid))
    assert second.run(parse('flow\n  debounce "save", wait: 200ms\n    echo("saved again")\n')).halted is None
    assert world2.marks == []  # superseded by the other turn's trigger: coalesced
    w.close()


PLAN_1 = 'flow\n  parallel\n    branch a\n      echo("A")\n    branch b\n      echo("B")\n  boom()\n'
PLAN_2 = 'flow\n  parallel\n    branch a\n      echo("A")\n    branch b\n      echo("B")\n  echo("{a}+{b}")\n'


def record_halted_run(tmp_path):
    w, sid = new_store(tmp_path)
    bodies: list[dict] = []

    class Sink:
        def emit(self, body):
            bodies.append(body)
            w.append(sid, Run(decode_run(body)))

    clock = ManualClock()
    sink = Sink()
    interp = Interpreter(CATALOG, RecordingHost(World(clock), sink, Redactor(), env={}), sink, clock=clock,
                         session=FlowDbBindings(w.dir, sid))
    assert interp.run(parse(PLAN_1)).halted.error == "boom failed"
    return w, sid, bodies


def test_resume_past_a_parallel_rebinds_its_branch_names_from_the_session(tmp_path):
    w, sid, bodies = record_halted_run(tmp_path)
    ledger = ResumeLedger.fold(bodies)
    assert ledger is not None and ledger.entry(0) is not None and ledger.entry(1) is None
    clock = ManualClock()
    world = World(clock)
    fresh = Interpreter(CATALOG, world, ListSink(), clock=clock, session=FlowDbBindings(w.dir, sid))
    res = fresh.run(parse(PLAN_2), ledger=ledger)
    assert res.halted is None
    assert world.marks == ["A+B"]  # the parallel was fast-forwarded (not re-run), its names rebound
    assert symbols(w.dir, sid)["a"][3:] == ("visible", {"string": "A"})

    # without the durable bindings the names stay unbound (the placeholders stay literal)
    world2 = World(clock)
    bare = Interpreter(CATALOG, world2, ListSink(), clock=clock, session=MemoryBindings())
    bare.run(parse(PLAN_2), ledger=ResumeLedger.fold(bodies))
    assert world2.marks == ["{a}+{b}"]
    w.close()


def test_a_ctx_statement_records_its_pack_and_resume_rebinds_it():
    clock = ManualClock()
    world = World(clock)
    sink = ListSink()
    interp = Interpreter(CATALOG, world, sink, clock=clock)
    interp.run(parse('flow\n  x = echo("X")\n  ctx pack\n    include x\n  boom()\n'))
    done = [e for e in sink.events if e["event"] == "statement_completed"]
    assert done[1]["node"] == 1 and "value" in done[1]  # flux: the pack is the statement's value
    world2 = World(clock)
    fresh = Interpreter(CATALOG, world2, ListSink(), clock=clock, values=dict(interp.values))
    res = fresh.run(parse('flow\n  x = echo("X")\n  ctx pack\n    include x\n  echo("{pack}")\n'),
                    ledger=ResumeLedger.fold(sink.events))
    assert res.halted is None and world2.marks == ['{"name":"pack","members":["x"]}']


KILLED_RUN = """
import os, sys
from flux.agent.builtin_ops import coding_ops
from flux.agent.client import Client
from flux.agent.ops import op

@op(name="crash", effect="write")
def crash(why: str) -> str:
    \"\"\"The process is killed mid-dispatch.\"\"\"
    os._exit(9)

ws = sys.argv[2]
c = Client("mock", store=sys.argv[1], workspace=ws, env_secrets=False, auto_approve=True,
           ops=[*coding_ops(ws), crash])
c.session().run_flow_sync(sys.argv[3])
"""


def test_resurrect_past_a_parallel_rebinds_the_branch_names(tmp_path):
    """A turn killed after its `parallel` completed: resurrect fast-forwards the parallel (its ops
    are not run again) and the statement after it sees the branch names, rebound from flow.db."""
    import subprocess
    import sys

    from flux.agent.builtin_ops import coding_ops
    from flux.agent.client import Client
    from flux.agent.ops import op
    from flux.timemachine import resurrect_session

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha")
    (ws / "b.txt").write_text("beta")
    plan = ('flow\n  parallel\n    branch a\n      read("a.txt")\n    branch b\n      read("b.txt")\n'
            '  crash("now")\n  write(path: "out.txt", content: "{a}|{b}")\n')
    store = tmp_path / "store"
    killed = subprocess.run([sys.executable, "-c", KILLED_RUN, str(store), str(ws), plan], capture_output=True)
    assert killed.returncode == 9, killed.stderr.decode()[-2000:]

    @op(name="crash", effect="write")
    def crash(why: str) -> str:
        """Runs this time."""
        return "ran"

    c = Client("mock", store=store, workspace=ws, env_secrets=False, auto_approve=True,
               ops=[*coding_ops(ws), crash])
    rep = resurrect_session(c, "s_1")
    c.close()
    assert rep is not None and rep.outcome == "resurrected", rep
    assert rep.statements_fast_forwarded == 1 and rep.ops_run_live == 2  # crash (in flight) + write
    assert (ws / "out.txt").read_text() == "alpha|beta"
