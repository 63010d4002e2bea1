"""Replay's direct path for host plans (flux.timemachine.replay_direct) is exactly the parser and
the interpreter: the keys it reads off a plan's text are the parser's, and a replay that serves
host plans directly reports what the interpreter-only replay reports, on generated and corrupted
stores."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from flux.canonical import canonical_json, json_string, scrub_text, sha256_hex
from flux.errors import FluxError
from flux.lang import ast as A
from flux.lang.catalog import OpCatalog, OpSpec
from flux.lang.hashes import flow_key, stmt_hash16
from flux.lang.interpreter import interpolate
from flux.lang.parser import RESERVED, parse
from flux.model.stored_plan import StoredPlanError, parse_stored_plan
from flux.store import PlanAttempted, Run, StatementCompleted, StoreReader, StoreWriter, TurnEnded
from flux.timemachine.replay import _replay, replay_session
from flux.timemachine.serve import gc_paused
from flux.timemachine.replay_direct import host_call
from flux.timemachine.replay_input import read_replay_input
from tests.core.test_replay_fastpath import _brief, _mutate, _outcome
from tests.helpers import REPO, cell, fixture_dir

# ------------------------------------------------------------------------------------------------
# The keys: host_call(text) is None, or exactly what the parser makes of text.

_STRINGS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["{adaptive_gather_1}", "{{x}}", "}}", "a{b", "x\ny\n", 'q"t', 'ends"', "\\", "\x01",
                     "\ud83d", "é✓", '"""', "\r\n", "#c"]),
)
_NUMBERS = st.one_of(st.integers(-(2 ** 65), 2 ** 65), st.sampled_from([2 ** 63, 2 ** 64, -(2 ** 63) - 1, 10 ** 18]),
                     st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1e16, -0.0, 1e-7, 0.5, 1.0]))
_JSON = st.recursive(st.one_of(st.none(), st.booleans(), _NUMBERS, _STRINGS),
                     lambda kids: st.one_of(st.lists(kids, max_size=3), st.dictionaries(_STRINGS, kids, max_size=3)),
                     max_leaves=8)
_NAMES = st.one_of(st.sampled_from(["adaptive_gather_1", "x", "flow", "if", "fmt", "true", "_"]),
                   st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True))
_OPS = st.one_of(st.sampled_from(["read", "fs.read", "a-b", "fmt", "each", "when"]),
                 st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,8}", fullmatch=True))


def _triple(v) -> str:
    """JSON with every string that holds a newline written as a verbatim triple-quoted string."""
    if isinstance(v, str):
        return '"""' + v + '"""' if "\n" in v else json_string(v)
    if isinstance(v, dict):
        return "{" + ",".join(json_string(k) + ":" + _triple(x) for k, x in sorted(v.items())) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_triple(x) for x in v) + "]"
    return canonical_json(v)


def _spell(value: dict, how: str) -> str:
    if how == "canonical":
        return canonical_json(value)
    if how == "triple":
        return _triple(value)
    if how == "spaced":
        return json.dumps(value, sort_keys=True, ensure_ascii=False)
    if how == "unsorted":
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return json.dumps(value)  # ascii escapes


@st.composite
def _host_texts(draw):
    value = draw(st.dictionaries(_STRINGS, _JSON, max_size=4))
    how = draw(st.sampled_from(["canonical", "canonical", "triple", "spaced", "unsorted", "ascii"]))
    sigil = draw(st.sampled_from(["", "", "$"]))
    name, op = draw(_NAMES), draw(_OPS)
    try:
        arg = _spell(value, how)
    except (ValueError, UnicodeError):
        arg = "{}"
    text = f"flow\n  {sigil}{name} = {op}({arg})\n"
    edit = draw(st.sampled_from(["none"] * 6 + ["dup", "trailing", "insert", "delete", "no-newline", "crlf"]))
    if edit == "dup" and arg != "{}":
        text = text.replace("({", "({" + arg[1:-1] + ",", 1)
    elif edit == "trailing" and arg != "{}":
        text = text.replace("})\n", ",})\n")
    elif edit == "insert":
        pos = draw(st.integers(0, len(text)))
        text = text[:pos] + draw(st.sampled_from(['"', '"""', "\\", "{", "}", ",", ":", "1", " ", "\n", "#"])) + text[pos:]
    elif edit == "delete" and text:
        pos = draw(st.integers(0, len(text) - 1))
        text = text[:pos] + text[pos + 1:]
    elif edit == "no-newline":
        text = text[:-1]
    elif edit == "crlf":
        text = text.replace("\n", "\r\n")
    return text, how, edit, value, name, op


