"""Replay's fast paths give exactly what the plain folds give (issue 10 item 2): the halt latch
kept as events arrive equals ``ResumeLedger.fold`` of the whole scratch trace."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.cassette.replay import ReplayTape, TapeCell
from flux.lang.interpreter import ResumeLedger
from flux.timemachine.serve import ScratchSink

_PLANS = st.sampled_from(["p1", "p2", "p3"])
_EVENTS = st.one_of(
    st.builds(lambda p, n, v: {"event": "statement_completed", "plan": p, "node": n, "stmt": f"s{n}", "value": v,
                               "skipped": False}, _PLANS, st.integers(0, 3), st.sampled_from([None, "v_1", "v_2"])),
    st.builds(lambda p, n: {"event": "plan_halted", "plan": p, "node": n, "stmt": f"s{n}", "kind": "runtime",
                            "error": "x"}, _PLANS, st.integers(0, 3)),
    st.builds(lambda p, q: {"event": "plan_resumed", "plan": p, "prior": q, "skipped": 1}, _PLANS, _PLANS),
    st.builds(lambda p, n: {"event": "checkpoint_reached", "flow_key": p, "label": "c", "node": n},
              _PLANS, st.integers(0, 3)),
    st.just({"event": "step_started", "step": "s", "op": "o", "input_hash": "h"}),
)


def _as_tuple(ledger: ResumeLedger | None):
    return None if ledger is None else (ledger.plan, ledger.completed, ledger.checkpoint)


@settings(max_examples=150, deadline=None)
@given(st.lists(_EVENTS, max_size=30))
def test_the_incremental_halt_latch_is_the_fold_of_the_trace(events):
    sink = ScratchSink(ReplayTape([]), None, None)
    for ev in events:
        sink.emit(ev)
        assert _as_tuple(sink.ledger()) == _as_tuple(ResumeLedger.fold(sink.events))


# ------------------------------------------------------------------------------------------------
# The streamed replay read equals the full decode, row for row, on corrupted stores.

import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import sqlite3  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
from hypothesis import HealthCheck  # noqa: E402

from flux.canonical import canonical_json, sha256_hex  # noqa: E402
from flux.errors import FluxError  # noqa: E402
from flux.lang.catalog import OpCatalog, OpSpec  # noqa: E402
from flux.lang.hashes import flow_key, stmt_hash16  # noqa: E402
from flux.lang.parser import parse  # noqa: E402
from flux.model.session import TRACE_KINDS, load_session  # noqa: E402
from flux.store import PlanAttempted, Run, StatementCompleted, StepStarted, StepSucceeded, StoreReader, StoreWriter  # noqa: E402
from flux.store.events import PlanHalted  # noqa: E402
from flux.timemachine.replay import replay_detail, replay_session  # noqa: E402
from flux.timemachine.replay_input import ReplayInput, read_replay_input  # noqa: E402
from tests.helpers import cell, write_turn  # noqa: E402


def _ledgered(w: StoreWriter, sid: str, tid: int, paths: list[str], *, halt_last: bool = False) -> None:
    body = "".join(f'  s{k} = write({{"path":"{p}","body":"x"}})\n' for k, p in enumerate(paths))
    draft = parse("flow\n" + body)
    key = flow_key(draft.name, draft.body)
    w.append(sid, PlanAttempted(step=2, outcome="accepted", plan_source="flow\n" + body), turn_id=tid)
    for k, (node, p) in enumerate(zip(draft.body, paths)):
        inp = {"body": "x", "path": p}
        ih = sha256_hex(canonical_json(inp))
        w.append(sid, Run(StepStarted(step=f"step_write_{ih[:16]}", op="write", input_hash=ih)))
        last = halt_last and k == len(paths) - 1
        w.append(sid, cell("write", inp, "boom" if last else "ok", is_error=last))
        if last:
            w.append(sid, Run(PlanHalted(plan=key, node=k, stmt=stmt_hash16(node), op="write", kind="runtime",
                                         error="boom")))
        else:
            w.append(sid, Run(StepSucceeded(step=f"step_write_{ih[:16]}", output=f"v_{k}")))
            w.append(sid, Run(StatementCompleted(plan=key, node=k, stmt=stmt_hash16(node), value=f"v_{k}")))


@pytest.fixture(scope="module")
def replay_base(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("replay-diff") / "store"
    with StoreWriter(d) as w:
        sid = w.create_session("mock")
        host = 'flow\n  adaptive_gather_1 = read({"path":"a.txt"})\n'
        tid = write_turn(w, sid, "one", plan=host, cells=[cell("read", {"path": "a.txt"}, "A")], end=None)
        _ledgered(w, sid, tid, ["b", "c", "d"])
        w.append(sid, Run(StepSucceeded(step="x", output="v_9")))
        from flux.store import TurnEnded
        w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
        tid = write_turn(w, sid, "two", cells=[], end=None)
        _ledgered(w, sid, tid, ["e", "f"], halt_last=True)
    return d


# Values a hostile writer can put in a run body's field: wrong types, numbers decoding cannot
# coerce (inf, nan), nesting, and the right type.
_FIELD_VALUES = st.sampled_from([None, True, False, 0, -1, 2 ** 70, 1.5, float("inf"), float("nan"), "", "x", [],
                                 {}, [1, [2]], {"k": "v"}, "op_recorded", "statement_completed"])
_PAYLOAD_TEXTS = st.sampled_from([
    "", "{", "[]", "null", '{"kind":1}', '{"kind":"run"}', '{"kind":"run","data":[]}',
    '{"kind":"run","data":{"event":7}}', '{"kind":"run","data":{"event":"nope"}}',
    '{"kind":"run","data":{"event":"op_recorded"}}', '{"kind":"run","data":{"event":"op_recorded","seq":1e999}}',
    '{"kind":"run","data":{"event":"statement_completed","node":NaN}}',
    '{"kind":"run","data":{"event":"step_started"},"kind":"turn_started"}',
    '{"kind":"run","data":{"event":"plan_halted","plan":"\\ud83d","node":0}}',
    '{"kind":"message","data":{"role":"user","content":[]}}', '{"kind":"turn_ended","data":{"iterations":1e999}}',
    '{"kind":"run","data":' + "[" * 5000 + "]" * 5000 + "}", '{"kind":"run","data":{"event":"op_recorded","seq":' + "9" * 5000 + "}}",
    # plan rows the fused read must decode as every reader does: coerced fields, odd shapes, a kind
    # that is not text (the column's then), surrogates, duplicate keys
    '{"kind":"plan_attempted","data":{"step":1.0,"outcome":"accepted","plan_source":"flow\\n  a = read({\\"path\\":\\"a.txt\\"})\\n"}}',
    '{"kind":"plan_attempted","data":{"step":1,"outcome":"accepted","phase":7,"plan_source":"flow\\n  a = read({\\"path\\":\\"a.txt\\"})\\n"}}',
    '{"kind":"plan_attempted","data":{"step":1,"outcome":"accepted","plan_source":"flow\\n  a = read({\\"path\\":\\"\\ud800\\"})\\n"}}',
    '{"kind":"plan_attempted","data":{"step":1,"outcome":"accepted","plan_source":null,"plan_source":"flow\\n  a = read({\\"path\\":\\"a.txt\\"})\\n"}}',
    '{"kind":"plan_attempted","data":[1]}', '{"kind":"plan_attempted","data":null}', '{"kind":"plan_attempted"}',
    '{"kind":7,"data":{"event":"op_recorded","op":"read","content":"A"}}', '{"kind":null,"data":{"step":2}}',
    '{"kind":"run","data":{"event":"op_recorded","op":"read","input_hash":"\\udc00","content":"\\ud83d"}}',
    '{"kind":"run","data":{"event":"op_recorded","op":"read","is_error":1,"content":"A"}}',
    '{"kind":"run","data":{"event":"statement_completed","plan":"p","node":1.0,"skipped":0}}',
    '{"kind":"run","data":{"event":"plan_halted","plan":"p","node":true,"op":5}}',
    '{"kind":"run","data":{"event":"step_started","step":1e999}}', '{"kind":"run","data":{"event":"step_succeeded","output":null}}',
    '{"kind":"turn_started","data":{"user_input":"x","model":"m"}}', '{"kind":"turn_ended","data":{"outcome":"ok"}}',
    '{"kind":"run","data":{"event":"op_recorded","op":"read","content":"A","content":7}}',
])


_PLAN_TEXTS = st.sampled_from([
    "flow\n  x = \n", "not a plan", 'flow\n  s0 = erase({"path":"b"})\n',
    'flow\n  adaptive_gather_1 = read({"path":"a.txt"})\n',
    'flow\n  s0 = write({"path":"b","body":"x"})\n  s1 = write({"path":"c","body":"x"})\n  s2 = write({"path":"d","body":"x"})\n',
])


def _mutate(store: Path, data, stream: str | None = None) -> None:
    """Corrupt 1-3 rows of the store (of ``stream`` only, when given)."""
    con = sqlite3.connect(store / "events.db", isolation_level=None)
    try:
        rows = con.execute("SELECT global_seq, kind, payload FROM events WHERE ? IS NULL OR stream = ?"
                           " ORDER BY global_seq", (stream, stream)).fetchall()
        for _ in range(data.draw(st.integers(1, 3), label="mutations")):
            gs, kind, payload = data.draw(st.sampled_from(rows), label="row")
            how = data.draw(st.sampled_from(["field", "text", "kind", "utf8", "blob", "plan", "column"]), label="how")
            if how == "plan":  # an accepted plan damaged, or naming an op a catalog may lack, or another's text
                plans = [r for r in rows if r[1] == "plan_attempted"]
                if not plans:
                    continue
                gs, kind, payload = data.draw(st.sampled_from(plans), label="plan row")
                obj = json.loads(payload)
                obj["data"]["plan_source"] = data.draw(_PLAN_TEXTS, label="plan text")
                con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (json.dumps(obj), gs))
            elif how == "field":
                obj = json.loads(payload)
                d = obj.get("data")
                if not isinstance(d, dict) or not d:
                    continue
                d[data.draw(st.sampled_from(sorted(d)), label="field")] = data.draw(_FIELD_VALUES, label="value")
                con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (json.dumps(obj), gs))
            elif how == "text":
                con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (data.draw(_PAYLOAD_TEXTS), gs))
            elif how == "column":  # a loose column (id, ts, turn_id) of another type, or NULL; mostly a plan row's
                plans = [r for r in rows if r[1] == "plan_attempted"]
                if plans and data.draw(st.booleans(), label="a plan row"):
                    gs = data.draw(st.sampled_from(plans), label="plan row")[0]
                col = data.draw(st.sampled_from(["id", "ts", "turn_id"]), label="column")
                turn_ids = [float(r[0]) for r in rows if r[1] == "turn_started"]  # 3.0 finds turn 3 in a dict
                value = data.draw(st.sampled_from([None, "7", 1.5, b"\x00", 10 ** 18, -1, True, *turn_ids]),
                                  label="column value")
                con.execute(f"UPDATE OR IGNORE events SET {col} = ? WHERE global_seq = ?", (value, gs))  # NOT NULL, UNIQUE
            elif how == "kind":
                con.execute("UPDATE events SET kind = ? WHERE global_seq = ?",
                            (data.draw(st.sampled_from(["run", "turn_started", "plan_attempted", "message", "weird"])), gs))
            elif how == "utf8":
                con.execute("UPDATE events SET payload = CAST(? AS TEXT) WHERE global_seq = ?",
                            (payload.encode()[:20] + b"\xff\xfe" + payload.encode()[20:], gs))
            else:
                con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (payload.encode(), gs))
    finally:
        con.close()


def _outcome(fn, *, detail: bool = True):
    try:
        rep = fn()
    except FluxError as e:
        return ("error", type(e).__name__, str(e))
    if not detail:  # what a detail=False report promises: everything but the per-statement detail, left empty
        assert (rep.statement_results, rep.requests, rep.scratch_events, rep.detail) == ([], [], [], False)
        return ("report", rep.to_json(), rep.summary_lines(), rep.served, rep.cell_status, rep.plans,
                rep.redacted_standins, rep.tape_end, rep.faithful, rep.unconsumed)
    return ("report", rep.to_json(), rep.summary_lines(), rep.served, rep.cell_status, rep.statement_results,
            rep.requests, rep.scratch_events, rep.plans, rep.redacted_standins, rep.tape_end)


def _brief(outcome):
    """The part of a full report's outcome a detail=False report keeps."""
    if outcome[0] == "error":
        return outcome
    _tag, js, lines, served, status, _sr, _req, _ev, plans, standins, end = outcome
    faithful = js["diverged"] is None and js["cells_consumed"] == js["cells_total"]
    return ("report", js, lines, served, status, plans, standins, end, faithful,
            [i for i, s in enumerate(status) if s != "served"])


