"""The streamed lean replay (flux.timemachine.replay_stream, issue 10 item 2: memory flat with the
session's length) reports exactly what the classic replay (read everything, then replay) reports,
on generated and corrupted stores; it is the path `flux replay` takes; and what it lets go of is
let go."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flux.timemachine.replay as R
import flux.timemachine.replay_stream as S
from flux.store import PlanAttempted, StoreReader, StoreWriter, TurnEnded
from flux.timemachine.replay import replay_session
from flux.timemachine.replay_direct import host_call
from flux.timemachine.serve import gc_paused
from tests.core.test_replay_direct import _CATALOG, _SCENARIOS, _host, _plan, _write_session
from tests.core.test_replay_fastpath import _mutate, _outcome
from tests.helpers import cell


def _streamed_and_classic(reader: StoreReader, sid: str, catalog=None):
    """(the lean report of the streamed path or None when it stood aside, what replay_session gives,
    what the classic path gives) — with the reader's skipped-row count each added."""
    skipped = reader.skipped_rows
    with gc_paused():
        try:
            direct = S.replay_streamed(reader, sid, catalog)
        except Exception as e:  # SessionNotFound only
            direct = e
    counted = reader.skipped_rows - skipped
    got = _outcome(lambda: replay_session(reader, sid, catalog=catalog, detail=False), detail=False)
    R._STREAMED = False
    try:
        skipped = reader.skipped_rows
        want = _outcome(lambda: replay_session(reader, sid, catalog=catalog, detail=False), detail=False)
        classic_counted = reader.skipped_rows - skipped
    finally:
        R._STREAMED = True
    if direct is not None and not isinstance(direct, Exception):
        assert counted == classic_counted  # the skipped rows are counted as the classic read counts them
    return direct, got, want


def _unledgered(plan):
    kind, stmts, outcomes, _ledgered = plan
    return kind, stmts, outcomes, False


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("stream") / "store"
    with StoreWriter(d) as w:
        yield d, w


_TAKEN: list[bool] = []


