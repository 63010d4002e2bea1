"""The toolbox a store was recorded with (toolbox.json), and the refusal of an op it cannot run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.agent.toolboxes import StoreToolbox, store_toolbox, toolbox_ops
from flux.cli import main
from flux.errors import FluxError
from tests.helpers import tree_digest


def test_a_store_without_the_file_runs_the_coding_ops(tmp_path):
    tb = store_toolbox(tmp_path)
    assert tb == StoreToolbox("coding", None, False)
    names = {o.name for o in tb.ops(tmp_path)}
    assert {"read", "write", "bash"} <= names and "publish" not in names


@pytest.mark.parametrize("text, why", [
    ("{", "is not JSON"),
    ("[1]", "must be an object"),
    ('{"toolbox": 3}', "must be an object"),
    ('{"toolbox": "nope"}', "unknown toolbox `nope` (known: coding, demo)"),
    ('{"toolbox": "demo", "workspace": "/etc"}', "must be a directory relative to the store"),
    ('{"toolbox": "demo", "workspace": "../.."}', "leaves the store directory"),
    ('{"toolbox": "demo", "workspace": ""}', "must be a directory relative to the store"),
    ("\udcff".encode("utf-8", "surrogatepass").decode("latin-1"), "is not JSON"),
])
def test_a_hostile_toolbox_file_is_one_line(tmp_path, text, why):
    (tmp_path / "toolbox.json").write_text(text, encoding="utf-8")
    with pytest.raises(FluxError) as e:
        store_toolbox(tmp_path)
    assert why in str(e.value) and "\n" not in str(e.value)


def test_the_demo_toolbox_runs_the_projects_tests_and_publishes_locally(demo):
    tb = store_toolbox(demo)
    assert tb.name == "demo" and tb.workspace == (demo / "workspace").resolve()
    ops = {o.name: o for o in tb.ops(tb.workspace)}
    from flux.agent.ops import OpError

    with pytest.raises(OpError, match="IndexError"):  # the demo project's bug, found by really running its tests
        ops["run_tests"].fn(path="tests")
    src = tb.workspace / "src" / "tokenizer.py"
    src.write_text(src.read_text().replace("    first = text[0]\n", "    if not text:\n        return []\n    first = text[0]\n"))
    assert "2 passed" in ops["run_tests"].fn(path="tests")
    out = ops["publish"].fn(repository="pypi")
    assert out.startswith("published tokenizer-0.4.0 to pypi: index/pypi/tokenizer-0.4.0.tar.gz")
    assert (tb.workspace / "index" / "pypi" / "tokenizer-0.4.0.tar.gz").is_file()
    with pytest.raises(OpError, match="already published"):  # honest: a second upload of the same version fails
        ops["publish"].fn(repository="pypi")
    with pytest.raises(FluxError, match="unknown toolbox"):
        toolbox_ops("nope", tb.workspace)


def _resurrect(store: Path, cwd: Path, *extra: str):
    import os

    cwd.mkdir(exist_ok=True)
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, ["resurrect", "s_9", "--store", str(store), "--yes", *extra])
    finally:
        os.chdir(old)


def test_cli_resurrects_the_demo_live_with_its_own_toolbox(demo, tmp_path):
    res = _resurrect(demo, tmp_path / "cwd")
    assert res.exit_code == 0, res.output
    assert "2 run live" in res.output
    assert (demo / "workspace" / "index" / "pypi" / "tokenizer-0.4.0.tar.gz").is_file()
    assert not list((tmp_path / "cwd").iterdir())  # the demo's workspace, not the current directory


def test_cli_refuses_an_op_the_toolbox_lacks_before_anything_runs(demo, tmp_path):
    (demo / "toolbox.json").unlink()
    before = tree_digest(demo)
    res = _resurrect(demo, tmp_path / "cwd")
    assert res.exit_code == 1
    err = [line for line in res.output.splitlines() if line.startswith("error:")]
    assert err == ["error: resurrect s_9 · turn 1 would dispatch `publish` live, and this toolbox has no "
                   "implementation of it — run it with the toolbox the session was recorded with (a store names it "
                   "in toolbox.json; demo stores use the demo toolbox); nothing was written"]
    assert tree_digest(demo) == before and not list((tmp_path / "cwd").iterdir())


def test_cli_says_a_bad_toolbox_file_in_one_line(demo, tmp_path):
    (demo / "toolbox.json").write_text(json.dumps({"toolbox": "demo", "workspace": "../elsewhere"}))
    before = tree_digest(demo)
    res = _resurrect(demo, tmp_path / "cwd")
    assert res.exit_code == 1 and "leaves the store directory" in res.output and "Traceback" not in res.output
    assert tree_digest(demo) == before


def _sweep(store: Path, cwd: Path, *args: str):
    import os

    cwd.mkdir(exist_ok=True)
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, ["sweep", *args, "--off-tape", "live", "--yes", "--store", str(store), "--json"])
    finally:
        os.chdir(old)


def _publish_cells(store: Path, sid: str) -> list[str]:
    from flux.store.store import StoreReader

    with StoreReader(store) as r:
        return [c.content for c in (e.body.event for e in r.events(sid, kinds=("run",)))
                if type(c).__name__ == "OpRecorded" and c.op == "publish"]


def test_a_live_sweep_runs_the_stores_toolbox_in_its_workspace(demo, tmp_path):
    """s_8 was killed dispatching `publish` (no cell): under --off-tape live the what-if's miss runs
    the demo's real publish into the demo workspace's local index — not the coding ops' "unknown op"."""
    res = _sweep(demo, tmp_path / "cwd", "--sessions", "s_8")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)["outcomes"][0]
    assert out["error"] is None and out["result"]["went_live"] == 1, out
    assert (demo / "workspace" / "index" / "pypi" / "tokenizer-0.4.0.tar.gz").is_file()
    assert _publish_cells(demo, out["result"]["session"])[0].startswith("published tokenizer-0.4.0 to pypi")
    assert not list((tmp_path / "cwd").iterdir())


