"""flux's website contract, ported as data: every complete Flux-Lang fence of its docs and blog
(tests/lang/data/website, copied verbatim) parses with ``parse_program``; the examples flux states are
formatter-checked are canonical here too; and each fence, broken, is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flux.lang import ast as A
from flux.lang import parse_program
from flux.lang.formatter import format_flow
from flux.lang.parser import ParseError
from flux.lang.program import Program

DATA = Path(__file__).parent / "data" / "website"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())["files"]
FENCES = sorted(MANIFEST)
#: the declarations that make a fence complete (flux's website_contract.rs, plus `board`)
DECLARATIONS = ("agent ", "board ", "channel ", "datasource ", "flow ", "journey ", "op ", "trigger ")


def _complete(block: str) -> bool:
    return any(line == line.lstrip() and line.startswith(DECLARATIONS) for line in block.splitlines())


def test_the_corpus_is_representative_and_every_fence_is_complete():
    assert len(FENCES) >= 25
    assert {p.name for p in DATA.glob("*.flux")} == set(FENCES)
    for name in FENCES:
        assert _complete((DATA / name).read_text()), name


@pytest.mark.parametrize("name", FENCES)
def test_every_complete_fence_parses(name):
    module = parse_program((DATA / name).read_text())
    assert isinstance(module, (A.DraftAst, Program))


@pytest.mark.parametrize("name", FENCES)
def test_every_fence_broken_is_refused(name):
    # an unknown declaration at column 0 in front of the same fence
    with pytest.raises(ParseError, match="unknown top-level declaration"):
        parse_program("nope\n" + (DATA / name).read_text())


@pytest.mark.parametrize("name", [n for n in FENCES if n.startswith("docs--language--examples.")])
def test_fluxs_formatter_checked_examples_are_canonical(name):
    text = (DATA / name).read_text()
    draft = parse_program(text)
    assert format_flow(draft) == text


def test_the_board_fence_reads_its_axes():
    program = parse_program((DATA / "docs--coding--boards.1.flux").read_text())
    (board,) = program.boards
    assert (board.name, board.scope, board.profile, board.kind, board.root) == (
        "execution", "repository", "execution", "markdown", "./board")


def test_the_blog_fence_binds_reserved_words_as_values():
    program = parse_program((DATA / "blog--2026-07-30-a-workflow-family-in-one-file.1.flux").read_text())
    start = next(f for f in program.flows if f.name == "start")
    assert start.body[0] == A.Bind("switched", A.Call("git_checkout", (A.Obj(
        {"branch": A.Var("branch"), "create": A.Lit(True)}),)))
    assert [f.name for f in program.flows] == ["status", "start", "save", "land", "undo"]


BOARD = 'board b\n  scope "repository"\n  profile "execution"\n  kind "markdown"\n'


@pytest.mark.parametrize("src, what", [
    ('board b\n  scope "repository"\n  profile "execution"\n', "needs a `kind`"),
    ('board b\n  scope "galaxy"\n  profile "execution"\n  kind "markdown"\n', "unknown board scope"),
    (BOARD.replace('"execution"', '"chaos"'), "unknown board profile"),
    (BOARD + '  colour "red"\n', "unknown board attribute"),
    (BOARD + '  kind "memory"\n', "duplicate board attribute"),
    (BOARD + "  root 7\n", "must be a string"),
    (BOARD + "\n" + BOARD, "declared twice"),
    ("board\n", "needs a name"),
])
def test_a_bad_board_declaration_is_one_error(src, what):
    with pytest.raises(ParseError, match=what):
        parse_program(src)
