"""flux's authored-flow surface: `flux flow list`, `flux flow run TARGET --inputs/--arg`,
`flux run FILE --entry FLOW`, and resumable stored flows (`--resumable`, `--resume S|last`,
`--resume-value`) — flux's rules (args.rs, flow_cmd.rs, time-machine.md "Resumable stored flows")
ported as data; every bad input one `error:` line with nothing written."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main
from tests.helpers import tree_digest

RELEASE = '''op repo-state -> String
  description "Return the current git worktree state"
  effects [read, process]
  expose true
  return "clean"

flow release-note(version: String, count: Number) -> String
  note = write({"path": "NOTE.md", "content": "release {version} x{count}\\n"})
  return note
'''
DEPLOY = '''flow deploy -> String
  a = append({"path": "log.txt", "content": "step one\\n"})
  b = read({"path": "missing.txt"})
  c = append({"path": "log.txt", "content": "step three\\n"})
  return c
'''
PROGRAM = '''flow setup() -> String
  s = write({"path": "SETUP.md", "content": "ready\\n"})
  return s

flow triage(query: String) -> String
  t = write({"path": "TRIAGE.md", "content": "{query}\\n"})
  return t
'''


@pytest.fixture
def here(tmp_path: Path, monkeypatch) -> Path:
    d = tmp_path / "proj"
    d.mkdir()
    monkeypatch.chdir(d)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return d


def flux(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_error(res, says: str) -> None:
    assert res.exit_code == 1, res.output
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], res.stderr


def _sessions(store: Path) -> int:
    if not (store / "events.db").exists():
        return 0
    con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True)
    try:
        return con.execute("SELECT COUNT(*) FROM streams").fetchone()[0]
    finally:
        con.close()


# -- flux flow list ----------------------------------------------------------------------------------


def test_flow_list_is_fluxs_catalog(here: Path, tmp_path: Path) -> None:
    assert flux("flow", "list").stdout == "no flows found — add .flux files under .flux/flows or ~/.flux/flows\n"
    (here / ".flux" / "flows").mkdir(parents=True)
    (here / ".flux" / "flows" / "release.flux").write_text(RELEASE)
    (here / ".flux" / "flows" / "broken.flux").write_text("flow broken\n  x = (\n")
    home_flows = tmp_path / "home" / ".flux" / "flows"
    home_flows.mkdir(parents=True)
    (home_flows / "mine.flux").write_text('flow release-note -> String\n  return "shadowed"\n')
    (home_flows / "solo.flux").write_text('flow\n  return "unnamed"\n')
    res = flux("flow", "list")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].startswith("broken [error] — parse error: ")
    assert lines[1:] == [
        "release-note [flow]  (params: version, count)",  # the project's wins over ~/.flux/flows's
        "repo-state [op] — Return the current git worktree state",
        "solo [flow]",  # an unnamed flow takes its file's stem
    ]
    assert flux("flow", "ls").stdout == res.stdout
    j = json.loads(flux("flow", "list", "--json").stdout)["flows"]
    assert [(e["name"], e["kind"]) for e in j] == [("broken", "error"), ("release-note", "flow"), ("repo-state", "op"),
                                                   ("solo", "flow")]
    assert j[1]["params"] == [{"name": "version", "type": "String"}, {"name": "count", "type": "Number"}]


# -- flux flow run TARGET --inputs/--arg ----------------------------------------------------------------


def _release(here: Path) -> None:
    (here / ".flux" / "flows").mkdir(parents=True, exist_ok=True)
    (here / ".flux" / "flows" / "release.flux").write_text(RELEASE)


@pytest.mark.parametrize("args, note", [
    (["--arg", "version=0.14.5", "--arg", "count=2"], "release 0.14.5 x2\n"),
    (["--inputs", '{"version": "0.14.5", "count": 3}'], "release 0.14.5 x3\n"),
    (["--inputs", '{"version": "old", "count": 1}', "--arg", "version=new"], "release new x1\n"),  # --arg over --inputs
    (["--arg", "version=a", "--arg", "version=b", "--arg", "count=1"], "release b x1\n"),  # the last one wins
    (["--arg", "version=x", "--arg", "count=oops", "--arg", "count=4"], "release x x4\n"),  # only the last is coerced
    (["--arg", "version={count}", "--arg", "count=1"], "release {count} x1\n"),  # a value is a value, not a template
])
def test_flow_run_by_saved_name_binds_the_declared_inputs(here: Path, args, note) -> None:
    _release(here)
    res = flux("flow", "run", "release-note", *args, "--yes", "--store", here / "st")
    assert res.exit_code == 0, res.output
    assert (here / "NOTE.md").read_text() == note
    plan = flux("show", "s_1", "--json", "--store", here / "st")
    source = json.loads(plan.stdout)["turns"][0]["plans"][0]["plan_source"]
    assert source.splitlines()[1].startswith("  version: String = ")  # the recording holds its inputs


@pytest.mark.parametrize("args, says", [
    (["--arg", "version"], "--arg expects NAME=VALUE (got `version`)"),
    (["--arg", "=1"], "--arg expects a non-empty NAME"),
    (["--arg", "version=1", "--arg", "count=1", "--arg", "colour=red"],
     "unknown flow input parameter(s): colour — declared parameters: version, count"),
    (["--arg", "version=1"], "missing required flow parameter(s): count (Number) — pass --inputs or --arg"),
    (["--arg", "version=1", "--arg", "count=many"], "--arg count expects Number JSON, got `many`"),
    (["--inputs", '{"version": 1, "count": 1}'], "input `version` expects String, got Number"),
    (["--inputs", "[1]"], "--inputs must be a JSON object, got List"),
    (["--inputs", "{nope"], "--inputs must be a valid JSON object"),
])
def test_flow_run_bad_inputs_are_one_line_and_write_nothing(here: Path, args, says) -> None:
    _release(here)
    res = flux("flow", "run", "release-note", *args, "--yes", "--store", here / "st")
    _one_error(res, says)
    assert _sessions(here / "st") == 0 and not (here / "NOTE.md").exists()


def test_flow_run_of_an_unknown_name_or_an_op_is_one_line(here: Path) -> None:
    _release(here)
    _one_error(flux("flow", "run", "nope", "--store", here / "st"), "no stored flow named `nope`")
    _one_error(flux("flow", "run", "repo-state", "--store", here / "st"),
               "defines composite op `repo-state` and no runnable flow")
    _one_error(flux("flow", "run", "gone.flux", "--store", here / "st"), "no such flow file: gone.flux")
    assert _sessions(here / "st") == 0


# -- flux run FILE --entry FLOW -------------------------------------------------------------------------


def test_run_entry_selects_one_flow_of_a_program(here: Path) -> None:
    (here / "work.flux").write_text(PROGRAM)
    res = flux("run", "work.flux", "--entry", "triage", "--arg", "query=printer on fire", "--yes", "--store", here / "st")
    assert res.exit_code == 0, res.output
    assert (here / "TRIAGE.md").read_text() == "printer on fire\n" and not (here / "SETUP.md").exists()
    # `flux flow run` refuses the same program: it declares two flows
    _one_error(flux("flow", "run", "work.flux", "--store", here / "st2"), "exactly one flow/journey")


@pytest.mark.parametrize("args, says", [
    (["work.flux", "--entry", "missing"], "flow entrypoint `missing` was not found in work.flux; available flows: setup, triage"),
    (["work.flux", "extra words", "--entry", "setup"], "accepts exactly one program path"),
    (["prompt", "--entry", "setup"], "`--entry` requires a `.flux` program path, got `prompt`"),
    (["work.flux", "--arg", "query=x"], "--inputs/--arg need --entry FLOW"),
    (["work.flux", "--entry", "triage"], "missing required flow parameter(s): query (String)"),
])
def test_run_entry_bad_input_is_one_line(here: Path, args, says) -> None:
    (here / "work.flux").write_text(PROGRAM)
    _one_error(flux("run", *args, "--store", here / "st"), says)
    assert _sessions(here / "st") == 0


# -- resumable stored flows -----------------------------------------------------------------------------


def test_resumable_prints_fluxs_halt_report_and_resume_does_not_repeat_the_done_work(here: Path) -> None:
    flow = here / "deploy.flux"
    flow.write_text(DEPLOY)
    store = here / "st"
    res = flux("flow", "run", "deploy.flux", "--resumable", "--yes", "--store", store)
    assert res.exit_code == 1
    report = res.stderr[res.stderr.index("✓ 0:"):].splitlines()
    assert report[:4] == ['✓ 0: a = append({"content":"""step one …', '✗ 1: b = read({"path":"missing.txt"})',
                          '· 2: c = append({"content":"""step three …', "· 3: return c"]
    assert report[5] == "[flow halted at step 2 of 4] missing.txt: no such file in the workspace"
    failure = json.loads(report[6])
    assert failure == {"node": 1, "stmt": failure["stmt"], "op": "read", "kind": "runtime", "fatal": True,
                       "message": "missing.txt: no such file in the workspace", "plan": failure["plan"], "session": "s_1"}
    assert failure["plan"].startswith("deploy#")
    assert report[8] == "Correct the flow and continue: `flux flow run deploy.flux --resume s_1` (or `--resume last`)."
    assert (here / "log.txt").read_text() == "step one\n"

    flow.write_text(DEPLOY.replace("missing.txt", "log.txt"))  # the fix
    res = flux("flow", "run", "deploy.flux", "--resume", "last", "--yes", "--store", store)
    assert res.exit_code == 0, res.output
    assert "resume · s_1 · 1 statement(s) fast-forwarded" in res.stderr
    assert (here / "log.txt").read_text() == "step one\nstep three\n"  # step one did not run again
    assert _sessions(store) == 1  # the same session, one more turn
    rep = flux("replay", "s_1", "--store", store)
    assert rep.exit_code == 0, rep.output

    # the same file, run fresh instead of resumed, repeats the done work — the resume is what spares it
    fresh = flux("flow", "run", "deploy.flux", "--yes", "--store", here / "st2")
    assert fresh.exit_code == 0
    assert (here / "log.txt").read_text() == "step one\nstep three\nstep one\nstep three\n"


