"""Interpreter.run_call — the adaptive loop's one-call plan run without the AST walk and the coroutine
tree — against Interpreter.run of the same host plan: the same events, host calls and state, and
the same recorded turn, row for row."""

from __future__ import annotations

import json
import sqlite3

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


def _record(tmp_path, direct: bool, monkeypatch):
    from flux.agent.approver import CallbackApprover

    if not direct:  # the reference: every tool call through Interpreter.run of its host plan
        def run_call(self, name, op_name, value):
            self.run(_plan(name, op_name, value), resumable=False)
        monkeypatch.setattr(Interpreter, "run_call", run_call)
    d = tmp_path / ("direct" if direct else "general")
    c = Client(ScriptedProvider(responses=[{"tool_calls": _CALLS}, {"text": "done"}]), model="scripted",
               ops=[echo, shout, boom, put], store=d / "store", workspace=tmp_path, env_secrets=False,
               secrets=["sk-SECRETSECRET1234"], approver=CallbackApprover(lambda r: r.input.get("path") != "no"),
               clock=lambda: 1_000, timer=lambda: 7)
    out = c.session().send_sync("go")
    c.close()
    monkeypatch.undo()
    con = sqlite3.connect(d / "store" / "events.db")
    rows = con.execute("SELECT stream, stream_seq, kind, ts, turn_id, payload FROM events ORDER BY global_seq").fetchall()
    reg = con.execute("SELECT model, created_at, updated_at, last_seq, msg_count FROM streams").fetchall()
    con.close()
    summary = (out.outcome, out.answer, [(t.name, t.status, t.content) for t in out.tool_calls],
               [c.to_body() for c in out.cells], [(p.step, p.phase, p.fingerprint, p.flow_key, p.source) for p in out.plans])
    return rows, reg, summary


def test_a_recorded_turn_is_the_same_row_for_row_both_ways(tmp_path, monkeypatch):
    direct = _record(tmp_path, True, monkeypatch)
    general = _record(tmp_path, False, monkeypatch)
    assert direct == general
    kinds = [json.loads(r[5])["data"].get("event") for r in direct[0] if r[2] == "run"]
    assert kinds.count("step_succeeded") == 4 and kinds.count("step_failed") == 2 and kinds.count("op_recorded") == 6
    assert "sk-SECRETSECRET1234" not in "".join(r[5] for r in direct[0])