def _strings_in(v):
    if isinstance(v, str):
        yield v
    elif isinstance(v, dict):
        for x in v.values():
            yield from _strings_in(x)
    elif isinstance(v, list):
        for x in v:
            yield from _strings_in(x)


def _check_key(text: str) -> bool:
    """host_call(text) agrees with the parser; True when it recognised the text."""
    hc = host_call(text)
    try:
        draft, key = parse_stored_plan(text)
    except StoredPlanError:
        assert hc is None, f"the direct path accepted a plan the parser refuses: {text!r}"
        return False
    if hc is None:
        return False
    (stmt,) = draft.body
    assert draft.name is None and not draft.params and draft.returns is None
    assert isinstance(stmt, A.Bind) and isinstance(stmt.value, A.Call) and len(stmt.value.args) == 1
    lit = stmt.value.args[0]
    assert isinstance(lit, A.Lit) and isinstance(lit.value, dict)
    assert (hc.flow_key, hc.stmt, hc.name, hc.op) == (key, stmt_hash16(stmt), stmt.name, stmt.value.op)
    assert hc.flow_key == flow_key(None, draft.body)
    assert hc.arg == canonical_json(lit.value)  # the op's input JSON, before interpolation
    if hc.value is None:  # no placeholder: interpolation can change nothing whatever is bound
        assert hc.input_hash == sha256_hex(canonical_json(lit.value))
        for s in _strings_in(lit.value):
            assert "{{" not in s and "}}" not in s and interpolate(s, _EVERYTHING) == s
    else:
        assert canonical_json(hc.value) == canonical_json(lit.value)
    return True


class _Everything(dict):
    """A symbol table that binds every name (to probe interpolation)."""

    def __contains__(self, key):
        return True

    def __getitem__(self, key):
        return "BOUND"


_EVERYTHING = _Everything()


@settings(max_examples=int(os.environ.get("FLUX_DIRECT_EXAMPLES", "150")), deadline=None)
@given(_host_texts())
def test_host_call_keys_are_the_parsers_keys(case):
    text, how, edit, value, name, op = case
    recognised = _check_key(text)
    if _plain(text, how, edit, value, name, op):
        assert recognised, f"a canonical host plan was not recognised: {text!r}"


def _plain(text, how, edit, value, name, op) -> bool:
    """Whether ``text`` is a host plan the direct path must recognise: canonical JSON (or canonical
    with triple-quoted strings the formatter would write), nothing the parser reads otherwise."""
    import re

    if edit != "none" or how not in ("canonical", "triple") or name in RESERVED or op in RESERVED or op == "fmt":
        return False
    try:
        canon = canonical_json(value)
        if scrub_text(canon) is not canon or canonical_json(json.loads(canon)) != canon:
            return False
        parse(text)
    except Exception:
        return False
    if re.search(r"[0-9]{19}", canon):
        return False
    if how == "triple" and any('"""' in s or s.endswith('"') or "\r" in s for s in _strings_in(value) if "\n" in s):
        return False
    return True


# Flat objects near the line: strings with what canonical JSON escapes or a placeholder may hold,
# numbers serde or the parser reads otherwise, keys out of order or twice.
_FLAT_STRINGS = st.one_of(st.text(max_size=6), st.sampled_from(
    ["", "a", "b", "ab", "é", "\x7f", "\u2028", "\x1f", '"', "\\", "{", "}", "{a}", "a}", "Z", "_", "10"]))
_FLAT_SCALARS = st.one_of(_FLAT_STRINGS, st.none(), st.booleans(), st.integers(-(10 ** 20), 10 ** 20),
                          st.sampled_from([0, -1, 10 ** 17, 10 ** 18 - 1, 10 ** 18, -(10 ** 18), 1.5, -0.0, 1e16]))


