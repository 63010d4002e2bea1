"""Run diff when positions drift (issue 8): rows aligned as a sequence, separate A/B indices.

An inject fork of an adaptive session dispatches nothing for the injected ``bind``: the child has
one cell fewer, and flux's positional diff compares call i with call i − 1 from there on.
"""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from flux.agent.client import Client
from flux.model.session import StmtRow
from flux.store.store import StoreReader
from flux.timemachine import fork_session, run_diff
from flux.timemachine.align import align, matches
from flux.timemachine.diff import align_by_position, align_rows

KEYS = st.lists(st.sampled_from("abcde"), max_size=24)


def _lcs_length(a: list, b: list) -> int:
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def _rows(keys: list[str], content: str = "c") -> list[StmtRow]:
    return [StmtRow(i, k, False, (("op", content),)) for i, k in enumerate(keys)]


@settings(max_examples=150, deadline=None)
@given(KEYS, KEYS)
def test_alignment_covers_both_sides_once_in_order_and_is_a_longest_match(a, b):
    pairs = align(a, b)
    assert [i for i, _ in pairs if i is not None] == list(range(len(a)))
    assert [j for _, j in pairs if j is not None] == list(range(len(b)))
    ms = matches(a, b)
    assert all(a[i] == b[j] for i, j in ms)
    assert len(ms) == _lcs_length(a, b)  # within the budget the match is a longest common subsequence
    rows = align_rows(_rows(a), _rows(b))
    assert [r.a_index for r in rows if r.a_index is not None] == list(range(len(a)))
    assert [r.b_index for r in rows if r.b_index is not None] == list(range(len(b)))
    assert [r.index for r in rows] == list(range(len(rows)))
    for r in rows:  # a row names the rows it pairs
        if r.kind != "plan":
            assert a[r.a_index] == b[r.b_index] == r.stmt
        else:
            assert r.a_stmt == (a[r.a_index] if r.a_index is not None else None)
            assert r.b_stmt == (b[r.b_index] if r.b_index is not None else None)


@settings(max_examples=100, deadline=None)
@given(KEYS, KEYS, st.sampled_from([0, 3, 20]))
def test_an_exhausted_budget_still_covers_both_sides_with_valid_matches(a, b, budget):
    """Past the work budget the alignment falls back to patience anchors, then positions: it may
    pair fewer rows, never a row twice, out of order, or two different keys as a match."""
    ms = matches(a, b, budget=budget)
    assert all(a[i] == b[j] for i, j in ms)
    assert all(x[0] < y[0] and x[1] < y[1] for x, y in zip(ms, ms[1:]))
    pairs = align(a, b, budget=budget)
    assert [i for i, _ in pairs if i is not None] == list(range(len(a)))
    assert [j for _, j in pairs if j is not None] == list(range(len(b)))


@settings(max_examples=100, deadline=None)
@given(KEYS)
def test_equal_inputs_are_all_same(a):
    rows = align_rows(_rows(a), _rows(list(a)))
    assert [r.kind for r in rows] == ["same"] * len(a)
    assert all(r.a_index == r.b_index == r.index for r in rows)


@settings(max_examples=150, deadline=None)
@given(KEYS.filter(bool), st.data())
def test_one_deletion_is_one_gap_row_and_everything_else_same(a, data):
    k = data.draw(st.integers(0, len(a) - 1))
    b = a[:k] + a[k + 1:]
    for ra, rb, side in ((_rows(a), _rows(b), "a"), (_rows(b), _rows(a), "b")):
        rows = align_rows(ra, rb)
        kinds = [r.kind for r in rows]
        assert len(rows) == len(a) and kinds.count("plan") == 1 and kinds.count("same") == len(a) - 1
        gap = rows[kinds.index("plan")]
        assert gap.is_gap and (gap.b_stmt is None if side == "a" else gap.a_stmt is None)


@settings(max_examples=100, deadline=None)
@given(KEYS, KEYS)
def test_flux_positional_result_is_kept_unless_the_sequence_pairs_more(a, b):
    pos = align_by_position(_rows(a), _rows(b))
    rows = align_rows(_rows(a), _rows(b))
    pos_pairs = sum(1 for r in pos if r.kind != "plan")
    if sum(1 for r in rows if r.kind != "plan") == pos_pairs:
        assert rows == pos
    else:
        assert sum(1 for r in rows if r.kind != "plan") > pos_pairs