@settings(max_examples=int(os.environ.get("FLUX_STREAM_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(st.tuples(st.lists(_plan().map(_unledgered), min_size=1, max_size=5), st.booleans()),
                      min_size=1, max_size=3),
       ledgered=st.sampled_from([False] * 5 + [True]), corrupt=st.sampled_from([False] * 3 + [True]),
       catalog=st.sampled_from([None] * 3 + [_CATALOG]), data=st.data())
def _streamed_examples(shared_store, turns, ledgered, corrupt, catalog,
                                                                      data):
    """Plans reading earlier bindings (placeholders) across plans and turns, halts and their
    fast-forwards, repeats, misses, truncated and denied cells, unended turns (the tape's end),
    catalogs lacking an op, corrupted rows: the same report or the same error."""
    store, writer = shared_store
    if ledgered:  # one plan records its statement rows: the executions come from the ledger (classic)
        plans, ended = turns[0]
        turns = [([(k, s, o, True) for k, s, o, _l in plans], ended)] + turns[1:]
    sid = _write_session(writer, turns, False)
    _assert_streams_as_classic(store, sid, catalog, corrupt, data, _TAKEN)


def _assert_streams_as_classic(store, sid, catalog, corrupt, data, taken) -> None:
    """The differentials' check: session ``sid`` (a corrupted copy when ``corrupt``) replays streamed
    as the classic replay replays it; ``taken`` counts whether the stream took it."""
    if corrupt:
        _mutate(store, data, stream=sid)
    pause = data.draw(st.sampled_from([1, 2, S._PAUSE]), label="rows a pull reads ahead")
    default, S._PAUSE = S._PAUSE, pause
    try:
        with StoreReader(store) as r:
            direct, got, want = _streamed_and_classic(r, sid, catalog)
    finally:
        S._PAUSE = default
    assert got == want
    if direct is not None:
        assert _outcome(lambda: direct, detail=False) == want
    taken.append(direct is not None)


def test_the_streamed_replay_reports_what_the_classic_replay_reports(shared_store):
    """The differential above, then its coverage: at least a third of its examples streamed (one
    test, so it holds whatever else runs or in what order)."""
    _TAKEN.clear()
    _streamed_examples(shared_store=shared_store)
    assert len(_TAKEN) >= 20 and sum(_TAKEN) >= len(_TAKEN) // 3


# Scenarios the classic replay answers in a particular way; each streamed (or standing aside) alike.
_P = {"path": "a"}
_STREAM_SCENARIOS = {
    **_SCENARIOS,
    # a host plan completes (its row and value let go), then halts: it is the latch, and the third
    # run fast-forwards over the FIRST run's row with the first run's value — the stream stands aside
    "ok-halt-again": [_host("adaptive_gather_1", "read", _P), _host("adaptive_gather_1", "read", _P, "error"),
                      _host("adaptive_gather_1", "read", _P), _host("adaptive_gather_2", "read", {"path": "{adaptive_gather_1}"})],
    # ... the same when the failed try is the same plan spelled otherwise (parsed, not direct)
    "ok-halt-again-spelled": [_host("adaptive_gather_1", "read", _P),
                              _host("adaptive_gather_1", "read", _P, "error", "spaced"),
                              _host("adaptive_gather_1", "read", _P),
                              _host("adaptive_gather_2", "read", {"path": "{adaptive_gather_1}"})],
    # a binding made in turn 1 is read by a placeholder two plans and a turn later
    "binding-across-turns": [_host("adaptive_gather_1", "read", _P), _host("adaptive_gather_2", "read", {"path": "b"})],
}


@pytest.mark.parametrize("name", sorted(_STREAM_SCENARIOS))
def test_scenarios_stream_as_the_classic_replay_runs_them(shared_store, name):
    store, writer = shared_store
    turns = [([_unledgered(p) for p in _STREAM_SCENARIOS[name]], name != "halts")]
    if name == "binding-across-turns":
        turns.append(([_host("adaptive_gather_3", "grep", {"path": "{adaptive_gather_1}"}),
                       ("multi", [("adaptive_gather_4", "read", {"path": "{adaptive_gather_3}"}, "spaced"),
                                  ("adaptive_gather_5", "read", {"path": "{adaptive_gather_2}"}, "canonical")],
                        ["ok", "ok"], False)], True))
    sid = _write_session(writer, turns, False)
    with StoreReader(store) as r:
        direct, got, want = _streamed_and_classic(r, sid)
    assert got == want and want[0] == "report"
    if name.startswith("ok-halt-again"):
        assert direct is None  # the first run's row was let go: only the classic replay has it
        # the third run is fast-forwarded and rebinds the FIRST run's value, which the fourth
        # reads: its input is not the recorded one (that read the third's), so it misses
        assert want[1]["cells_consumed"] == 2 and "no matching unconsumed" in want[1]["diverged"]
        assert [p.halt_kind for p in want[5]] == [None, "runtime", None, "runtime"]
    elif name in ("binding-across-turns", "placeholder", "fast-forward", "rebind", "checkpoint"):
        assert direct is not None and _outcome(lambda: direct, detail=False) == want
    if name == "binding-across-turns":  # every binding was seen where it was read: the recording replays whole
        assert want[1]["diverged"] is None and want[1]["cells_consumed"] == want[1]["cells_total"] == 5


def test_flux_replay_s_path_streams_and_holds_neither_the_cells_nor_the_values(tmp_path, monkeypatch):
    """200 host plans (every 10th halts, every plan's input reads the previous binding): the lean
    replay streams; the tape never holds more unserved cells than the plans one pull reads ahead
    (``_PAUSE``) recorded, and the interpreter keeps no value of a completed host plan."""
    store = tmp_path / "store"
    with StoreWriter(store) as w, w.transaction():
        sid = w.create_session("mock")
        for t in range(2):
            tid = w.begin_turn(sid, f"turn {t}", "mock")
            for k in range(100):
                name = f"adaptive_gather_{k % 7}"
                inp = {"path": f"{t}/{k}", "prev": prev if t or k else "start"}
                text = 'flow\n  %s = read({"path":"%s/%d","prev":"%s"})\n' % (
                    name, t, k, "{%s}" % prev_name if t or k else "start")
                w.append(sid, PlanAttempted(step=k + 1, outcome="accepted", plan_source=text), turn_id=tid)
                bad = k % 10 == 9
                content = f"c{t}-{k}"
                w.append(sid, cell("read", inp, content, is_error=bad))
                if not bad:
                    prev, prev_name = content, name
            w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
    held: list[int] = []
    interps: list = []
    real_append, real_interp = S.StreamTape.append, S.Interpreter

    def append(self, c):
        real_append(self, c)
        held.append(sum(x is not None for x in self.cells))

    class Spy(real_interp):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            interps.append(self)
    monkeypatch.setattr(S.StreamTape, "append", append)
    monkeypatch.setattr(S, "Interpreter", Spy)
    with StoreReader(store) as r:
        direct, got, want = _streamed_and_classic(r, "s_1")
    assert direct is not None and got == want and want[1]["cells_consumed"] == 200 and want[1]["diverged"] is None
    assert max(held) <= S._PAUSE + 1
    values = interps[0].values
    # only the values the halt latch may read are kept: those of plans run while one was open
    assert len(values) <= 20, len(values)


def test_a_session_with_ledger_rows_streams_and_one_with_nothing_to_replay_takes_the_classic_path(shared_store):
    store, writer = shared_store
    sid = _write_session(writer, [([_host("a", "read", _P, ledgered=True)], True)], False)
    empty = writer.create_session("mock")
    with StoreReader(store) as r:
        direct, got, want = _streamed_and_classic(r, sid)
        assert direct is not None and got == want and _outcome(lambda: direct, detail=False) == want
        direct, got, want = _streamed_and_classic(r, empty)
        assert direct is None and got == want and want[0] == "error"


# ------------------------------------------------------------------------------------------------
# Sessions as flux records them when it runs plans resumably: statement rows (statement_completed,
# plan_halted) order the executions (§3.7); failed calls tried again; redacted plans (stand-ins);
# executions with no plan; stray ledger rows (re-runs, resumes).

def _ledger_rows(draft, key, outcomes, halted_rows):
    """The statement rows a resumable run of ``draft`` writes for ``outcomes`` (ok ... then a failure)."""
    from flux.lang import ast as A
    from flux.lang.hashes import stmt_hash16
    from flux.store import PlanHalted, StatementCompleted

    rows = []
    binds = [i for i, n in enumerate(draft.body) if isinstance(n, A.Bind)]
    for j, (i, outcome) in enumerate(zip(binds, outcomes)):
        node = draft.body[i]
        if outcome == "ok":
            rows.append(StatementCompleted(plan=key, node=i, stmt=stmt_hash16(node), value=f"v_{j}"))
        else:
            if halted_rows:
                rows.append(PlanHalted(plan=key, node=i, stmt=stmt_hash16(node), op=node.value.op, kind="runtime",
                                       error="failed"))
            break
    return rows


def _write_resumable(w: StoreWriter, turns, extras) -> str:
    """Like test_replay_direct's _write_session, every plan ledgered (plan_halted rows included), and
    per plan an extra: "retry" (the same plan again right after), "redacted" (its stored text has a
    redaction marker, its rows the key of the text it ran), "noplan" (rows of a key no plan has),
    "stray" (a stray statement row of the plan: a re-run or a resume), "none"."""
    import json as _json

    from flux.canonical import canonical_json
    from flux.lang import ast as A
    from flux.lang.hashes import flow_key
    from flux.lang.interpreter import interpolate
    from flux.lang.parser import parse
    from flux.store import Run, StatementCompleted
    from tests.core.test_replay_direct import _plan_text

    bound: dict = {}
    with w.transaction():
        sid = w.create_session("mock")
        n = 0
        for t, (plans, ended) in enumerate(turns):
            tid = w.begin_turn(sid, f"turn {t}", "mock")
            for k, (kind, stmts, outcomes, _l) in enumerate(plans):
                extra = extras[n % len(extras)]
                n += 1
                for attempt in range(2 if extra == "retry" else 1):
                    text = _plan_text(kind, stmts)
                    draft = parse(text)
                    key = flow_key(draft.name, draft.body)
                    stored = text.replace('"a"', '"[redacted]"', 1) if extra == "redacted" else text
                    w.append(sid, PlanAttempted(step=k + 1, outcome="accepted", plan_source=stored), turn_id=tid)
                    outs = outcomes if attempt == 0 else ["ok"] * len(outcomes)
                    binds = [x for x in draft.body if isinstance(x, A.Bind)]
                    for i, (node, outcome) in enumerate(zip(binds, outs)):
                        value = _json.loads(canonical_json(node.value.args[0].value))
                        inp = {k2: interpolate(v, bound) if isinstance(v, str) else v for k2, v in value.items()}
                        if outcome == "missing":
                            break
                        if outcome == "wrong":
                            inp = {"other": 1}
                        w.append(sid, cell(node.value.op, inp, f"out-{node.name}-{t}-{k}-{i}-{attempt}",
                                           is_error=outcome == "error", denied=outcome == "denied",
                                           truncated=outcome == "truncated"))
                        if outcome != "ok":
                            break
                        bound[node.name] = f"out-{node.name}-{t}-{k}-{i}-{attempt}"
                    for row in _ledger_rows(draft, key, outs, halted_rows=True):
                        w.append(sid, Run(row))
                    if extra == "noplan":
                        w.append(sid, Run(StatementCompleted(plan=f"h:{n:016x}", node=0, stmt="0" * 16)))
                    elif extra == "stray":
                        w.append(sid, Run(StatementCompleted(plan=key, node=0, stmt="1" * 16, skipped=bool(n % 2))))
            if ended:
                w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
    return sid


_EXTRAS = st.lists(st.sampled_from(["none"] * 4 + ["retry", "retry", "redacted", "noplan", "stray"]), min_size=1,
                   max_size=6)
_LEDGER_TAKEN: list[bool] = []


@settings(max_examples=int(os.environ.get("FLUX_STREAM_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(st.tuples(st.lists(_plan(), min_size=1, max_size=5), st.booleans()), min_size=1, max_size=3),
       extras=_EXTRAS, corrupt=st.sampled_from([False] * 3 + [True]),
       catalog=st.sampled_from([None] * 3 + [_CATALOG]), data=st.data())
def _resumable_streamed_examples(shared_store, turns, extras, corrupt,
                                                                               catalog, data):
    store, writer = shared_store
    sid = _write_resumable(writer, turns, extras)
    _assert_streams_as_classic(store, sid, catalog, corrupt, data, _LEDGER_TAKEN)


def test_a_resumably_recorded_session_streams_as_the_classic_replay_replays_it(shared_store):
    """The differential above, then its coverage: at least a third of its examples streamed (one
    test, so it holds whatever else runs or in what order)."""
    _LEDGER_TAKEN.clear()
    _resumable_streamed_examples(shared_store=shared_store)
    assert len(_LEDGER_TAKEN) >= 20 and sum(_LEDGER_TAKEN) >= len(_LEDGER_TAKEN) // 3


# Each guard of the stream, by a session that needs it: the stream either gives the classic report
# itself (``direct`` not None) or stands aside — and which one is asserted.

def _multi(stmts, outcomes):
    return "multi", [(n, op, v, "canonical") for n, op, v in stmts], outcomes, False


_S0 = ("adaptive_gather_1", "read", _P)
_GUARDS = {
    # the first plan's cell was not recorded, the second's (same plan) was: the first takes it, as
    # the whole tape would give it — the tape reads on past the rows scanned so far
    # (then the second misses: a divergence, the third plan's cell left)
    "read-on-at-a-miss": ([_host(*_S0, "missing"), _host(*_S0), _host("adaptive_gather_2", "read", {"path": "b"})],
                          True),
    # L halts at its second statement; P (L's first statement) is fast-forwarded over L's row while
    # L is the latch; L halts at its first statement, so its latch row is the FIRST run's, and P's
    # fast-forward reads that row's value again: a value named by a latch row is never let go
    "latch-row-value-kept": ([_multi([_S0, ("adaptive_gather_2", "grep", {"path": "b"})], ["ok", "error"]),
                              _host(*_S0, "missing"),  # (fast-forwarded: its cell would be left over)
                              _multi([_S0, ("adaptive_gather_2", "grep", {"path": "b"})], ["error"]),
                              _host(*_S0, "missing"), _host("adaptive_gather_3", "read", {"path": "{adaptive_gather_1}"})],
                             True),
}


@pytest.mark.parametrize("name", sorted(_GUARDS))
def test_each_guard_of_the_stream_by_a_session_that_needs_it(shared_store, name):
    store, writer = shared_store
    plans, ended = _GUARDS[name]
    sid = _write_session(writer, [(plans, ended)], False)
    with StoreReader(store) as r:
        direct, got, want = _streamed_and_classic(r, sid)
    assert got == want and want[0] == "report"
    assert direct is not None and _outcome(lambda: direct, detail=False) == want
    if name == "read-on-at-a-miss":
        assert want[1]["cells_consumed"] == 1 and want[5][0].halted is None
    else:  # the last plan reads the value L's first run bound, rebound by both fast-forwards: as recorded
        assert [p.halt_kind for p in want[5]] == ["runtime", None, "runtime", None, None]
        assert want[1]["diverged"] is None and want[1]["cells_consumed"] == want[1]["cells_total"] == 4


@pytest.mark.parametrize("how", ["earlier_turn_plan_row", "turns_out_of_order"])
def test_a_plan_order_the_turn_fold_would_change_takes_the_classic_path(tmp_path, how):
    """Two turns, each with one plan; the stream meets them in an order the turn fold does not run
    them in (a plan row of the earlier turn after the newer turn's, or turn ids out of order)."""
    import sqlite3

    store = tmp_path / "store"
    a = 'flow\n  adaptive_gather_1 = read({"path":"a"})\n'
    b = 'flow\n  adaptive_gather_2 = read({"path":"b"})\n'
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        t1 = w.begin_turn(sid, "one", "mock")
        if how == "turns_out_of_order":
            w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=a), turn_id=t1)
            w.append(sid, cell("read", {"path": "a"}, "A"))
        t2 = w.begin_turn(sid, "two", "mock")
        w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=b), turn_id=t2)
        w.append(sid, cell("read", {"path": "b"}, "B"))
        if how == "earlier_turn_plan_row":
            w.append(sid, PlanAttempted(step=2, outcome="accepted", plan_source=a), turn_id=t1)
            w.append(sid, cell("read", {"path": "a"}, "A"))
    if how == "turns_out_of_order":  # the second turn's id below the first's: the fold runs it first
        con = sqlite3.connect(store / "events.db", isolation_level=None)
        con.execute("UPDATE events SET global_seq = -7 WHERE global_seq = ?", (t2,))
        con.execute("UPDATE events SET turn_id = -7 WHERE turn_id = ?", (t2,))
        con.close()
    with StoreReader(store) as r:
        direct, got, want = _streamed_and_classic(r, sid)
    assert direct is None and got == want
    assert [p.flow_key for p in want[5]] != [] and want[1]["cells_consumed"] == 2
    keys = [p.flow_key for p in want[5]]
    from flux.timemachine.replay_direct import host_call
    assert keys == ([host_call(a).flow_key, host_call(b).flow_key] if how == "earlier_turn_plan_row"
                    else [host_call(b).flow_key, host_call(a).flow_key])