@st.composite
def _flat_texts(draw):
    items = draw(st.lists(st.tuples(_FLAT_STRINGS, _FLAT_SCALARS), max_size=4))
    text = "{" + ",".join(json_string(k) + ":" + canonical_json(v) for k, v in items) + "}"
    edit = draw(st.sampled_from(["none"] * 4 + ["sorted", "number", "ws"]))
    if edit == "sorted":  # what canonical JSON writes for these members (sorted, the last of a key)
        text = canonical_json(dict(items))
    elif edit == "number":  # a member whose number JSON reads but canonical JSON writes otherwise
        raw = draw(st.sampled_from(["-0", "00", "01", "-01", "1.0", "1e2", "1E2", "-", "+1", "1" * 19]))
        text = canonical_json(dict(items))[:-1] + ("," if items else "") + '"~":' + raw + "}"
    elif edit == "ws":
        text = text.replace(",", ", ", 1)
    return text


@settings(max_examples=int(os.environ.get("FLUX_DIRECT_EXAMPLES", "300")), deadline=None)
@given(_flat_texts())
def test_a_flat_object_is_read_as_canonical_only_when_canonical_json_writes_it(arg):
    """host_call's shortcut (no decode) agrees with the full check it stands for; and it says no
    to a brace inside a string, so a placeholder is never missed."""
    from flux.timemachine.replay_direct import _flat_canonical

    if not _flat_canonical(arg):
        return
    value = json.loads(arg)
    assert type(value) is dict and canonical_json(value) == arg
    assert "{" not in arg[1:-1] and "}" not in arg[1:-1]
    assert not any(type(v) is int and abs(v) >= 10 ** 18 for v in value.values())  # an i64 the parser reads as one


@pytest.mark.parametrize("arg,flat", [
    ('{}', True), ('{"a":1}', True), ('{"a":"x","b":null,"c":true,"d":false,"e":-12}', True),
    ('{"a":1,"a":2}', False), ('{"b":1,"a":2}', False), ('{"a":01}', False), ('{"a":-0}', False),
    ('{"a":1.5}', False), ('{"a":"{b}"}', False), ('{"a":"\\n"}', False), ('{"a":[1]}', False),
    ('{"a":{"b":1}}', False), ('{"a":1234567890123456789}', False), ('{"a":1 }', False), ('{"a":1,}', False),
    ('{"z":"\u2028","é":"✓"}', True), ('{"é":"✓","z":"x"}', False),
])
def test_flat_canonical_cases(arg, flat):
    from flux.timemachine.replay_direct import _flat_canonical

    assert _flat_canonical(arg) is flat


@pytest.mark.parametrize("text", [
    'flow\n  adaptive_gather_1 = read({"path":"src/a.py"})\n',
    'flow\n  $adaptive_batch_1_action_1 = append({"content":"""created\n""","path":"x.txt"})\n',
    'flow\n  adaptive_gather_2 = grep({"n":{"m":[1,2.5,null,true]},"q":"{adaptive_gather_1}"})\n',
    'flow\n  a = fs.read-all({})',
])
def test_canonical_host_plans_are_recognised(text):
    assert _check_key(text)


@pytest.mark.parametrize("text", [
    'flow\n  a = read({"path": "x"})\n',  # not canonical: spaces
    'flow\n  a = read({"b":1,"a":2})\n',  # unsorted
    'flow\n  a = read({"a":1,"a":2})\n',  # duplicate key
    'flow\n  a = read({"a":18446744073709551616})\n',  # an f64 to serde
    'flow\n  a = read({"a":1e999})\n',
    'flow\n  a = read({"a":"\\ud83d"})\n',
    'flow\n  when = read({"a":1})\n',
    'flow\n  a = read({"a":"""x""""})\n',
    'flow\n  a = read({"!":"x,""",""",":1})\n',  # reads as JSON only if the triple quotes were misplaced
    'flow\r\n  a = read({"a":1})\r\n',
])
def test_other_texts_are_left_to_the_parser(text):
    assert host_call(text) is None
    _check_key(text)


def _plan_sources(db: Path) -> list[str]:
    con = sqlite3.connect(f"file:{db}?immutable=1", uri=True)
    try:
        out = []
        for (payload,) in con.execute("SELECT payload FROM events WHERE kind = 'plan_attempted'"):
            src = json.loads(payload).get("data", {}).get("plan_source")
            if isinstance(src, str):
                out.append(src)
        return out
    finally:
        con.close()


@pytest.fixture(scope="module")
def gen_store(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("gen") / "store"
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "gen_store.py"), str(d), "--sessions", "3",
                    "--big", "551"], check=True, capture_output=True)
    return d