# The catalogs a replay may be given: none (permissive), one with every op, one without `write`.
_CATALOGS = st.sampled_from([None, ("read", "write"), ("read",), ("read", "write", "erase")])


def _same_input(a: ReplayInput, b: ReplayInput) -> None:
    assert (a.id, a.turns, a.executions, a.has_trace) == (b.id, b.turns, b.executions, b.has_trace)
    assert [TapeCell.of(getattr(c, "rec", c)) for c in a.cells] == [TapeCell.of(getattr(c, "rec", c)) for c in b.cells]


@settings(max_examples=int(os.environ.get("FLUX_READ_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_streamed_replay_read_equals_the_full_decode_on_corrupted_rows(replay_base, tmp_path_factory, data):
    store = tmp_path_factory.mktemp("v") / "store"
    shutil.copytree(replay_base, store)
    _mutate(store, data)
    full, fast = StoreReader(store), StoreReader(store)
    try:
        detail = load_session(full, "s_1", kinds=TRACE_KINDS)
        _same_input(read_replay_input(fast, "s_1"), ReplayInput.of_detail(detail))
        assert fast.skipped_rows == full.skipped_rows
        fast.skipped_rows = full.skipped_rows = 0
        assert _outcome(lambda: replay_session(fast, "s_1")) == \
            _outcome(lambda: replay_detail(load_session(full, "s_1", kinds=TRACE_KINDS)))
        assert fast.skipped_rows == full.skipped_rows
        # Plans parsed as the replay reaches them (and the lean report `flux replay` asks for) give
        # what parsing every plan first gives (on_progress takes that path): the same report, or
        # the same error — a damaged plan, a missing turn, an op the catalog lacks, in flux's order.
        turn = data.draw(st.sampled_from([None, 1, 2, 3]), label="turn")
        ops = data.draw(_CATALOGS, label="catalog")
        catalog = None if ops is None else OpCatalog([OpSpec(op, ("path",)) for op in ops])
        eager = _outcome(lambda: replay_detail(load_session(full, "s_1", kinds=TRACE_KINDS), turn=turn,
                                               catalog=catalog, on_progress=lambda done, total: None))
        assert _outcome(lambda: replay_session(fast, "s_1", turn, catalog=catalog)) == eager
        assert _outcome(lambda: replay_session(fast, "s_1", turn, catalog=catalog, detail=False),
                        detail=False) == _brief(eager)
    finally:
        full.close()
        fast.close()


def test_the_base_store_replays_and_the_mutations_reach_both_halves(replay_base):
    with StoreReader(replay_base) as r:
        rep = replay_session(r, "s_1")
        inp = read_replay_input(r, "s_1")
    assert rep.cells_total == 6 and rep.cells_consumed == 5 and len(inp.executions) == 2 and inp.has_trace
    assert rep.diverged is None and rep.plans[-1].halt_kind == "runtime"


def test_a_plan_text_accepted_twice_is_parsed_once_and_runs_at_both_executions(tmp_path, monkeypatch):
    import flux.timemachine.plans as plans_mod

    store = tmp_path / "store"
    host = 'flow\n  adaptive_gather_1 = read({"path": "a.txt"})\n'  # not canonical JSON: parsed, not direct
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        write_turn(w, sid, "one", plan=host, cells=[cell("read", {"path": "a.txt"}, "A")])
        write_turn(w, sid, "two", plan=host, cells=[cell("read", {"path": "a.txt"}, "A")])
    calls: list[str] = []
    real = plans_mod.parse_stored_plan
    monkeypatch.setattr(plans_mod, "parse_stored_plan", lambda text: calls.append(text) or real(text))
    with StoreReader(store) as r:
        rep = replay_session(r, "last")
    # one parse for the two acceptances, and the plan runs at both executions
    assert calls == [host]
    assert [p.flow_key for p in rep.plans] == [rep.plans[0].flow_key] * 2
    assert rep.cells_total == 2 and rep.cells_consumed == 2 and rep.diverged is None and rep.faithful


# ------------------------------------------------------------------------------------------------
# Plans parsed as the replay reaches them: let go after their last run, refused as flux refuses.

def _host_store(tmp_path, plans: list[tuple[str, str, str]]) -> Path:
    """One turn per (op, path, content) plan, each with its one cell (no ledger rows). The argument
    is not canonical JSON (a space), so the plan is parsed, not taken by the direct path."""
    store = tmp_path / "store"
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        for i, (op, path, content) in enumerate(plans):
            plan = f'flow\n  adaptive_gather_{i} = {op}({{"path": "{path}"}})\n'
            write_turn(w, sid, f"t{i}", plan=plan, cells=[cell(op, {"path": path}, content)])
    return store


@pytest.mark.parametrize("streamed", [True, False])
@pytest.mark.parametrize("ledgered", [False, True])
def test_a_plan_is_let_go_after_its_last_run_and_parsed_no_earlier_than_needed(tmp_path, monkeypatch, ledgered,
                                                                               streamed):
    import gc
    import weakref

    import flux.timemachine.plans as plans_mod
    import flux.timemachine.replay as replay_mod
    from flux.lang.interpreter import Interpreter

    if ledgered:  # execution order from ledger rows: plan 0 runs twice (a re-run), the others once
        store = tmp_path / "store"
        with StoreWriter(store) as w:
            sid = w.create_session("mock")
            for t in range(3):
                tid = write_turn(w, sid, f"t{t}", cells=[], end=None)
                _ledgered(w, sid, tid, [f"p{t}"])
            tid = write_turn(w, sid, "again", cells=[], end=None)
            _ledgered(w, sid, tid, ["p0"])
    else:
        store = _host_store(tmp_path, [("read", f"f{i}", f"F{i}") for i in range(4)])
    refs: list[weakref.ref] = []
    real_parse = plans_mod.parse_stored_plan

    def parse(text):
        draft, key = real_parse(text)
        refs.append(weakref.ref(draft))
        return draft, key

    alive_at_run: list[int] = []
    real_run = Interpreter.run

    def run(self, draft, *a, **k):
        gc.collect()
        alive_at_run.append(sum(r() is not None for r in refs))
        return real_run(self, draft, *a, **k)

    monkeypatch.setattr(plans_mod, "parse_stored_plan", parse)
    monkeypatch.setattr(plans_mod, "_PARSE_CACHE", 0)  # (the cache would hold the last texts parsed)
    monkeypatch.setattr(Interpreter, "run", run)
    monkeypatch.setattr(replay_mod, "_STREAMED", streamed)
    import flux.timemachine.replay_stream as stream_mod
    monkeypatch.setattr(stream_mod, "_HELD_PLANS", 2)
    monkeypatch.setattr(stream_mod, "_PAUSE", 1)  # (one row read ahead: two held plans are enough)
    with StoreReader(store) as r:
        rep = replay_session(r, "last", detail=False)
    assert rep.faithful and len(rep.plans) == 4
    if ledgered and streamed:  # the stream holds the newest _HELD_PLANS plans (each parsed once, when read)
        assert len(alive_at_run) == 4 and max(alive_at_run) == 2
    elif ledgered:  # plan 0 is held until its second run, the others only for theirs
        assert alive_at_run == [1, 2, 2, 1]
    else:  # one plan alive at a time: the one running
        assert alive_at_run == [1, 1, 1, 1]


def _ledger_store(tmp_path, *, damaged_last: bool = False, unknown_op_last: bool = False,
                  diverge_first: bool = False) -> Path:
    store = tmp_path / "store"
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        tid = write_turn(w, sid, "one", cells=[], end=None)
        if diverge_first:  # the first plan's one cell answers another input: replay stops there
            text = 'flow\n  s0 = write({"path":"a","body":"x"})\n'
            draft = parse(text)
            w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=text), turn_id=tid)
            w.append(sid, cell("write", {"body": "x", "path": "zzz"}, "ok"))
            w.append(sid, Run(StatementCompleted(plan=flow_key(draft.name, draft.body), node=0,
                                                 stmt=stmt_hash16(draft.body[0]))))
        else:
            _ledgered(w, sid, tid, ["a"])
        tid = write_turn(w, sid, "two", cells=[], end=None)
        if damaged_last:
            w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source="flow\n  x = \n"), turn_id=tid)
        elif unknown_op_last:
            w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source='flow\n  s0 = erase({"path":"q"})\n'),
                     turn_id=tid)
        else:
            _ledgered(w, sid, tid, ["b"])
    return store