@pytest.mark.parametrize("late", ["damaged", "unknown_op"])
def test_a_plan_a_divergence_kept_from_running_is_still_checked(tmp_path, late):
    """flux refuses a damaged plan (or, with a catalog, an unknown op) anywhere in the session, even
    after the replay diverged: the stream reads the plans it did not reach and stands aside."""
    from flux.lang.catalog import OpCatalog, OpSpec

    store = tmp_path / "store"
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        tid = w.begin_turn(sid, "one", "mock")
        w.append(sid, PlanAttempted(step=1, outcome="accepted",
                                    plan_source='flow\n  adaptive_gather_1 = read({"path":"a"})\n'), turn_id=tid)
        w.append(sid, cell("read", {"path": "other"}, "A"))  # not the plan's input: a miss
        late_text = "flow\n  x = \n" if late == "damaged" else 'flow\n  adaptive_gather_2 = erase({"path":"b"})\n'
        w.append(sid, PlanAttempted(step=2, outcome="accepted", plan_source=late_text), turn_id=tid)
        w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
    catalog = OpCatalog([OpSpec("read")]) if late == "unknown_op" else None
    with StoreReader(store) as r:
        direct, got, want = _streamed_and_classic(r, sid, catalog)
    assert direct is None and got == want and want[0] == "error" and want[1] == "NotReplayable"