def test_every_host_plan_in_the_fixture_demo_and_benchmark_stores_keys_as_the_parser_keys(demo_master, gen_store):
    for store, at_least in ((fixture_dir(), 1), (demo_master, 20), (gen_store, 100)):
        sources = _plan_sources(store / "events.db")
        recognised = sum(_check_key(s) for s in sources)
        assert recognised >= at_least, (store, recognised, len(sources))


def test_the_fused_read_equals_the_full_decode_on_every_session_of_the_stores(demo_master, gen_store, tmp_path):
    """read_replay_input (one fused pass, no event per plan row) reads what the full decode gives,
    on every session of the fixture, the demo store and a generated store — and on a session of
    plans and cells only (flux's batch path: no step or statement rows, so the cells alone make
    the trace)."""
    from flux.model.session import TRACE_KINDS, load_session
    from flux.timemachine.replay_input import ReplayInput
    from tests.core.test_replay_fastpath import _same_input

    cells_only = tmp_path / "cells-only"
    with StoreWriter(cells_only) as w:
        sid = w.create_session("mock")
        tid = w.begin_turn(sid, "t", "mock")
        w.append(sid, PlanAttempted(step=1, outcome="accepted", plan_source='flow\n  a = read({"path":"a"})\n'),
                 turn_id=tid)
        w.append(sid, cell("read", {"path": "a"}, "A"))
    for store in (fixture_dir(), demo_master, gen_store, cells_only):
        with StoreReader(store) as fast, StoreReader(store) as full:
            for row in full.list_sessions():
                _same_input(read_replay_input(fast, row.id),
                            ReplayInput.of_detail(load_session(full, row.id, kinds=TRACE_KINDS)))
                assert fast.skipped_rows == full.skipped_rows
    with StoreReader(cells_only) as r:
        assert read_replay_input(r, "s_1").has_trace and replay_session(r, "s_1").faithful


# ------------------------------------------------------------------------------------------------
# Differential: the direct path and the interpreter give the same replay, on generated stores.

_BINDERS = ["adaptive_gather_1", "adaptive_gather_2", "$adaptive_gather_1"]
_VALUES = [{"path": "a"}, {"path": "b"}, {"path": "{adaptive_gather_1}"}, {"path": "{adaptive_gather_2}"},
           {"content": "x\ny\n", "path": "n"}, {"n": {"m": 1}, "path": "a"}, {"path": 'q"t', "z": [1.5, None]}]
_OUTCOMES = ["ok"] * 10 + ["error", "error", "denied", "truncated", "missing", "wrong"]


@st.composite
def _statement(draw):
    return draw(st.sampled_from(_BINDERS)), draw(st.sampled_from(["read", "write", "grep"])), \
        draw(st.sampled_from(_VALUES)), draw(st.sampled_from(["canonical", "canonical", "triple", "spaced"]))


@st.composite
def _plan(draw):
    first = draw(_statement())
    kind = draw(st.sampled_from(["host"] * 4 + ["multi", "checkpoint", "rebind"]))
    stmts = [first] if kind == "host" else [first] + draw(st.lists(_statement(), min_size=1, max_size=2))
    return kind, stmts, [draw(st.sampled_from(_OUTCOMES)) for _ in stmts], draw(st.booleans())


def _plan_text(kind: str, stmts) -> str:
    lines = []
    for i, (name, op, value, how) in enumerate(stmts):
        if kind == "checkpoint" and i == 1:
            lines.append('  checkpoint "c1"\n')
        binder = name if kind in ("host", "rebind") or i == 0 else name.lstrip("$") + f"_{i}"
        lines.append(f"  {binder} = {op}({_spell(value, how)})\n")
    return "flow\n" + "".join(lines)


def _write_session(store: Path | StoreWriter, turns, orphan_execution: bool) -> str:
    """One session (its id returned): per turn its plans, each followed by its cells (and, when
    the plan says so, the recording's statement rows, which make the execution list)."""
    if isinstance(store, StoreWriter):
        with store.transaction():
            return _write_into(store, turns, orphan_execution)
    with StoreWriter(store) as w, w.transaction():
        return _write_into(w, turns, orphan_execution)