@pytest.mark.parametrize("case", ["damaged_and_no_such_turn", "damaged_and_unknown_op", "unknown_op_after_divergence"])
def test_refusals_are_flux_s_in_flux_s_order_when_plans_parse_late(tmp_path, case):
    if case == "damaged_and_no_such_turn":
        store, kw = _ledger_store(tmp_path, damaged_last=True), {"turn": 9}
        want = "no longer parses"
    elif case == "damaged_and_unknown_op":  # the first plan's op is unknown, a later plan is damaged
        store, kw = _ledger_store(tmp_path, damaged_last=True), {"catalog": OpCatalog([OpSpec("read", ("path",))])}
        want = "no longer parses"
    else:  # the first plan diverges and stops the replay; a later one names an op the catalog lacks
        store = _ledger_store(tmp_path, unknown_op_last=True, diverge_first=True)
        with StoreWriter(store) as w:  # the unknown-op plan is an execution (a ledger row names it)
            draft = parse('flow\n  s0 = erase({"path":"q"})\n')
            w.append("s_1", Run(StatementCompleted(plan=flow_key(draft.name, draft.body), node=0,
                                                   stmt=stmt_hash16(draft.body[0]))))
        kw = {"catalog": OpCatalog([OpSpec("write", ("path",))])}
        want = "unknown op `erase`"
    with StoreReader(store) as r:
        lazy = _outcome(lambda: replay_session(r, "s_1", kw.get("turn"), catalog=kw.get("catalog"), detail=False),
                        detail=False)
        eager = _outcome(lambda: replay_session(r, "s_1", kw.get("turn"), catalog=kw.get("catalog"),
                                                on_progress=lambda d, t: None))
    assert lazy == eager and lazy[0] == "error" and want in lazy[2]


