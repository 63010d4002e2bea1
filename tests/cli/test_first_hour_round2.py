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