def test_an_unchanged_failing_statement_runs_again_live_once_the_world_is_fixed(here: Path) -> None:
    (here / "deploy.flux").write_text(DEPLOY)
    store = here / "st"
    assert flux("flow", "run", "deploy.flux", "--yes", "--store", store).exit_code == 1
    (here / "missing.txt").write_text("now here\n")
    res = flux("flow", "run", "deploy.flux", "--resume", "s_1", "--yes", "--store", store)
    assert res.exit_code == 0, res.output
    assert (here / "log.txt").read_text() == "step one\nstep three\n"


def test_resume_value_binds_a_halted_await(here: Path) -> None:
    (here / "ask.flux").write_text('flow ask -> String\n  a = append({"path": "ask.txt", "content": "asked\\n"})\n'
                                   '  await $reply: String = "reply"\n'
                                   '  b = append({"path": "ask.txt", "content": "{reply}\\n"})\n  return b\n')
    store = here / "st"
    res = flux("flow", "run", "ask.flux", "--resumable", "--yes", "--store", store)
    assert res.exit_code == 1 and '"kind":"awaiting","fatal":false' in res.stderr
    digest = tree_digest(store)
    _one_error(flux("flow", "run", "ask.flux", "--resume", "last", "--yes", "--store", store),
               "session s_1 halted awaiting a value for `$reply` — pass --resume-value <json>")
    assert tree_digest(store) == digest
    res = flux("flow", "run", "ask.flux", "--resume", "last", "--resume-value", "hello", "--yes", "--store", store)
    assert res.exit_code == 0, res.output
    assert (here / "ask.txt").read_text() == "asked\nhello\n"
    assert flux("replay", "s_1", "--store", store).exit_code == 0


