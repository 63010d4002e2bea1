"""Interpreter tests: authored flows run against a small in-test op host, asserting run events."""

from __future__ import annotations

import json

import pytest

from flux.lang import parse
from flux.lang.catalog import OpCatalog, OpSpec, map_args_to_input
from flux.lang.hashes import flow_key, input_hash, once_key, step_id, stmt_hash16
from flux.lang.interpreter import (
    Interpreter, LedgerEntry, ListSink, OpOutcome, ResumeError, ResumeLedger, interpolate,
)


class DictHost:
    """Ops are Python functions of the input; raising ValueError makes an is_error outcome."""

    def __init__(self, ops, denied=()):
        self.ops, self.denied, self.calls = ops, set(denied), []

    def dispatch(self, op, input, input_json):
        self.calls.append((op, input_json))
        if op in self.denied:
            return OpOutcome(f"policy denied `{op}`", denied=True)
        try:
            out = self.ops[op](input)
        except ValueError as exc:
            return OpOutcome(str(exc), is_error=True)
        return OpOutcome(out if isinstance(out, str) else json.dumps(out))


def make(ops=None, specs=(), approve=False, **kw):
    ops = ops or {}
    catalog = OpCatalog([OpSpec(n) for n in ops] + list(specs))
    host, sink = DictHost(ops, kw.pop("denied", ())), ListSink()
    interp = Interpreter(catalog, host, sink, approver=lambda m, r: approve,
                         sleep=lambda s: None, **kw)
    return interp, host, sink


def run(src, ops=None, **kw):
    interp, host, sink = make(ops, **kw)
    res = interp.run(parse(src), resumable=True)
    return res, sink, host, interp


# ------------------------------------------------------------------------------- catalog

def test_map_args_to_input():
    spec = OpSpec("write", required=("path",), optional=("content",))
    assert map_args_to_input(spec, [{"a": 1}]) == {"a": 1}
    assert map_args_to_input(spec, []) == {}
    assert map_args_to_input(spec, ["x"]) == {"path": "x"}
    assert map_args_to_input(spec, ["x", "y"]) == {"path": "x", "content": "y"}
    assert map_args_to_input(OpSpec("raw"), ["x"]) == "x"
    two = OpSpec("two", required=("a", "b"), optional=("c",))
    assert map_args_to_input(two, [5]) == {"a": 5}
    cat = OpCatalog.permissive()
    assert "anything" in cat and cat.get("anything").params == ()
    assert "x" not in OpCatalog([OpSpec("y")]) and len(OpCatalog([OpSpec("y")])) == 1


def test_interpolate():
    syms = {"name": "Ada", "n": 3, "obj": {"b": 1, "a": 2}}
    assert interpolate("hi {name} x{n} {obj} {missing} {{name}}", syms) == \
        'hi Ada x3 {"b":1,"a":2} {missing} {name}'


# ------------------------------------------------------------------------------- events

def test_fixture_like_call_events_and_hashes():
    src = 'flow\n  out = append({"content":"""created by flux mock\n""","path":"flux-mock.txt"})\n'
    res, sink, host, _ = run(src, {"append": lambda i: "appended 21 bytes to flux-mock.txt"})
    ih = "7b7d06ae306ee31ae768f1e70ebbc4e4e92750881536d135cbec17de7d4f2dff"
    draft = parse(src)
    key = flow_key(None, draft.body)
    assert sink.events == [
        {"event": "step_started", "step": "step_append_7b7d06ae306ee31a", "op": "append",
         "input_hash": ih},
        {"event": "step_succeeded", "step": "step_append_7b7d06ae306ee31a", "output": "v_1"},
        {"event": "statement_completed", "plan": key, "node": 0,
         "stmt": stmt_hash16(draft.body[0]), "value": "v_1", "skipped": False},
    ]
    assert list(sink.events[0]) == ["event", "step", "op", "input_hash"]
    assert res.ok and res.symbols["out"] == "appended 21 bytes to flux-mock.txt"
    assert host.calls == [("append", '{"content":"created by flux mock\\n","path":"flux-mock.txt"}')]