_KEYS = st.one_of(st.integers(0, 2 ** 64 - 1).map(lambda n: f"h:{n:016x}"),
                  st.sampled_from(["h:ABCDEF0123456789", "h:+123456789abcde", "h:1_23456789abcdef", "h:0123", "", "x"]),
                  st.text(max_size=20))
_REPLAYED = st.one_of(st.builds(R.ReplayedPlan, _KEYS),
                      st.builds(R.ReplayedPlan, _KEYS, st.none() | st.text(max_size=5),
                                st.sampled_from([None, "runtime", "tape_end"]), st.none() | st.integers(0, 3)))


@settings(max_examples=150, deadline=None)
@given(plans=st.lists(_REPLAYED, max_size=12), last=_REPLAYED, data=st.data())
def test_a_plan_log_reads_as_the_list_of_plans_it_keeps(plans, last, data):
    log = R.PlanLog()
    for p in plans:
        if data.draw(st.booleans()) and p.halted is None and p.halt_kind is None and p.node is None:
            log.ran(p.flow_key)
        else:
            log.append(p)
    assert log == plans and plans == log and list(log) == plans and len(log) == len(plans)
    assert [log[i] for i in range(-len(plans), len(plans))] == plans + plans
    assert log[1:-1] == plans[1:-1] and log[::2] == plans[::2]
    with pytest.raises(IndexError):
        log[len(plans)]
    if plans:
        log[-1] = last
        plans[-1] = last
        assert log == plans and log[-1] == last
    assert log != plans + [last]
    rep = R.ReplayReport("s_1", log, 0, 0, None, 0)
    assert rep.to_json() == R.ReplayReport("s_1", plans, 0, 0, None, 0).to_json()
    assert rep.summary_lines() == R.ReplayReport("s_1", plans, 0, 0, None, 0).summary_lines()


