"""What-if (spec §4.8) both paths, off tape halt and live, the Counterfactual API, and sweeps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.sdk import Client
from flux.agent.providers.null import NullProvider
from flux.cli import main
from flux.errors import FluxError
from flux.store.store import StoreReader, StoreWriter
from flux.timemachine.whatif import WhatIfSpec, plan_what_if, run_what_if, what_if_over
from tests.helpers import HOST_PLAN, cell, tree_digest, write_turn

NOW = 1_764_000_000_000





def offline(store: Path, ws: Path, **kw) -> Client:
    return Client(NullProvider(model="offline"), model="offline", store=store, workspace=ws, env_secrets=False,
                  auto_resurrect=False, **kw)


def test_pure_substitution_is_hermetic_and_diverges_where_substituted(demo: Path, ws: Path) -> None:
    c = offline(demo, ws)
    cf = c.open_session("s_1").what_if().substitute("run_tests", "2 passed").run()
    c.close()
    assert cf.hermetic and cf.went_live == 0 and cf.model_calls == 0 and cf.substituted == 2
    cf.assert_diverges_at(2)
    cf.assert_compensated_with("edit")
    with pytest.raises(AssertionError, match="never dispatched `publish`"):
        cf.assert_compensated_with("publish")
    with pytest.raises(AssertionError, match="diverges at node 2"):
        cf.assert_diverges_at(0)
    d = cf.diff()
    assert [r.kind for r in d.rows] == ["same", "same", "output", "same", "output", "same"]
    assert cf.cost() == 0.0
    with StoreReader(demo) as r:
        row = r.get_session(cf.session)
    assert row.correlation_id == "s_1" and row.agent_id == "what_if:s_1@latest"


def test_substitute_at_wins_over_substitute_and_is_per_row(demo: Path, ws: Path) -> None:
    c = offline(demo, ws)
    cf = run_what_if(c, "s_1", WhatIfSpec(substitute={"run_tests": "A"}, substitute_at={4: "B"}))
    c.close()
    rows = cf.diff().rows
    assert rows[2].b == "A" and rows[4].b == "B"


def test_substitute_at_bad_row_is_one_line_and_writes_nothing(demo: Path, ws: Path) -> None:
    before = tree_digest(demo)
    r = StoreReader(demo)
    with pytest.raises(FluxError, match="has 6 diff row"):
        plan_what_if(r, "s_1", WhatIfSpec(substitute_at={60: "x"}))
    r.close()
    assert tree_digest(demo) == before


def test_policy_what_if_records_denials(demo: Path, ws: Path, tmp_path: Path) -> None:
    pol = tmp_path / "ro.toml"
    pol.write_text('default = "deny"\nallow = ["effect:read"]\n')
    c = offline(demo, ws)
    cf = c.open_session("s_1").what_if().policy(pol).run()
    c.close()
    assert cf.denials >= 1 and not cf.hermetic and "denied by policy" in cf.badge
    assert cf.first_divergence() is not None


def test_off_tape_halt_then_live(demo: Path, ws: Path) -> None:
    """s_9 was killed while `publish` was in flight: it has no cell, so it is off tape."""
    c = offline(demo, ws)
    cf = run_what_if(c, "s_9", WhatIfSpec())
    c.close()
    assert cf.latched and "off tape" in cf.latched and cf.went_live == 0 and "halted off tape" in cf.badge
    r = StoreReader(demo)
    preview = plan_what_if(r, "s_9", WhatIfSpec(off_tape="live"))
    r.close()
    assert not preview.offline and [o.op for o in preview.ops] == ["publish", "append"]
    from flux.agent.ops import op

    @op(effect="network")
    def publish(repository: str) -> str:
        """Upload."""
        (ws / "uploads.txt").write_text(repository)
        return "uploaded"

    from flux.agent.builtin_ops import coding_ops

    c = offline(demo, ws, ops=coding_ops(ws) + [publish], auto_approve=True)
    cf = run_what_if(c, "s_9", WhatIfSpec(off_tape="live"))
    c.close()
    assert cf.went_live == 2 and cf.live_ops == ["publish", "append"] and (ws / "uploads.txt").read_text() == "pypi"


def test_replan_path_with_a_model(demo: Path, ws: Path) -> None:
    c = Client("mock", store=demo, workspace=ws, env_secrets=False, auto_resurrect=False)
    cf = c.open_session("s_7").what_if().model("mock").turn(2).run()
    c.close()
    assert cf.model_calls >= 1 and not cf.hermetic and cf.went_live == 0
    assert cf.identical is None or cf.diff() is not None
    assert cf.diff().identical  # the same deterministic agent against the frozen world: no change
    assert not (ws / "flux-mock.txt").exists()  # its dispatches were served from the frozen tape


def _corpus(store: Path, n: int) -> list[str]:
    ids = []
    with StoreWriter(store) as w:
        for i in range(n):
            sid = w.create_session("mock")
            write_turn(w, sid, f"read {i}", plan=HOST_PLAN.format(path=f"f{i}.txt"),
                       cells=[cell("read", {"path": f"f{i}.txt"}, f"content {i}")])
            ids.append(sid)
        bad = w.create_session("mock")
        write_turn(w, bad, "broken", plan="flow\n  x = (\n", cells=[cell("read", {"path": "b"}, "b")])
    return ids[:n // 2] + [bad] + ids[n // 2:]


def test_sweep_over_fifty_sessions_with_one_broken(tmp_path: Path, ws: Path) -> None:
    store = tmp_path / "corpus"
    ids = _corpus(store, 50)
    rep = what_if_over(store, ids, WhatIfSpec(substitute={"read": "changed"}), jobs=2,
                       client_args={"workspace": str(ws)})
    assert rep.total == 51 and len(rep.outcomes) == 51
    assert [o.session for o in rep.outcomes] == ids  # input order
    [err] = [o for o in rep.outcomes if not o.ok]
    assert err.session == ids[25] and "no longer parses" in err.error
    assert rep.changed == 50 and rep.errors == 1 and rep.offline_cost == 0.0  # the error row is not a change
    assert all(o.result.hermetic for o in rep.outcomes if o.ok)
    same = what_if_over(store, ids[:3], WhatIfSpec(), jobs=1, client_args={"workspace": str(ws)})
    assert same.changed == 0 and all(o.result.identical for o in same.outcomes)


def test_a_sweep_counts_its_error_rows_as_errors_not_changes(tmp_path: Path, ws: Path) -> None:
    """Reproduction: one identical session and one that cannot run printed ``changed 1/2 · errors 1``
    although nothing diverged."""
    store = tmp_path / "corpus"
    ids = _corpus(store, 1)  # [broken, ok]
    rep = what_if_over(store, ids, WhatIfSpec(), jobs=1, client_args={"workspace": str(ws)})
    assert [o.ok for o in rep.outcomes] == [False, True] and rep.outcomes[1].result.identical
    assert (rep.changed, rep.errors, rep.total) == (0, 1, 2)
    assert rep.summary_line().startswith("changed 0/2 · errors 1")
    assert rep.to_json()["changed"] == 0 and rep.to_json()["errors"] == 1
    changed = what_if_over(store, ids, WhatIfSpec(substitute={"read": "changed"}), jobs=1,
                           client_args={"workspace": str(ws)})
    assert (changed.changed, changed.errors) == (1, 1)  # the one that ran and diverged


def test_cli_what_if_and_sweep(demo: Path, ws: Path) -> None:
    res = CliRunner().invoke(main, ["what-if", "s_1", "--substitute", 'run_tests="2 passed"', "--store", str(demo),
                                    "--workspace", str(ws), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["hermetic"] and out["first_divergence"]["node"] == 2 and out["diff"]["identical"] is False
    res = CliRunner().invoke(main, ["what-if", "s_9", "--off-tape", "live", "--store", str(demo), "--workspace", str(ws)])
    assert res.exit_code == 1 and "would run live (publish (write)" in res.stderr
    res = CliRunner().invoke(main, ["what-if", "s_1", "--substitute", "nojson", "--store", str(demo)])
    assert res.exit_code == 1 and res.stderr.startswith("error: --substitute takes OP=JSON")
    res = CliRunner().invoke(main, ["sweep", "--all", "--substitute", 'read="x"', "--store", str(demo), "--workspace",
                                    str(ws), "--jobs", "2"])
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[-1].startswith("changed ") and "errors 0 · offline cost $0.00" in res.stdout


def test_client_what_if_over_runs_on_the_clients_own_ops(tmp_path: Path, ws: Path) -> None:
    """``client.what_if_over``: each counterfactual runs on this client's ops — sequentially and in
    forked workers alike — so an off-tape dispatch reaches the client's own op, not a default one."""
    from flux.agent.ops import op

    store = tmp_path / "corpus"
    ids = []
    with StoreWriter(store) as w:
        for i in range(4):  # the plan reads twice; only the first read has a cell
            sid = w.create_session("mock")
            write_turn(w, sid, f"read {i}", plan=f'flow\n  a = read({{"path":"f{i}.txt"}})\n  b = read({{"path":"g{i}.txt"}})\n',
                       cells=[cell("read", {"path": f"f{i}.txt"}, f"content {i}")])
            ids.append(sid)

    @op(effect="read")
    def read(path: str) -> str:
        """Read (this client's own op)."""
        with (ws / "calls.log").open("a") as f:
            f.write(path + "\n")
        return f"own {path}"

    c = Client(NullProvider(model="offline"), model="offline", store=store, workspace=ws, env_secrets=False,
               auto_resurrect=False, auto_approve=True, ops=[read])
    try:
        spec = c.open_session(ids[0]).what_if().off_tape("live")
        seq = c.what_if_over(ids[:2], spec, jobs=1)
        par = c.what_if_over([c.open_session(s) for s in ids[2:]], spec.spec, jobs=2)
        with pytest.raises(FluxError, match="needs a WhatIfSpec"):
            c.what_if_over(ids, {"substitute": {}})
    finally:
        c.close()
    for rep, sessions in ((seq, ids[:2]), (par, ids[2:])):
        assert [o.session for o in rep.outcomes] == sessions and rep.errors == 0
        assert all(o.result.went_live == 1 and o.result.live_ops == ["read"] for o in rep.outcomes)
    assert sorted((ws / "calls.log").read_text().split()) == [f"g{i}.txt" for i in range(4)]
