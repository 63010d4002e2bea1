"""Fork's child, written by this code and by the previous paths, on generated sessions at every N.

The sessions are recorded the way a resumable turn records (an accepted plan, then per statement
``step_started``, its cell, ``step_succeeded`` and ``statement_completed``), with plans of host
statements spelled every way a store may hold them: canonical (replay's direct path takes them),
with unsorted keys or spaces (the parser's), a ``$`` name, a ``\\n`` escape (a triple-quoted
string in the canonical text), reserved and digit-led names, a placeholder that interpolates an
earlier statement's value, plans of one statement, several plans and turns, ledgered or not.

The previous paths (the *legacy* side): every plan parsed and run by the interpreter, the prefix
plan formatted by the formatter's general arms, the rows written one statement per row
(``append_runs``). The children must be equal row for row (ids and timestamps normalised).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from flux.agent.client import Client
from flux.canonical import canonical_json
from flux.lang import formatter
from flux.lang.hashes import flow_key, stmt_hash16
from flux.lang.interpreter import interpolate_json
from flux.lang.parser import RESERVED, parse
from flux.store import Message, PlanAttempted, Run, StatementCompleted, StepStarted, StepSucceeded, StoreWriter, TurnEnded
from flux.timemachine import engine, fork as fork_mod, fork_session
from tests.core.test_lang_fastpath import _utf8_sorted_compact
from tests.core.test_tm_write_rows import _child, _legacy_flush
from tests.helpers import cell

_OPS = ("read", "write", "git.status", "fetch-url")
_NAMES = ("a", "out_1", "_x", "Data9", "else", "9lives", "in")  # two reserved words, a digit-led name
_VALUES = ("plain", "two words", "x\ny", 'q"uote', "back\\slash", "é ü", "tab\tstop", "", "{{braces}}")


def _literal(rng: random.Random, k: int, bound: list[str]) -> dict:
    v: dict = {"path": f"out/{k}.txt"}
    if rng.random() < 0.25:
        v["text"] = rng.choice(("line one\nline two", "ends in quote\n\"", 'has """ and\n', "cr\r\nlf"))
    for _ in range(rng.randrange(3)):
        key = rng.choice(("body", "mode", "n", "deep", "list", "é", "Z"))
        pick = rng.randrange(6)
        v[key] = (rng.choice(_VALUES) if pick < 3 else rng.randrange(-5, 10 ** 6) if pick == 3
                  else {"inner": rng.choice(_VALUES), "a": [1, 2.5, None, True]} if pick == 4 else [rng.choice(_VALUES)])
    if bound and rng.random() < 0.2:
        v["ref"] = "{" + rng.choice(bound) + "}"  # interpolated: the cell holds the earlier value
    return v


def _line(rng: random.Random, name: str, op: str, value: dict, canonical: bool, style: int | None = None) -> str:
    """One statement, spelled canonically (a ``$`` now and then: still the direct path's, not the
    formatter's spelling) or, in a mixed plan, one of the other ways the parser reads."""
    if style is None:
        style = rng.randrange(1, 10) if canonical else rng.randrange(3)
    arg = canonical_json(value)
    if style == 0:  # keys as inserted (unsorted when there are several), spaces after separators
        arg = ", ".join(f"{canonical_json(k)}: {canonical_json(x)}" for k, x in value.items())
        arg = "{" + arg + "}"
    elif style == 2:  # a one-line triple-quoted string (a host call reads it as the JSON string)
        path = canonical_json(value["path"])
        arg = arg.replace('"path":' + path, '"path":"""' + value["path"] + '"""', 1)
    sym = "$" + name if name in RESERVED or name[0].isdigit() or style == 1 else name
    return f"  {sym} = {op}({arg})\n"


