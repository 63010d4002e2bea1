"""Replay's direct path for multi-statement host plans (flux.timemachine.replay_direct.HostPlan,
issue 10 item 2): a plan of several ``name = op({…})`` lines — how a resumable turn's plans are
stored — is keyed from its text exactly as the parser keys it, and run against the tape (the §4.10
fast-forward, the requests, the ledger rows) exactly as the interpreter runs it: on generated
resumable sessions with halts, retries, redacted plans and stray rows, corrupted copies, through
`flux replay`'s streamed path and the classic one, against the interpreter-only replay."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import flux.timemachine.replay as R
from flux.canonical import canonical_json, sha256_hex
from flux.cassette.replay import ReplayHost, ReplayTape
from flux.lang import ast as A
from flux.lang.catalog import OpCatalog, OpSpec
from flux.lang.hashes import flow_key, stmt_hash16
from flux.lang.interpreter import Interpreter, interpolate
from flux.lang.parser import RESERVED
from flux.model.stored_plan import StoredPlanError, parse_stored_plan
from flux.store import StoreReader, StoreWriter
from flux.timemachine.replay import _replay, replay_session
from flux.timemachine.serve import PlanServer, ScratchSink, gc_paused, never_asked
from flux.timemachine.replay_direct import NOT_DIRECT, DirectRunner, HostCall, HostPlan, direct_plan, host_plan
from flux.timemachine.replay_input import read_replay_input
from tests.core.test_replay_direct import (
    _BINDERS, _CATALOG, _EVERYTHING, _JSON, _NAMES, _OPS, _STRINGS, _spell, _strings_in,
)
from tests.core.test_replay_direct import _OUTCOMES as _CELL_OUTCOMES
from tests.core.test_replay_direct import _VALUES as _PLAN_VALUES
from tests.core.test_replay_fastpath import _mutate, _outcome
from tests.core.test_replay_stream import _EXTRAS, _write_resumable
from tests.helpers import cell as make_cell

# ------------------------------------------------------------------------------------------------
# The keys: direct_plan(text) is None, or exactly what the parser makes of text.


def _check_plan(text: str) -> bool:
    """direct_plan(text) agrees with the parser; True when it recognised a multi-statement plan."""
    dp = direct_plan(text)
    try:
        draft, key = parse_stored_plan(text)
    except StoredPlanError:
        assert dp is None, f"the direct path accepted a plan the parser refuses: {text!r}"
        return False
    if type(dp) is not HostPlan:
        return False
    assert draft.name is None and not draft.params and draft.returns is None
    assert dp.flow_key == key == flow_key(None, draft.body)
    assert len(dp.stmts) == len(draft.body) >= 2
    for st_, node in zip(dp.stmts, draft.body):
        assert isinstance(node, A.Bind) and isinstance(node.value, A.Call) and len(node.value.args) == 1
        lit = node.value.args[0]
        assert isinstance(lit, A.Lit) and isinstance(lit.value, dict)
        assert (st_.stmt, st_.name, st_.op) == (stmt_hash16(node), node.name, node.value.op)
        assert st_.arg == canonical_json(lit.value)  # the op's input JSON, before interpolation
        if st_.value is None:  # no placeholder: interpolation can change nothing whatever is bound
            assert st_.input_hash == sha256_hex(canonical_json(lit.value))
            for s in _strings_in(lit.value):
                assert "{{" not in s and "}}" not in s and interpolate(s, _EVERYTHING) == s
        else:
            assert st_.input_hash is None and canonical_json(st_.value) == canonical_json(lit.value)
    return True


@st.composite
def _multi_texts(draw):
    n = draw(st.integers(2, 4))
    lines, plain = [], True
    for _ in range(n):
        value = draw(st.one_of(st.dictionaries(_STRINGS, _JSON, max_size=3),
                               st.dictionaries(st.sampled_from(["path", "n", "q"]),
                                               st.one_of(st.text(max_size=5), st.integers(-5, 5)), max_size=3)))
        how = draw(st.sampled_from(["canonical"] * 4 + ["triple", "spaced", "unsorted", "ascii"]))
        sigil = draw(st.sampled_from(["", "", "$"]))
        name, op = draw(_NAMES), draw(_OPS)
        try:
            arg = _spell(value, how)
        except (ValueError, UnicodeError):
            arg = "{}"
        lines.append(f"  {sigil}{name} = {op}({arg})")
        canon = canonical_json(value)
        plain = plain and how == "canonical" and name not in RESERVED and op not in RESERVED and op != "fmt" \
            and canon.isascii() and "\\u" not in canon and not any(c.isdigit() for c in canon) \
            and "\n" not in canon
    text = "flow\n" + "\n".join(lines) + "\n"
    edit = draw(st.sampled_from(["none"] * 6 + ["insert", "delete", "blank", "checkpoint", "no-newline", "crlf",
                                                "two-newlines", "indent", "comment"]))
    if edit == "insert":
        pos = draw(st.integers(0, len(text)))
        text = text[:pos] + draw(st.sampled_from(['"', '"""', "\\", "{", "}", ",", ":", "1", " ", "\n", "#", "\r",
                                                  ")", "("])) + text[pos:]
    elif edit == "delete":
        pos = draw(st.integers(0, len(text) - 1))
        text = text[:pos] + text[pos + 1:]
    elif edit == "blank":
        text = text.replace("\n  ", "\n\n  ", 1)
    elif edit == "checkpoint":
        text = text + '  checkpoint "c"\n'
    elif edit == "no-newline":
        text = text[:-1]
    elif edit == "crlf":
        text = text.replace("\n", "\r\n")
    elif edit == "two-newlines":
        text = text + "\n"
    elif edit == "indent":
        text = text.replace("\n  ", "\n   ", 1)
    elif edit == "comment":
        text = text.replace("\n", "  # c\n", 1)
    return text, plain and edit in ("none", "no-newline")


