"""Hermetic replay (§4.4) of the real fixture, tampered copies, and runs recorded live through the
interpreter + RecordingHost into writer-built stores."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pytest

from flux.canonical import canonical_json, sha256_hex
from flux.cassette.record import RecordingHost
from flux.cassette.redactor import Redactor
from flux.errors import FluxError, NotReplayable, SessionNotFound
from flux.lang.catalog import OpCatalog, OpSpec
from flux.lang.formatter import format_flow
from flux.lang.hashes import flow_key
from flux.lang.interpreter import Interpreter, ResumeLedger
from flux.lang.parser import parse
from flux.model.session import load_session
from flux.store.events import Message, PlanAttempted, Run, StepStarted, TurnEnded, decode_run
from flux.store.payload_decode import decode_payload
from flux.store.store import StoreReader, StoreWriter
from flux.timemachine.replay import replay_session, replay_tree
from tests.helpers import tree_digest, on_cell, rewrite

FIXTURE_KEY = "h:0aac945488efbfd1"
APPEND_HASH = "7b7d06ae306ee31ae768f1e70ebbc4e4e92750881536d135cbec17de7d4f2dff"


def full_digest(d: Path) -> dict[str, str]:
    return tree_digest(d)


# ------------------------------------------------------------------------------ the real fixture


def test_fixture_replays_faithfully_and_writes_nothing(fixture_store):
    before = full_digest(fixture_store)
    progress = []
    rep = replay_session(StoreReader(fixture_store), "s_1", on_progress=lambda d, t: progress.append((d, t)))
    assert rep.summary_lines() == ["replayed 1 plan(s) · 1/1 recorded cell(s) served", f"  ✓ {FIXTURE_KEY}"]
    assert rep.to_json() == {"cells_consumed": 1, "cells_total": 1, "diverged": None, "missing_sources": 0,
                             "plans": [{"flow_key": FIXTURE_KEY, "halted": None}], "session": "s_1"}
    assert rep.faithful and rep.unfaithful_reason is None
    assert rep.served == [0] and rep.cell_status == ["served"] and rep.unconsumed == []
    [st] = rep.statement_results
    assert (st.plan, st.node, st.stmt, st.status, st.cells) == (FIXTURE_KEY, 0, "39ae08c585f98e6a", "completed", (0,))
    assert [e["event"] for e in rep.scratch_events] == ["step_started", "step_succeeded", "statement_completed"]
    assert rep.scratch_events[0]["input_hash"] == APPEND_HASH
    assert progress == [(1, 1)]
    assert full_digest(fixture_store) == before


def test_changed_plan_text_diverges(fixture_store):
    rewrite(fixture_store, lambda b: dataclasses.replace(b, plan_source=b.plan_source.replace("flux mock", "flux MOCK"))
            if isinstance(b, PlanAttempted) else b)
    rep = replay_session(StoreReader(fixture_store), "s_1")
    new_input = {"content": "created by flux MOCK\n", "path": "flux-mock.txt"}
    h = sha256_hex(canonical_json(new_input))
    msg = (f"op `append` (input hash {h[:16]}…) has no matching unconsumed recorded cell — the plan's dataflow "
           "diverged from the recording")
    assert rep.diverged == msg
    assert rep.plans[0].halted == f"replay diverged: {msg}" and rep.plans[0].halt_kind == "runtime"
    assert (rep.cells_consumed, rep.cells_total) == (0, 1)
    assert rep.cell_status == ["unconsumed"] and not rep.faithful
    assert rep.statement_results[0].status == "halted"
    assert rep.statement_results[0].requests[0].status == "miss"


def test_changed_cell_content_is_served_as_recorded(fixture_store):
    """Replay serves whatever the tape says (it never re-runs the op): the run stays faithful to the
    tampered recording; `flux diff` is what shows the world changed (tests/core/test_diff.py)."""
    rewrite(fixture_store, on_cell(lambda c: Run(dataclasses.replace(c, content="appended 99 bytes"))))
    rep = replay_session(StoreReader(fixture_store), "s_1")
    assert rep.faithful and rep.served == [0]


def test_removed_cell_is_not_replayable(fixture_store):
    rewrite(fixture_store, on_cell(lambda c: None))
    with pytest.raises(NotReplayable, match=r"^session s_1 is not replayable: no cassette cells recorded \(pre-C-43 run, or FLUX_CASSETTE=0\)$"):
        replay_session(StoreReader(fixture_store), "s_1")


def test_removed_cell_among_others_diverges(fixture_store):
    # an unrelated cell remains, so the session has a tape, but the append cell is gone
    rewrite(fixture_store, on_cell(lambda c: Run(dataclasses.replace(c, op="read"))))
    rep = replay_session(StoreReader(fixture_store), "s_1")
    assert rep.diverged.startswith("op `append` (input hash 7b7d06ae306ee31a…) has no matching unconsumed recorded cell")
    assert (rep.cells_consumed, rep.cells_total) == (0, 1)


def test_truncated_cell_refuses_service(fixture_store):
    rewrite(fixture_store, on_cell(lambda c: Run(dataclasses.replace(c, truncated=True))))
    rep = replay_session(StoreReader(fixture_store), "s_1")
    assert rep.diverged == ("recorded cell 0 for op `append` was truncated at the capture cap — this run is not "
                            "hermetically replayable past it (re-record with a larger FLUX_CASSETTE_MAX_BYTES)")
    assert rep.cell_status == ["truncated"] and rep.cells_consumed == 0
    assert rep.plans[0].halted.startswith("replay diverged: recorded cell 0")


def test_extra_cell_is_left_unconsumed(fixture_store):
    reader = StoreReader(fixture_store)
    cell = load_session(reader, "s_1").cells[0].rec
    reader.close()
    with StoreWriter(fixture_store) as w:
        w.append("s_1", Run(dataclasses.replace(cell, seq=1)))
    rep = replay_session(StoreReader(fixture_store), "s_1")
    assert rep.diverged is None
    assert (rep.cells_consumed, rep.cells_total) == (1, 2)
    assert rep.served == [0] and rep.cell_status == ["served", "unconsumed"]
    assert not rep.faithful
    assert rep.unfaithful_reason == "replay left 1 of 2 recorded cassette cells unconsumed — the run diverged silently"


def test_unparseable_plan_source_names_the_plan(fixture_store):
    rewrite(fixture_store, lambda b: dataclasses.replace(b, plan_source="flow\n  x = append({\n")
            if isinstance(b, PlanAttempted) else b)
    with pytest.raises(NotReplayable) as ei:
        replay_session(StoreReader(fixture_store), "s_1")
    msg = str(ei.value)
    assert msg.startswith("session s_1 is not replayable: the accepted plan of turn 1 (attempt step 1, stream_seq 10) no longer parses: line ")
    assert "\n" not in msg


def test_no_plan_and_no_statements(fixture_store):
    rewrite(fixture_store, lambda b: None if isinstance(b, PlanAttempted) else b)
    with pytest.raises(NotReplayable, match="no executed statements and no accepted plan_source recorded$"):
        replay_session(StoreReader(fixture_store), "s_1")


def test_turn_filter(fixture_store):
    r = StoreReader(fixture_store)
    assert replay_session(r, "s_1", turn=1).faithful
    with pytest.raises(NotReplayable, match=r"turn 2 does not exist \(it has 1 turn\(s\)\)"):
        replay_session(r, "s_1", turn=2)


def test_unknown_op_with_a_given_catalog(fixture_store):
    r = StoreReader(fixture_store)
    with pytest.raises(NotReplayable, match=rf"plan {FIXTURE_KEY} uses unknown op `append` — the catalog has no such op"):
        replay_session(r, "s_1", catalog=OpCatalog([OpSpec("read", ("path",))]))
    assert replay_session(r, "s_1", catalog=OpCatalog([OpSpec("append", ("path", "content"))])).faithful


def test_session_from_another_store(fixture_store, tmp_path):
    with StoreWriter(tmp_path / "other") as w:
        w.create_session("mock")
    r = StoreReader(fixture_store)
    with pytest.raises(SessionNotFound, match="no session 's_2'"):
        replay_session(r, "s_2")
    with pytest.raises(SessionNotFound):
        replay_session(StoreReader(tmp_path / "other"), "s_9")


def test_scratch_dir_gets_the_replayed_run_never_the_recorded_store(fixture_store, tmp_path):
    before = full_digest(fixture_store)
    r = StoreReader(fixture_store)
    with pytest.raises(FluxError, match="must not be the recorded store"):
        replay_session(r, "s_1", scratch_dir=fixture_store)
    assert full_digest(fixture_store) == before
    rep = replay_session(r, "s_1", scratch_dir=tmp_path / "scratch")
    assert rep.scratch_session == "s_1"
    d = load_session(StoreReader(tmp_path / "scratch"), rep.scratch_session)
    assert d.row.model == "replay" and d.row.correlation_id == "s_1"
    assert [e.body.event.TAG for e in d.run_events] == ["step_started", "step_succeeded", "statement_completed"]
    assert full_digest(fixture_store) == before


# ------------------------------------------------------------------ runs recorded live, then replayed


@dataclass
class Outcome:
    content: str
    view: str | None = None
    is_error: bool = False
    denied: bool = False


class Live:
    """A live op host: a function per op; counts calls."""

    def __init__(self, **ops):
        self.ops = ops
        self.calls = []

    def dispatch(self, op, input, input_json):
        self.calls.append((op, input))
        out = self.ops[op](input)
        return out if isinstance(out, Outcome) else Outcome(str(out))


class StoreSink:
    def __init__(self, w: StoreWriter, sid: str):
        self.w, self.sid, self.events = w, sid, []

    def emit(self, body: dict) -> None:
        self.events.append(body)
        self.w.append(self.sid, Run(decode_run(body)))


def record_turn(w: StoreWriter, sid: str, plans: list[str], live: Live, redactor: Redactor | None = None,
                interp_state: dict | None = None):
    """One live turn: for each plan, plan_attempted (redacted canonical text) then a resumable run
    with the live host behind a RecordingHost — the engine's write order (§2.6)."""
    red = redactor or Redactor()
    w.append(sid, Message.text("user", "go"))
    tid = w.begin_turn(sid, "go", "mock")
    sink = StoreSink(w, sid)
    host = RecordingHost(live, sink, red, env={})
    interp = Interpreter(OpCatalog.permissive(), host, sink, lambda m, r: True, **(interp_state or {}))
    results = []
    for step, text in enumerate(plans, 1):
        draft = parse(text)
        w.append(sid, PlanAttempted(step=step, outcome="accepted", plan_source=red.redact(format_flow(draft))), turn_id=tid)
        ledger = ResumeLedger.fold([dict(e) for e in _trace_dicts(w, sid)])
        results.append(interp.run(draft, resumable=True, ledger=ledger))
    w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
    w.append(sid, Message.text("assistant", "done"))
    return results