def _write_into(w: StoreWriter, turns, orphan_execution: bool) -> str:
    bound: dict[str, str] = {}
    if True:
        sid = w.create_session("mock")
        for t, (plans, ended) in enumerate(turns):
            tid = w.begin_turn(sid, f"turn {t}", "mock")
            for k, (kind, stmts, outcomes, ledgered) in enumerate(plans):
                text = _plan_text(kind, stmts)
                w.append(sid, PlanAttempted(step=k + 1, outcome="accepted", plan_source=text), turn_id=tid)
                draft = parse(text)
                key = flow_key(draft.name, draft.body)
                ops = [n for n in draft.body if isinstance(n, A.Bind)]
                for i, (node, outcome) in enumerate(zip(ops, outcomes)):
                    value = json.loads(canonical_json(node.value.args[0].value))
                    inp = {k2: interpolate(v, bound) if isinstance(v, str) else v for k2, v in value.items()}
                    content = f"out-{node.name}-{t}-{k}-{i}"
                    if outcome == "missing":
                        break
                    if outcome == "wrong":
                        inp = {"other": 1}
                    w.append(sid, cell(node.value.op, inp, content, is_error=outcome == "error",
                                       denied=outcome == "denied", truncated=outcome == "truncated"))
                    if outcome != "ok":
                        break
                    bound[node.name] = content
                    if ledgered:
                        w.append(sid, Run(StatementCompleted(plan=key, node=draft.body.index(node),
                                                             stmt=stmt_hash16(node), value=f"v_{i}")))
            if orphan_execution and t == 0:
                w.append(sid, Run(StatementCompleted(plan="h:0123456789abcdef", node=0, stmt="0" * 16)))
            if ended:
                w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
    return sid


_CATALOG = OpCatalog([OpSpec("read"), OpSpec("write")])  # no `grep`: a plan naming it is refused


def _both(reader: StoreReader, sid: str = "s_1", turn=None, catalog=None):
    """The full reports, direct and interpreted; and, checked here, the lean (``detail=False``,
    `flux replay`'s: a quiet sink, a lean tape) reports both ways are the full one's brief."""
    out = {}
    for direct in (True, False):
        for keep in (True, False):
            try:
                inp = read_replay_input(reader, sid)  # afresh: a lean replay takes the cells from it
            except FluxError as e:
                out[direct, keep] = ("error", type(e).__name__, str(e))
                continue
            with gc_paused():
                out[direct, keep] = _outcome(lambda: _replay(inp, on_progress=None, scratch_dir=None, recorded_dir=None,
                                                             direct=direct, turn=turn, catalog=catalog, keep=keep),
                                             detail=keep)
    assert out[True, False] == out[False, False] == _brief(out[False, True])
    return [out[True, True], out[False, True]]


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory):
    """One store for every generated session (creating a store per example costs more than the test)."""
    d = tmp_path_factory.mktemp("direct") / "store"
    with StoreWriter(d) as w:
        yield d, w