@settings(max_examples=int(os.environ.get("FLUX_DIRECT_EXAMPLES", "150")), deadline=None)
@given(_multi_texts())
def test_host_plan_keys_are_the_parsers_keys(case):
    text, plain = case
    recognised = _check_plan(text)
    if plain:
        assert recognised, f"a canonical multi-statement host plan was not recognised: {text!r}"


@pytest.mark.parametrize("text", [
    'flow\n  a = read({"path":"src/a.py"})\n  b = grep({"q":"{a}"})\n',
    'flow\n  $a = read({})\n  a = read({"n":{"m":[1,2.5,null,true]}})\n  c = fs.read-all({"x":"y"})',
    'flow\n  a = read({"new":"x = 4","old":"x = 3","path":"src/m.py","z":1})\n  b = bash({"command":"é ✓"})\n',
])
def test_canonical_multi_statement_host_plans_are_recognised(text):
    assert _check_plan(text)


# One fixed text per reason host_plan declines it (then the parser, and the interpreter, take it).
_DECLINED = {
    "one statement": 'flow\n  a = read({"p":1})\n',
    "a blank line": 'flow\n  a = read({"p":1})\n\n  b = read({"p":2})\n',
    "two trailing newlines": 'flow\n  a = read({"p":1})\n  b = read({"p":2})\n\n',
    "CRLF": 'flow\r\n  a = read({"p":1})\r\n  b = read({"p":2})\r\n',
    "a bare CR in a line": 'flow\n  a = read({"p":1})\r\n  b = read({"p":2})\n',
    "a checkpoint": 'flow\n  a = read({"p":1})\n  checkpoint "c"\n  b = read({"p":2})\n',
    "a comment": 'flow\n  a = read({"p":1})  # c\n  b = read({"p":2})\n',
    "three-space indent": 'flow\n   a = read({"p":1})\n  b = read({"p":2})\n',
    "spaces in the JSON": 'flow\n  a = read({"p": 1})\n  b = read({"p":2})\n',
    "unsorted keys": 'flow\n  a = read({"p":1})\n  b = read({"q":2,"p":1})\n',
    "a duplicate key": 'flow\n  a = read({"p":1})\n  b = read({"p":1,"p":2})\n',
    "a 19-digit number": 'flow\n  a = read({"p":1})\n  b = read({"p":1234567890123456789})\n',
    "a lone surrogate": 'flow\n  a = read({"p":"\ud83d"})\n  b = read({"p":2})\n',
    "an escaped surrogate": 'flow\n  a = read({"p":1})\n  b = read({"p":"\\ud83d"})\n',
    "a triple-quoted string": 'flow\n  a = read({"p":1})\n  b = read({"p":"""x"""})\n',
    "a reserved binder": 'flow\n  a = read({"p":1})\n  when = read({"p":2})\n',
    "a reserved binder with $": 'flow\n  a = read({"p":1})\n  $flow = read({"p":2})\n',
    "a reserved op": 'flow\n  a = read({"p":1})\n  b = each({"p":2})\n',
    "fmt": 'flow\n  a = read({"p":1})\n  b = fmt({"p":2})\n',
    "not an object": 'flow\n  a = read({"p":1})\n  b = read([1])\n',
    "two arguments": 'flow\n  a = read({"p":1})\n  b = read({"p":2}, {"q":3})\n',
    "a named flow": 'flow f\n  a = read({"p":1})\n  b = read({"p":2})\n',
    "a bare expression": 'flow\n  a = read({"p":1})\n  read({"p":2})\n',
    "too deep": 'flow\n  a = read({"p":1})\n  b = read(' + '{"p":' * 130 + "1" + "}" * 130 + ")\n",
}