def _trace_dicts(w: StoreWriter, sid: str):
    rows = w.conn.execute("SELECT kind, payload FROM events WHERE stream = ? AND kind = 'run' ORDER BY stream_seq", (sid,))
    return [decode_payload(k, p).event.to_body() for k, p in rows]


PLAN_V1 = 'flow\n  a = read({"path":"in.txt"})\n  b = write({"body":"{a}","path":"out.txt"})\n'
PLAN_V2 = 'flow\n  a = read({"path":"in.txt"})\n  b = write({"body":"{a}!","path":"out.txt"})\n'


def test_halted_plan_and_revision_replay_exactly(tmp_path):
    fails = {"n": 0}

    def write(inp):
        fails["n"] += 1
        return Outcome("disk full", is_error=True) if fails["n"] == 1 else "wrote"

    live = Live(read=lambda i: "hello", write=write)
    store = tmp_path / "st"
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        res = record_turn(w, sid, [PLAN_V1, PLAN_V2], live)
    assert res[0].halted is not None and res[1].halted is None
    assert [c[0] for c in live.calls] == ["read", "write", "write"]  # v2 fast-forwarded the read

    before = full_digest(store)
    rep = replay_session(StoreReader(store), sid)
    k1, k2 = (flow_key(d.name, d.body) for d in (parse(PLAN_V1), parse(PLAN_V2)))
    assert rep.summary_lines() == [
        "replayed 2 plan(s) · 3/3 recorded cell(s) served",
        f"  ✓ {k1} — halted as recorded (reproduced): disk full",
        f"  ✓ {k2}",
    ]
    assert rep.faithful and rep.served == [0, 1, 2]
    assert [(s.plan, s.node, s.status) for s in rep.statement_results] == [
        (k1, 0, "completed"), (k1, 1, "halted"), (k2, 0, "skipped"), (k2, 1, "completed"),
    ]
    assert rep.statement_results[1].kind == "runtime" and rep.statement_results[1].error == "disk full"
    assert full_digest(store) == before
    assert len(live.calls) == 3  # replay never reached the live host


