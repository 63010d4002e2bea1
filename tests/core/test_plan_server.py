"""PlanServer, the one entry through which replay, fork's prefix, resurrect and what-if run an
execution's plan: a host plan in any of its shapes (its text's HostCall or HostPlan, a draft over a
HostBody) runs on the direct path and leaves exactly what the interpreter leaves for its parsed
plan; a parsed plan, a non-resumable run or a host the direct path does not serve from goes to the
interpreter — and a request the tape cannot answer diverges the same way on both paths."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.canonical import canonical_json
from flux.cassette.replay import ReplayHost, ReplayTape
from flux.lang import ast as A
from flux.lang.catalog import OpCatalog
from flux.lang.interpreter import Interpreter
from flux.model.stored_plan import parse_stored_plan
from flux.timemachine.engine import HostBody
from flux.timemachine.replay_direct import NOT_DIRECT, DirectRunner, direct_plan
import flux.timemachine.serve as serve_mod
from flux.timemachine.serve import PlanServer, ScratchSink, never_asked
from tests.helpers import cell as make_cell


class _NotATapeHost(ReplayHost):
    """Serves from the same tape, but is no plain ReplayHost: the direct path must not take it."""


def _run(cells, text: str, shape: str, *, host_type=ReplayHost, resumable: bool = True):
    """Run ``text`` once on a fresh replay (a keeping scratch sink) through PlanServer, as ``shape``:
    ``text`` (the direct plan its text gives), ``body`` (a draft over a HostBody) or ``ast`` (parsed).
    What it left, and how many runs the direct path answered."""
    tape = ReplayTape(cells)
    sink = ScratchSink(tape, None, None)
    interp = Interpreter(OpCatalog.permissive(), host_type(tape), sink, never_asked, run_id="replay")
    direct_runs: list[str] = []

    class Counting(DirectRunner):
        def run(self, plan, ledger):
            h = DirectRunner.run(self, plan, ledger)
            if h is not NOT_DIRECT:
                direct_runs.append(plan.flow_key)
            return h

    real, serve_mod.DirectRunner = serve_mod.DirectRunner, Counting
    try:
        server = PlanServer(interp)
    finally:
        serve_mod.DirectRunner = real
    dp = direct_plan(text)
    plan = {"text": dp, "body": A.DraftAst(body=HostBody(dp)), "ast": parse_stored_plan(text)[0]}[shape]
    h = server.run(plan, sink.ledger(), resumable=resumable)
    halt = None if h is None else (h.kind, h.error, h.node, h.stmt, h.op)
    state = (halt, dict(interp.symbols), dict(interp.values), interp._steps_base, list(sink.events),
             [tuple(r) for r in sink.results], list(tape.served), tape.diverged, list(tape.log))
    return state, direct_runs, server.value


def _text(stmts) -> str:
    return "flow\n" + "".join(f"  {name} = {op}({canonical_json(arg)})\n" for name, op, arg in stmts)


_STMTS = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["read", "grep"]),
                            st.fixed_dictionaries({"path": st.sampled_from(["x", "y", "{a}"])})),
                  min_size=1, max_size=3)
_ANSWERS = st.lists(st.sampled_from(["ok", "ok", "ok", "error", "denied", "wrong"]), min_size=3, max_size=3)


def _cells(stmts, answers):
    cells, bound = [], {}
    for (name, op, arg), answer in zip(stmts, answers):
        inp = {"path": bound.get("a", "{a}") if arg["path"] == "{a}" else arg["path"]}
        if answer == "wrong":  # a cell for another input: the request misses, the replay diverges
            inp = {"path": "elsewhere"}
        content = f"out-{len(cells)}"
        cells.append(make_cell(op, inp, content, is_error=answer == "error", denied=answer == "denied").event)
        if answer != "ok":
            break
        bound[name] = content
    return cells


@settings(max_examples=80, deadline=None)
@given(stmts=_STMTS, answers=_ANSWERS)
def test_every_shape_of_a_host_plan_leaves_what_the_interpreter_leaves(stmts, answers):
    text = _text(stmts)
    cells = _cells(stmts, answers)
    ast_state, ast_direct, _ = _run(cells, text, "ast")
    assert ast_direct == []  # a parsed plan is the interpreter's
    key = direct_plan(text).flow_key
    for shape in ("text", "body"):
        state, direct, value = _run(cells, text, shape)
        assert direct == [key] and value is None  # the direct path ran it (it returns no value)
        assert state == ast_state


@pytest.mark.parametrize("answer", ["ok", "error", "wrong"])
def test_a_host_it_does_not_serve_from_and_a_non_resumable_run_go_to_the_interpreter(answer):
    stmts = [("a", "read", {"path": "x"}), ("b", "grep", {"path": "{a}"})]
    text = _text(stmts)
    cells = _cells(stmts, [answer, "ok", "ok"])
    reference, _, _ = _run(cells, text, "ast")
    state, direct, _ = _run(cells, text, "text", host_type=_NotATapeHost)
    assert direct == [] and state == reference
    state, direct, _ = _run(cells, text, "body", resumable=False)
    assert direct == []
    assert state == _run(cells, text, "ast", resumable=False)[0]
    if answer == "wrong":  # the broken tape: the first request misses and the replay latches a divergence
        assert reference[7] is not None and reference[0][0] == "runtime"
    else:
        assert reference[7] is None


def test_the_interpreter_s_value_is_kept_and_the_direct_runner_declines_what_it_cannot_run():
    text = _text([("a", "read", {"path": "x"})])
    cells = _cells([("a", "read", {"path": "x"})], ["ok"])
    _state, _direct, value = _run(cells, text, "ast")
    assert value is None  # a host plan returns nothing
    tape = ReplayTape(cells)
    interp = Interpreter(OpCatalog.permissive(), _NotATapeHost(tape), ScratchSink(tape, None, None), never_asked)
    assert DirectRunner(interp).run(direct_plan(text), None) is NOT_DIRECT
    assert tape.served == [] and interp.symbols == {}  # declined before anything was done