def test_a_lean_tape_lets_go_of_served_cells_and_spent_index_entries():
    cells = [TapeCell("read", "h1", None, "A"), TapeCell("read", "h2", None, "B"), TapeCell("read", "h1", None, "C")]
    tape = ReplayTape(cells, lean=True)
    assert tape.find("read", "h1") == 0 and tape.take("read", "h1", 0).content == "A"
    assert tape.cells[0] is None and ("read", "h1") in tape._index  # cell 2 still answers h1
    assert tape.take("read", "h1", tape.find("read", "h1")).content == "C"
    assert tape.cells == [None, cells[1], None] and ("read", "h1") not in tape._index
    assert tape.find("read", "h1") is None and tape.log == [] and tape.requests == 2 and tape.unserved == 0
    with pytest.raises(ValueError):
        tape.copy()


def test_a_plan_s_rows_are_kept_while_it_may_run_again_and_its_revision_fast_forwards_alike(tmp_path):
    """K runs in full, runs again and halts at its second statement, then runs a third time: the
    halt latch's rows include the first run's, so the third run fast-forwards both statements. A
    replay that let K's rows go after its first run would run the second statement again (a miss)."""
    text = 'flow\n  s0 = write({"path":"a","body":"x"})\n  s1 = write({"path":"b","body":"x"})\n'
    draft = parse(text)
    key = flow_key(draft.name, draft.body)
    stmts = [stmt_hash16(n) for n in draft.body]
    store = tmp_path / "store"
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        for run, halt in ((0, False), (1, True), (2, None)):
            tid = write_turn(w, sid, f"t{run}", cells=[], end=None)
            w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=text), turn_id=tid)
            if halt is None:  # the revision: both statements fast-forwarded from the ledger
                for node in (0, 1):
                    w.append(sid, Run(StatementCompleted(plan=key, node=node, stmt=stmts[node], skipped=True)))
                continue
            w.append(sid, cell("write", {"body": "x", "path": "a"}, "ok"))
            w.append(sid, Run(StatementCompleted(plan=key, node=0, stmt=stmts[0], value=f"v_{run}a")))
            w.append(sid, cell("write", {"body": "x", "path": "b"}, "boom" if halt else "ok", is_error=halt))
            if halt:
                w.append(sid, Run(PlanHalted(plan=key, node=1, stmt=stmts[1], op="write", kind="runtime", error="boom")))
            else:
                w.append(sid, Run(StatementCompleted(plan=key, node=1, stmt=stmts[1], value=f"v_{run}b")))
    with StoreReader(store) as r:
        lazy = _outcome(lambda: replay_session(r, "s_1", detail=False), detail=False)
        eager = _outcome(lambda: replay_session(r, "s_1", on_progress=lambda d, t: None))
    assert lazy == _brief(eager)
    assert lazy[1]["cells_consumed"] == 4 and lazy[1]["diverged"] is None and len(lazy[1]["plans"]) == 3


