"""The plan snapshot's line diff is flux's `line_diff` (crates/flux-sdk/src/test.rs): lines cut as
Rust's `str::lines` cuts them, compared position by position — so a trailing newline is no phantom
empty `- `/`+ ` row, anywhere the kit prints a snapshot diff."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.testkit.errors import AssertionFailed
from flux.testkit.linediff import first_line_change, line_diff, snapshot_lines
from flux.testkit import Scenario

# flux's rule, as data: (old, new, the rows flux's line_diff prints)
CASES = [
    ("a\nb\n", "a\nc\n", ["  a", "- b", "+ c"]),
    ("a\n", "a", ["  a"]),  # a trailing newline is not a line
    ("a", "a\n", ["  a"]),
    ("", "x\n", ["+ x"]),
    ("x\n", "", ["- x"]),
    ("", "", []),
    ("a\r\nb\r\n", "a\nb", ["  a", "  b"]),  # \r\n ends a line like \n
    ("a\n\n", "a\n", ["  a", "- "]),  # a real empty line is a line
    ("\n", "", ["- "]),
    ("a\nb\nc", "a\nc", ["  a", "- b", "+ c", "- c"]),  # by position, not aligned
    ("x\ry", "x\ry", ["  x\ry"]),  # a lone \r is no line ending
    ("a\r", "a", ["- a\r", "+ a"]),  # nor one at the very end, with no \n after it
]


@pytest.mark.parametrize("old, new, rows", CASES)
def test_line_diff_is_fluxs(old, new, rows) -> None:
    assert line_diff(old, new) == "\n".join(rows)


def test_the_old_split_on_newline_printed_a_phantom_row() -> None:
    """The reproduction: a snapshot file ending in a newline against plans that do not."""
    old, new = "flow\n  a = read({})\n", "flow\n  a = read({})"
    naive = [f"  {x}" if x == y else f"- {x}" for x, y in zip(old.split("\n"), new.split("\n") + [None])]
    assert naive[-1] == "- "  # what the per-`\n` cut printed
    assert line_diff(old, new) == "  flow\n    a = read({})"  # flux: no such row


_text = st.text(alphabet=st.sampled_from(["a", "b", "\n", "\r", " ", "é"]), max_size=20)


@settings(max_examples=200, deadline=None)
@given(_text, _text)
def test_line_diff_rows_are_the_lines_of_both_sides(old, new) -> None:
    rows = line_diff(old, new).split("\n") if line_diff(old, new) else []
    a, b = snapshot_lines(old), snapshot_lines(new)
    assert [r[2:] for r in rows if not r.startswith("+ ")] == a  # every old line once, in order
    assert [r[2:] for r in rows if not r.startswith("- ")] == b  # every new line once, in order
    assert all(r[:2] in ("  ", "- ", "+ ") for r in rows)
    assert not any("\n" in x for x in a + b)
    assert snapshot_lines(old + "\n") == a if old and not old.endswith(("\n", "\r")) else True
    if a == b:
        assert all(r.startswith("  ") for r in rows)


def test_first_line_change_says_when_only_line_endings_differ() -> None:
    assert first_line_change("flow\n", "flow", "plan.flux.snap") == (
        "plan.flux.snap and the recorded plans have the same lines and differ only in line endings "
        "(a trailing newline, or \\r\\n)")
    assert first_line_change("a\nb", "a\nc", "plan.flux.snap") == (
        "plan.flux.snap line 2 is 'b', the recorded plans have 'c'")
    assert first_line_change("a", "a\nc", "p") == "p line 2 is nothing (the file ends), the recorded plans have 'c'"


def test_a_snapshot_whose_final_newline_changed_fails_without_phantom_rows(openai_dir) -> None:
    snap = openai_dir / "plan.flux.snap"
    text = snap.read_text()
    snap.write_text(text[:-1] if text.endswith("\n") else text + "\n")  # only the final newline changes
    with Scenario.load(openai_dir) as sc:
        with pytest.raises(AssertionFailed) as e:
            sc.replay().assert_plan_snapshot()
    assert "differ only in line endings" in e.value.summary
    detail = str(e.value).split(f"{snap}\n", 1)[1]
    assert detail.splitlines() and all(r.startswith("  ") for r in detail.splitlines())


def test_a_changed_snapshot_line_is_one_minus_and_one_plus_row(openai_dir) -> None:
    snap = openai_dir / "plan.flux.snap"
    snap.write_text(snap.read_text().replace("README.md", "OLD.md"))
    with Scenario.load(openai_dir) as sc:
        with pytest.raises(AssertionFailed) as e:
            sc.replay().assert_plan_snapshot()
    detail = str(e.value).split(f"{snap}\n", 1)[1].splitlines()
    changed = [r for r in detail if not r.startswith("  ")]
    assert changed == ['-   adaptive_gather_1 = read({"path":"OLD.md"})', '+   adaptive_gather_1 = read({"path":"README.md"})']