@pytest.mark.parametrize("why", sorted(_DECLINED))
def test_texts_host_plan_declines(why):
    text = _DECLINED[why]
    assert host_plan(text) is None
    assert type(direct_plan(text)) is not HostPlan
    _check_plan(text)


# ------------------------------------------------------------------------------------------------
# The runner declines (NOT_DIRECT, before anything is done) what it cannot run as the interpreter.

_TEXT = 'flow\n  a = read({"p":1})\n  b = grep({"q":"{a}"})\n'


def _setup(cells, *, keep=False, catalog=None, host=None):
    tape = ReplayTape(cells, lean=not keep)
    sink = ScratchSink(tape, None, None, keep=keep)
    interp = Interpreter(catalog or OpCatalog.permissive(), host or ReplayHost(tape), sink, never_asked,
                         run_id="replay")
    return interp, sink, tape, DirectRunner(interp)


def _cells():
    return [make_cell("read", {"p": 1}, "A").event, make_cell("grep", {"q": "A"}, "B").event]


def _state(interp, sink, tape, h):
    halt = None if h is None else (h.kind, h.error, h.node, h.stmt, h.op)
    return (halt, dict(interp.symbols), dict(interp.values), interp._next_vid, interp._last_vid, interp._steps_base,
            interp.clock.t, dict(sink.completed_rows), list(sink.open_halts), dict(sink.checkpoints), list(sink.events),
            list(sink.results),
            list(tape.served), list(tape._consumed), tape.diverged, tape.requests, tape.unserved, list(tape.log),
            tape.last)


@pytest.mark.parametrize("why", ["an op the catalog lacks", "not a replay host", "a plan already running"])
def test_the_runner_declines_before_anything_is_done(why):
    hp = host_plan(_TEXT)
    catalog = OpCatalog([OpSpec("read")]) if why == "an op the catalog lacks" else None
    interp, sink, tape, runner = _setup(_cells(), keep=True, catalog=catalog)
    if why == "not a replay host":
        runner.tape = None
    elif why == "a plan already running":
        interp._sched = object()
    before = _state(interp, sink, tape, None)
    assert runner.run(hp, None) is NOT_DIRECT
    assert runner.run(hp, sink.ledger()) is NOT_DIRECT
    assert runner.run_through(hp) is NOT_DIRECT
    assert _state(interp, sink, tape, None) == before
    if why == "an op the catalog lacks":  # and the interpreter's run is what the replay then does
        other = _setup(_cells(), keep=True, catalog=catalog)
        h = PlanServer(interp).run(hp, None, flow_key=hp.flow_key)
        h2 = other[0].run(hp.draft(), resumable=True, ledger=None, flow_key=hp.flow_key).halted
        assert h.kind == "runtime" and "unknown op" in h.error
        assert _state(interp, sink, tape, h) == _state(*other[:3], h2)