@pytest.fixture(scope="module")
def host_base(tmp_path_factory) -> Path:
    """A session of three host plans, each with its step rows and cell (no ledger rows: the shape the
    streamed replay takes)."""
    d = tmp_path_factory.mktemp("host-rows") / "store"
    with StoreWriter(d) as w:
        sid = w.create_session("mock")
        tid = write_turn(w, sid, "one", end=None)
        for k, p in enumerate(["a", "b", "c"]):
            inp = {"path": p}
            ih = sha256_hex(canonical_json(inp))
            w.append(sid, PlanAttempted(step=k + 1, outcome="accepted",
                                        plan_source=f"flow\n  adaptive_gather_{k + 1} = read({canonical_json(inp)})\n"),
                     turn_id=tid)
            w.append(sid, Run(StepStarted(step=f"step_read_{ih[:16]}", op="read", input_hash=ih)))
            w.append(sid, cell("read", inp, f"content {p}"))
            w.append(sid, Run(StepSucceeded(step=f"step_read_{ih[:16]}", output=f"v_{k}")))
        from flux.store import TurnEnded
        w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
    return d


_CELL = ('{"kind":"run","data":{"event":"op_recorded","seq":0,"step":"s","op":"read","input_hash":"'
         + sha256_hex(canonical_json({"path": "a"})) + '","content":%s}}')