def test_changed_rows_between_matches_pair_up_and_only_the_excess_is_a_gap():
    rows = align_rows(_rows(list("tXrey")), _rows(list("trABey")))
    assert [(r.kind, r.a_stmt, r.b_stmt, r.a_index, r.b_index) for r in rows] == [
        ("same", None, None, 0, 0),
        ("plan", "X", None, 1, None),  # only A
        ("same", None, None, 2, 1),
        ("plan", None, "A", None, 2),  # e (A 3) matches e (B 4): A, B are extra on B's side
        ("plan", None, "B", None, 3),
        ("same", None, None, 3, 4),
        ("same", None, None, 4, 5),
    ]
    # a replaced key between two matches is one ~ row with both sides, as flux shows it
    rows = align_rows(_rows(list("xtaQy")), _rows(list("taZy")))
    assert [(r.kind, r.a_index, r.b_index) for r in rows] == [
        ("plan", 0, None), ("same", 1, 0), ("same", 2, 1), ("plan", 3, 2), ("same", 4, 3)]
    assert (rows[3].a_stmt, rows[3].b_stmt) == ("Q", "Z")


def test_same_key_different_content_is_an_output_row_on_the_paired_cells():
    a = _rows(list("tre"))
    b = [StmtRow(0, "t", False, (("op", "c"),)), StmtRow(1, "e", False, (("op", "other"),))]
    rows = align_rows(a, b)
    assert [(r.kind, r.a_index, r.b_index) for r in rows] == [("same", 0, 0), ("plan", 1, None), ("output", 2, 1)]
    assert (rows[2].a, rows[2].b) == ("c", "other")


def test_ten_thousand_rows_with_repeated_keys_stay_fast_and_exact():
    """Repeated keys (the same call many times) are the case a quadratic matcher chokes on."""
    import time

    a = ["call:run_tests:x", "call:edit:y"] * 5_000
    b = a[:3] + a[4:]  # one edit call fewer
    t = time.process_time()
    rows = align_rows(_rows(a), _rows(b))
    assert time.process_time() - t < 5  # a generous sanity bound; the benchmark measures it
    assert sum(1 for r in rows if r.kind == "plan") == 1 and len(rows) == len(a)


# ---- real sessions -------------------------------------------------------------------------------


def _client(store: Path, ws: Path) -> Client:
    ws.mkdir(exist_ok=True)
    return Client("mock", store=store, workspace=ws, env_secrets=False, auto_approve=True)


def _diff(store: Path, a: str, b: str):
    r = StoreReader(store)
    try:
        return run_diff(r, a, r, b)
    finally:
        r.close()


def test_demo_inject_fork_of_an_adaptive_session_aligns_after_the_fork_point(demo: Path, tmp_path: Path) -> None:
    """`flux fork s_1 --at 1 --inject …` on the demo: `=` task, the injected read as a gap, then
    every later call paired with the same call (served from tape: `=`), not with its neighbour."""
    c = _client(demo, tmp_path / "ws")
    res = fork_session(c, "s_1", 1, inject="injected")
    c.close()
    d = _diff(demo, "s_1", res.session)
    assert d.cell_rows and d.sequence_aligned and (d.a_rows, d.b_rows) == (6, 5)
    ops = [c.op for c in d.a_cells]
    assert ops == ["task", "read", "run_tests", "edit", "run_tests", "append"]
    assert [(r.kind, r.a_index, r.b_index) for r in d.rows] == [
        ("same", 0, 0), ("plan", 1, None), ("same", 2, 1), ("same", 3, 2), ("same", 4, 3), ("same", 5, 4)]
    assert d.first_divergence == 1 and d.summary == {"output": 0, "plan": 1, "same": 5}
    assert d.summary_line().endswith(f"aligned as a sequence (s_1 has 6 cells, {res.session} has 5)")
    # the payloads come from the right cell on each side
    a_pl, b_pl, what = d.row_payloads(2)
    assert what == "cell (op, input, content)" and json.loads(a_pl) == json.loads(b_pl)
    assert json.loads(a_pl)["op"] == "run_tests"
    a_pl, b_pl, _ = d.row_payloads(1)
    assert json.loads(a_pl)["op"] == "read" and b_pl == ""
    # --json: flux's rows plus each row's a_index / b_index
    rows = json.loads(d.json_text())["rows"]
    assert rows[1] == {"a_index": 1, "a_stmt": d.rows[1].a_stmt, "b_index": None, "b_stmt": None, "kind": "plan",
                       "node": 1}
    assert rows[2]["a_index"] == 2 and rows[2]["b_index"] == 1 and rows[2]["kind"] == "same"
    # swapped, the gap is on A's side
    d2 = _diff(demo, res.session, "s_1")
    assert [(r.kind, r.a_index, r.b_index) for r in d2.rows][:3] == [("same", 0, 0), ("plan", None, 1), ("same", 1, 2)]