@given(st.lists(st.integers(0, 2 ** 40)), st.lists(st.integers(0, 2 ** 40)))
def test_a_served_log_equals_the_list_of_the_same_indices(a, b):
    log = S.ServedLog(a)
    assert (log == a) and (a == log) and not (log != a) and (log == list(a)) and list(log) == a
    assert (log == b) == (a == b) and (log != b) == (a != b) and (b == log) == (a == b)


# ------------------------------------------------------------------------------------------------
# The guards of the ledger-ordered stream (and of a failed call tried again), each by a fixed
# session: the stream either answers (and equals the classic replay) or stands aside, as asserted.

def _hc(path, name="adaptive_gather_1", op="read"):
    return 'flow\n  %s = %s({"path":"%s"})\n' % (name, op, path)


def _key_stmt(text):
    from flux.timemachine.replay_direct import host_call
    hc = host_call(text)
    return hc.flow_key, hc.stmt


def _write_script(w, script):
    """A session from (what, ...) steps: ("turn",), ("plan", text), ("cell", path, content[, error]),
    ("done", text), ("halt", text), ("row", key) (a statement row of a key no plan has)."""
    from flux.store import PlanHalted, Run, StatementCompleted

    with w.transaction():
        sid = w.create_session("mock")
        tid = None
        for step in script:
            what = step[0]
            if what == "turn":
                tid = w.begin_turn(sid, "t", "mock")
            elif what == "plan":
                w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=step[1]), turn_id=tid)
            elif what == "cell":
                w.append(sid, cell("read", {"path": step[1]}, step[2], is_error=len(step) > 3))
            elif what == "done":
                key, stmt = _key_stmt(step[1])
                w.append(sid, Run(StatementCompleted(plan=key, node=0, stmt=stmt, value="v_1")))
            elif what == "halt":
                key, stmt = _key_stmt(step[1])
                w.append(sid, Run(PlanHalted(plan=key, node=0, stmt=stmt, op="read", kind="runtime", error="x")))
            elif what == "row":
                w.append(sid, Run(StatementCompleted(plan=step[1], node=0, stmt="0" * 16)))
            elif what == "row0":  # node 0's row of a parsed (multi-statement) plan
                from flux.lang.hashes import stmt_hash16
                from flux.model.stored_plan import parse_stored_plan
                draft, key = parse_stored_plan(step[1])
                w.append(sid, Run(StatementCompleted(plan=key, node=0, stmt=stmt_hash16(draft.body[0]), value="v_1")))
            elif what == "end":
                w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
    return sid


