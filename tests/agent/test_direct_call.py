"""Interpreter.run_call — the adaptive loop's one-call plan run without the AST walk and the coroutine
tree — against Interpreter.run of the same host plan: the same events, host calls and state, and
the same recorded turn, row for row."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.agent.client import Client
from flux.agent.loop import escape_braces
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
                it.run_call(name, op_name, escape_braces(value))
            else:
                it.run(_plan(name, op_name, escape_braces(value)), resumable=False)
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


@op(effect="write")
def note(path: str, n: int = 0, flag: bool = False, tag: Any = None) -> str:
    """A flat typed schema (the fused tool call's kind): answers what it got, a secret for n == 9."""
    if n == 9:
        return "token=sk-SECRETSECRET1234"
    if n == 8:
        raise OpError("n is 8")
    return f"{path}:{n}:{flag}:{tag}" * (200 if n == 7 else 1)


@op(effect="read")
def glance(path: str) -> OpOutcome:
    """A read op with a flat schema whose outcome has a view (the cell's general steps)."""
    return OpOutcome(content=f"seen {path}", view=f"<{path}>" if path != "a" else None)


def _record(tmp_path, way: str, monkeypatch, calls=None, *, approver: str = "callback", ticking: bool = False,
            cap: int | None = None):
    """Record the turn one of three ways: ``fused`` (the loop's one-pass call, DirectCall),
    ``run_call`` (Interpreter.run_call through the recording and live hosts) or ``run`` (the
    reference: Interpreter.run of each call's host plan). ``approver``: ``callback`` (refuses path
    'no') or ``auto`` (``--yes``); ``ticking``: the store clock and the timer count up (so every read
    of them, and its order, shows in the rows); ``cap``: the cassette cap."""
    import itertools

    from flux.agent import loop
    from flux.agent.approver import CallbackApprover

    if way != "fused":
        monkeypatch.setattr(loop.DirectCall, "of", classmethod(lambda cls, *a: None))
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
    clock, timer = (itertools.count(1_000).__next__, itertools.count(7).__next__) if ticking else (lambda: 1_000, lambda: 7)
    # The group commit's 50 ms age rule reads time.monotonic: a slow side (a loaded machine, a 360k-char
    # output) would commit where the other does not. A microsecond a read: it never fires here.
    from flux.store import writer as store_mod
    tick = itertools.count()
    monkeypatch.setattr(store_mod, "_monotonic", lambda: next(tick) * 1e-6)
    kw = {"auto_approve": True} if approver == "auto" else {"approver": CallbackApprover(_approve)}
    c = Client(ScriptedProvider(responses=[{"tool_calls": calls or _CALLS}, {"text": "done"}]), model="scripted",
               ops=[echo, shout, boom, put, keep, stash, grow, ghost, note, glance], store=d / "store", workspace=tmp_path,
               env_secrets=False, secrets=["sk-SECRETSECRET1234"], clock=clock, timer=timer, cassette_cap=cap, **kw)
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


# -- the fused tool call (DirectCall.tool): the whole of _tool in one pass, for plain flat inputs --

# Inputs at and around the fused call's edge: plain scalars (taken), and values it hands to the
# general path — floats, braces, quotes, backslashes, newlines, controls, surrogates, lists, a
# registered secret or a credential-looking text (the redactor's prefilter), wrong types, missing
# or unknown arguments.
_FLAT_STR = st.sampled_from(["a.txt", "no", "a", "", "x y", "é ✓", "{y}", 'q"q', "b\\s", "l\nl", "t\tt", "\ud83d",
                             "sk-SECRETSECRET1234", "sk-abcdefghijklmnopqrstu", "key=v", "ok.txt"])
_FLAT_VAL = st.one_of(_FLAT_STR, st.integers(-3, 9), st.booleans(), st.none(), st.just(1.5), st.just([1]))
_FLAT_CALL = st.one_of(
    st.builds(lambda p, n, f, t: {"name": "note", "input": {"path": p, "n": n, "flag": f, "tag": t}},
              _FLAT_STR, st.integers(0, 9), st.booleans(), _FLAT_VAL),
    st.builds(lambda d: {"name": "note", "input": d},
              st.dictionaries(st.sampled_from(["path", "n", "flag", "tag", "zzz", "p\"q"]), _FLAT_VAL, max_size=4)),
    st.builds(lambda p: {"name": "glance", "input": {"path": p}}, _FLAT_STR),
    st.builds(lambda i: {"name": "echo", "input": {"i": i}}, _FLAT_VAL),
    st.builds(lambda p, t: {"name": "put", "input": {"path": p, "text": t}}, st.sampled_from(["ok.txt", "no"]), _FLAT_STR),
    st.builds(lambda i: {"name": "boom", "input": {"i": i}}, st.integers(0, 3)),
    st.just({"name": "nope", "input": {}}),
)


@settings(max_examples=15, deadline=None)
@given(calls=st.lists(_FLAT_CALL, min_size=1, max_size=6), approver=st.sampled_from(["callback", "auto"]),
       cap=st.sampled_from([None, 40]))
def test_random_flat_turns_are_the_same_fused_and_through_run_call(tmp_path_factory, calls, approver, cap):
    from _pytest.monkeypatch import MonkeyPatch

    for i, c in enumerate(calls):  # the model's tool-call ids
        c["id"] = f"toolu_{i}"
    mp = MonkeyPatch()
    try:
        tmp = tmp_path_factory.mktemp("flat")
        fused = _record(tmp, "fused", mp, calls, approver=approver, ticking=True, cap=cap)
        assert fused == _record(tmp, "run_call", mp, calls, approver=approver, ticking=True, cap=cap)
    finally:
        mp.undo()


_FUSED_CALLS = [
    {"id": "t1", "name": "note", "input": {"path": "a.txt", "n": 1, "flag": True, "tag": None}},
    {"id": "t2", "name": "note", "input": {"n": 9, "path": "b"}},  # its answer holds a secret (redacted cell)
    {"id": "t3", "name": "note", "input": {"path": "no", "n": 2}},  # refused by the callback approver
    {"id": "t4", "name": "note", "input": {"path": "c", "n": 8}},  # the op fails
    {"id": "t5", "name": "note", "input": {"path": "d", "n": 7, "tag": "é ✓"}},  # over the cap
    {"id": "t6", "name": "glance", "input": {"path": "e"}},  # an outcome with a view
    {"id": "t7", "name": "glance", "input": {"path": "a"}},
    {"id": "t8", "name": "echo", "input": {"i": 3}},
    {"id": "t9", "name": "note", "input": {"path": "p" * 190, "flag": False}},  # an input view over the cap
]


def _spy_on_the_fused_call(monkeypatch) -> list[bool]:
    """A list that gets, per tool call, whether the fused call (``DirectCall.tool``) took it."""
    from flux.agent import loop

    taken: list[bool] = []
    tool = loop.DirectCall.tool

    def spy(self, *a):
        r = tool(self, *a)
        taken.append(r is not None)
        return r
    monkeypatch.setattr(loop.DirectCall, "tool", spy)
    return taken


@pytest.mark.parametrize("approver", ["callback", "auto"])
def test_a_flat_turn_takes_the_fused_tool_call_and_records_what_run_call_records(tmp_path, monkeypatch, approver):
    taken = _spy_on_the_fused_call(monkeypatch)
    fused = _record(tmp_path, "fused", monkeypatch, _FUSED_CALLS, approver=approver, ticking=True, cap=200)
    assert taken == [True] * len(_FUSED_CALLS)  # every call here is one the fused path takes
    assert fused == _record(tmp_path, "run_call", monkeypatch, _FUSED_CALLS, approver=approver, ticking=True, cap=200)
    assert fused == _record(tmp_path, "run", monkeypatch, _FUSED_CALLS, approver=approver, ticking=True, cap=200)
    payloads = "".join(r[5] for r in fused[0])
    assert "sk-SECRETSECRET1234" not in payloads and '"truncated":true' in payloads
    assert '"input_view_truncated":true' in payloads
    assert ('"denied":true' in payloads) == (approver == "callback")


_GENERAL_CALLS = [  # calls the fused tool call hands to the general path, each for its own reason
    {"id": "g1", "name": "note", "input": {"path": "sk-SECRETSECRET1234"}},  # a registered secret
    {"id": "g2", "name": "note", "input": {"path": "x", "tag": "ghp_abcdefghijklmnopqrstu"}},  # a credential's look
    {"id": "g3", "name": "note", "input": {"path": "{y}"}},  # braces (escaped in the plan)
    {"id": "g4", "name": "note", "input": {"path": 'q"q'}},  # an escape in the literal
    {"id": "g5", "name": "note", "input": {"path": "l\nl"}},  # a newline (spelt with """ in the plan)
    {"id": "g6", "name": "note", "input": {"path": "x", "n": True}},  # a bool for an int: invalid
    {"id": "g6b", "name": "note", "input": {"path": "x", "flag": 1}},  # an int for a bool: invalid
    {"id": "g6c", "name": "note", "input": {"path": 1}},  # an int for a string: invalid
    {"id": "g7", "name": "note", "input": {"path": "x", "tag": 1.5}},  # a float
    {"id": "g8", "name": "note", "input": {"path": "x", "tag": [1]}},  # a list
    {"id": "g9", "name": "note", "input": {"n": 1}},  # a missing argument
    {"id": "g10", "name": "note", "input": {"path": "x", "zzz": 1}},  # an unknown one
    {"id": "g11", "name": "shout", "input": {"text": "hi"}},  # an answer that is not text (JSON-encoded)
    {"id": "g12", "name": "nope", "input": {}},  # an unknown tool
]


def test_calls_the_fused_tool_call_hands_over_are_recorded_by_the_general_path(tmp_path, monkeypatch):
    taken = _spy_on_the_fused_call(monkeypatch)
    fused = _record(tmp_path, "fused", monkeypatch, _GENERAL_CALLS, ticking=True)
    assert taken == [False] * 12 + [True, False]
    assert fused == _record(tmp_path, "run_call", monkeypatch, _GENERAL_CALLS, ticking=True)
    assert "sk-SECRETSECRET1234" not in "".join(r[5] for r in fused[0])


@pytest.mark.parametrize("n", [2**63 - 1, 2**63, 2**64 - 1, 2**64, 2**70, -(2**63), -(2**63) - 1, 10**30])
def test_ints_past_i64_and_u64_are_recorded_fused_as_the_general_path_records_them(tmp_path, monkeypatch, n):
    # The parser reads an integer beyond i64/u64 back as an f64 (serde_json's rule); the fused call
    # writes the literal from the input: both ways must still store the same rows.
    calls = [{"id": "t1", "name": "note", "input": {"path": "a", "n": n}}, {"id": "t2", "name": "echo", "input": {"i": n}}]
    assert _record(tmp_path, "fused", monkeypatch, calls, ticking=True) == \
        _record(tmp_path, "run_call", monkeypatch, calls, ticking=True)