def test_interpolation_vars_templates_jq_fmt_and_return():
    ops = {"who": lambda i: {"user": {"name": "Ada", "tags": ["x", "y"]}},
           "greet": lambda i: "greeted " + i["text"]}
    src = (
        "flow\n"
        "  w = who()\n"
        "  name = w.user.name\n"
        "  tag = w.user.tags[1]\n"
        "  miss = w.nope?\n"
        '  msg = greet(text: "hello {name}, tag {tag} {{literal}} {unbound}")\n'
        '  both = { n: name, list: [ tag, 1 ] }\n'
        '  f = fmt("{name}/{tag}")\n'
        "  return greet(text: f)\n"
    )
    res, sink, host, _ = run(src, ops)
    assert res.ok and res.returned
    assert res.symbols["miss"] is None
    assert host.calls[1] == ("greet", json.dumps(
        {"text": "hello Ada, tag y {literal} {unbound}"}, separators=(",", ":")))
    assert res.symbols["both"] == {"n": "Ada", "list": ["y", 1]}
    assert res.value == "greeted Ada/y"
    kinds = sink.kinds()
    # return: statement_completed then flow_returned, with the call's output id.
    assert kinds[-3:] == ["step_succeeded", "statement_completed", "flow_returned"]
    assert sink.events[-1] == {"event": "flow_returned", "value": sink.events[-3]["output"]}
    assert sink.events[-2]["value"] == sink.events[-3]["output"]
    assert kinds.count("statement_completed") == 8


def test_when_unless_expr_formulas():
    ops = {"count": lambda i: "7", "mark": lambda i: "marked " + i["v"]}
    src = (
        "flow\n"
        "  c = count()\n"
        "  when $c > 3 && !false\n"
        '    a = mark(v: "big")\n'
        "  else\n"
        '    a = mark(v: "small")\n'
        "  unless $c == 7\n"
        '    b = mark(v: "never")\n'
        "  d = ($c + 1) * 2 - 10 / 4\n"
        '  e = $c >= 7 || $nothing\n'
    )
    res, sink, host, _ = run(src, ops)
    assert res.ok
    assert res.symbols["a"] == "marked big"
    assert "b" not in res.symbols
    assert res.symbols["d"] == 13.5
    assert res.symbols["e"] is True  # short-circuit: $nothing is never read
    assert [c[0] for c in host.calls] == ["count", "mark"]


def test_each_collect_flat_seq_parallel():
    ops = {"files": lambda i: ["a", "b"], "read": lambda i: [i["path"], i["path"].upper()]}
    src = (
        "flow\n"
        "  fs = files()\n"
        "  each f in fs -> flat all\n"
        "    read(path: f)\n"
        "  each f in fs -> nested\n"
        "    read(path: f)\n"
        "  seq -> s\n"
        '    x = read(path: "q")\n'
        "    x\n"
        "  parallel\n"
        "    branch left\n"
        '      read(path: "l")\n'
        "    branch right\n"
        '      read(path: "r")\n'
    )
    res, sink, host, _ = run(src, ops)
    assert res.ok
    assert res.symbols["all"] == ["a", "A", "b", "B"]
    assert res.symbols["nested"] == ['["a", "A"]', '["b", "B"]']
    assert res.symbols["s"] == '["q", "Q"]'
    assert json.loads(res.symbols["left"]) == ["l", "L"]
    assert json.loads(res.symbols["right"]) == ["r", "R"]
    # each statement with a collect target records the collected value id
    sc = [e for e in sink.events if e["event"] == "statement_completed"]
    assert [("value" in e) for e in sc] == [True, True, True, True, False]


