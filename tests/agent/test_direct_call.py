"""Interpreter.run_call — the adaptive loop's one-call plan run without the AST walk and the coroutine
tree — against Interpreter.run of the same host plan: the same events, host calls and state, and
the same recorded turn, row for row."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.agent.client import Client
from flux.agent.loop import _escape_braces
from flux.agent.ops import OpError, op
from flux.agent.providers.scripted import ScriptedProvider
from flux.lang import ast as A
from flux.lang.catalog import OpCatalog, OpSpec
from flux.lang.interpreter import Interpreter, OpOutcome


def _plan(name: str, op_name: str, value) -> A.DraftAst:
    return A.DraftAst(name=None, params=(), returns=None,
                      body=(A.Bind(name=name, value=A.Call(op=op_name, args=(A.Lit(value=value),))),))


class _Host:
    """Answers each dispatch from a script of outcomes and logs what it was asked."""

    def __init__(self, outcomes):
        self.outcomes, self.log = list(outcomes), []

    def dispatch(self, op_name, input, input_json):
        self.log.append((op_name, json.dumps(input, sort_keys=True), input_json))
        return self.outcomes.pop(0)


class _Sink:
    def __init__(self):
        self.events = []

    def emit(self, ev):
        self.events.append(dict(ev))


_CATALOG = OpCatalog([OpSpec("echo", ("i",), (), "pure", ""), OpSpec("put", ("path", "text"), (), "write", "")])
_OUTCOMES = st.one_of(st.builds(OpOutcome, content=st.text(max_size=8)),
                      st.builds(OpOutcome, content=st.text(max_size=8), is_error=st.just(True)),
                      st.builds(OpOutcome, content=st.text(max_size=8), denied=st.just(True)))
_VALUES = st.dictionaries(st.sampled_from(["i", "path", "text", "x"]),
                          st.one_of(st.integers(), st.sampled_from(["{name}", "{{", "a}b", "plain", ""]),
                                    st.lists(st.text(max_size=3), max_size=2)), max_size=3)


def _run_both(calls, outcomes):
    out = []
    for direct in (True, False):
        host, sink = _Host(outcomes), _Sink()
        it = Interpreter(_CATALOG, host, sink, run_id="s_1")
        for name, op_name, value in calls:
            if direct:
                it.run_call(name, op_name, _escape_braces(value))
            else:
                it.run(_plan(name, op_name, _escape_braces(value)), resumable=False)
        out.append((sink.events, host.log, dict(it.symbols), dict(it.values), it._next_vid, it.steps))
    return out


@settings(max_examples=80, deadline=None)
@given(calls=st.lists(st.tuples(st.sampled_from(["a", "adaptive_gather_1", "b"]),
                                st.sampled_from(["echo", "put", "nope"]), _VALUES), min_size=1, max_size=4),
       outcomes=st.lists(_OUTCOMES, min_size=4, max_size=4))
def test_run_call_equals_run_of_the_host_plan(calls, outcomes):
    direct, general = _run_both(calls, outcomes)
    assert direct == general


# -- a whole recorded turn, both ways ------------------------------------------------------------

@op(effect="pure")
def echo(i: int) -> str:
    """Echo."""
    return f"got {i}"


@op(effect="pure")
def shout(text: str) -> dict:
    """A dict answer (JSON-encoded content)."""
    return {"up": text.upper(), "len": len(text)}


@op(effect="pure")
def boom(i: int) -> str:
    """Always fails."""
    raise OpError(f"no {i}")


@op(effect="write")
def put(path: str, text: str) -> OpOutcome:
    """Write (refused by the callback approver for path 'no')."""
    return OpOutcome(content=f"wrote {path}", view=f"[{text}]")


@op(effect="pure")
def keep(v: Any = None) -> Any:
    """Answers its input (any JSON: a dict or list answer is JSON-encoded content)."""
    return v


@op(effect="write")
def stash(v: Any = None) -> str:
    """A write op taking any JSON."""
    return "stashed"


@op(effect="pure")
def grow(v: Any = None) -> str:
    """Mutates the value it was given (an op may): the run hands it a copy of the model's input."""
    if isinstance(v, list):
        v.append("grown")
    elif isinstance(v, dict):
        v["grown"] = 1
    return "grew"


@op(effect="pure")
def ghost(i: int) -> str:
    """Answers a lone surrogate (the run must see, and the cell store, U+FFFD)."""
    return f"a\ud800b{i}"


_CALLS = [
    {"name": "echo", "input": {"i": 1}},
    {"name": "shout", "input": {"text": "{name} and {{x}} and sk-SECRETSECRET1234"}},
    {"name": "boom", "input": {"i": 2}},
    {"name": "put", "input": {"path": "ok.txt", "text": "hi \ud83d"}},
    {"name": "put", "input": {"path": "no", "text": "refused"}},
    {"name": "nope", "input": {}},
    {"name": "echo", "input": {"wrong": 1}},
    {"name": "echo", "input": {"i": 3}},
]


