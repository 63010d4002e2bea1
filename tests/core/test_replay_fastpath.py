"""Replay's fast paths give exactly what the plain folds give (issue 10 item 2): the halt latch
kept as events arrive equals ``ResumeLedger.fold`` of the whole scratch trace."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.cassette.replay import ReplayTape
from flux.lang.interpreter import ResumeLedger
from flux.timemachine.replay import _ScratchSink

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
    sink = _ScratchSink(ReplayTape([]), None, None)
    for ev in events:
        sink.emit(ev)
        assert _as_tuple(sink.ledger()) == _as_tuple(ResumeLedger.fold(sink.events))
