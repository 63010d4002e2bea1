"""`flux fork` and `flux resurrect` from the command line: every mode, the gate, and every bad input
as one line with nothing written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.store.store import StoreReader, StoreWriter
from tests.helpers import HOST_PLAN, REPO, tree_digest, write_turn

NOW = 1_764_000_000_000





def flux(*args, env=None):
    return CliRunner(env=env).invoke(main, [str(a) for a in args])


def test_fork_inject_offline_prints_flux_lines(demo: Path, ws: Path) -> None:
    res = flux("fork", "s_1", "--at", 2, "--inject", '"2 passed"', "--store", demo, "--workspace", ws)
    assert res.exit_code == 0, res.output
    assert "offline: no model call, no side effect" in res.stderr
    assert "fork · s_1 @ statement 2 → s_12 · prefix from tape" in res.stderr
    assert res.stdout.strip() == "forked session: s_12  (replay it with `flux replay s_12`; compare with `flux diff s_1 s_12`)"
    d = flux("diff", "s_1", "s_12", "--store", demo, "--json")
    rows = [r["kind"] for r in json.loads(d.stdout)["rows"]]
    assert rows[:2] == ["same", "same"] and "plan" in rows
    rep = flux("replay", "s_12", "--store", demo)
    assert rep.exit_code == 0, rep.output


def test_fork_at_zero_whose_tail_dispatches_nothing_does_not_suggest_replay(fixture_store: Path, ws: Path) -> None:
    """Injecting at statement 0 of the fixture leaves a child with no dispatch and no cell: `flux
    replay` has no tape for it (flux refuses such a session), so the hint says so instead of
    suggesting a replay that would fail; the diff it suggests works."""
    res = flux("fork", "s_1", "--at", 0, "--inject", '"x"', "--store", fixture_store, "--workspace", ws)
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == ("forked session: s_2  (its tail dispatched no op, so there is nothing to replay; "
                                  "compare with `flux diff s_1 s_2`)")
    assert flux("replay", "s_2", "--store", fixture_store).exit_code == 1  # as the hint says: nothing to replay
    d = flux("diff", "s_1", "s_2", "--store", fixture_store, "--json")
    assert [r["kind"] for r in json.loads(d.stdout)["rows"]] == ["plan"]
    j = flux("fork", "s_1", "--at", 0, "--inject", '"y"', "--store", fixture_store, "--workspace", ws, "--json")
    assert json.loads(j.stdout)["replayable"] is False


def test_fork_edit_needs_the_gate_then_runs_live(demo: Path, ws: Path, tmp_path: Path) -> None:
    plan = tmp_path / "edit.flux"
    plan.write_text('flow\n  note = append({"path":"NOTES.md","content":"from the fork\\n"})\n')
    before = tree_digest(demo)
    res = flux("fork", "s_5", "--at", 0, "--edit", plan, "--store", demo, "--workspace", ws)
    assert res.exit_code == 1 and res.stderr.splitlines()[-1].startswith("error: fork s_5 @ 0 would run live (append (write))")
    assert "This will dispatch, for real" in res.stderr and tree_digest(demo) == before
    res = flux("fork", "s_5", "--at", 0, "--edit", plan, "--store", demo, "--workspace", ws, "--yes", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["live_ops"] == ["append"] and out["preview"]["offline"] is False
    assert (ws / "NOTES.md").read_text() == "from the fork\n"


def test_fork_replan_with_a_model(demo: Path, ws: Path) -> None:
    res = flux("fork", "s_7", "--at", 0, "--replan", "--prompt", "write another note", "-m", "mock", "--store", demo,
               "--workspace", ws, "--yes")
    assert res.exit_code == 0, res.output
    assert "model      network  mock" in res.stderr and "forked session: s_12" in res.stdout
    with StoreReader(demo) as r:
        row = r.get_session("s_12")
        assert row.agent_id == "fork:s_7@0" and row.correlation_id == "s_7"


def test_resurrect_cli_json_and_nothing_to_do(demo: Path, ws: Path) -> None:
    res = flux("resurrect", "s_7", "--store", demo, "--workspace", ws)
    assert res.exit_code == 1 and res.stderr.startswith("error: session s_7 has no interrupted turn — nothing to resurrect")
    res = flux("resurrect", "s_9", "--store", demo, "--workspace", ws, "--json")
    assert res.exit_code == 1 and "would run live (publish" in res.stderr


def _no_cells_store(tmp_path: Path) -> Path:
    s = tmp_path / "nocells"
    with StoreWriter(s) as w:
        sid = w.create_session("mock")
        write_turn(w, sid, "read it", plan=HOST_PLAN.format(path="README.md"))
    return s


@pytest.mark.parametrize("case", ["unknown", "past-end", "non-bind", "unparsable", "analysis", "no-cells", "no-key",
                                  "bad-json", "two-modes"])
def test_bad_fork_input_is_one_line_and_writes_nothing(case: str, demo: Path, ws: Path, tmp_path: Path) -> None:
    store = demo
    env = None
    bad = tmp_path / "bad.flux"
    args: list = []
    expect = ""
    if case == "unknown":
        args, expect = ["s_99", "--at", 0, "--inject", "1"], "s_99"
    elif case == "past-end":
        args, expect = ["s_5", "--at", 3, "--inject", "1"], "--at 3 is past the end: session s_5 has 3 statement(s)"
    elif case == "non-bind":
        args, expect = ["s_5", "--at", 1, "--inject", "1"], "--inject needs a top-level `bind` statement"
    elif case == "unparsable":
        bad.write_text("flow\n  x = (\n")
        args, expect = ["s_5", "--at", 0, "--edit", bad], "the edited plan does not parse"
    elif case == "analysis":
        bad.write_text("flow\n  x = read(nothing_binds_this)\n")
        args, expect = ["s_5", "--at", 0, "--edit", bad], "fails analysis: symbol `nothing_binds_this`"
    elif case == "no-cells":
        store = _no_cells_store(tmp_path)
        args, expect = ["s_1", "--at", 0, "--inject", "1"], "is not forkable: no cassette cells recorded"
    elif case == "no-key":
        env = {"ANTHROPIC_API_KEY": None}
        args, expect = ["s_1", "--at", 2], "ANTHROPIC_API_KEY"
    elif case == "bad-json":
        args, expect = ["s_5", "--at", 0, "--inject", "{nope"], "--inject is not JSON"
    elif case == "two-modes":
        bad.write_text("flow\n  x = read({})\n")
        args, expect = ["s_5", "--at", 0, "--inject", "1", "--edit", bad], "pass one of --inject, --edit and --replan"
    before = tree_digest(store)
    res = flux("fork", *args, "--store", store, "--workspace", ws, env=env)
    assert res.exit_code == 1
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("error: ") and expect in res.stderr, res.stderr
    assert tree_digest(store) == before


def test_read_only_store_is_one_line(demo: Path, ws: Path) -> None:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("needs unshare and root to mount the store read-only")
    before = tree_digest(demo)
    env = dict(os.environ, PYTHONPATH=str(REPO / "core"))
    cmd = (f"mount --bind {demo} {demo} && mount -o remount,ro,bind {demo} && exec {sys.executable} -c "
           f"'from flux.cli import main; main()' fork s_1 --at 2 --inject 1 --store {demo} --workspace {ws}")
    p = subprocess.run(["unshare", "-m", "sh", "-c", cmd], env=env, capture_output=True, text=True, timeout=60)
    if "mount" in p.stderr and "error:" not in p.stderr:
        pytest.skip(f"cannot mount here: {p.stderr.strip()}")
    assert p.returncode == 1
    last = p.stderr.splitlines()[-1]
    assert last.startswith("error: ") and "read-only" in last and "Traceback" not in p.stderr
    assert tree_digest(demo) == before


def test_fork_refuses_an_op_the_toolbox_lacks_even_with_yes(demo: Path, ws: Path) -> None:
    """The gate runs after the prefix ran in memory: an op the tail would dispatch live that this
    toolbox cannot run is still refused up front, as one line, with nothing written."""
    (demo / "toolbox.json").unlink()
    before = tree_digest(demo)
    res = flux("fork", "s_9", "--at", 1, "--inject", '"x"', "--store", demo, "--workspace", ws, "--yes")
    assert res.exit_code == 1 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("error: fork s_9 @ statement 1 (inject) would dispatch `publish` live, and this "
                                 "toolbox has no implementation of it")
    assert tree_digest(demo) == before and not list(ws.iterdir())


def test_fork_cli_runs_the_prefix_once_and_predicts_only_the_tail(demo: Path, ws: Path, monkeypatch) -> None:
    """`flux fork` runs the prefix in memory once (the gate's preview comes from the tape it left,
    the write reuses it): no static prediction of the prefix, no second prefix run."""
    from flux.timemachine import fork as fork_mod

    runs: list[int] = []
    previews: list[bool] = []
    real_run, real_preview = fork_mod._run_fork_prefix, fork_mod._preview
    monkeypatch.setattr(fork_mod, "_run_fork_prefix", lambda *a: runs.append(1) or real_run(*a))
    monkeypatch.setattr(fork_mod, "_preview",
                        lambda plan, after_prefix=None: previews.append(after_prefix is not None)
                        or real_preview(plan, after_prefix))
    res = flux("fork", "s_1", "--at", 2, "--inject", '"2 passed"', "--store", demo, "--workspace", ws, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert runs == [1] and previews == [True]
    assert out["prefix_served"] == out["preview"]["prefix_cells"] == 2 and out["preview"]["offline"] is True
    assert out["hermetic"] is True


def test_a_prefix_forks_once(demo: Path, ws: Path) -> None:
    """run_fork_prefix's interpreter and tape move on with the tail: a second fork_session on the
    same prefix is refused (not a child built from a spent tape)."""
    from flux.cli.timemachine import _offline_client, _toolbox_catalog
    from flux.timemachine import fork_session, prepare_fork, run_fork_prefix

    cat = _toolbox_catalog(ws, demo)
    with StoreReader(demo) as r:
        plan = prepare_fork(r, "s_1", 2, inject="2 passed", catalog=cat, workspace=str(ws), preview=False)
    prefix = run_fork_prefix(plan, cat)
    assert plan.preview is not None and plan.preview.offline and prefix.served == 2
    client = _offline_client(demo, ws, "mock")
    try:
        assert fork_session(client, "s_1", 2, prefix=prefix).session == "s_12"
        with pytest.raises(ValueError, match="forked already"):
            fork_session(client, "s_1", 2, prefix=prefix)
    finally:
        client.close()