@settings(max_examples=int(os.environ.get("FLUX_DIRECT_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(st.tuples(st.lists(_plan(), min_size=1, max_size=4), st.booleans()), min_size=1, max_size=3),
       orphan=st.booleans(), corrupt=st.sampled_from([False, False, True]),
       turn=st.sampled_from([None] * 4 + [1, 2, 4]), catalog=st.sampled_from([None] * 4 + [_CATALOG]), data=st.data())
def test_the_direct_path_reports_what_the_interpreter_reports(shared_store, turns, orphan, corrupt, turn, catalog,
                                                              data):
    store, writer = shared_store
    sid = _write_session(writer, turns, orphan)
    if corrupt:
        _mutate(store, data, stream=sid)
    with StoreReader(store) as r:
        direct, interpreted = _both(r, sid, turn=turn, catalog=catalog)
    assert direct == interpreted


def _host(name, op, value, outcome="ok", how="canonical", ledgered=False):
    return "host", [(name, op, value, how)], [outcome], ledgered


_A = {"path": "a"}
_SCENARIOS = {
    # a plan halted after its checkpoint: the next plan starts past it, so a host plan runs nothing
    "checkpoint": [("checkpoint", [("adaptive_gather_1", "read", _A, "canonical"),
                                   ("adaptive_gather_2", "grep", {"path": "b"}, "canonical")], ["ok", "error"], False),
                   _host("adaptive_gather_2", "write", {"path": "b"})],
    # a host plan's result is interpolated into the next one's input
    "placeholder": [_host("adaptive_gather_1", "read", _A), _host("adaptive_gather_2", "read", {"path": "{adaptive_gather_1}"}),
                    _host("adaptive_gather_1", "grep", {"n": {"m": 1}, "path": "{adaptive_gather_2}"})],
    # the halted plan completed the host plan's statement: fast-forwarded, with its recorded value
    "fast-forward": [("multi", [("adaptive_gather_1", "read", _A, "canonical"),
                                ("adaptive_gather_2", "grep", {"path": "b"}, "canonical")], ["ok", "denied"], False),
                     _host("adaptive_gather_1", "read", _A), _host("adaptive_gather_2", "read", {"path": "{adaptive_gather_1}"})],
    # ... and the fast-forward rebinds the statement's recorded value (the halted plan rebound the name)
    "rebind": [("rebind", [("adaptive_gather_1", "read", _A, "canonical"), ("adaptive_gather_1", "read", {"path": "b"}, "canonical"),
                           ("adaptive_gather_2", "grep", {"path": "b"}, "canonical")], ["ok", "ok", "error"], False),
               _host("adaptive_gather_1", "read", _A), _host("adaptive_gather_2", "read", {"path": "{adaptive_gather_1}"})],
    "halts": [_host("a", "read", _A, "denied"), _host("b", "read", {"path": "b"}, "truncated"),
              _host("c", "read", {"path": "c"}, "error", "triple")],
    "miss": [_host("a", "read", _A), _host("b", "read", {"path": "b"}, "wrong"), _host("c", "read", _A)],
    "twice": [_host("$adaptive_gather_1", "read", {"content": "x\ny\n", "path": "n"}, how="triple", ledgered=True),
              _host("adaptive_gather_1", "read", {"content": "x\ny\n", "path": "n"}, how="triple", ledgered=True)],
}


@pytest.mark.parametrize("name", sorted(_SCENARIOS))
def test_scenarios_replay_the_same_both_ways(shared_store, name):
    store, writer = shared_store
    sid = _write_session(writer, [(_SCENARIOS[name], True)], False)
    with StoreReader(store) as r:
        direct, interpreted = _both(r, sid)
    assert direct == interpreted and direct[0] == "report"


def test_the_differential_sees_the_direct_path(tmp_path):
    """The generated stores do go through the direct path (and replay as recorded)."""
    store = tmp_path / "store"
    plan = ("host", [("adaptive_gather_1", "read", {"path": "a"}, "canonical")], ["ok"], False)
    halted = ("host", [("adaptive_gather_2", "write", {"path": "b"}, "triple")], ["error"], False)
    multi = ("multi", [("adaptive_gather_1", "read", {"path": "a"}, "canonical"),
                       ("adaptive_gather_2", "grep", {"path": "{adaptive_gather_1}"}, "canonical")], ["ok", "error"], False)
    _write_session(store, [([plan, halted, multi, plan], True)], False)
    import flux.timemachine.serve as serve_mod

    calls = []
    real = serve_mod.DirectRunner

    class Spy(real):
        def run(self, hc, ledger):
            calls.append(hc.flow_key)
            return real.run(self, hc, ledger)

    with StoreReader(store) as r:
        serve_mod.DirectRunner = Spy
        try:
            rep = replay_session(r, "s_1")
        finally:
            serve_mod.DirectRunner = real
        direct, interpreted = _both(r)
    assert direct == interpreted
    # Every plan runs directly (the two-statement one as a HostPlan). The fourth execution repeats the
    # first plan, whose statement the halted third plan completed: it is fast-forwarded (skipped), so
    # its own recorded cell stays unconsumed.
    assert len(calls) == 4 and rep.diverged is None and (rep.cells_consumed, rep.cells_total) == (4, 5)
    assert [p.halt_kind for p in rep.plans] == [None, "runtime", "runtime", None]
    assert rep.scratch_events[-2:] == [
        {"event": "statement_completed", "plan": calls[0], "node": 0, "stmt": rep.statement_results[0].stmt,
         "value": "v_2", "skipped": True},
        {"event": "plan_resumed", "plan": calls[0], "prior": rep.plans[2].flow_key, "skipped": 1}]


def test_a_scratch_store_holds_the_same_run_either_way(tmp_path):
    store = tmp_path / "store"
    plans = [("host", [("adaptive_gather_1", "read", {"path": "a"}, "canonical")], ["ok"], False),
             ("host", [("adaptive_gather_2", "read", {"path": "{adaptive_gather_1}"}, "canonical")], ["ok"], False),
             ("host", [("adaptive_gather_2", "write", {"path": "b"}, "canonical")], ["denied"], False)]
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
            runs.append((rep.scratch_events, con.execute(
                "SELECT stream_seq, kind, payload FROM events WHERE kind = 'run' ORDER BY stream_seq").fetchall()))
            con.close()
    assert runs[0] == runs[1] and len(runs[0][1]) == 9


# ------------------------------------------------------------------------------------------------
# DirectRunner.run_through (the streamed replay's run of a host plan with no latch open) leaves what
# run() and then letting go of the plan's row leave: the same halt, symbols, value ids, sink rows
# and tape state.

_THROUGH_VALUES = [{"path": "a"}, {"path": "b"}, {"path": "{adaptive_gather_1}"}, {"n": 1, "path": "a"}]


def _through_state(interp, sink, tape, h):
    halt = None if h is None else (h.kind, h.error, h.node, h.stmt, h.op)
    return (halt, dict(interp.symbols), dict(interp.values), interp._next_vid, interp._last_vid, interp._steps_base,
            interp.clock.t, {k: v for k, v in sink.completed_rows.items()}, list(sink.open_halts), dict(sink.checkpoints),
            list(tape.served), list(tape._consumed), tape.diverged, tape.requests, tape.unserved, list(tape.truncated),
            tape.last)


@settings(max_examples=int(os.environ.get("FLUX_DIRECT_EXAMPLES", "60")), deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["adaptive_gather_1", "adaptive_gather_2"]),
                                st.sampled_from(["read", "grep"]), st.sampled_from(range(len(_THROUGH_VALUES))),
                                st.sampled_from(["ok"] * 6 + ["error", "denied", "truncated", "wrong", "twice"])),
                      min_size=1, max_size=7),
       keep=st.sampled_from([False, False, True]), checkpointed=st.sampled_from([False, False, True]))