def test_a_refused_statement_is_not_run_again_unchanged(here: Path) -> None:
    (here / "deploy.flux").write_text(DEPLOY)
    store = here / "st"
    res = flux("flow", "run", "deploy.flux", "--resumable", "--store", store)  # deny-all: the first op is refused
    assert res.exit_code == 1 and '"kind":"denied"' in res.stderr
    digest = tree_digest(store)
    _one_error(flux("flow", "run", "deploy.flux", "--resume", "s_1", "--store", store),
               "this file still has that statement unchanged — it was not run again")
    assert tree_digest(store) == digest and not (here / "log.txt").exists()


@pytest.mark.parametrize("setup, args, says", [
    ("completed", ["--resume", "s_1"], "session s_1 has no open halt to resume"),
    ("completed", ["--resume", "s_9"], "s_9"),
    ("unnamed", ["--resume", "last"], "`--resume last` needs the flow to declare a name"),
    ("completed", ["--resume", "last"], "no halted `flow run` session found for flow `deploy`"),
    ("completed", ["--resume-value", "1"], "--resume-value needs --resume"),
    ("completed", ["--resume", "s_1", "--session", "s_1"], "--resume names the session to continue"),
])
def test_resume_of_a_session_that_is_not_resumable_is_one_line_and_writes_nothing(here: Path, setup, args, says) -> None:
    store = here / "st"
    text = DEPLOY.replace("missing.txt", "log.txt")
    if setup == "unnamed":
        text = text.replace("flow deploy -> String", "flow")
    (here / "deploy.flux").write_text(text)
    assert flux("flow", "run", "deploy.flux", "--yes", "--store", store).exit_code == 0
    digest, log = tree_digest(store), (here / "log.txt").read_text()
    _one_error(flux("flow", "run", "deploy.flux", *args, "--yes", "--store", store), says)
    assert tree_digest(store) == digest and (here / "log.txt").read_text() == log