def test_op_error_halts_runtime_and_try_catches():
    def boom(i):
        raise ValueError("bash failed: exit 1")
    src = "flow\n  ok = fine()\n  bad = bash()\n  never = fine()\n"
    res, sink, host, _ = run(src, {"fine": lambda i: "ok", "bash": boom})
    draft = parse(src)
    key = flow_key(None, draft.body)
    assert res.halted.kind == "runtime" and res.halted.node == 1
    assert sink.kinds() == ["step_started", "step_succeeded", "statement_completed",
                            "step_started", "step_failed", "plan_halted"]
    assert sink.events[-1] == {"event": "plan_halted", "plan": key, "node": 1,
                               "stmt": stmt_hash16(draft.body[1]), "op": "bash",
                               "kind": "runtime", "error": "bash failed: exit 1"}
    assert sink.events[-2]["error"] == "bash failed: exit 1"

    src2 = "flow\n  try\n    bash()\n  catch e\n    r = fine(why: e)\n"
    res2, sink2, host2, _ = run(src2, {"fine": lambda i: "handled " + i["why"], "bash": boom})
    assert res2.ok and res2.symbols["r"] == "handled bash failed: exit 1"
    assert sink2.kinds()[-1] == "statement_completed"


def test_denied_is_fatal_even_inside_try():
    src = "flow\n  try\n    rm()\n  catch\n    fine()\n"
    res, sink, _, _ = run(src, {"rm": lambda i: "gone", "fine": lambda i: "ok"}, denied={"rm"})
    assert res.halted.kind == "denied"
    assert sink.events[-1]["kind"] == "denied" and sink.events[-1]["op"] == "rm"
    assert sink.kinds() == ["step_started", "step_failed", "plan_halted"]


def test_retry_until_success():
    state = {"n": 0}

    def flaky(i):
        state["n"] += 1
        if state["n"] < 3:
            raise ValueError("try again")
        return "done"
    res, sink, _, _ = run("flow\n  retry 3, backoff: exponential, delay: 1s -> r\n    flaky()\n",
                          {"flaky": flaky})
    assert res.ok and res.symbols["r"] == "done"
    assert sink.kinds().count("step_failed") == 2
    res2, _, _, _ = run("flow\n  retry 2\n    flaky()\n", {"flaky": lambda i: (_ for _ in ()).throw(
        ValueError("always"))})
    assert res2.halted.kind == "runtime" and res2.halted.error == "`retry` exhausted 2 attempt(s): always"


def test_assert_and_confirm():
    res, sink, _, _ = run('flow\n  x = 1\n  assert $x > 2, "x too small"\n')
    assert res.halted.kind == "assert_failed" and res.halted.error == "x too small"
    assert sink.events[-1]["kind"] == "assert_failed" and "op" not in sink.events[-1]

    src = 'flow\n  confirm "deploy?", risk: high\n    deploy()\n'
    res, sink, host, _ = run(src, {"deploy": lambda i: "shipped"})
    assert res.halted.kind == "confirm_denied" and host.calls == []
    assert sink.events == [{"event": "plan_halted", "plan": flow_key(None, parse(src).body),
                            "node": 0, "stmt": stmt_hash16(parse(src).body[0]),
                            "kind": "confirm_denied", "error": "confirmation denied: deploy?"}]
    seen = []
    interp, host, sink = make({"deploy": lambda i: "shipped"})
    interp.approver = lambda m, r: seen.append((m, r)) or True
    assert interp.run(parse(src)).ok and seen == [("deploy?", "high")]


def test_once_checkpoint_and_await():
    src = (
        "flow\n"
        '  once "welcome" -> w\n'
        "    send()\n"
        '  checkpoint "phase-1"\n'
        '  await reply = "user_input"\n'
        "  after()\n"
    )
    draft = parse(src)
    key = flow_key(None, draft.body)
    once_done: dict = {}
    res, sink, host, _ = run(src, {"send": lambda i: "sent", "after": lambda i: "x"},
                             once_done=once_done, run_id="s_3")
    assert res.halted.kind == "awaiting"
    assert sink.events[2] == {"event": "once_completed",
                              "label": once_key("welcome", draft.body[0].body),
                              "value": "v_2", "summary": ""}
    assert sink.kinds() == ["step_started", "step_succeeded", "once_completed",
                            "statement_completed", "checkpoint_reached", "awaiting",
                            "plan_halted"]
    assert sink.events[4] == {"event": "checkpoint_reached", "flow_key": key,
                              "label": "phase-1", "node": 1}
    assert sink.events[5] == {"event": "awaiting", "run": "s_3:2", "node": 2}
    assert sink.events[6]["error"] == "plan paused: awaiting `user_input`"
    # A second run with the same session state does not send again.
    res2, sink2, host2, _ = run(src, {"send": lambda i: "sent", "after": lambda i: "x"},
                                once_done=once_done)
    assert host2.calls == [] and "once_completed" not in sink2.kinds()


