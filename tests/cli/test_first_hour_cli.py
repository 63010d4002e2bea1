"""Issue 11 (a new user's first hour), the CLI side: one usage-error contract for every verb,
``flux-tui --version`` / bad stores, and replaying an interrupted session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.demo import build_demo_store

NOW = 1_764_000_000_000


def run(*args, env=None):
    return CliRunner().invoke(main, list(args), env=env or {}, prog_name="flux")


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    return build_demo_store(tmp_path_factory.mktemp("demo") / "store", now_ms=NOW)


# -- item 12: usage errors are `error: …` + exit 1, for every verb ------------------------------

# (argv, what the one line must say). Every verb, and the group itself.
USAGE_ERRORS = [
    (["nosuch"], "no such command 'nosuch'"),
    (["--bogus"], "no such option '--bogus'"),
    (["sessions", "--limit", "0"], "invalid value for '--limit'"),
    (["sessions", "--limit", "x"], "invalid value for '--limit'"),
    (["sessions", "--bogus"], "no such option '--bogus'"),
    (["show", "--turn", "0"], "invalid value for '--turn'"),
    (["show", "a", "b"], "got unexpected extra argument (b)"),
    (["replay", "--turn", "x"], "invalid value for '--turn'"),
    (["replay", "--bogus"], "no such option '--bogus'"),
    (["diff"], "missing argument 'A'"),
    (["diff", "s_1"], "missing argument 'B'"),
    (["run"], "missing argument 'PROMPT...'"),
    (["run", "hi", "--max-iter", "0"], "invalid value for '--max-iter'"),
    (["flow", "run"], "missing argument 'TARGET'"),
    (["flow", "nosuch"], "no such command 'nosuch'"),
    (["demo", "--bogus"], "no such option '--bogus'"),
]


@pytest.mark.parametrize("argv, says", USAGE_ERRORS, ids=[" ".join(a) for a, _ in USAGE_ERRORS])
def test_every_usage_error_is_one_error_line_exit_1(argv, says, tmp_path):
    res = run(*argv)
    assert res.exit_code == 1, (res.exit_code, res.output)
    assert res.stdout == ""
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"error: {says}"), lines[0]
    assert "--help`)" in lines[0]  # says where to read more
    assert "Usage:" not in res.stderr and "Error:" not in res.stderr


def _leaf_verbs() -> list[list[str]]:
    """Every verb path (``sessions``, ``flow run``, …), read from the group: new verbs are covered too."""
    import click

    ctx = click.Context(main, info_name="flux")
    out = []

    def walk(group, path):
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            if isinstance(cmd, click.Group):
                walk(cmd, path + [name])
            elif cmd is not None:
                out.append(path + [name])

    walk(main, [])
    return out


def test_every_verb_keeps_the_contract_for_an_unknown_option():
    verbs = _leaf_verbs()
    assert {"sessions", "show", "replay", "diff", "run", "demo"} <= {v[-1] for v in verbs}
    for verb in verbs:
        res = run(*verb, "--no-such-option")
        assert res.exit_code == 1, (verb, res.output)
        line = res.stderr.strip()
        assert "\n" not in line and line.startswith("error: no such option '--no-such-option'"), (verb, line)
        assert line.endswith(f"(see `flux {' '.join(verb)} --help`)"), (verb, line)


@pytest.mark.parametrize("argv", [[], ["flow"]])
def test_a_bare_group_prints_its_help_exit_0(argv):
    res = run(*argv)
    assert res.exit_code == 0 and res.stdout.startswith("Usage: flux") and res.stderr == ""


def test_help_and_version_still_exit_0():
    assert run("--version").exit_code == 0
    res = run("sessions", "--help")
    assert res.exit_code == 0 and "--limit" in res.stdout


def test_flux_tui_usage_errors_and_version():
    from flux import __version__
    from flux_tui.app import main as tui_main

    res = CliRunner().invoke(tui_main, ["--version"], prog_name="flux-tui")
    assert res.exit_code == 0 and res.stdout.strip() == f"flux-tui, version {__version__}"
    res = CliRunner().invoke(tui_main, ["--bogus"], prog_name="flux-tui")
    line = res.stderr.strip()  # click may add "Did you mean '--host'?" — still one line, the same contract
    assert res.exit_code == 1 and line.startswith("error: no such option '--bogus'") and "\n" not in line
    assert line.endswith("(see `flux-tui --help`)")


def test_docs_state_the_usage_error_contract():
    text = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
    assert "Usage errors" in text and "exit 1" in text


# -- item 2: replaying an interrupted session is not a divergence --------------------------------


def _interrupted(store: Path) -> list[str]:
    rows = json.loads(run("sessions", "--store", str(store), "--json").stdout)["sessions"]
    return [r["id"] for r in rows if r.get("interrupted")]


def test_replaying_an_interrupted_session_says_the_tape_ends_exit_0(demo):
    ids = _interrupted(demo)
    assert ids, "the demo store has interrupted sessions"
    for sid in ids:
        res = run("replay", sid, "--store", str(demo))
        assert res.exit_code == 0, (sid, res.output)
        assert "diverged" not in res.output
        last = res.stdout.splitlines()[-1]
        assert last.startswith("  ⏸ ") and "— tape ends at statement " in last, last
        assert "interrupted (resurrect it with `flux resurrect`)" in last
        data = json.loads(run("replay", sid, "--store", str(demo), "--json").stdout)
        assert data["diverged"] is None
        assert set(data["tape_end"]) == {"flow_key", "node", "op", "turn", "position"}
        assert f"tape ends at statement {data['tape_end']['position']} " in last


def test_a_reproduced_halt_is_a_check_mark(demo):
    # The demo's denied-call session halts live; replay reproduces that halt: ✓, not ✗, exit 0.
    rows = json.loads(run("sessions", "--store", str(demo), "--json").stdout)["sessions"]
    seen = False
    for r in rows:
        res = run("replay", r["id"], "--store", str(demo))
        for line in res.stdout.splitlines():
            if "halted as recorded (reproduced)" in line:
                seen = True
                assert line.startswith("  ✓ ") and res.exit_code == 0, res.output
        assert "✗" not in res.stdout or "diverged" in res.stdout
    assert seen


# -- item 3: --sub-agents shows each child's own line, forks told apart from sub-agents ------------


def test_sub_agents_prints_one_line_per_child_by_kind(tmp_path):
    from flux.canonical import canonical_json, sha256_hex
    from flux.store.events import OpRecorded, Run
    from flux.store.store import StoreWriter
    from tests.helpers import write_turn

    plan = 'flow\n  a = read({"path":"x"})\n'
    h = sha256_hex(canonical_json({"path": "x"}))

    def cell():
        return Run(OpRecorded(step=f"step_read_{h[:16]}", op="read", input_hash=h, content="X"))

    store = tmp_path / "st"
    with StoreWriter(store) as w:
        parent = w.create_session("mock")
        write_turn(w, parent, "go", plan=plan, cells=[cell()])
        sub = w.create_session("mock", context={"correlation_id": parent, "agent_id": "subagent:reviewer"})
        write_turn(w, sub, "go", plan=plan, cells=[cell()])
        fork = w.create_session("mock", context={"correlation_id": parent, "agent_id": f"fork:{parent}@0"})
        write_turn(w, fork, "go", plan=plan, cells=[cell()])
        whatif = w.create_session("mock", context={"correlation_id": parent, "agent_id": f"what_if:{parent}@0"})
        write_turn(w, whatif, "go", plan=plan, cells=[])
    plain = run("replay", parent, "--store", str(store))
    res = run("replay", parent, "--sub-agents", "--store", str(store))
    assert res.exit_code == 0, res.output
    extra = res.stdout.splitlines()[len(plain.stdout.splitlines()):]
    assert extra == [
        f"  ↳ sub-agent {sub} (reviewer) · replayed 1 plan(s) · 1/1 recorded cell(s) served · ✓ faithful",
        f"  ⋔ fork {fork} @0 · replayed 1 plan(s) · 1/1 recorded cell(s) served · ✓ faithful",
        f"  ? what-if {whatif} @0 — session {whatif} is not replayable: no run trace recorded",
    ]
    assert f"replay · fork {fork}" in res.stderr and f"replay · sub-agent {sub}" in res.stderr


# -- item 4: cell-row diffs show the op's input and content, not hashes --------------------------


def _cell_run_store(tmp_path) -> tuple[Path, str, str]:
    from flux.canonical import canonical_json, sha256_hex
    from flux.store.events import OpRecorded, Run
    from flux.store.store import StoreWriter
    from tests.helpers import write_turn

    def cell(inp, content):
        h = sha256_hex(canonical_json(inp))
        return Run(OpRecorded(step=f"step_read_{h[:16]}", op="read", input_hash=h, content=content,
                              input_view=canonical_json(inp)))

    store = tmp_path / "cells"
    with StoreWriter(store) as w:
        a = w.create_session("mock")
        write_turn(w, a, "go", cells=[cell({"path": "README.md"}, "hello"), cell({"path": "x.json"}, '{"n": 1}')])
        b = w.create_session("mock")
        write_turn(w, b, "go", cells=[cell({"path": "NOTES.md"}, "hello"), cell({"path": "x.json"}, '{"n": 2}')])
    return store, a, b


def test_cell_row_diff_names_inputs_and_explains_them(tmp_path):
    store, a, b = _cell_run_store(tmp_path)
    res = run("diff", a, b, "--store", str(store), "--explain")
    assert res.exit_code == 1
    out = res.stdout
    assert '    - op `read` {"path":"README.md"}' in out and '    + op `read` {"path":"NOTES.md"}' in out
    assert "…)" not in out  # no bare hashes
    assert "Value of root['input']['path'] changed from \"README.md\" to \"NOTES.md\"." in out


def test_cell_row_payloads_are_json_on_both_sides(tmp_path):
    from flux.store.store import StoreReader
    from flux.timemachine.diff import run_diff

    store, a, b = _cell_run_store(tmp_path)
    reader = StoreReader(store)
    d = run_diff(reader, a, reader, b)
    assert d.cell_rows
    pa, pb, what = d.row_payloads(0)
    assert json.loads(pa) == {"op": "read", "input": {"path": "README.md"}, "content": "hello"}
    assert json.loads(pb) == {"op": "read", "input": {"path": "NOTES.md"}, "content": "hello"}
    assert what == "cell (op, input, content)"


# -- item 17: the first diff a new user opens teaches all three markers -------------------------


def test_the_demo_fork_diff_shows_same_plan_and_world_rows(demo):
    """The demo's fork s_6 of s_1 is made by the fork engine: a shared prefix (`=`), then both a
    plan divergence (`~`) and a world divergence (`≠`) — and the text names each marker."""
    r = run("diff", "s_1", "s_6", "--store", str(demo), "--json")
    assert r.exit_code == 1, r.output
    report = json.loads(r.output)
    kinds = [row["kind"] for row in report["rows"]]
    assert kinds[0] == "same", kinds
    assert {"same", "plan", "output"} <= set(kinds), kinds  # flux calls a world divergence "output"
    # the shared prefix runs up to the fork point, unbroken
    first_other = next(i for i, k in enumerate(kinds) if k != "same")
    assert first_other >= 1 and all(k == "same" for k in kinds[:first_other])
    text = run("diff", "s_1", "s_6", "--store", str(demo)).output
    for marker in ("  = op", "  ~ plan diverges", "  ≠ same statement, different world"):
        assert marker in text, text
