"""Issue 7 item 3: one hostile accepted ``plan_source`` in a store must not crash ``flux sessions``
(for the whole store, when its turn is open), ``flux show`` or ``flux replay``."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.store import StoreWriter
from tests.helpers import write_turn

HOSTILE = {
    "calls": "flow\n  x = " + "f(" * 250 + ")" * 250 + "\n",
    "objects": "flow\n  x = " + "{a: " * 200 + "$b" + "}" * 200 + "\n",
    "when": "flow\n" + "".join("  " * (i + 1) + "when $a\n" for i in range(330)) + "  " * 331 + "x = 1\n",
    "plus": "flow\n  x = $a" + " + $a" * 1000 + "\n",
    "bigint": 'flow\n  x = tool({"n":' + "9" * 4301 + "})\n",
    "inf": 'flow\n  x = tool({"n":1e400})\n',
    "surrogate": 'flow\n  x = tool({"s":"\\ud83d"})\n',
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
@pytest.mark.parametrize("open_turn", [True, False])
def test_read_verbs_survive_a_hostile_plan(tmp_path, name, open_turn):
    d = tmp_path / "s"
    with StoreWriter(d) as w:
        sid = w.create_session("mock")
        write_turn(w, sid, "go", plan=HOSTILE[name], end=None if open_turn else "ok")
    runner = CliRunner()
    for args in (["sessions"], ["sessions", "--json"], ["show", sid], ["show", sid, "--json"],
                 ["replay", sid]):
        res = runner.invoke(main, [*args, "--store", str(d)], env={})
        assert res.exception is None or isinstance(res.exception, SystemExit), (args, res.output)
        assert "Traceback" not in res.output, (args, res.output)
        if res.exit_code != 0:
            # (the one-line rule for replay's header is issue 7 item 10, not checked here)
            assert res.stderr.strip().splitlines()[-1].startswith("error: "), (args, res.stderr)
    listed = json.loads(runner.invoke(main, ["sessions", "--json", "--store", str(d)], env={}).output)
    assert [s["id"] for s in listed["sessions"]] == [sid]