def _session(w: StoreWriter, rng: random.Random, ledgered: bool) -> tuple[str, int]:
    sid = w.create_session("mock")
    total = 0
    with w.transaction():
        vid = 0
        for turn in range(rng.randrange(1, 3)):
            w.append(sid, Message.text("user", f"task {turn}"))
            tid = w.begin_turn(sid, f"task {turn}", "mock")
            for p in range(rng.randrange(1, 3) + (turn == 0)):
                n = 1 if turn == p == 0 else rng.choice((2, 4, 6))  # a one-statement plan first (a tool call's)
                bound: list[str] = []
                symbols: dict = {}
                lines, stmts = [], []
                canonical = rng.random() < 0.6  # a plan replay's direct path takes (most lines canonical)
                for k in range(n):
                    name = rng.choice(_NAMES[:4] if canonical else _NAMES) + f"{turn}{p}{k}"
                    if not canonical and rng.random() < 0.2:
                        name = rng.choice(_NAMES)  # a reserved word or a digit-led name, bare
                    op = rng.choice(_OPS)
                    value = _literal(rng, k, bound)
                    first = turn == p == 0 and rng.random() < 0.5  # the one-statement plan, triple-quoted
                    lines.append(_line(rng, name, op, value, canonical, 2 if first else None))
                    stmts.append((name, op, value))
                    bound.append(name)
                text = "flow\n" + "".join(lines)
                draft = parse(text)
                key = flow_key(draft.name, draft.body)
                w.append(sid, PlanAttempted(step=p + 1, outcome="accepted", plan_source=text), turn_id=tid)
                for k, ((name, op, value), node) in enumerate(zip(stmts, draft.body)):
                    inp = interpolate_json(node.value.args[0].value, symbols)
                    content = f"content {turn}.{p}.{k}" + ("\n" if k % 2 else "")
                    c = cell(op, inp, content, is_error=rng.random() < 0.08)  # the plan halts there
                    h = c.event.input_hash
                    vid += 1
                    w.append(sid, Run(StepStarted(step=f"step_{op}_{h[:16]}", op=op, input_hash=h)))
                    w.append(sid, c)
                    w.append(sid, Run(StepSucceeded(step=f"step_{op}_{h[:16]}", output=f"v_{vid}")))
                    if ledgered:
                        w.append(sid, Run(StatementCompleted(plan=key, node=k, stmt=stmt_hash16(node), value=f"v_{vid}")))
                    symbols[node.name] = content
                total += n
            w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
    return sid, total


def _legacy_rerecord(self, i: int) -> None:
    """The prefix host's re-recording of a served cell as it was (inline in its dispatch)."""
    body = dict(self.bodies[i]) if self.bodies is not None else self.tape.cells[i].to_body()
    body["seq"] = self.seq
    self.seq += 1
    self.sink.emit(body)


def _legacy(m) -> None:
    """The previous paths: every plan parsed (no direct plan) and run by the interpreter, the
    general formatter, the prefix host's re-recording as it was, the rows written one by one."""
    real = engine.executions_of
    m.setattr(fork_mod, "executions_of", lambda detail, **kw: real(detail, **{k: v for k, v in kw.items() if k != "direct"}))
    m.setattr(fork_mod._PrefixHost, "rerecord", _legacy_rerecord)
    m.setattr(formatter, "_bind_call_stmt", lambda node: None)
    m.setattr(formatter, "compact_value", _utf8_sorted_compact)
    m.setattr(fork_mod, "flush_events", _legacy_flush)


@pytest.mark.parametrize("seed", range(5))
def test_fork_child_at_every_position_equals_the_previous_paths(monkeypatch, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    store = tmp_path / "store"
    with StoreWriter(store) as w:
        sid, total = _session(w, rng, ledgered=seed % 3 != 2)
    clients = {}
    for side in ("legacy", "new"):
        ws = tmp_path / f"ws-{side}"
        ws.mkdir()
        clients[side] = Client("mock", store=store, workspace=ws, env_secrets=False)
    try:
        for at in range(total):
            children = {}
            for side in ("legacy", "new"):
                with monkeypatch.context() as m:
                    if side == "legacy":
                        _legacy(m)
                    res = fork_session(clients[side], sid, at, inject={"injected": at})
                children[side] = _child(store, res.session)
            assert children["new"] == children["legacy"], (seed, at)
            assert len(children["new"][0]) >= 4 + at
    finally:
        for c in clients.values():
            c.close()
