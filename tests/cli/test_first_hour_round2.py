"""A new user's first hour, round 2 — the CLI's reproductions, each on a real store: what-if refuses
a substitution for an op the session never calls, resurrect with nothing to finish is an error and
``last`` means the newest interrupted session, and the smaller output defects."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from flux.cli import main
from flux.store.store import StoreReader, StoreWriter
from tests.helpers import HOST_PLAN, tree_digest, write_turn


def flux(*args, env=None):
    return CliRunner(env=env).invoke(main, [str(a) for a in args], prog_name="flux")


def one_error(res, starts: str) -> str:
    """The contract for bad input: exit 1, one ``error:`` line on stderr, nothing on stdout."""
    assert res.exit_code == 1, (res.exit_code, res.output)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {starts}"), res.stderr
    assert res.stdout == "" and "Traceback" not in res.stderr
    return lines[0]


# -- what-if --substitute for an op the session never calls ----------------------------------------

def test_what_if_refuses_a_substitution_for_an_op_the_session_never_calls(demo: Path, ws: Path) -> None:
    before = tree_digest(demo)
    line = one_error(flux("what-if", "s_1", "--substitute", 'nosuchop="x"', "--store", demo, "--workspace", ws),
                     "--substitute nosuchop=…: s_1 never calls `nosuchop`")
    assert "it calls append, edit, read, run_tests, task" in line and "nothing was written" in line
    assert tree_digest(demo) == before
    # a real op of the session goes through (the same command, one name right)
    res = flux("what-if", "s_1", "--substitute", 'run_tests="2 passed"', "--store", demo, "--workspace", ws)
    assert res.exit_code == 0, res.output
    assert "counterfactual session: s_12" in res.stdout


def test_what_if_names_the_turn_when_the_op_is_only_in_another_turn(demo: Path, ws: Path) -> None:
    before = tree_digest(demo)
    line = one_error(flux("what-if", "s_1", "--turn", 1, "--substitute", 'append="x"', "--store", demo,
                          "--workspace", ws), "--substitute append=…: turn 1 of s_1 never calls `append`")
    assert "append" not in line.split("it calls ", 1)[1]
    assert tree_digest(demo) == before


# -- resurrect: nothing to resurrect is an error; `last` is the newest interrupted session ---------

def test_resurrect_with_nothing_to_resurrect_is_one_error_line(demo: Path, ws: Path) -> None:
    before = tree_digest(demo)
    one_error(flux("resurrect", "s_1", "--store", demo, "--workspace", ws),
              "session s_1 has no interrupted turn — nothing to resurrect")
    one_error(flux("resurrect", "s_1", "--store", demo, "--workspace", ws, "--json"),
              "session s_1 has no interrupted turn — nothing to resurrect")
    assert tree_digest(demo) == before


def test_resurrect_last_on_a_store_with_no_interrupted_session(tmp_path: Path) -> None:
    store = tmp_path / "st"
    with StoreWriter(store) as w:
        write_turn(w, w.create_session("mock"), "done already", plan=HOST_PLAN.format(path="a.txt"))
    before = tree_digest(store)
    one_error(flux("resurrect", "--store", store, "--workspace", tmp_path),
              f"no session in {store} has an interrupted turn — nothing to resurrect")
    assert tree_digest(store) == before


def _two_interrupted(tmp_path: Path) -> Path:
    """s_1 interrupted most recently, s_2 interrupted earlier, s_3 (highest id) finished."""
    store = tmp_path / "st"
    with StoreWriter(store) as w:
        s1, s2, s3 = (w.create_session("mock") for _ in range(3))
        write_turn(w, s2, "killed first", plan=HOST_PLAN.format(path="two.txt"), end=None, ts=1_700_000_000_000)
        write_turn(w, s3, "finished", plan=HOST_PLAN.format(path="three.txt"), ts=1_700_000_100_000)
        write_turn(w, s1, "killed last", plan=HOST_PLAN.format(path="one.txt"), end=None, ts=1_700_000_200_000)
    return store


def test_resurrect_last_is_the_newest_interrupted_session_not_the_highest_id(tmp_path: Path) -> None:
    store = _two_interrupted(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "one.txt").write_text("one\n")
    listed = flux("sessions", "--store", store, "--json")
    flagged = [s["id"] for s in json.loads(listed.stdout)["sessions"] if s["interrupted"]]
    assert flagged == ["s_1", "s_2"]  # newest first; s_3 is the highest id and is not interrupted
    res = flux("resurrect", "last", "--store", store, "--workspace", ws, "--yes", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["outcome"] == "resurrected"
    with StoreReader(store) as r:
        from flux.model.listing import interrupted_sessions

        assert set(interrupted_sessions(r)) == {"s_2"}  # s_1 was finished, s_2 left alone
    # with no argument too, and now the newest interrupted one is s_2
    (ws / "two.txt").write_text("two\n")
    res = flux("resurrect", "--store", store, "--workspace", ws, "--yes", "--json")
    assert res.exit_code == 0, res.output
    with StoreReader(store) as r:
        assert interrupted_sessions(r) == {}


# -- every verb has --json; the help says which verbs write; scripted models and completion --------

def _leaf_commands():
    import click

    ctx = click.Context(main)

    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                yield from walk(cmd.get_command(ctx, name), [*path, name])
        else:
            yield " ".join(path), cmd

    return list(walk(main, []))


def test_every_verb_has_json_as_the_readme_and_cli_md_say():
    from tests.helpers import REPO

    verbs = _leaf_commands()
    assert len(verbs) >= 16 and {"demo", "record", "export", "golden check", "golden update"} <= {n for n, _ in verbs}
    # the saved-case verbs print JSON lines whatever the flags, `db migrate` one status line (the docs say so)
    missing = [name for name, cmd in verbs if not name.startswith("case ") and name != "db migrate"
               and "--json" not in {o for p in cmd.params for o in getattr(p, "opts", ())}]
    assert missing == []
    assert "Every verb has\n`--json` (the `flux case` verbs print JSON lines always; `flux db migrate`" in (REPO / "README.md").read_text()
    assert "and `--json` (the `flux case` verbs" in (REPO / "docs" / "cli.md").read_text()


def test_demo_json_names_the_store_and_its_sessions(tmp_path: Path) -> None:
    res = flux("demo", "--store", tmp_path / "d", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    listed = json.loads(flux("sessions", "--store", tmp_path / "d", "--json", "--limit", 100).stdout)["sessions"]
    assert out["sessions"] == [s["id"] for s in listed] and len(out["sessions"]) == 11
    assert out["interrupted"] == [s["id"] for s in sorted(listed, key=lambda s: int(s["id"][2:])) if s["interrupted"]]
    assert out["interrupted"] == ["s_8", "s_9"] and Path(out["store"]) == tmp_path / "d"
    again = flux("demo", "--store", tmp_path / "d", "--json")  # bad input stays one error line, JSON or not
    one_error(again, f"{tmp_path / 'd'} already holds a store")


def test_export_json_holds_the_same_trajectory_or_names_the_file(demo: Path, tmp_path: Path) -> None:
    plain = flux("export", "s_1", "--format", "atif", "--normalize", "--store", demo)
    res = flux("export", "s_1", "--format", "atif", "--normalize", "--store", demo, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["trajectory"] == json.loads(plain.stdout) and out["trajectory"]["steps"]
    assert (out["session"], out["format"], out["normalized"], out["file"]) == ("s_1", "atif", True, None)
    f = tmp_path / "t.json"
    res = flux("export", "s_1", "--format", "atif", "--normalize", "--store", demo, "--json", "-o", f)
    out = json.loads(res.stdout)
    assert out["file"] == str(f) and "trajectory" not in out and json.loads(f.read_text()) == json.loads(plain.stdout)
    one_error(flux("export", "s_99", "--format", "atif", "--store", demo, "--json"), "")


def test_golden_json_says_whether_it_matches(demo: Path, tmp_path: Path) -> None:
    g = tmp_path / "s1.golden.json"
    res = flux("golden", "update", "s_1", g, "--store", demo, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) | {"diff": None} == {"session": "s_1", "golden": str(g), "matches": True,
                                                        "written": "created", "diff": None, "problem": None}
    res = flux("golden", "check", "s_1", g, "--store", demo, "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["matches"] is True and json.loads(res.stdout)["written"] is None
    # the same golden against another session: no match, exit 1, the failure text in `problem`
    res = flux("golden", "check", "s_3", g, "--store", demo, "--json")
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert out["matches"] is False and out["problem"].startswith(f"trajectory differs from {g}")
    res = flux("golden", "update", "s_3", g, "--store", demo, "--json")
    out = json.loads(res.stdout)
    assert res.exit_code == 0 and out["written"] == "updated" and out["diff"].startswith("--- golden")


def test_record_json(tmp_path: Path) -> None:
    res = flux("record", "note", "write a quick note", "--dir", tmp_path / "sc", "-m", "mock", "--yes", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out == {"directory": str(tmp_path / "sc" / "note"), "session": "s_1", "model": "mock", "outcome": "ok",
                   "tool_calls": out["tool_calls"], "replay_faithful": True} and out["tool_calls"] >= 1


def test_the_help_says_which_verbs_write():
    from flux_tui.app import main as tui_main
    from flux_tui.help import APP_HELP

    tui = CliRunner().invoke(tui_main, ["--help"])
    assert "Read-only" not in tui.stdout and "fork, what-if and resurrect write" in " ".join(tui.stdout.split())
    assert "Nothing is ever written" not in APP_HELP and "Browsing writes" in APP_HELP
    top = " ".join(flux("--help").stdout.split())
    assert "fork, what-if and resurrect (these write a new session" in top


def _flux_exe() -> str:
    import sys

    exe = Path(sys.executable).parent / "flux"
    assert exe.is_file(), f"the flux entry point is not installed beside {sys.executable}"
    return str(exe)


def test_shell_completion_as_documented(tmp_path: Path) -> None:
    import os
    import subprocess

    from tests.helpers import REPO

    assert 'eval "$(_FLUX_COMPLETE=bash_source flux)"' in (REPO / "docs" / "cli.md").read_text()
    env = dict(os.environ, _FLUX_COMPLETE="bash_source")
    src = subprocess.run([_flux_exe()], env=env, capture_output=True, text=True, timeout=60)
    assert src.returncode == 0 and "_flux_completion()" in src.stdout and "complete " in src.stdout
    env = dict(os.environ, _FLUX_COMPLETE="bash_complete", COMP_WORDS="flux re", COMP_CWORD="1")
    verbs = subprocess.run([_flux_exe()], env=env, capture_output=True, text=True, timeout=60)
    assert verbs.stdout.split() == ["plain,record", "plain,replay", "plain,resurrect"]
    env = dict(os.environ, _FLUX_COMPLETE="bash_complete", COMP_WORDS="flux what-if s_1 --sub", COMP_CWORD="3")
    opts = subprocess.run([_flux_exe()], env=env, capture_output=True, text=True, timeout=60)
    assert opts.stdout.split() == ["plain,--substitute", "plain,--substitute-at"]


def test_the_documented_scripted_model_runs(tmp_path: Path) -> None:
    import re

    from tests.helpers import REPO

    doc = (REPO / "docs" / "agent.md").read_text()
    script = re.search(r"\*\*`scripted:FILE`\*\*.*?```json\n(.*?)```", doc, re.S).group(1)
    (tmp_path / "answers.json").write_text(script)
    ws = tmp_path / "ws"
    ws.mkdir()
    res = flux("run", "-m", f"scripted:{tmp_path / 'answers.json'}", "--store", tmp_path / "st", "--workspace", ws,
               "--yes", "write a note")
    assert res.exit_code == 0, res.output
    assert (ws / "note.txt").read_text() == "hello\n" and "Wrote note.txt." in res.stdout
    # running out of answers is an error that says how many were served
    (tmp_path / "one.json").write_text('[{"tool_calls": [{"name": "read", "input": {"path": "note.txt"}}]}]')
    res = flux("run", "-m", f"scripted:{tmp_path / 'one.json'}", "--store", tmp_path / "st3", "--workspace", ws,
               "--yes", "read it")
    assert res.exit_code == 1 and "served" in res.output


# -- the smaller output defects ----------------------------------------------------------------------

def test_sessions_columns_line_up_with_long_model_names_and_wider_ids(demo: Path) -> None:
    res = flux("sessions", "--store", demo)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert any("anthropic:claude-sonnet-4-5" in ln for ln in lines) and {"s_9", "s_11"} <= {ln.split()[0] for ln in lines}
    for column in (" msg  ", "active "):
        assert len({ln.index(column) for ln in lines}) == 1, (column, lines)
    assert lines[0].startswith("s_11    2 msg  mock                        active")


def test_sessions_is_flux_s_line_when_every_column_fits(tmp_path: Path) -> None:
    from tests.helpers import write_turn

    store = tmp_path / "st"
    with StoreWriter(store) as w:
        for _ in range(3):
            write_turn(w, w.create_session("mock"), "hi")
    lines = flux("sessions", "--store", store).stdout.splitlines()
    assert len(lines) == 3
    for n, ln in zip((3, 2, 1), lines):
        assert ln.startswith(f"s_{n}    2 msg  mock                   ")  # flux's {:<22}, not wider


def _starts(row: str) -> list[int]:
    """Where each whitespace-separated cell of a table row starts."""
    import re

    return [m.start() for m in re.finditer(r"\S+", row)]


def _table(stderr: str) -> list[str]:
    lines = stderr.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("This will dispatch, for real"))
    return [ln for ln in lines[start + 1:] if ln.startswith("  ")]


def test_the_gate_table_s_columns_line_up_and_the_workspace_is_said_once(demo: Path) -> None:
    res = flux("resurrect", "s_9", "--store", demo)
    one_line = res.stderr.splitlines()[-1]
    assert res.exit_code == 1 and one_line.startswith("error: resurrect s_9 would run live (publish (write), append (write))")
    heading = next(ln for ln in res.stderr.splitlines() if ln.startswith("This will dispatch"))
    assert heading == f"This will dispatch, for real (workspace {demo / 'workspace'}):"
    rows = _table(res.stderr)
    assert [r.split()[0] for r in rows] == ["publish", "append"]
    assert len({tuple(_starts(r)[:3]) for r in rows}) == 1  # each column starts at one offset
    assert all("workspace" not in r for r in rows)


def test_the_gate_refusal_marks_a_cut_op_list(demo: Path) -> None:
    res = flux("fork", "s_1", "--at", 2, "--replan", "-m", "mock", "--store", demo)
    assert res.exit_code == 1
    rows = _table(res.stderr)
    assert len(rows) == 11 and rows[-1].split() == ["model", "network", "mock"]  # ten ops and the model
    assert len({tuple(_starts(r)[:3]) for r in rows}) == 1
    err = res.stderr.splitlines()[-1]
    assert "publish (write), … 4 more, model mock) — pass --yes" in err
    # a short list is named whole, with no mark
    res = flux("resurrect", "s_9", "--store", demo)
    assert "…" not in res.stderr.splitlines()[-1]


def test_a_cross_store_diff_names_each_side_s_store(demo: Path, tmp_path: Path) -> None:
    import shutil

    other = Path(shutil.copytree(demo, tmp_path / "other"))
    res = flux("diff", "s_1", "s_6", "--store", demo, "--store-b", other)
    assert res.exit_code == 1
    assert res.stdout.splitlines()[0] == f"diff s_1 ({demo}) ↔ s_6 ({other})"
    assert sum(ln.startswith("diff ") for ln in res.stdout.splitlines()) == 1
    data = json.loads(flux("diff", "s_1", "s_6", "--store", demo, "--store-b", other, "--json").stdout)
    assert (data["a_store"], data["b_store"]) == (str(demo), str(other))
    same_store = json.loads(flux("diff", "s_1", "s_6", "--store", demo, "--json").stdout)
    assert "a_store" not in same_store and flux("diff", "s_1", "s_6", "--store", demo).stdout.startswith("diff s_1 ↔ s_6\n")


def test_a_bad_store_b_is_named_store_b(demo: Path, tmp_path: Path) -> None:
    line = one_error(flux("diff", "s_1", "s_1", "--store", demo, "--store-b", tmp_path / "nope"), f"{tmp_path / 'nope'} does not exist")
    assert "point --store-b at an existing one" in line
    (tmp_path / "file").write_text("x")
    assert "--store-b takes the directory" in one_error(
        flux("diff", "s_1", "s_1", "--store", demo, "--store-b", tmp_path / "file"), "")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "events.db").write_text("")
    assert "point --store-b at a directory flux wrote" in one_error(
        flux("diff", "s_1", "s_1", "--store", demo, "--store-b", tmp_path / "empty"), "")
    # the A side still names --store
    assert "point --store at an existing one" in one_error(
        flux("diff", "s_1", "s_1", "--store", tmp_path / "nope", "--store-b", demo), "")


def test_fork_edit_shows_every_analysis_problem(demo: Path, ws: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.flux"
    bad.write_text('flow\n  a = nosuch({"x":1})\n  b = other(zzz)\n  c = read(undefined_sym)\n  d = nosuch({})\n')
    before = tree_digest(demo)
    line = one_error(flux("fork", "s_5", "--at", 0, "--edit", bad, "--store", demo, "--workspace", ws),
                     "the edited plan fails analysis: ")
    for problem in ("symbol `zzz` is not bound", "symbol `undefined_sym` is not bound", "unknown op `nosuch` (known: ",
                    "unknown op `other`"):
        assert problem in line, problem
    assert line.count("unknown op `nosuch`") == 1 and line.count("(known: ") == 1  # the known ops, said once
    assert "more" not in line and tree_digest(demo) == before


def test_a_halted_tail_keeps_the_output_s_lines_bounded(demo: Path, tmp_path: Path) -> None:
    plan = tmp_path / "halt.flux"
    plan.write_text('flow\n  x = bash({"command":"for i in 1 2 3; do echo line $i; done; exit 1"})\n')
    res = flux("fork", "s_5", "--at", 0, "--edit", plan, "--store", demo, "--yes")
    assert res.exit_code == 1
    err = res.stderr.splitlines()
    assert err[-5:-1] == ["  │ line 1", "  │ line 2", "  │ line 3", "  │ [exit 1]"]
    assert err[-1] == "error: fork tail halted: line 1 … [exit 1] (4 lines of output, above)"
    plan.write_text('flow\n  x = bash({"command":"seq 1 500; exit 3"})\n')
    res = flux("fork", "s_5", "--at", 0, "--edit", plan, "--store", demo, "--yes")
    err = res.stderr.splitlines()
    shown = [ln for ln in err if ln.startswith("  │ ")]
    assert len(shown) == 41 and shown[0] == "  │ 1" and shown[20] == "  │ … 461 line(s) not shown …"
    assert shown[-1] == "  │ [exit 3]" and err[-1].endswith("(501 lines of output, above)")
    assert all(len(ln) < 200 for ln in err)


def test_a_mock_re_plan_on_the_demo_writes_the_note(demo: Path) -> None:
    res = flux("fork", "s_1", "--at", 3, "--replan", "-m", "mock", "--yes", "--store", demo)
    assert res.exit_code == 0, res.output
    assert "could not write the note" not in res.output and "Finished." in res.stdout
    assert (demo / "workspace" / "flux-mock.txt").read_text() == "created by flux mock\n"


def test_the_mock_says_why_it_could_not_write_the_note(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    res = flux("run", "-m", "mock", "--store", tmp_path / "st", "--workspace", ws, "write a note")  # deny-all
    assert res.stdout.splitlines()[0].startswith("I could not write the note: denied by policy: `append`")
    assert not (ws / "flux-mock.txt").exists()


def _failing_output(text: str):
    """``fail_with_output`` on ``text``, as a verb would call it: (exit status, stderr lines)."""
    import click

    from flux.cli.common import fail_with_output

    @click.command()
    def verb():
        fail_with_output("fork tail halted", text)

    res = CliRunner().invoke(verb, [])
    return res.exit_code, res.stderr.splitlines()


def test_hostile_op_output_in_a_halt_stays_bounded_lines_and_one_error():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    line = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=400)

    @settings(max_examples=150, deadline=None)
    @given(st.lists(line, max_size=120).map("\n".join) | st.text(max_size=3000))
    def check(text):
        code, err = _failing_output(text)
        assert code == 1 and err and err[-1].startswith("error: fork tail halted")
        assert sum(ln.startswith("error:") for ln in err) == 1
        assert len(err) <= 42 and all(len(ln) <= 260 for ln in err)
        assert all(ln.startswith("  │ ") for ln in err[:-1])
        assert not any(ch in ln for ln in err for ch in "\r\x00\x1b\x07\x7f\x85\u2028\u2029")

    check()
    code, err = _failing_output("x" * 5000)  # one huge line: one bounded error line
    assert code == 1 and len(err) == 1 and len(err[0]) < 300 and err[0].endswith("…")
