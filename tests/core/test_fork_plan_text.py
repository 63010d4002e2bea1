"""qa5: the plan texts a fork's child records for its prefix are format_flow's of the parsed plans
(the previous code's rule), whatever spelling the source session stored — a host plan that replay's
direct path reads from its text included: a one-line triple-quoted string, a `$` binder, a `\\n`
escape, no final line break, a plan cut inside (the truncated target)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.lang.formatter import format_flow
from flux.lang.hashes import flow_key, stmt_hash16
from flux.lang.parser import parse
from flux.store import PlanAttempted, Run, StatementCompleted, StoreWriter, TurnEnded
from tests.helpers import cell

# stored spellings the direct path reads (each is a host call or a host plan) and format_flow rewrites
_SOURCES = {
    "a one-line triple-quoted string": 'flow\n  a = read({"path":"""x.txt"""})\n',
    "a triple-quoted string with a quote": 'flow\n  a = read({"path":"""x"y"""})\n',
    "a $ binder": 'flow\n  $a = read({"path":"x.txt"})\n',
    "a \\n escape": 'flow\n  a = read({"path":"x\\ny"})\n',
    "no final line break": 'flow\n  a = read({"path":"x.txt"})',
    "two statements, a $": 'flow\n  $a = read({"path":"x.txt"})\n  b = read({"path":"z"})\n',
    "two statements, a \\n escape": 'flow\n  a = read({"path":"x\\ny"})\n  b = read({"path":"z"})\n',
    "canonical (control)": 'flow\n  a = read({"path":"x.txt"})\n  b = read({"path":"z"})\n',
}


def _session(store, text: str) -> str:
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        tid = w.begin_turn(sid, "t", "mock")
        for k, plan in enumerate((text, 'flow\n  last = read({"path":"w"})\n')):
            draft = parse(plan)
            key = flow_key(draft.name, draft.body)
            w.append(sid, PlanAttempted(step=k + 1, outcome="accepted", plan_source=plan), turn_id=tid)
            for i, node in enumerate(draft.body):
                w.append(sid, cell(node.value.op, node.value.args[0].value, f"out{k}{i}"))
                w.append(sid, Run(StatementCompleted(plan=key, node=i, stmt=stmt_hash16(node), value=f"v_{k}{i}")))
        w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
    return sid


@pytest.mark.parametrize("why", sorted(_SOURCES))
def test_a_fork_child_records_its_prefix_plans_as_format_flow_writes_them(tmp_path, why):
    text = _SOURCES[why]
    n = len(parse(text).body)
    for at in range(1, n + 1):  # inside the plan (its truncated text), and just after it
        store = tmp_path / f"s{at}"
        sid = _session(store, text)
        r = CliRunner().invoke(main, ["fork", sid, "--at", str(at), "--inject", '"Z"', "--store", str(store),
                                      "--workspace", str(tmp_path), "--json"])
        assert r.exit_code == 0, r.output
        child = json.loads(r.output)["session"]
        con = sqlite3.connect(store / "events.db")
        rows = [json.loads(p)["data"]["plan_source"] for (p,) in con.execute(
            "SELECT payload FROM events WHERE stream = ? AND kind = 'plan_attempted' ORDER BY stream_seq", (child,))]
        con.close()
        prefix = parse(text)
        want = format_flow(type(prefix)(name=None, params=prefix.params, returns=None, body=prefix.body[:at]))
        assert rows[0] == want, (at, rows)
