"""``flux policy simulate``: the demo store's recorded history under proposed policies — the
numbers checked against the store's own rows, the same answer on the pool, nothing written, and
bad input in one line."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.agent.approver import load_policy
from flux.cli import main
from flux.timemachine.policy_sim import simulate_policy, store_effects
from tests.helpers import tree_digest


def _cells(store: Path) -> list[tuple[str, str, bool]]:
    """(session, op, denied) of every recorded cell of the store's root sessions, read with SQL."""
    con = sqlite3.connect(store / "events.db")
    try:
        roots = {f"s_{n}" for (n,) in con.execute("SELECT n FROM streams WHERE correlation_id IS NULL")}
        rows = con.execute("SELECT stream, payload FROM events WHERE kind = 'run' ORDER BY global_seq").fetchall()
    finally:
        con.close()
    out = []
    for stream, payload in rows:
        ev = json.loads(payload).get("data", {})
        if stream in roots and ev.get("event") == "op_recorded":
            out.append((stream, ev["op"], bool(ev.get("denied"))))
    return out


def _policy(tmp_path: Path, text: str, name: str = "p.toml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _run(*args):
    return CliRunner().invoke(main, ["policy", "simulate", *args])


def test_denying_one_op_affects_exactly_the_sessions_that_ran_it(demo: Path, tmp_path: Path):
    cells = _cells(demo)
    assert cells, "the demo store records op calls"
    ran_publish = sorted({s for s, op, denied in cells if op == "publish" and not denied})
    assert ran_publish  # the demo's recordings ran publish
    before = tree_digest(demo)
    res = _run(str(_policy(tmp_path, 'default = "allow"\ndeny = ["publish"]\n')), "--store", str(demo), "--json")
    assert res.exit_code == 1, res.output  # a recorded call would have been blocked
    out = json.loads(res.stdout)
    affected = sorted(s["session"] for s in out["sessions"] if s["blocked"])
    assert affected == ran_publish
    assert all(b["op"] == "publish" and b["proposed"] == "deny" and b["rule"] == "publish"
               for s in out["sessions"] for b in s["blocked"])
    tally = out["ops"]["publish"]
    assert tally["calls"] == sum(1 for _, op, _d in cells if op == "publish")
    assert tally["deny"] == sum(1 for _, op, d in cells if op == "publish" and not d)
    assert tree_digest(demo) == before  # reads only


def test_a_policy_that_allows_everything_blocks_nothing_and_names_what_it_newly_allows(demo: Path, tmp_path: Path):
    cells = _cells(demo)
    refused = [(s, op) for s, op, denied in cells if denied]
    assert refused  # the demo recorded a refusal
    res = _run(str(_policy(tmp_path, 'default = "allow"\n')), "--store", str(demo), "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["affected"] == 0 and all(not s["blocked"] for s in out["sessions"])
    unblocked = sorted((s["session"], u["op"]) for s in out["sessions"] for u in s["unblocked"])
    assert unblocked == sorted(refused)
    assert sum(s["calls"] for s in out["sessions"]) == len(cells)


def test_ask_and_effect_patterns_and_the_calls_a_halt_would_skip(demo: Path, tmp_path: Path):
    policy = load_policy(_policy(tmp_path, 'default = "allow"\nask = ["run_tests"]\ndeny = ["effect:write"]\n'))
    effects = store_effects(demo)
    assert effects["run_tests"] and effects["publish"] == "write"
    ids = sorted({s for s, _op, _d in _cells(demo)}, key=lambda s: int(s[2:]))
    sim = simulate_policy(demo, ids, policy)
    for s in sim.sessions:
        for b in s.blocked:
            assert (b.proposed, b.rule) == ("ask", "run_tests") if b.op == "run_tests" else \
                (b.proposed, b.rule) == ("deny", "effect:write")
    s1 = next(s for s in sim.sessions if s.session == "s_1")
    first = s1.blocked[0]
    later = [c for c in _session_cells(demo, "s_1") if c[0] == first.turn and c[1] > first.cell]
    assert s1.not_run_after == len(later) > 0
    assert sim.summary_line().startswith("p.toml: ")
    pooled = simulate_policy(demo, ids, policy, jobs=2)
    assert [s.to_json() for s in pooled.sessions] == [s.to_json() for s in sim.sessions]
    assert {k: v.to_json() for k, v in pooled.ops.items()} == {k: v.to_json() for k, v in sim.ops.items()}


def _session_cells(store: Path, sid: str) -> list[tuple[int, int]]:
    from flux.model.session import load_session
    from flux.store.store import StoreReader

    with StoreReader(store) as r:
        return [(c.turn_number, c.index) for c in load_session(r, sid).cells]


def test_the_text_report_lists_ops_and_sessions(demo: Path, tmp_path: Path):
    res = _run(str(_policy(tmp_path, 'default = "allow"\ndeny = ["publish"]\n')), "--store", str(demo))
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["op", "calls", "ran", "would", "deny", "would", "ask", "newly", "allowed"]
    assert any(ln.startswith("publish ") for ln in lines[1:])
    assert "blocked (first: publish at turn" in res.stdout and lines[-1].startswith("p.toml: ")


@pytest.mark.parametrize("text, words", [
    ("default = 'maybe'\n", "default must be allow, deny or ask"),
    ("allow = 3\n", "`allow` must be a list"),
    ("colour = 'red'\n", "unknown key(s) colour"),
    ("[[[", "is not valid TOML"),
])
def test_a_bad_policy_file_is_one_line(demo: Path, tmp_path: Path, text: str, words: str):
    res = _run(str(_policy(tmp_path, text)), "--store", str(demo))
    assert res.exit_code == 1 and res.stderr.startswith("error: ") and words in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_missing_file_missing_session_and_bad_executor_are_one_line(demo: Path, tmp_path: Path):
    ok = str(_policy(tmp_path, 'default = "allow"\n'))
    for args, words in ((["nope.toml"], "cannot read the policy file"),
                        ([ok, "--sessions", "s_999"], "no session 's_999'"),
                        ([ok, "--executor", "dask"], "unknown executor 'dask'"),
                        ([ok, "--sessions", "s_1", "--since", "7d"], "--since goes without --sessions")):
        res = _run(*args, "--store", str(demo))
        assert res.exit_code == 1 and res.stderr.startswith("error: ") and words in res.stderr, (args, res.stderr)