_A, _B, _C = _hc("a"), _hc("b"), _hc("c")
_RED = _hc("[redacted]")
_M = 'flow\n  x = read({"path":"m1"})\n  y = read({"path":"m2"})\n'
_LEDGER_GUARDS = {
    # a plan accepted, run and recorded with its rows: the stream answers
    "ledgered": (True, [("turn",), ("plan", _A), ("cell", "a", "A"), ("done", _A), ("plan", _B), ("cell", "b", "B"),
                        ("done", _B)]),
    # an execution of a plan accepted long before (let go from the newest held plans): stand aside
    "held-plan-let-go": (False, [("turn",), ("plan", _A), ("cell", "a", "A"), ("done", _A), ("plan", _B),
                                 ("cell", "b", "B"), ("done", _B), ("plan", _C), ("cell", "c", "C"), ("done", _C),
                                 ("cell", "a", "A2"), ("done", _A)]),
    # an execution no plan accepted so far has, whose plan is accepted later: stand aside
    "plan-after-its-execution": (False, [("turn",), ("cell", "a", "A"), ("done", _A), ("plan", _B), ("cell", "b", "B"),
                                         ("done", _B), ("plan", _C), ("cell", "c", "C"), ("done", _C), ("plan", _A)]),
    # an execution with no plan: a missing source, and a redacted plan stands in for the next one
    "missing-and-standin": (True, [("turn",), ("plan", _A), ("cell", "a", "A"), ("done", _A), ("row", "h:00000000000000aa"),
                                   ("plan", _RED), ("cell", "[redacted]", "R"), ("row", "h:00000000000000bb")]),
    # an execution left without a stand-in, then a redacted plan the classic replay pairs with it
    "standin-accepted-late": (False, [("turn",), ("plan", _A), ("cell", "a", "A"), ("done", _A),
                                      ("row", "h:00000000000000aa"), ("plan", _B), ("cell", "b", "B"), ("done", _B),
                                      ("plan", _C), ("cell", "c", "C"), ("done", _C), ("plan", _RED),
                                      ("row", "h:00000000000000bb")]),
    # a redacted plan paired as a stand-in whose own key runs later: no stand-in after all
    # (an unserved cell at the end: not the tape's end)
    "standin-that-runs": (False, [("turn",), ("plan", _RED), ("row", "h:00000000000000aa"),
                                  ("cell", "[redacted]", "R"), ("done", _RED), ("cell", "z", "Z")]),
    # an execution left without a stand-in, and a redacted plan accepted well after it that no other
    # execution takes: the classic replay pairs them (it pairs over the whole session)
    "standin-left-unpaired": (False, [("turn",), ("plan", _A), ("cell", "a", "A"), ("done", _A),
                                      ("row", "h:00000000000000aa"), ("plan", _B), ("cell", "b", "B"), ("done", _B),
                                      ("plan", _C), ("cell", "c", "C"), ("done", _C), ("plan", _RED),
                                      ("cell", "z", "Z")]),
    # a redacted plan whose key ran, accepted again: still no stand-in (a later execution is missing)
    "redacted-plan-that-ran-accepted-again": (True, [("turn",), ("plan", _RED), ("cell", "[redacted]", "R"),
                                                     ("done", _RED), ("plan", _B), ("cell", "b", "B"), ("done", _B),
                                                     ("plan", _C), ("cell", "c", "C"), ("done", _C), ("plan", _RED),
                                                     ("row", "h:00000000000000aa"), ("cell", "z", "Z")]),
    # ledger rows after plans ran in acceptance order (a batch turn, then a resumable one): stand aside
    "batch-then-resumable": (False, [("turn",), ("plan", _A), ("cell", "a", "A"), ("plan", _B), ("cell", "b", "B"),
                                     ("plan", _C), ("cell", "c", "C"), ("done", _C)]),
    # the recording stops inside the newest turn, which never ended: the tape's end, not a divergence
    # (ledger order: a two-statement plan killed after its first statement's row)
    "tape-end": (True, [("turn",), ("plan", _A), ("cell", "a", "A"), ("done", _A), ("plan", _M), ("cell", "m1", "M1"),
                        ("row0", _M)]),
    "tape-end-batch": (True, [("turn",), ("plan", _A), ("cell", "a", "A"), ("plan", _B)]),
    # ... but a turn that ended, or a last plan of an earlier turn, diverged
    "tape-end-turn-ended": (True, [("turn",), ("plan", _A), ("cell", "a", "A"), ("done", _A), ("plan", _M),
                                   ("cell", "m1", "M1"), ("row0", _M), ("end",)]),
    "tape-end-batch-turn-ended": (True, [("turn",), ("plan", _A), ("cell", "a", "A"), ("plan", _B), ("end",)]),
    "tape-end-older-turn": (True, [("turn",), ("plan", _A), ("cell", "a", "A"), ("plan", _B), ("turn",)]),
    "tape-end-older-turn-ledger": (True, [("turn",), ("plan", _A), ("cell", "a", "A"), ("done", _A), ("plan", _M),
                                          ("cell", "m1", "M1"), ("row0", _M), ("turn",)]),
    # a failed call tried again on the same input (its first try): streams
    "retry": (True, [("turn",), ("plan", _A), ("cell", "a", "A", "error"), ("halt", _A), ("plan", _A),
                     ("cell", "a", "A2"), ("done", _A), ("plan", _B), ("cell", "b", "B"), ("done", _B)]),
}