def _record(tmp_path, way: str, monkeypatch, calls=None):
    """Record the turn one of three ways: ``fused`` (the loop's one-pass call, _DirectCall),
    ``run_call`` (Interpreter.run_call through the recording and live hosts) or ``run`` (the
    reference: Interpreter.run of each call's host plan)."""
    from flux.agent import loop
    from flux.agent.approver import CallbackApprover

    if way != "fused":
        monkeypatch.setattr(loop._DirectCall, "of", classmethod(lambda cls, *a: None))
    if way == "run":
        def run_call(self, name, op_name, value):
            self.run(_plan(name, op_name, value), resumable=False)
        monkeypatch.setattr(Interpreter, "run_call", run_call)
    state: list = []  # the interpreter's and the live host's state at the turn's end
    finish = loop.TurnRunner._finish

    def spy(self, rec, out, interp, observations, usages, turn_msgs, live):
        state.append((dict(interp.symbols), dict(interp.values), interp._next_vid, interp.steps, interp._last_vid,
                      list(live.log), live.dispatches, live.last_exec_us, rec.appended, len(rec.owed)))
        return finish(self, rec, out, interp, observations, usages, turn_msgs, live)
    monkeypatch.setattr(loop.TurnRunner, "_finish", spy)
    d = tmp_path / way
    c = Client(ScriptedProvider(responses=[{"tool_calls": calls or _CALLS}, {"text": "done"}]), model="scripted",
               ops=[echo, shout, boom, put, keep, stash, grow, ghost], store=d / "store", workspace=tmp_path, env_secrets=False,
               secrets=["sk-SECRETSECRET1234"], approver=CallbackApprover(_approve), clock=lambda: 1_000, timer=lambda: 7)
    commits: list[int] = []  # rows inserted before each COMMIT: where the durability flushes fall
    inserted = [0]

    def trace(sql):
        if sql.startswith("INSERT INTO events"):
            inserted[0] += 1
        elif sql == "COMMIT":
            commits.append(inserted[0])
    c.writer.conn.set_trace_callback(trace)
    out = c.session().send_sync("go")
    c.close()
    monkeypatch.undo()
    con = sqlite3.connect(d / "store" / "events.db")
    rows = con.execute("SELECT stream, stream_seq, kind, ts, turn_id, payload FROM events ORDER BY global_seq").fetchall()
    reg = con.execute("SELECT model, created_at, updated_at, last_seq, msg_count FROM streams").fetchall()
    con.close()
    summary = (out.outcome, out.answer, out.error, [(t.name, t.status, t.content, t.input) for t in out.tool_calls],
               [c.to_body() for c in out.cells], [(p.step, p.phase, p.fingerprint, p.flow_key, p.source) for p in out.plans])
    return rows, reg, summary, commits, state


def _approve(r):
    from flux.agent.approver import Decision

    if r.input.get("path") == "no":
        return Decision(False, "refused \udc00 by the test")  # a lone surrogate: scrubbed in the cell only
    return True


def test_a_recorded_turn_is_the_same_row_for_row_all_three_ways(tmp_path, monkeypatch):
    direct = _record(tmp_path, "fused", monkeypatch)
    assert direct == _record(tmp_path, "run_call", monkeypatch)
    assert direct == _record(tmp_path, "run", monkeypatch)
    kinds = [json.loads(r[5])["data"].get("event") for r in direct[0] if r[2] == "run"]
    assert kinds.count("step_succeeded") == 4 and kinds.count("step_failed") == 2 and kinds.count("op_recorded") == 6
    assert "sk-SECRETSECRET1234" not in "".join(r[5] for r in direct[0])


# Tool calls of every kind the loop meets: pure and write ops (durability flushes), results, dict
# answers, op failures, refusals, unknown tools, bad input, nested and brace-holding values, a
# registered secret, lone surrogates, and inputs that are not plain JSON (a tuple: run_call's path).
_LEAF = st.one_of(st.integers(-3, 3), st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.none(),
                  st.sampled_from(["{name}", "{{x}}", "a}b", "sk-SECRETSECRET1234", "\ud83d", "", "plain"]))
_JSON = st.recursive(_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=2),
                                                    st.dictionaries(st.sampled_from(["a", "{k}", "b"]), inner,
                                                                    max_size=2)), max_leaves=4)
_CALL = st.one_of(
    st.builds(lambda i: {"name": "echo", "input": {"i": i}}, st.integers(-2, 2)),
    st.builds(lambda v: {"name": "keep", "input": {"v": v}}, _JSON),
    st.builds(lambda v: {"name": "stash", "input": {"v": v}}, _JSON),
    st.builds(lambda v: {"name": "grow", "input": {"v": v}}, st.one_of(st.lists(_LEAF, max_size=2),
                                                                       st.dictionaries(st.just("a"), _LEAF))),
    st.builds(lambda t: {"name": "shout", "input": {"text": t}}, st.sampled_from(["{name} {{x}}", "hi", "\ud83d"])),
    st.builds(lambda i: {"name": "boom", "input": {"i": i}}, st.integers(0, 3)),
    st.builds(lambda i: {"name": "ghost", "input": {"i": i}}, st.integers(0, 3)),
    st.builds(lambda p, t: {"name": "put", "input": {"path": p, "text": t}}, st.sampled_from(["ok.txt", "no"]),
              st.sampled_from(["x", "{y}", "\ud83d"])),
    st.just({"name": "nope", "input": {}}),
    st.just({"name": "keep", "input": {"v": (1, 2)}}),  # not plain JSON: run_call's path
)


@settings(max_examples=12, deadline=None)
@given(calls=st.lists(_CALL, min_size=1, max_size=5))
def test_random_turns_are_the_same_row_for_row_fused_and_through_run_call(tmp_path_factory, calls):
    from _pytest.monkeypatch import MonkeyPatch

    mp = MonkeyPatch()
    try:
        tmp = tmp_path_factory.mktemp("turn")
        assert _record(tmp, "fused", mp, calls) == _record(tmp, "run_call", mp, calls)
    finally:
        mp.undo()
