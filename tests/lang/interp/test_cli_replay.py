"""`flux flow run` a plan using the constructs with positional arguments, then `flux replay`: the
replay uses the signatures the run used, serves every cell and reproduces the halt."""

from __future__ import annotations

import json

from click.testing import CliRunner

from flux.cli import main

PLAN = '''flow demo
  parallel
    branch left
      read("a.txt")
    branch right
      glob("*.txt")
  loop for 300ms, every: 100ms -> last
    read("a.txt")
  race 5s -> w
    branch first
      read("a.txt")
  timeout 10s
    write(path: "out.txt", content: "{left}")
  with_tools ["read"] -> r
    read("out.txt")
  ctx pack
    budget 100
    include left, right
  f = thing file path "a.txt"
  verify read("out.txt") contains "hello"
  scope h = read("a.txt")
    append(path: "out.txt", content: "more")
  finally
    read("out.txt")
  saga
    step
      append(path: "out.txt", content: "x")
    undo
      write(path: "out.txt", content: "undone")
    step
      read("missing.txt")
'''


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args], env={})


def test_flow_run_then_replay_is_faithful(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello\n")
    plan = tmp_path / "plan.flux"
    plan.write_text(PLAN)
    store = tmp_path / "S"
    res = run("flow", "run", plan, "--store", store, "--workspace", ws, "--yes", "--json")
    assert res.exit_code == 1 and json.loads(res.stdout)["outcome"] == "halted"
    assert (ws / "out.txt").read_text() == "undone"  # the saga compensated
    res = run("replay", "last", "--store", store, "--json")
    rep = json.loads(res.stdout)
    assert rep["diverged"] is None and rep["cells_consumed"] == rep["cells_total"] >= 12, rep
    assert "missing.txt" in rep["plans"][0]["halted"]