def test_a_live_sweep_with_two_workers_runs_the_stores_toolbox_too(demo, tmp_path):
    """Two forked workers, two killed publishes: both dispatch the demo's publish into the one
    index, so exactly one uploads and the other is refused by the index (same version)."""
    res = _sweep(demo, tmp_path / "cwd", "--sessions", "s_8,s_9", "--jobs", "2")
    assert res.exit_code == 0, res.output
    outs = json.loads(res.stdout)["outcomes"]
    assert [o["session"] for o in outs] == ["s_8", "s_9"] and all(o["error"] is None for o in outs), outs
    cells = sorted(c for o in outs for c in _publish_cells(demo, o["result"]["session"]))
    assert len(cells) == 2 and cells[0].startswith("published tokenizer-0.4.0 to pypi"), cells
    assert cells[1].startswith("tokenizer-0.4.0 is already published to pypi"), cells
    assert [p.name for p in (demo / "workspace" / "index" / "pypi").iterdir()] == ["tokenizer-0.4.0.tar.gz"]


def test_a_live_sweep_needing_an_op_the_toolbox_lacks_is_an_error_row_and_writes_nothing(demo, tmp_path):
    """Without toolbox.json the store's toolbox is the coding ops: s_8's killed `publish` would go
    live with no implementation. The sweep refuses that session up front (as `flux what-if` does),
    as its error row naming the op; the other session still runs; nothing is written for s_8."""
    from flux.store.store import StoreReader

    (demo / "toolbox.json").unlink()
    with StoreReader(demo) as r:
        before = {row.id for row in r.list_sessions()}
    res = _sweep(demo, tmp_path / "cwd", "--sessions", "s_8,s_1")
    assert res.exit_code == 1, res.output
    outs = {o["session"]: o for o in json.loads(res.stdout)["outcomes"]}
    err = outs["s_8"]["error"]
    assert err is not None and "would dispatch `publish` live" in err and "no implementation" in err, err
    assert "\n" not in err and outs["s_8"]["result"] is None
    assert outs["s_1"]["error"] is None, outs["s_1"]
    with StoreReader(demo) as r:
        made = {row.id for row in r.list_sessions()} - before
    assert made == {outs["s_1"]["result"]["session"]}  # s_1's what-if only: nothing for s_8
    assert not (demo / "workspace" / "index").exists() or not any((demo / "workspace" / "index").rglob("*.tar.gz"))
