"""Corpus sweeps on a real local Ray cluster (``ray.init(num_cpus=2)``): the same report as the
local process pool — one row per session in input order, the broken session an error row,
the counterfactual sessions written back to the store — plus the executor's refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.errors import FluxError
from flux.store.store import StoreReader, StoreWriter
from flux.timemachine.executors import Executor, parse_executor, run_on_ray
from flux.timemachine.whatif import WhatIfSpec, what_if_over
from tests.helpers import cell, tree_digest, write_turn


def _corpus(store: Path, n: int) -> list[str]:
    """``n`` sessions that read a file, with one whose plan no longer parses in the middle."""
    ids = []
    with StoreWriter(store) as w:
        for i in range(n):
            sid = w.create_session("mock")
            write_turn(w, sid, f"read {i}", plan=f'flow\n  a = read({{"path":"f{i}.txt"}})\n',
                       cells=[cell("read", {"path": f"f{i}.txt"}, f"content {i}")])
            ids.append(sid)
        bad = w.create_session("mock")
        write_turn(w, bad, "broken", plan="flow\n  x = (\n", cells=[cell("read", {"path": "b"}, "b")])
    return ids[: n // 2] + [bad] + ids[n // 2:]


@pytest.fixture(scope="module")
def ray_cluster():
    """One real local Ray cluster for the module (starting one takes seconds)."""
    try:
        import ray
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("the Ray sweep tests need ray in CI (pip install -e '.[test]')")
        pytest.skip("the ray extra is not installed (pip install -e '.[test]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def _rows(report) -> list[tuple]:
    """A report's rows without the counterfactual ids (each run writes its own sessions)."""
    return [(o.session, o.ok, o.error, None if o.result is None else (o.result.identical, o.result.badge))
            for o in report.outcomes]


def _counterfactuals(store: Path) -> int:
    with StoreReader(store) as r:
        return sum(1 for s in r.list_sessions() if (s.agent_id or "").startswith("what_if:"))


def test_a_ray_sweep_reports_what_the_pool_reports(ray_cluster, tmp_path: Path, ws: Path):
    store = tmp_path / "corpus"
    ids = _corpus(store, 8)
    spec = WhatIfSpec(substitute={"read": "changed"})
    seen: list[int] = []
    on_ray = what_if_over(store, ids, spec, jobs=2, client_args={"workspace": str(ws)}, executor="ray",
                          on_progress=lambda done, total, o: seen.append(done))
    assert seen == list(range(1, 10))  # one progress tick per session
    written_by_ray = _counterfactuals(store)
    pool = what_if_over(store, ids, spec, jobs=2, client_args={"workspace": str(ws)})
    assert _rows(on_ray) == _rows(pool)
    assert [o.session for o in on_ray.outcomes] == ids  # input order
    assert (on_ray.total, on_ray.changed, on_ray.errors, on_ray.offline_cost) == (9, 8, 1, 0.0)
    [err] = [o for o in on_ray.outcomes if not o.ok]
    assert err.session == ids[4] and "no longer parses" in err.error
    assert written_by_ray == 8 and _counterfactuals(store) == 16  # each ran session wrote its what-if back
    with StoreReader(store) as r:  # what Ray wrote is a whole session the store can read back
        ok = [o for o in on_ray.outcomes if o.ok]
        assert all(r.get_session(o.result.session).correlation_id == o.session for o in ok)


def test_a_ray_task_whose_worker_dies_is_an_error_row_and_the_sweep_goes_on(ray_cluster, tmp_path: Path):
    def task(store, sid, spec, args):
        if sid == "s_2":
            os._exit(9)  # the worker process dies mid-task
        return (sid, "ran")

    rows = run_on_ray(task, str(tmp_path), ["s_1", "s_2", "s_3"], None, {}, executor=Executor("ray"), jobs=2,
                      failed=lambda sid, why: (sid, why))
    assert rows[0] == ("s_1", "ran") and rows[2] == ("s_3", "ran")
    assert rows[1][0] == "s_2" and rows[1][1].startswith("the Ray task failed: ")