@pytest.mark.parametrize("name", sorted(_LEDGER_GUARDS))
def test_each_guard_of_the_ledger_ordered_stream_by_a_session_that_needs_it(tmp_path, monkeypatch, name):
    monkeypatch.setattr(S, "_HELD_PLANS", 2)
    monkeypatch.setattr(S, "_PAUSE", 1)  # (the stream reading one row ahead: what each guard is for)
    streams, script = _LEDGER_GUARDS[name]
    with StoreWriter(tmp_path / "store") as w:
        sid = _write_script(w, script)
    with StoreReader(tmp_path / "store") as r:
        direct, got, want = _streamed_and_classic(r, sid)
    assert got == want and want[0] == "report"
    assert (direct is not None) == streams, name
    if direct is not None:
        assert _outcome(lambda: direct, detail=False) == want
    js = want[1]
    if name == "missing-and-standin":
        assert js["missing_sources"] == 1 and want[6] == 1 and js["cells_consumed"] == 2
    elif name == "retry":
        assert js["diverged"] is None and js["cells_consumed"] == 3 and [p.halt_kind for p in want[5]] == ["runtime", None, None]
    elif name.startswith("tape-end"):
        end = want[7]
        if name in ("tape-end", "tape-end-batch"):
            assert end is not None and js["diverged"] is None and end.turn == 1 and end.node == (name == "tape-end")
        else:
            assert end is None and js["diverged"] is not None
    elif name == "held-plan-let-go":
        assert js["missing_sources"] == 0 and len(js["plans"]) == 4
    elif name == "plan-after-its-execution":
        assert js["missing_sources"] == 0
    elif name == "redacted-plan-that-ran-accepted-again":
        assert want[6] == 0 and js["missing_sources"] == 1 and js["cells_consumed"] == 3
    elif name == "standin-left-unpaired":
        assert want[6] == 1 and js["diverged"] is not None
    elif name == "standin-accepted-late":  # the first execution with no plan gets the stand-in (and diverges)
        assert want[6] == 1 and js["missing_sources"] == 0 and js["diverged"] is not None