def test_saga_compensates_in_reverse():
    def fail(i):
        raise ValueError("charge failed")
    ops = {"reserve": lambda i: "r", "unreserve": lambda i: "u", "ship": lambda i: "s",
           "unship": lambda i: "us", "charge": fail, "refund": lambda i: "rf"}
    src = ("flow\n  saga\n    step\n      reserve()\n    undo\n      unreserve()\n"
           "    step\n      ship()\n    undo\n      unship()\n"
           "    step\n      charge()\n    undo\n      refund()\n")
    res, sink, host, _ = run(src, ops)
    assert [c[0] for c in host.calls] == ["reserve", "ship", "charge", "unship", "unreserve"]
    assert res.halted.kind == "runtime" and res.halted.op is None  # flux names no op for a saga


def test_memo_reuses_session_value():
    memo: dict = {}
    src = "flow\n  memo s = survey()\n"
    run(src, {"survey": lambda i: "big"}, memo=memo)
    res, sink, host, _ = run(src, {"survey": lambda i: "other"}, memo=memo)
    assert host.calls == [] and res.symbols["s"] == "big"
    assert sink.kinds() == ["statement_completed"]


def test_what_cannot_run_says_which_construct_and_why():
    res, sink, _, _ = run('flow\n  t = thing person name "Ada"\n')
    assert res.halted.kind == "runtime" and res.halted.error == (  # flux's own words (host.rs)
        'no deterministic resolution for a Person by Name("Ada") — a Name/Query selector needs a '
        "host resolver")
    assert sink.events[-1]["error"] == res.halted.error


def test_unknown_op_and_non_resumable_mode():
    interp, host, sink = make({})
    res = interp.run(parse("flow\n  x = nope()\n"), resumable=False)
    assert res.halted.kind == "runtime" and res.halted.error == "unknown op `nope`"
    assert sink.events == []
    interp, host, sink = make({"a": lambda i: "1"})
    interp.run(parse("flow\n  a()\n  return 5\n"), resumable=False)
    assert sink.kinds() == ["step_started", "step_succeeded", "flow_returned"]


# ------------------------------------------------------------------------------- resume

def test_resume_skips_ledgered_statements_and_rebinds():
    def boom(i):
        raise ValueError("down")
    src = "flow\n  a = first()\n  b = second(x: a)\n  c = third(y: b)\n"
    draft = parse(src)
    key = flow_key(None, draft.body)
    values: dict = {}
    res, sink, host, _ = run(src, {"first": lambda i: "A", "second": lambda i: "B-" + i["x"],
                                   "third": boom}, values=values)
    assert res.halted.node == 2
    trace = list(sink.events)
    ledger = ResumeLedger.from_interrupted(trace, key)
    assert [e.node for e in ledger.completed] == [0, 1]
    folded = ResumeLedger.fold(trace)
    assert folded.plan == key and len(folded.completed) == 2

    interp, host3, sink3 = make({"first": lambda i: "X", "second": lambda i: "X",
                                 "third": lambda i: "C-" + i["y"]}, values=values)
    res3 = interp.run(draft, resumable=True, ledger=ledger)
    assert res3.ok and res3.symbols["c"] == "C-B-A"
    assert [c[0] for c in host3.calls] == ["third"]
    assert sink3.kinds() == ["statement_completed", "statement_completed", "plan_resumed",
                             "step_started", "step_succeeded", "statement_completed"]
    assert sink3.events[0]["skipped"] is True and sink3.events[0]["value"] == "v_1"
    assert sink3.events[2] == {"event": "plan_resumed", "plan": key, "prior": key, "skipped": 2}
    # the latch is closed once the resume is recorded
    assert ResumeLedger.fold(trace + sink3.events) is None
    # a changed statement stops the fast-forward there
    edited = parse("flow\n  a = first()\n  b = second(x: \"new\")\n  c = third(y: b)\n")
    interp, host4, sink4 = make({"first": lambda i: "A", "second": lambda i: "N",
                                 "third": lambda i: "C"}, values=values)
    interp.run(edited, ledger=ledger)
    assert [c[0] for c in host4.calls] == ["second", "third"]