def test_demo_fork_and_what_if_diffs_keep_flux_positions(demo_master: Path) -> None:
    """The demo's re-planned fork (s_6) and what-if (s_10) already align by position: their
    diffs, JSON included, are flux's positional ones (no index keys)."""
    for child, kinds in (("s_6", ["same", "same", "same", "plan", "output", "plan", "plan"]),
                         ("s_10", ["same", "same", "output", "same", "output", "same"])):
        d = _diff(demo_master, "s_1", child)
        assert [r.kind for r in d.rows] == kinds and not d.sequence_aligned
        assert all("a_index" not in row for row in json.loads(d.json_text())["rows"])


def test_inject_fork_of_the_real_fixture_aligns_after_the_fork_point(fixture_store: Path, tmp_path: Path) -> None:
    """The fixture's s_1 (one append) continued by a second mock turn (glob, append), forked at
    the glob with an injected value: the child lacks the glob cell; its append pairs with the
    source's second append, not with the glob."""
    c = _client(fixture_store, tmp_path / "ws")
    c.run_sync("another note", session=c.open_session("s_1"))
    res = fork_session(c, "s_1", 1, inject=["nothing"])
    c.close()
    d = _diff(fixture_store, "s_1", res.session)
    assert [c.op for c in d.a_cells] == ["append", "glob", "append"] and [c.op for c in d.b_cells] == ["append", "append"]
    assert [(r.kind, r.a_index, r.b_index) for r in d.rows] == [("same", 0, 0), ("plan", 1, None), ("same", 2, 1)]
    assert d.rows[0].stmt == "call:append:7b7d06ae306ee31a"
    lines = d.render_text().splitlines()
    assert lines[1].startswith("  = op `append`") and lines[2] == "  ~ plan diverges:"
    assert lines[3] == '    - op `glob` {"pattern":"*"}' and lines[4] == "    + ∅ (no statement at this position)"
    assert lines[5].startswith("  = op `append`")


def test_unshifted_pair_json_is_unchanged(fixture_store: Path) -> None:
    d = _diff(fixture_store, "s_1", "s_1")
    assert d.json_text() == (
        '{"a":"s_1","b":"s_1","first_divergence":null,"identical":true,'
        '"rows":[{"kind":"same","node":0,"stmt":"call:append:7b7d06ae306ee31a"}],'
        '"summary":{"output":0,"plan":0,"same":1}}')


def test_cli_fork_then_diff_as_the_issue_reproduces_it(demo: Path, tmp_path: Path) -> None:
    """`flux fork s_1 --at 1 --inject '"injected"'` then `flux diff s_1 <child>` (and --explain,
    --json): `= task`, one `~` gap, then `=` rows — not `= task` and five `~` rows."""
    from click.testing import CliRunner

    from flux.cli import main

    ws = tmp_path / "ws"
    ws.mkdir()
    res = CliRunner().invoke(main, ["fork", "s_1", "--at", "1", "--inject", '"injected"', "--store", str(demo),
                                    "--workspace", str(ws)], env={})
    assert res.exit_code == 0, res.output
    child = res.stdout.split("forked session: ")[1].split()[0]
    res = CliRunner().invoke(main, ["diff", "s_1", child, "--store", str(demo), "--explain"], env={})
    assert res.exit_code == 1
    out = res.stdout.splitlines()
    assert [ln[:3] for ln in out[1:4]] == ["  =", "  ~", "   "] and out[2] == "  ~ plan diverges:"
    assert out[3] == '    - op `read` {"path":"src/tokenizer.py"}' and out[4] == "    + ∅ (no statement at this position)"
    assert any('"op": "read"' in ln for ln in out)  # --explain diffs A's read cell against nothing
    marks = [ln[:3] for ln in out if ln.startswith(("  =", "  ~", "  ≠"))]
    assert marks == ["  =", "  ~", "  =", "  =", "  =", "  ="]
    assert "aligned as a sequence (s_1 has 6 cells" in res.stderr
    res = CliRunner().invoke(main, ["diff", "s_1", child, "--store", str(demo), "--json"], env={})
    data = json.loads(res.stdout)
    assert data["first_divergence"] == 1 and data["summary"] == {"output": 0, "plan": 1, "same": 5}
    assert [(r["a_index"], r["b_index"]) for r in data["rows"]] == [(0, 0), (1, None), (2, 1), (3, 2), (4, 3), (5, 4)]