def test_a_retried_failed_call_in_a_long_session_streams_once_it_ran_before_it_stands_aside(tmp_path):
    """Many failed calls each tried again (never run before): the stream answers; then one call that
    completed earlier fails and is tried again (its fast-forward reads the earlier row): stand aside."""
    script = [("turn",)]
    for i in range(30):
        t = _hc(f"p{i}")
        script += [("plan", t), ("cell", f"p{i}", "E", "error"), ("halt", t), ("plan", t), ("cell", f"p{i}", "ok"),
                   ("done", t)]
    q = _hc("q")
    script = [("turn",), ("plan", q), ("cell", "q", "Q"), ("done", q)] + script[1:]  # q runs through: let go
    with StoreWriter(tmp_path / "store") as w:
        sid = _write_script(w, script)
        again = _write_script(w, script + [("plan", q), ("cell", "q", "E", "error"), ("halt", q),
                                           ("plan", q), ("cell", "q", "Q2"), ("done", q)])
    with StoreReader(tmp_path / "store") as r:
        direct, got, want = _streamed_and_classic(r, sid)
        assert direct is not None and got == want and want[1]["cells_consumed"] == 61
        direct, got, want = _streamed_and_classic(r, again)
        # the retry fast-forwards over q's first row (its value rebound): its own cell is left
        assert direct is None and got == want and want[1]["cells_consumed"] == 62 and want[1]["cells_total"] == 63


def test_the_stores_flux_writes_take_the_streamed_path(demo_master, tmp_path):
    """A copy of the real fixture (written by flux 0.26.0) and every demo session — statement rows,
    interrupted turns and all — are answered by the stream, exactly as the classic replay answers."""
    from tests.helpers import copy_fixture

    fx = copy_fixture(tmp_path / "fx")
    for store in (fx, demo_master):
        with StoreReader(store) as r:
            for row in r.list_sessions():
                direct, got, want = _streamed_and_classic(r, row.id)
                assert direct is not None and got == want and _outcome(lambda: direct, detail=False) == want, row.id


@pytest.mark.parametrize("newest", ["accepts_it_again", "accepts_another", "ended"])
def test_a_tape_end_is_told_by_the_newest_turn_even_when_an_earlier_turn_ran_the_plan(tmp_path, newest):
    """The replay stops in turn 1 on a miss after every cell was served; the tape ends there only
    if the newest turn never ended and accepted a plan with that key too — here one the replay
    never reached. The stream (acceptance order) tells it exactly as the classic replay does."""
    store = tmp_path / "store"
    stops = 'flow\n  adaptive_gather_2 = read({"path":"b"})\n'
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        tid = w.begin_turn(sid, "one", "mock")
        w.append(sid, PlanAttempted(step=1, outcome="accepted",
                                    plan_source='flow\n  adaptive_gather_1 = read({"path":"a"})\n'), turn_id=tid)
        w.append(sid, cell("read", {"path": "a"}, "A"))
        w.append(sid, PlanAttempted(step=2, outcome="accepted", plan_source=stops), turn_id=tid)  # no cell: a miss
        w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
        tid = w.begin_turn(sid, "two", "mock")
        again = stops if newest != "accepts_another" else 'flow\n  adaptive_gather_2 = read({"path":"c"})\n'
        w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source=again), turn_id=tid)
        if newest == "ended":
            w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
    with StoreReader(store) as r:
        direct, got, want = _streamed_and_classic(r, sid)
    assert direct is not None and got == want and _outcome(lambda: direct, detail=False) == want
    report = want[1]
    if newest == "accepts_it_again":
        assert report["diverged"] is None and report["tape_end"] == {
            "flow_key": host_call(stops).flow_key, "node": 0, "op": "read", "turn": 2, "position": 0}
    else:
        assert "tape_end" not in report and report["diverged"] is not None
