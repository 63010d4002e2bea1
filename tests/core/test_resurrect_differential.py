"""Resurrect on replay's direct path against the previous path, on generated interrupted sessions.

Each session's newest turn was killed somewhere in its last accepted plan: its cells recorded up to
a point (the op in flight with or without its cell, a statement with or without its ledger row),
resumably (``statement_completed`` rows) or not (a host-derived turn's plan: no statement rows).
The plans are spelled every way a store holds them — canonical host statements (the direct path
takes them), unsorted keys or spaces (the parser's), ``$`` names, a one-statement host call with a
triple-quoted string, placeholders that interpolate an earlier statement's value — and the cells
vary: an error or a refusal (the plan halts there), a truncated cell (refused, latched), a cell
whose input the plan no longer dispatches (divergence: the dispatch goes live, the cell is left
unconsumed), a redacted cell (served by its redacted hash), hostile content (lone surrogates,
control characters, JSON-looking text). The live ops write to a log, answer hostile text, fail,
or are refused by the approver.

Both sides resurrect a copy of the same store: the *direct* side as shipped (a host plan read
without the parser and run by ``DirectRunner.run_resume``), the *interpreter* side with
``resurrect._DIRECT = False`` (every plan parsed and interpreted — the previous path). The
session's rows (ids and timestamps normalised), the report, the live ops' side effects and any
one-line error must be equal.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
from pathlib import Path

import pytest

from flux.agent.approver import Decision
from flux.agent.client import Client
from flux.agent.ops import op
from flux.canonical import canonical_json, sha256_hex
from flux.errors import FluxError
from flux.lang.hashes import flow_key, stmt_hash16
from flux.lang.interpreter import interpolate_json
from flux.lang.parser import RESERVED, parse
from flux.store import (
    CheckpointReached, Message, OpRecorded, PlanAttempted, PlanHalted, Run, StatementCompleted, StepFailed, StepStarted, StepSucceeded,
    StoreReader, StoreWriter, TurnEnded,
)
from flux.timemachine import replay_direct, resurrect as res_mod
from flux.timemachine.resurrect import plan_resurrect, resurrect_session

_OPS = ("read", "write", "publish")
_HOSTILE = ("plain", "lone \udc80 surrogate", "ctl \x00\x1b[31m\x7f", '{"json":"looking","n":[1,2]}', "é ü\n\ttab",
            "", "{{braces}} {x}", "x" * 300)


def _ops(log: list) -> list:
    """The live ops: each appends (op, input) to ``log``; ``publish`` answers hostile text, ``write``
    fails on a path with ``fail`` in it."""

    @op(effect="read")
    def read(path: str, **extra) -> str:
        """Read."""
        log.append(("read", path, sorted(extra)))
        return f"read {path}"

    @op(effect="write")
    def write(path: str, **extra) -> str:
        """Write."""
        log.append(("write", path, sorted(extra)))
        if "fail" in path:
            raise RuntimeError(f"disk full \udc81 at {path}")
        return f"wrote {path}"

    @op(effect="network")
    def publish(path: str, **extra) -> str:
        """Publish."""
        log.append(("publish", path, sorted(extra)))
        return _HOSTILE[len(path) % len(_HOSTILE)]

    return [read, write, publish]


class _Approver:
    """Allows everything but ``publish`` of a path with ``deny`` in it."""

    def decide(self, request) -> Decision:
        if request.op == "publish" and "deny" in str(request.input.get("path", "")):
            return Decision(False, "denied by the test approver")
        return Decision(True, "ok")


def _line(rng: random.Random, name: str, op_: str, value: dict, canonical: bool, one: bool) -> str:
    arg = canonical_json(value)
    style = rng.randrange(1, 8) if canonical else rng.randrange(2)
    if style == 0:  # keys as inserted, spaces after separators (the parser's path)
        arg = "{" + ", ".join(f"{canonical_json(k)}: {canonical_json(x)}" for k, x in value.items()) + "}"
    elif one and style == 2:  # a one-statement host call with a one-line triple-quoted string
        arg = arg.replace('"path":' + canonical_json(value["path"]), '"path":"""' + value["path"] + '"""', 1)
    sym = "$" + name if name in RESERVED or style == 1 else name
    return f"  {sym} = {op_}({arg})\n"


def _cell(rng: random.Random, op_: str, inp: dict, k: int) -> tuple[OpRecorded, str]:
    """A recorded cell for this dispatch (and how it was spoiled, if at all)."""
    ij = canonical_json(inp)
    h = sha256_hex(ij)
    kind = rng.choices(("ok", "error", "denied", "truncated", "diverged", "redacted"), (10, 1, 1, 1, 1, 1))[0]
    content = rng.choice(_HOSTILE) + f" #{k}"
    if kind == "diverged":  # recorded for an input the plan no longer dispatches
        other = dict(inp, path=inp["path"] + ".old")
        ij = canonical_json(other)
        h = sha256_hex(ij)
    red = None
    if kind == "redacted":  # the plan holds the redacted input; the cell the real one's hash
        red, h = h, sha256_hex(ij + "secret")
    return OpRecorded(seq=k, step=f"step_{op_}_{h[:16]}", op=op_, input_hash=h, input_hash_redacted=red, input_view=ij,
                      content=content, is_error=kind == "error", denied=kind == "denied",
                      truncated=kind == "truncated", redacted=red is not None), kind


def _session(w: StoreWriter, rng: random.Random) -> str:
    sid = w.create_session("mock")
    if rng.random() < 0.3:  # an earlier, closed turn
        w.append(sid, Message.text("user", "before"))
        t0 = w.begin_turn(sid, "before", "mock")
        w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=t0)
    w.append(sid, Message.text("user", "build"))
    tid = w.begin_turn(sid, "build", "mock")
    resumable = rng.random() < 0.5
    n = rng.choice((1, 2, 3, 5, 7))
    canonical = rng.random() < 0.85
    lines, stmts, bound = [], [], []
    for k in range(n):
        name = rng.choice(("a", "out_", "_x", "Data")) + str(k)
        if rng.random() < 0.05:
            name = rng.choice(("else", "in"))  # reserved: spelled `$else`
        op_ = rng.choice(_OPS)
        path = rng.choice(("src", "out", "fail", "deny")) + f"/{k}.txt"
        value: dict = {"path": path}
        if rng.random() < 0.3:
            value["body"] = rng.choice(("x", "two words", 'q"uote', "é", "tab\tstop", "line\nbreak"))
        if bound and rng.random() < 0.25:
            value["ref"] = "{" + rng.choice(bound) + "}"
        lines.append(_line(rng, name, op_, value, canonical, n == 1))
        stmts.append((op_, value))
        bound.append(name)
    text = "flow\n" + "".join(lines)
    if rng.random() < 0.04:
        text = text[:-3]  # a plan that does not parse: a one-line error, nothing written
    if rng.random() < 0.2:
        w.append(sid, PlanAttempted(step=1, outcome="rejected", plan_source="flow\n  nope"), turn_id=tid)
    w.append(sid, PlanAttempted(step=2, outcome="accepted", plan_source=text), turn_id=tid)
    try:
        draft = parse(text)
    except FluxError:
        return sid
    key = flow_key(draft.name, draft.body)
    symbols: dict = {}
    killed = rng.randrange(n + 1)  # statements recorded before the kill
    vid = 0
    for k in range(killed + 1):
        if k == n:
            break
        op_, _value = stmts[k]
        inp = interpolate_json(draft.body[k].value.args[0].value, symbols)
        ij = canonical_json(inp)
        h = sha256_hex(ij)
        step = f"step_{op_}_{h[:16]}"
        w.append(sid, Run(StepStarted(step=step, op=op_, input_hash=h)))
        if k == killed:  # the op in flight: killed before, or right after, its cell
            if (n + k) % 4 == 1:  # (no draw) it failed with no cell (recorded with the cassette off)
                w.append(sid, Run(StepFailed(step=step, error="failed, no cell")))
            elif rng.random() < 0.5:
                c, _kind = _cell(rng, op_, inp, k)
                w.append(sid, Run(c))
            break
        c, kind = _cell(rng, op_, inp, k)
        w.append(sid, Run(c))
        if c.is_error or c.denied:
            w.append(sid, Run(StepFailed(step=step, error=c.content)))
            if resumable and (k + n) % 3:  # the latch a resumable run writes (no draw: the sessions stay as they were)
                w.append(sid, Run(PlanHalted(plan=key, node=k, stmt=stmt_hash16(draft.body[k]), op=op_,
                                             kind="denied" if c.denied else "runtime", error=c.content)))
            break  # the recording halted here (the kill came later)
        vid += 1
        w.append(sid, Run(StepSucceeded(step=step, output=f"v_{vid}")))
        symbols[draft.body[k].name] = c.content if kind != "truncated" else c.content
        if resumable and rng.random() < 0.9:
            w.append(sid, Run(StatementCompleted(plan=key, node=k, stmt=stmt_hash16(draft.body[k]), value=f"v_{vid}")))
    if resumable and rng.random() < 0.5:  # a (hostile) checkpoint row: the fast-forward starts after it
        w.append(sid, Run(CheckpointReached(flow_key=key, label="cp", node=rng.randrange(min(killed, n - 1), n))))
    if rng.random() < 0.05:  # a corrupt row in the window: skipped and counted by both reads
        w.append(sid, Run(StepStarted(step="x", op="read", input_hash="y")))
    return sid


def _rows(store: Path, sid: str) -> list:
    con = sqlite3.connect(store / "events.db")
    try:
        rows = con.execute("SELECT global_seq, stream_seq, kind, schema_version, turn_id, payload FROM events"
                           " WHERE stream = ? ORDER BY stream_seq", (sid,)).fetchall()
    finally:
        con.close()
    by_gs = {r[0]: r[1] for r in rows}
    return [(r[1], r[2], r[3], by_gs.get(r[4]) if r[4] is not None else None, r[5]) for r in rows]


def _resurrect_all(store: Path, ws: Path, sids: list[str]) -> list[tuple]:
    """Each session resurrected in turn by one client: (report or one-line error, live ops, rows)."""
    log: list = []
    ws.mkdir()
    c = Client("mock", store=store, workspace=ws, env_secrets=False, ops=_ops(log),
               approver=_Approver())
    out = []
    try:
        for sid in sids:
            log.clear()
            with StoreReader(store) as r:  # the gate's preview (what the CLI and the app show first)
                try:
                    preview = plan_resurrect(r, sid, catalog=c.toolbox.catalog(), workspace="ws")
                except FluxError as e:
                    preview = str(e)
            try:
                rep = resurrect_session(c, sid)
                got = rep.to_json() if rep is not None else None
            except FluxError as e:
                got = ("error", type(e).__name__, str(e))
            out.append((got, list(log), _rows(store, sid), preview))
    finally:
        c.close()
    return out


def test_resurrect_on_the_direct_path_equals_the_interpreter_path(monkeypatch, tmp_path: Path) -> None:
    runs: list = []
    real = replay_direct.DirectRunner.run_resume

    def spy(self, plan, ledger, resumable):
        got = real(self, plan, ledger, resumable)
        runs.append(got is not replay_direct.NOT_DIRECT)
        return got

    monkeypatch.setattr(replay_direct.DirectRunner, "run_resume", spy)
    master = tmp_path / "master"
    with StoreWriter(master) as w:
        sids = [_session(w, random.Random(seed)) for seed in range(40)]
    got = {}
    for side in ("interpreter", "direct"):
        store = tmp_path / side
        shutil.copytree(master, store)
        with monkeypatch.context() as m:
            if side == "interpreter":
                m.setattr(res_mod, "_DIRECT", False)
            got[side] = _resurrect_all(store, tmp_path / f"ws-{side}", sids)
    kinds = set()
    for seed, (direct, interpreted) in enumerate(zip(got["direct"], got["interpreter"])):
        assert direct == interpreted, seed
        rep = direct[0]
        kinds.add("error" if type(rep) is tuple else "none" if rep is None else
                  (rep["outcome"], rep["ops_run_live"] > 0, rep["diverged"] is not None))
        if type(rep) is dict and rep["statements_fast_forwarded"]:
            kinds.add("fast-forwarded")
            if "checkpoint_reached" in str(direct[2]):
                kinds.add("checkpoint")
    # the generated sessions reach the direct path, halts, live ops, divergence, fast-forwards and one-line errors
    assert sum(runs) >= 15 and {"error", "fast-forwarded", "checkpoint", ("halted", True, False)} <= kinds, (sum(runs), kinds)
    assert any(k[0] == "resurrected" and k[1] for k in kinds if type(k) is tuple)
    assert any(k[0] == "resurrected" and not k[1] for k in kinds if type(k) is tuple)
    assert any(type(k) is tuple and k[2] for k in kinds)


def test_a_served_cell_never_runs_live_on_the_direct_path(tmp_path: Path) -> None:
    """Exactly-once on the direct path: a 40-statement killed turn (no statement rows), 30 cells
    recorded and the 31st op in flight with no cell — 30 cells are served, only the ops from the
    in-flight one on run live (each once), and the healed session replays faithfully."""
    from flux.timemachine import replay_session

    store = tmp_path / "store"
    inputs = [{"path": f"out/{k}.txt"} for k in range(40)]
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        w.append(sid, Message.text("user", "build"))
        tid = w.begin_turn(sid, "build", "mock")
        w.append(sid, PlanAttempted(step=1, outcome="accepted",
                                    plan_source="flow\n" + "".join(f"  s{k} = write({canonical_json(i)})\n"
                                                                   for k, i in enumerate(inputs))), turn_id=tid)
        for k, i in enumerate(inputs[:31]):
            h = sha256_hex(canonical_json(i))
            w.append(sid, Run(StepStarted(step=f"step_write_{h[:16]}", op="write", input_hash=h)))
            if k < 30:
                w.append(sid, Run(OpRecorded(seq=k, step=f"step_write_{h[:16]}", op="write", input_hash=h,
                                             input_view=canonical_json(i), content=f"wrote {k}")))
                w.append(sid, Run(StepSucceeded(step=f"step_write_{h[:16]}", output=f"v_{k + 1}")))
    log: list = []
    (tmp_path / "ws").mkdir()
    c = Client("mock", store=store, workspace=tmp_path / "ws", env_secrets=False, ops=_ops(log),
               approver=_Approver())
    runs: list = []
    real = replay_direct.DirectRunner.run_resume
    try:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(replay_direct.DirectRunner, "run_resume",
                      lambda self, *a: runs.append(1) or real(self, *a))
            rep = resurrect_session(c, sid)
    finally:
        c.close()
    assert runs == [1]
    assert (rep.outcome, rep.ops_served_from_cassette, rep.ops_run_live, rep.unanchored_served) == ("resurrected", 30, 10, 30)
    assert [p for _op, p, _x in log] == [f"out/{k}.txt" for k in range(30, 40)]
    with StoreReader(store) as r:
        replay = replay_session(r, sid)
    assert replay.faithful and replay.diverged is None, replay.unfaithful_reason