def test_cli_sweep_on_ray_prints_the_pools_rows(ray_cluster, demo: Path, ws: Path):
    def run(*extra):
        res = CliRunner().invoke(main, ["sweep", "--all", "--substitute", 'read="x"', "--store", str(demo),
                                        "--workspace", str(ws), "--jobs", "2", "--json", *extra])
        assert res.exit_code == 0, res.output
        out = json.loads(res.stdout)
        for o in out["outcomes"]:
            o.pop("counterfactual", None)
            (o.get("result") or {}).pop("session", None)
        return out

    assert run("--executor", "ray") == run()


def test_cli_sweep_starts_and_stops_its_own_ray_cluster(tmp_path: Path, ws: Path):
    """Without a running cluster, ``--executor ray`` starts one for the sweep and stops it after."""
    store = tmp_path / "corpus"
    ids = _corpus(store, 2)
    res = subprocess.run([sys.executable, "-c", "from flux.cli import main; main()", "sweep", "--sessions", ",".join(ids), "--substitute",
                          'read="x"', "--store", str(store), "--workspace", str(ws), "--executor", "ray", "-j", "2"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 1, res.stderr  # the broken session is an error row: exit 1
    lines = res.stdout.splitlines()
    assert lines[-1].startswith("changed 2/3 · errors 1")
    assert [ln.split()[0] for ln in lines[:-1]] == ids and "error" in lines[1]
    assert "Traceback" not in res.stderr


def test_executor_names_are_checked_in_one_line(tmp_path: Path, demo: Path):
    assert parse_executor(None) == parse_executor("pool") == Executor("pool")
    assert parse_executor("ray") == Executor("ray") and parse_executor("ray=auto") == Executor("ray", "auto")
    for bad in ("dask", "ray=", "rays"):
        with pytest.raises(FluxError, match="unknown executor"):
            parse_executor(bad)
    before = tree_digest(demo)
    res = CliRunner().invoke(main, ["sweep", "--all", "--store", str(demo), "--executor", "dask"])
    assert res.exit_code == 1 and res.stderr.startswith("error: unknown executor 'dask' — use pool, ray")
    assert tree_digest(demo) == before


def test_an_unreachable_cluster_is_one_line_not_minutes_of_retries(tmp_path: Path):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(FluxError, match=f"cannot reach the Ray cluster at 127.0.0.1:{port}"):
        run_on_ray(lambda *a: None, str(tmp_path), ["s_1"], None, {}, executor=Executor("ray", f"127.0.0.1:{port}"),
                   jobs=1, failed=lambda sid, why: why)


def test_without_the_ray_extra_the_error_names_it(tmp_path: Path, monkeypatch):
    import builtins

    real = builtins.__import__

    def no_ray(name, *a, **kw):
        if name == "ray" or name.startswith("ray."):
            raise ImportError(name)
        return real(name, *a, **kw)
    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(FluxError, match=r"needs the ray extra: pip install 'flux-tui\[ray\]'"):
        run_on_ray(lambda *a: None, str(tmp_path), ["s_1"], None, {}, executor=Executor("ray"), jobs=1,
                   failed=lambda sid, why: why)


def test_policy_simulation_on_ray_reports_what_the_pool_reports(ray_cluster, demo: Path, tmp_path: Path):
    from flux.agent.approver import load_policy
    from flux.timemachine.policy_sim import simulate_policy

    p = tmp_path / "p.toml"
    p.write_text('default = "allow"\nask = ["run_tests"]\ndeny = ["effect:write"]\n', encoding="utf-8")
    policy = load_policy(p)
    with StoreReader(demo) as r:
        ids = [s.id for s in sorted(r.list_sessions(), key=lambda s: s.n) if not s.correlation_id]
    on_ray = simulate_policy(demo, ids, policy, jobs=2, executor="ray")
    pool = simulate_policy(demo, ids, policy, jobs=2)
    assert on_ray.to_json() == pool.to_json() and on_ray.affected > 0