# ------------------------------------------------------------------------------------------------
# run / run_through against the interpreter, statement by statement state.

_VALUES = [{"p": 1}, {"p": 2}, {"q": "{a}"}, {"q": "{b}"}, {"n": 1, "p": "x"}]
_OUTCOMES = ["ok"] * 6 + ["error", "denied", "truncated", "wrong", "twice", "missing"]


@st.composite
def _runs(draw):
    """Plans of 2-3 host statements (some repeated: retries, fast-forwards) and the cells they find."""
    texts, cells, bound = [], [], {}
    pool = []
    for _ in range(draw(st.integers(1, 3))):
        stmts = [(draw(st.sampled_from(["a", "b", "c"])), draw(st.sampled_from(["read", "grep"])),
                  draw(st.sampled_from(range(len(_VALUES))))) for _ in range(draw(st.integers(2, 3)))]
        pool.append("flow\n" + "".join(f"  {n} = {op}({canonical_json(_VALUES[v])})\n" for n, op, v in stmts))
    for _ in range(draw(st.integers(1, 6))):
        text = draw(st.sampled_from(pool))
        texts.append(text)
        for line in text.split("\n")[1:-1]:
            name, rest = line.strip().split(" = ", 1)
            op, arg = rest.split("(", 1)
            value = json.loads(arg[:-1])
            inp = {k: interpolate(v, bound) if isinstance(v, str) else v for k, v in value.items()}
            outcome = draw(st.sampled_from(_OUTCOMES))
            if outcome == "missing":
                break
            if outcome == "wrong":
                inp = {"other": 1}
            content = f"out-{len(cells)}"
            for _ in range(2 if outcome == "twice" else 1):
                cells.append(make_cell(op, inp, content, is_error=outcome == "error", denied=outcome == "denied",
                                       truncated=outcome == "truncated").event)
            if outcome not in ("ok", "twice"):
                break
            bound[name] = content
    return texts, cells


@settings(max_examples=int(os.environ.get("FLUX_DIRECT_EXAMPLES", "60")), deadline=None)
@given(run=_runs(), keep=st.sampled_from([False, False, True]), checkpointed=st.sampled_from([None] * 3 + [-1, 0, 1]))
def test_run_runs_as_the_interpreter_and_run_through_as_running_and_letting_go(run, keep, checkpointed):
    """Each plan three ways on three replays of the same tape, state compared after every plan: the
    interpreter (a); run (b); and (c) in the let-go case (no latch, no row of the key) run_through, else
    run — with (a) letting go of the rows as the stream does in that case (a keeping sink is not quiet:
    run_through declines it, and the stream, whose sink is quiet, runs it and lets go)."""
    texts, cells = run
    a, b, c = _setup(cells, keep=keep), _setup(cells, keep=keep), _setup(cells, keep=keep)
    if checkpointed is not None:  # a checkpoint noted under the first plan's key (no host plan makes one, but a
        for x in (a, b, c):  # halted plan that reached one is a latch whose fast-forward starts after it)
            x[1].checkpoints[host_plan(texts[0]).flow_key] = checkpointed
    for text in texts:
        hp = host_plan(text)
        assert hp is not None
        key = hp.flow_key
        (ia, sa, ta, _ra), (ib, sb, tb, rb), (ic, sc, tc, rc) = a, b, c
        la, lb, lc = sa.ledger(), sb.ledger(), sc.ledger()
        assert (la is None) == (lb is None) == (lc is None)
        through = la is None and key not in sa.completed_rows
        try:
            ha = ia.run(parse_stored_plan(text)[0], resumable=True, ledger=la, flow_key=key).halted
        except Exception as e:  # noqa: BLE001 - a ResumeError: the same from the direct path
            with pytest.raises(type(e)):
                rb.run(hp, lb)
            return
        hb = rb.run(hp, lb)
        hc = rc.run_through(hp) if through else NOT_DIRECT
        if hc is NOT_DIRECT:
            assert not through or keep or checkpointed is not None  # a keeping sink, a checkpointed key
            hc = rc.run(hp, lc)
            if through and hc is None:
                sc.let_go_of_rows(key, ic.values)
        assert _state(ib, sb, tb, hb) == _state(ia, sa, ta, ha)
        if through and ha is None:
            sa.let_go_of_rows(key, ia.values)
            sb.let_go_of_rows(key, ib.values)
        assert _state(ic, sc, tc, hc) == _state(ia, sa, ta, ha)


