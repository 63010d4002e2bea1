"""The full replay report (``replay_session(..., detail=True)``, the app's ``replay_detail``) keeps
its records as named tuples and must hold exactly what the interpreter-only replay holds
(``direct=False``) on generated, halted, diverged, interrupted, redacted and corrupted sessions;
and every consumer of the detail (the Test Kit's replay trace, the app's replay marks and
divergence target) must read the same from it."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flux.timemachine.serve as serve_mod
from flux.cassette.replay import ServeRecord
from flux.errors import FluxError
from flux.model.session import load_session
from flux.store import StoreReader, StoreWriter
from flux.testkit.assertions import _replay_trace
from flux.timemachine.replay import ReplayedPlan, StatementResult, _replay, replay_detail, replay_session
from flux.timemachine.serve import gc_paused
from flux.timemachine.replay_direct import NOT_DIRECT, DirectRunner
from flux.timemachine.replay_input import ReplayInput, read_replay_input
from tests.core.test_replay_direct import _BINDERS, _CATALOG, _SCENARIOS, _VALUES, _plan, _write_session
from tests.core.test_replay_fastpath import _mutate, _outcome
from tests.core.test_replay_stream import _EXTRAS, _write_resumable

_DIRECT_RUNS: list[int] = []  # executions the direct path ran, over the whole differential


class _Counting(DirectRunner):
    def run(self, plan, ledger):
        h = DirectRunner.run(self, plan, ledger)
        if h is not NOT_DIRECT:
            _DIRECT_RUNS.append(1)
        return h


def _consumers(rep, detail) -> tuple:
    """What every reader of the detail makes of a report: the Test Kit's replay trace, the app's
    replay marks (per statement, their errors, the cells) and its divergence target."""
    from flux_tui.replay_marks import divergence_target, marks_from_report

    marks = marks_from_report("s", rep)
    target = divergence_target(rep, detail) if detail is not None else None
    return (_replay_trace(SimpleNamespace(report=rep)), marks.stmts, marks.stmt_errors, marks.cells, target,
            [r.ok for r in rep.statement_results], [r.cells for r in rep.statement_results], rep.unconsumed)


def _full(reader, sid, *, turn=None, catalog=None, direct=True):
    """The full report of ``sid`` (as replay_session reads it) and what its consumers make of it."""
    try:
        inp = read_replay_input(reader, sid)
        detail = load_session(reader, sid)
    except FluxError as e:
        return ("error", type(e).__name__, str(e))
    try:
        with gc_paused():
            rep = _replay(inp, turn=turn, catalog=catalog, on_progress=None, scratch_dir=None, recorded_dir=None,
                          direct=direct)
    except FluxError as e:
        return ("error", type(e).__name__, str(e))
    return _outcome(lambda: rep) + _consumers(rep, detail)


def _both_ways(reader, sid, turn=None, catalog=None):
    direct = _full(reader, sid, turn=turn, catalog=catalog)
    interpreted = _full(reader, sid, turn=turn, catalog=catalog, direct=False)
    assert direct == interpreted
    return direct


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("detail") / "store"
    with StoreWriter(d) as w:
        yield d, w


@pytest.fixture(autouse=True)
def _count_direct(monkeypatch):
    monkeypatch.setattr(serve_mod, "DirectRunner", _Counting)


# A plain host call that succeeds (the commonest execution), drawn as often as the general plans.
_PLAIN = st.builds(lambda name, value, ledgered: ("host", [(name, "read", value, "canonical")], ["ok"], ledgered),
                   st.sampled_from(_BINDERS), st.sampled_from(_VALUES), st.booleans())


@settings(max_examples=int(os.environ.get("FLUX_DETAIL_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(st.tuples(st.lists(_PLAIN | _plan(), min_size=1, max_size=5), st.booleans()), min_size=1,
                      max_size=3),
       orphan=st.booleans(), resumable=st.booleans(), extras=_EXTRAS, corrupt=st.sampled_from([False, False, True]),
       turn=st.sampled_from([None] * 4 + [1, 2]), catalog=st.sampled_from([None] * 4 + [_CATALOG]), data=st.data())
def _full_report_examples(shared_store, turns, orphan, resumable, extras, corrupt, turn, catalog,
                                            data):
    """Batch-shaped sessions (acceptance order) and resumably recorded ones (statement rows, halts,
    retries, redacted plans, plans with no source, stray rows), a turn ended or not, some
    corrupted: the full report and the interpreter's are the same report
    (or the same error), and read the same to every consumer."""
    store, writer = shared_store
    sid = _write_resumable(writer, turns, extras) if resumable else _write_session(writer, turns, orphan)
    if corrupt:
        _mutate(store, data, stream=sid)
    with StoreReader(store) as r:
        _both_ways(r, sid, turn=turn, catalog=catalog)


def test_the_full_report_is_the_interpreter_s(shared_store):
    """The differential above, then its coverage: its examples ran the direct path at least 20 times
    (one test, so it holds whatever else runs or in what order)."""
    before = len(_DIRECT_RUNS)
    _full_report_examples(shared_store=shared_store)
    assert len(_DIRECT_RUNS) - before >= 20


# An interrupted turn (the tape ends at a request the recording never served), a divergence, a
# redacted plan, halts of every kind, placeholders, fast-forwards: fixed, so each is always there.
_P = ("host", [("adaptive_gather_1", "read", {"path": "a"}, "canonical")], ["ok"], False)
_FIXED = {**_SCENARIOS, "interrupted": None, "redacted": None,
          # a canonical host call whose cell failed, or was denied: it halts
          "error-denied": [_P, ("host", [("adaptive_gather_2", "read", {"path": "b"}, "canonical")], ["error"], False),
                           ("host", [("adaptive_gather_2", "read", {"path": "c"}, "canonical")], ["denied"], False)],
          # the same plan twice, then halting: the latch holds both runs' rows, and the next plan's
          # fast-forward reads the first one's (its value id, and the value it names)
          "repeat-then-halt": [_P, _P, ("host", [("adaptive_gather_1", "read", {"path": "a"}, "canonical")], ["error"], False),
                               ("multi", [("adaptive_gather_1", "read", {"path": "a"}, "canonical"),
                                          ("adaptive_gather_2", "read", {"path": "b"}, "canonical")], ["ok", "ok"], False)],
          # recorded resumably, a halt and then another host call: it runs with the latch open
          # (plan_resumed first)
          "halt-then-host": [_P, ("host", [("adaptive_gather_2", "read", {"path": "b"}, "canonical")], ["error"], False),
                             ("host", [("adaptive_gather_2", "read", {"path": "c"}, "canonical")], ["ok"], False)]}


@pytest.mark.parametrize("name", sorted(_FIXED))
def test_fixed_sessions_report_the_same_both_ways(shared_store, name):
    store, writer = shared_store
    a = {"path": "a"}
    if name == "interrupted":  # the newest turn never ended and its last request has no cell: tape_end
        plans = [("host", [("adaptive_gather_1", "read", a, "canonical")], ["ok"], False),
                 ("host", [("adaptive_gather_2", "read", {"path": "b"}, "canonical")], ["missing"], False)]
        sid = _write_session(writer, [(plans, False)], False)
    elif name in ("repeat-then-halt", "halt-then-host"):  # recorded resumably: its statement and halt rows order the executions
        sid = _write_resumable(writer, [(_FIXED[name], True)], ["none"])
    elif name == "redacted":  # its stored text redacted: replayed from the stand-in, its cells' redacted hashes
        plans = [("host", [("adaptive_gather_1", "read", a, "canonical")], ["ok"], False)] * 2
        sid = _write_resumable(writer, [(plans, True)], ["redacted", "none"])
    else:
        sid = _write_session(writer, [(_FIXED[name], True)], False)
    with StoreReader(store) as r:
        out = _both_ways(r, sid)
    assert out[0] == "report"
    if name == "interrupted":
        assert out[10] is not None  # tape_end
    if name == "miss":
        assert out[1]["diverged"] is not None
    if name == "error-denied":
        assert [p.halt_kind for p in out[8]] == [None, "runtime", "denied"]
    if name == "halt-then-host":
        assert [e["event"] for e in out[7]].count("plan_resumed") == 1
    if name == "repeat-then-halt":
        assert [p.halted is None for p in out[8]] == [True, True, False, True]
        assert any(e.get("skipped") is True for e in out[7])  # the fast-forward over the latch's rows


def test_a_turn_s_replay_is_the_interpreter_s(shared_store):
    """``turn=N`` keeps only the plans that turn accepted."""
    store, writer = shared_store
    turns = [([("host", [(f"adaptive_gather_{i}", "read", {"path": f"{t}{i}"}, "canonical")], ["ok"], False)
               for i in range(3)], True) for t in range(2)]
    sid = _write_session(writer, turns, False)
    with StoreReader(store) as r:
        for turn in (1, 2):
            out = _both_ways(r, sid, turn=turn)
            assert out[0] == "report" and len(out[8]) == 3  # the turn's plans only


def test_the_app_s_replay_of_a_loaded_session_is_the_interpreter_s(shared_store):
    """``replay_detail`` (the app: the tape holds the session's model cells, not the read's) and the
    interpreter-only replay of the same loaded session."""
    store, writer = shared_store
    plans = [("host", [(f"adaptive_gather_{i}", "read", {"path": str(i)}, "canonical")], ["ok"], False)
             for i in range(6)] + [_SCENARIOS["halts"][0], _SCENARIOS["miss"][1]]
    sid = _write_session(writer, [(plans, True)], False)
    with StoreReader(store) as r:
        detail = load_session(r, sid)
        direct = replay_detail(detail)
        with gc_paused():
            interpreted = _replay(ReplayInput.of_detail(load_session(r, sid)), turn=None, catalog=None, on_progress=None,
                                  scratch_dir=None, recorded_dir=None, direct=False)
    assert _outcome(lambda: direct) + _consumers(direct, detail) == \
        _outcome(lambda: interpreted) + _consumers(interpreted, detail)
    assert direct.statement_results[0].requests == (direct.requests[0],) and direct.requests[0].status == "served"


def test_the_records_read_as_they_always_read():
    """The report's records are named tuples now: the same fields, defaults, repr and equality
    among themselves, immutable."""
    rec = ServeRecord("read", "ab", 3, "served")
    assert (rec.op, rec.input_hash, rec.index, rec.status, rec.message) == ("read", "ab", 3, "served", None)
    assert repr(rec) == "ServeRecord(op='read', input_hash='ab', index=3, status='served', message=None)"
    sr = StatementResult("h:1", 0, 2, "s", "halted", "runtime", "boom", (rec,))
    assert (sr.ok, sr.cells, sr.kind, sr.error) == (False, (3,), "runtime", "boom")
    assert StatementResult("h:1", 0, 0, "s", "completed").requests == () and StatementResult("h:1", 0, 0, "s", "completed").ok
    assert ReplayedPlan("h:1") == ReplayedPlan("h:1", None, None, None) and ReplayedPlan("h:1").to_json() == {
        "flow_key": "h:1", "halted": None}
    for obj, field in ((rec, "op"), (sr, "status"), (ReplayedPlan("h:1"), "halted")):
        with pytest.raises(AttributeError):
            setattr(obj, field, "x")


def test_the_benchmark_s_replay_is_the_interpreter_s(tmp_path):
    """bench_peers' run (1 turn, one host plan per tool call, acceptance order): the full report of
    its replay, direct and interpreted, on a smaller run of the same shape."""
    import sys

    from tests.helpers import REPO

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import bench_peers
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    bench_peers.flux_record(tmp_path, 40, [bench_peers.echo])
    with StoreReader(tmp_path / "store") as r:
        before = len(_DIRECT_RUNS)
        out = _both_ways(r, "last")
        assert len(_DIRECT_RUNS) - before == 40  # every call on the direct path (the first of the two ways)
        full = replay_session(r, "last")
    assert out[0] == "report" and full.faithful and len(full.statement_results) == len(full.requests) == 40
    assert len(full.scratch_events) == 120