def _no_secret_on_disk(store: Path, secret: str) -> None:
    for p in store.iterdir():
        assert secret.encode() not in p.read_bytes(), p.name


def test_secret_from_an_op_output_never_reaches_the_store_and_replay_matches_via_redacted_hash(tmp_path):
    secret = "hunter2hunter2xyz"
    plan = 'flow\n  r = fetch({"url":"https://api.example.com/x"})\n  s = save({"body":"{r}"})\n'
    live = Live(fetch=lambda i: f"welcome, your key is {secret}", save=lambda i: "saved")
    store = tmp_path / "st"
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        record_turn(w, sid, [plan], live, Redactor([secret]))
    assert live.calls[1] == ("save", {"body": f"welcome, your key is {secret}"})  # the live run saw it
    _no_secret_on_disk(store, secret)

    rep = replay_session(StoreReader(store), sid)
    assert rep.faithful, rep.unfaithful_reason
    cells = [c.rec for c in load_session(StoreReader(store), sid).cells]
    assert cells[0].content == "welcome, your key is [redacted]" and cells[0].redacted
    # replay serves `r` redacted, so `save` gets the redacted input: only the second key matches
    assert rep.requests[1].input_hash == cells[1].input_hash_redacted != cells[1].input_hash
    assert rep.redacted_standins == 0