def test_run_through_leaves_what_running_and_letting_go_leave(steps, keep, checkpointed):
    from flux.cassette.replay import ReplayHost, ReplayTape
    from flux.lang.interpreter import Interpreter
    from flux.timemachine.replay_direct import NOT_DIRECT
    from flux.timemachine.serve import PlanServer, ScratchSink, never_asked
    from tests.helpers import cell as make_cell

    texts, cells, bound = [], [], {}
    for name, op, vi, outcome in steps:
        value = _THROUGH_VALUES[vi]
        texts.append(f"flow\n  {name} = {op}({canonical_json(value)})\n")
        inp = {k: interpolate(v, bound) if isinstance(v, str) else v for k, v in value.items()}
        content = f"out-{len(cells)}"
        if outcome == "wrong":
            inp = {"other": 1}
        for _ in range(2 if outcome == "twice" else 1):
            cells.append(make_cell(op, inp, content, is_error=outcome == "error", denied=outcome == "denied",
                                   truncated=outcome == "truncated").event)
        if outcome in ("ok", "twice"):
            bound[name] = content

    def setup():
        tape = ReplayTape(cells, lean=not keep)
        sink = ScratchSink(tape, None, None, keep=keep)
        interp = Interpreter(OpCatalog.permissive(), ReplayHost(tape), sink, never_asked, run_id="replay")
        return interp, sink, tape, PlanServer(interp)

    a, b = setup(), setup()
    if checkpointed:  # a checkpoint noted under the first plan's key (no host plan makes one): its rows are kept
        for _i, sink, _t, _r in (a, b):
            sink.checkpoints[host_call(texts[0]).flow_key] = -1
    for text in texts:
        hc = host_call(text)
        assert hc is not None
        (ia, sa, ta, ra), (ib, sb, tb, rb) = a, b
        ledger = sa.ledger()
        assert (ledger is None) == (sb.ledger() is None)
        through = ledger is None and hc.flow_key not in sa.completed_rows
        ha = ra.run(hc, ledger, flow_key=hc.flow_key)
        if ha is None and through:
            sa.let_go_of_rows(hc.flow_key, ia.values)
        hb = rb.direct.run_through(hc) if through else rb.run(hc, sb.ledger(), flow_key=hc.flow_key)
        if hb is NOT_DIRECT:  # a keeping sink or a checkpointed key: the let-go run declines, the stream's
            assert keep or checkpointed  # fallback runs it and lets go of what it may
            hb = rb.run(hc, None, flow_key=hc.flow_key)
            if hb is None:
                sb.let_go_of_rows(hc.flow_key, ib.values)
        assert _through_state(ib, sb, tb, hb) == _through_state(ia, sa, ta, ha)