def test_a_latch_row_whose_value_is_gone_is_the_interpreter_s_resume_error():
    from flux.lang.interpreter import ResumeError

    hp = host_plan(_TEXT)
    out = []
    for direct in (True, False):
        interp, sink, tape, runner = _setup(_cells(), keep=True)
        sink.open_halts.append("h:0000000000000000")
        sink.completed_rows["h:0000000000000000"] = (0, hp.stmts[0].stmt, "v_99")
        with pytest.raises(ResumeError) as e:
            if direct:
                runner.run(hp, sink.ledger())
            else:
                interp.run(hp.draft(), resumable=True, ledger=sink.ledger(), flow_key=hp.flow_key)
        out.append((str(e.value), _state(interp, sink, tape, None)))
    assert out[0] == out[1] and "v_99" in out[0][0]


# ------------------------------------------------------------------------------------------------
# Whole replays: resumably recorded sessions through the new path vs the interpreter-only replay.


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostplan") / "store"
    with StoreWriter(d) as w:
        yield d, w


_RAN: list[int] = []


class _Spy(DirectRunner):
    """Counts the host plans of two or more statements the direct path is asked to run."""

    def run(self, plan, ledger):
        if type(plan) is HostPlan:
            _RAN.append(1)
        return DirectRunner.run(self, plan, ledger)

    def run_through(self, plan):
        if type(plan) is HostPlan:
            _RAN.append(1)
        return DirectRunner.run_through(self, plan)


def _interpreted(reader, sid, catalog, keep):
    def go():
        inp = read_replay_input(reader, sid)
        with gc_paused():
            return _replay(inp, turn=None, catalog=catalog, on_progress=None, scratch_dir=None, recorded_dir=None,
                           direct=False, keep=keep)
    return _outcome(go, detail=keep)


@st.composite
def _plan(draw):
    """test_replay_direct's plans, multi-statement ones (mostly canonical: host plans) more often."""
    def statement():
        return draw(st.sampled_from(_BINDERS)), draw(st.sampled_from(["read", "write", "grep"])), \
            draw(st.sampled_from(_PLAN_VALUES)), draw(st.sampled_from(["canonical"] * 5 + ["triple", "spaced"]))
    first = statement()
    kind = draw(st.sampled_from(["host"] * 2 + ["multi"] * 4 + ["checkpoint", "rebind"]))
    stmts = [first] if kind == "host" else [first] + [statement() for _ in range(draw(st.integers(1, 2)))]
    return kind, stmts, [draw(st.sampled_from(_CELL_OUTCOMES)) for _ in stmts], draw(st.booleans())