def test_secret_in_a_plan_literal_replays_from_the_redacted_plan(tmp_path):
    secret = "hunter2hunter2xyz"
    plan = f'flow\n  r = fetch({{"auth":"{secret}","url":"https://api.example.com/x"}})\n  s = save({{"body":"{{r}}"}})\n'
    live = Live(fetch=lambda i: "ok", save=lambda i: "saved")
    store = tmp_path / "st"
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        record_turn(w, sid, [plan], live, Redactor([secret]))
    _no_secret_on_disk(store, secret)

    rep = replay_session(StoreReader(store), sid)
    assert rep.faithful, rep.unfaithful_reason
    assert rep.redacted_standins == 1 and rep.missing_sources == 0
    d = parse(plan)
    assert rep.plans[0].flow_key == flow_key(d.name, d.body)  # reported under the executed key
    cell = load_session(StoreReader(store), sid).cells[0].rec
    assert rep.requests[0].input_hash == cell.input_hash_redacted != cell.input_hash


def test_confirm_gates_auto_allow_and_the_approver_is_never_asked(tmp_path):
    plan = 'flow\n  a = read({"path":"x"})\n  confirm "deploy?", risk: high\n    b = deploy({"env":"prod"})\n'
    live = Live(read=lambda i: "1", deploy=lambda i: "deployed")
    store = tmp_path / "st"
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        record_turn(w, sid, [plan], live)
    rep = replay_session(StoreReader(store), sid)
    assert rep.faithful and rep.cells_total == 2


def test_sub_agents_replay_after_the_parent(tmp_path):
    store = tmp_path / "st"
    with StoreWriter(store) as w:
        parent = w.create_session("mock")
        record_turn(w, parent, ['flow\n  a = read({"path":"p"})\n'], Live(read=lambda i: "P"))
        good = w.create_session("mock", context={"correlation_id": parent, "agent_id": "subagent:coder"})
        record_turn(w, good, ['flow\n  a = read({"path":"c"})\n'], Live(read=lambda i: "C"))
        empty = w.create_session("mock", context={"correlation_id": parent, "agent_id": "subagent:idle"})
        w.append(empty, Run(StepStarted(step="step_x_0", op="x", input_hash="0" * 64)))
    seen = []
    tree = replay_tree(StoreReader(store), parent, sub_agents=True, on_child=seen.append)
    assert seen == [good, empty]
    assert tree.report.faithful
    assert tree.children[0].report.faithful and tree.children[0].error is None
    assert tree.children[1].report is None and "no cassette cells recorded" in tree.children[1].error
    assert tree.diverged_child is None
    j = tree.to_json()
    assert j["sub_agents"] == [{"cells_consumed": 1, "cells_total": 1, "diverged": None, "session": good}]


def test_no_run_trace(tmp_path):
    with StoreWriter(tmp_path / "st") as w:
        sid = w.create_session("mock")
        w.append(sid, Message.text("user", "hi"))
    with pytest.raises(NotReplayable, match=rf"^session {sid} is not replayable: no run trace recorded$"):
        replay_session(StoreReader(tmp_path / "st"), sid)


def test_identical_pairs_are_served_in_recorded_order(tmp_path):
    n = {"i": 0}

    def tick(inp):
        n["i"] += 1
        return f"tick {n['i']}"

    plan = 'flow\n  a = tick({})\n  b = tick({})\n  c = log({"msg":"{a} {b}"})\n'
    store = tmp_path / "st"
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        record_turn(w, sid, [plan], Live(tick=tick, log=lambda i: "ok"))
    rep = replay_session(StoreReader(store), sid)
    # `log`'s input depends on the order the two identical ticks were served in
    assert rep.faithful and rep.served == [0, 1, 2]


def test_plan_turns_names_the_turn_of_each_replayed_flow_key(fixture_store):
    from flux.timemachine.replay import plan_turns

    with StoreReader(fixture_store) as r:
        assert plan_turns(load_session(r, "s_1")) == {FIXTURE_KEY: 1}