def test_resume_with_missing_value_is_loud():
    draft = parse("flow\n  a = first()\n")
    ledger = ResumeLedger("h:x", [LedgerEntry(0, stmt_hash16(draft.body[0]), "v_99")])
    interp, _, _ = make({"first": lambda i: "A"})
    with pytest.raises(ResumeError):
        interp.run(draft, ledger=ledger)


def test_from_interrupted_clears_on_restart_and_resume():
    sc = lambda node: {"event": "statement_completed", "plan": "p", "node": node,  # noqa: E731
                       "stmt": "s", "skipped": False}
    trace = [sc(0), sc(1), sc(0), {"event": "checkpoint_reached", "flow_key": "p",
                                   "label": "c", "node": 3}]
    led = ResumeLedger.from_interrupted(trace, "p")
    assert [e.node for e in led.completed] == [0] and led.checkpoint == 3
    trace2 = [sc(0), {"event": "plan_resumed", "plan": "q", "prior": "p", "skipped": 1}]
    assert ResumeLedger.from_interrupted(trace2, "p") is None
    assert ResumeLedger.from_interrupted([], "p") is None


def test_a_killed_resume_of_the_same_plan_keeps_its_fast_forward_for_resurrect_only():
    """flux (§3.8) clears at a plan_resumed naming the plan as prior, dropping the skipped rows the
    fast-forward wrote just before it; resurrect's ledger (across_resumes) keeps them when the
    plan resumed itself, so a resurrect that was killed is fast-forwarded over, not re-run."""
    sc = lambda node, skipped=False: {"event": "statement_completed", "plan": "p", "node": node,  # noqa: E731
                                      "stmt": f"s{node}", "value": f"v_{node}", "skipped": skipped}
    resumed = lambda plan: {"event": "plan_resumed", "plan": plan, "prior": "p", "skipped": 1}  # noqa: E731
    killed_twice = [sc(0), sc(0, True), resumed("p"), sc(1)]  # the original run, a resurrect killed in node 2
    assert [e.node for e in ResumeLedger.from_interrupted(killed_twice, "p").completed] == [1]  # flux's
    kept = ResumeLedger.from_interrupted(killed_twice, "p", across_resumes=True)
    assert [(e.node, e.value) for e in kept.completed] == [(0, "v_0"), (1, "v_1")]
    # a third run: its own fast-forward restarts the rows (a node that does not grow), and keeps them too
    thrice = killed_twice + [sc(0, True), sc(1, True), resumed("p"), sc(2)]
    assert [e.node for e in ResumeLedger.from_interrupted(thrice, "p", across_resumes=True).completed] == [0, 1, 2]
    # another plan resuming this one still clears it
    assert ResumeLedger.from_interrupted([sc(0), resumed("q")], "p", across_resumes=True) is None


def test_step_ids_match_hash_rules():
    res, sink, _, _ = run('flow\n  x = op(a: 1, b: "two")\n', {"op": lambda i: "ok"})
    ih = input_hash({"a": 1, "b": "two"})
    assert sink.events[0]["step"] == step_id("op", ih) == f"step_op_{ih[:16]}"