# (which row, what is written into it): rows the read's fast paths must send on to the full path
# (a lone surrogate the one rule rewrites, a sequence number that is not an integer) or may pass
# straight through (a step row: replay reads none of its values), each decoded as every reader does.
@pytest.mark.parametrize("row,change", [
    ("cell", ("payload", _CELL % '"A \\ud83d B"')),
    ("cell", ("payload", _CELL.replace('"op":"read"', '"op":"re\\udc00ad"') % '"x"')),
    ("cell", ("payload", _CELL % '"caf\\u00e9 \\\\u"')),
    ("plan", ("payload", '{"kind":"plan_attempted","data":{"step":1,"outcome":"accepted",'
                         '"plan_source":"flow\\n  adaptive_gather_1 = read({\\"path\\":\\"\\ud800\\"})\\n"}}')),
    ("plan", ("payload", '{"kind":"plan_attempted","data":{"step":1,"outcome":"accepted",'
                         '"plan_source":"flow\\n  adaptive_gather_1 = read({\\"path\\":\\"a\\"})\\n","error":"\\udfff"}}')),
    ("step", ("payload", '{"kind":"run","data":{"event":"step_started","step":"\\ud800","op":"read"}}')),
    ("step", ("payload", '{"kind":"run","data":{"event":"step_started","step":["x"],"op":7}}')),
    ("step", ("stream_seq", "9x")),
    ("cell", ("stream_seq", 2.5)),
    ("plan", ("stream_seq", "1a")),
    ("cell", ("kind", b"run")),
])
def test_rows_off_the_fast_paths_read_as_every_reader_reads_them(host_base, tmp_path, row, change):
    store = tmp_path / "store"
    shutil.copytree(host_base, store)
    con = sqlite3.connect(store / "events.db", isolation_level=None)
    pick = {"cell": "payload LIKE '%op_recorded%'", "plan": "kind = 'plan_attempted'",
            "step": "payload LIKE '%step_started%'"}[row]
    (gs,) = con.execute(f"SELECT global_seq FROM events WHERE {pick} ORDER BY global_seq LIMIT 1").fetchone()
    col, value = change
    con.execute(f"UPDATE events SET {col} = ? WHERE global_seq = ?", (value, gs))
    con.close()
    full, fast = StoreReader(store), StoreReader(store)
    try:
        _same_input(read_replay_input(fast, "s_1"), ReplayInput.of_detail(load_session(full, "s_1", kinds=TRACE_KINDS)))
        assert fast.skipped_rows == full.skipped_rows
        full.skipped_rows = 0
        eager = _outcome(lambda: replay_detail(load_session(full, "s_1", kinds=TRACE_KINDS)))
        for detail in (False, True):
            fast.skipped_rows = 0
            got = _outcome(lambda: replay_session(fast, "s_1", detail=detail), detail=detail)
            assert got == (eager if detail else _brief(eager))
            assert fast.skipped_rows == full.skipped_rows
    finally:
        full.close()
        fast.close()