@settings(max_examples=int(os.environ.get("FLUX_HOSTPLAN_EXAMPLES", "50")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(st.tuples(st.lists(_plan(), min_size=1, max_size=5), st.booleans()), min_size=1, max_size=3),
       extras=_EXTRAS, corrupt=st.sampled_from([False] * 3 + [True]),
       catalog=st.sampled_from([None] * 3 + [_CATALOG]), data=st.data())
def _hostplan_examples(shared_store, turns, extras, corrupt, catalog,
                                                                   data, monkeypatch):
    """`flux replay`'s path (streamed, or classic when the stream stands aside) and the full report
    (classic, direct) against the interpreter-only replay: the same report or the same error."""
    import flux.timemachine.serve as serve_mod

    store, writer = shared_store
    sid = _write_resumable(writer, turns, extras)
    if corrupt:
        _mutate(store, data, stream=sid)
    monkeypatch.setattr(serve_mod, "DirectRunner", _Spy)  # (every replay's direct path: PlanServer's)
    with StoreReader(store) as r:
        lean = _outcome(lambda: replay_session(r, sid, catalog=catalog, detail=False), detail=False)
        assert lean == _interpreted(r, sid, catalog, keep=False)
        full = _outcome(lambda: replay_session(r, sid, catalog=catalog, detail=True))
        assert full == _interpreted(r, sid, catalog, keep=True)


def test_a_resumable_session_replays_as_the_interpreter_replays_it(shared_store, monkeypatch):
    """The differential above, then its coverage: its host plans ran directly at least 20 times (one
    test, so it holds whatever else runs or in what order)."""
    before = len(_RAN)
    _hostplan_examples(shared_store=shared_store, monkeypatch=monkeypatch)
    assert len(_RAN) - before >= 10  # (about half the examples are host plans; 10 keeps the bound seed-proof)


def test_the_ledger_benchmark_store_runs_every_plan_directly(tmp_path, monkeypatch):
    """gen_store's ledger shape (every other plan two statements, statement rows, halts): no plan
    reaches the interpreter, and the report is the interpreter-only replay's."""
    import subprocess
    import sys

    from tests.helpers import REPO

    store = tmp_path / "ledger"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "gen_store.py"), str(store), "--sessions", "1",
                    "--big", "551", "--shape", "ledger"], check=True, capture_output=True)
    ran = []
    real = Interpreter.run

    def spy(self, *a, **k):
        ran.append(1)
        return real(self, *a, **k)

    with StoreReader(store) as r:
        monkeypatch.setattr(Interpreter, "run", spy)
        lean = _outcome(lambda: replay_session(r, "last", detail=False), detail=False)
        assert ran == []
        monkeypatch.setattr(Interpreter, "run", real)
        assert lean == _interpreted(r, "last", None, keep=False)
        assert lean[0] == "report" and lean[-2] is True  # faithful


def test_a_scratch_store_holds_the_same_run_either_way(tmp_path):
    """A replay that writes its scratch store (the events the direct runner emits, through the
    writer) writes what the interpreter-only replay writes: completions, a halt inside a plan,
    and the retry's fast-forward over the halted plan's rows."""
    import sqlite3

    from tests.core.test_replay_direct import _write_session

    store = tmp_path / "store"
    a, b = ("adaptive_gather_1", "read", {"path": "a"}, "canonical"), \
        ("adaptive_gather_2", "grep", {"path": "{adaptive_gather_1}"}, "canonical")
    plans = [("multi", [a, b], ["ok", "ok"], True), ("multi", [b, a], ["ok", "error"], True),
             ("multi", [b, a], ["ok", "ok"], True)]
    _write_session(store, [(plans, True)], False)
    runs = []
    with StoreReader(store) as r:
        inp = read_replay_input(r, "s_1")
        for direct in (True, False):
            d = tmp_path / f"scratch-{direct}"
            with gc_paused():
                rep = _replay(inp, turn=None, catalog=None, on_progress=None, scratch_dir=d, recorded_dir=store,
                              direct=direct)
            con = sqlite3.connect(d / "events.db")
            runs.append((rep.scratch_events, [p.halt_kind for p in rep.plans], con.execute(
                "SELECT stream_seq, kind, payload FROM events WHERE kind = 'run' ORDER BY stream_seq").fetchall()))
            con.close()
    assert runs[0] == runs[1]
    events = [e["event"] for e in runs[0][0]]
    assert runs[0][1] == [None, "runtime", None] and "plan_resumed" in events and events.count("plan_halted") == 1
