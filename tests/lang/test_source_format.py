"""The lossless formatter (``flux fmt``): flux's fmt_cli.rs golden ported as data (tests/lang/data/fmt),
and the properties flux's canonical_corpus.rs holds its canonicalizer to — the meaning is kept, every
comment survives, the output is a fixed point — over flux's own ``.flux`` files, the website fences and
fuzzed text."""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from flux.lang import ast as A
from flux.lang.formatter import format_flow
from flux.lang.parser import ParseError, parse, parse_program
from flux.lang.source_format import format_source, source_comments
from tests.lang.fuzzing import one_input, seeds

DATA = Path(__file__).parent / "data"
MIXED = (DATA / "fmt" / "mixed_dialect.flux").read_text()
CANONICAL = (DATA / "fmt" / "canonical.flux").read_text()
FLUX_FILES = sorted((DATA / "flux").rglob("*.flux"))
FENCES = sorted((DATA / "website").glob("*.flux"))


def _sound(text: str) -> str:
    """format_source(text), checked: same module, same comments, a fixed point."""
    out = format_source(text)
    assert parse_program(out) == parse_program(text), out
    assert Counter(source_comments(out)) == Counter(source_comments(text)), out
    assert format_source(out) == out, out
    return out


def test_fluxs_golden_every_legacy_spelling_becomes_canonical_with_its_comments():
    assert format_source(MIXED) == CANONICAL
    assert parse_program(MIXED) == parse_program(CANONICAL)  # a spelling change only
    assert format_source(CANONICAL) == CANONICAL
    assert source_comments(CANONICAL) == ["# what this flow is for", "# find the work",
                                          "# author order, not alphabetical", "# inside a block"]


def test_the_soundness_checks_fail_for_a_formatter_that_drops_comments():
    # the semantic formatter (the stored plans' text) keeps no comment: the comment check catches it
    semantic = format_flow(parse(MIXED))
    assert parse(semantic) == parse(MIXED)
    assert Counter(source_comments(semantic)) != Counter(source_comments(MIXED))
    with pytest.raises(AssertionError):
        assert Counter(source_comments(semantic)) == Counter(source_comments(MIXED))


@pytest.mark.parametrize("canonical, legacy", [
    ('  hits = grep(pattern: "TODO", glob: "*.rs")', '  $hits = grep(pattern: "TODO", glob: "*.rs")'),
    ("  notify(hits)", "  do notify $hits"),
    ("  timeout 30s -> slow", "  timeout 30000 -> slow"),
    ("  return out", "  return $out"),
])
def test_the_golden_with_one_line_in_a_legacy_spelling_is_not_canonical(canonical, legacy):
    broken = CANONICAL.replace(canonical, legacy)
    assert broken != CANONICAL
    assert format_source(broken) == CANONICAL


def test_named_arguments_and_puns_stay_as_the_author_wrote_them():
    text = ('flow f\n  r = git_revert(commit: commit, mainline: 1)\n  s = grep(pattern, glob)\n'
            '  t = x(b: 1, a: y)\n  return { state: s, r }\n')
    assert _sound(text) == text
    # the semantic formatter sorts and puns
    assert format_flow(parse(text)) == ('flow f\n  r = git_revert(commit, mainline: 1)\n  s = grep(glob, pattern)\n'
                                        '  t = x(a: y, b: 1)\n  return { r, state: s }\n')


def test_comments_and_blank_lines_keep_their_places():
    text = ("# header comment\n"
            "flow f(x: String)  # the flow\n"
            "  a = read(x)    # aligned\n"
            "\n"
            "  # about the branch\n"
            "  when a\n"
            "    b = f(\n"
            "      # inside a call\n"
            "      k: 1,\n"
            "    )\n"
            "    # after b, in the branch\n"
            "  else\n"
            "    c = g()\n"
            "# after the flow\n")
    out = _sound(text)
    assert out == ("# header comment\n"
                   "flow f(x: String)  # the flow\n"
                   "  a = read(x)    # aligned\n"
                   "\n"
                   "  # about the branch\n"
                   "  when a\n"
                   "    b = f(k: 1)\n"
                   "    # inside a call\n"
                   "    # after b, in the branch\n"
                   "  else\n"
                   "    c = g()\n"
                   "# after the flow\n")


def test_declarations_between_flows_are_kept_as_written():
    text = ('agent a\n  model   "m"   # spaced as the author likes\n\nflow one\n  $x = f()\n\n'
            '# two\nflow two\n  y = g()\n')
    assert _sound(text) == ('agent a\n  model   "m"   # spaced as the author likes\n\nflow one\n  x = f()\n\n'
                            '# two\nflow two\n  y = g()\n')


@pytest.mark.parametrize("path", FLUX_FILES, ids=lambda p: str(p.relative_to(DATA)))
def test_every_flux_file_of_flux_formats_soundly(path):
    _sound(path.read_text())


@pytest.mark.parametrize("path", FENCES, ids=lambda p: p.name)
def test_every_website_fence_formats_soundly(path):
    _sound(path.read_text())


@pytest.mark.parametrize("path", [p for p in FENCES if p.name.startswith("docs--language--examples.")] +
                         [DATA / "fmt" / "canonical.flux"], ids=lambda p: p.name)
def test_fluxs_formatter_checked_files_are_canonical(path):
    text = path.read_text()
    assert format_source(text) == text


@pytest.mark.parametrize("text", ['flow x\n  confirm "y\n', "nope\n", "flow\n  x = (\n"])
def test_text_that_does_not_parse_is_refused(text):
    with pytest.raises(ParseError):
        format_source(text)


def _parses(text: str) -> bool:
    try:
        parse_program(text)
    except ParseError:
        return False
    return True


_PARSING_SEEDS = [s for s in seeds() if _parses(s)]


def _sprinkle(rng: random.Random, text: str) -> str:
    """``text`` with comments added at line ends and on lines of their own, and blank lines."""
    out = []
    for i, line in enumerate(text.split("\n")):
        indent = line[:len(line) - len(line.lstrip(" "))]
        r = rng.random()
        if r < 0.2 and line.strip():
            out.append(f"{indent}# c{i}")
        elif r < 0.3:
            out.append("")
        if line.strip() and rng.random() < 0.3:
            line += f"  # t{i}"
        out.append(line)
    return "\n".join(out)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(st.randoms(use_true_random=False))
def test_commented_canonical_text_keeps_the_semantic_formatters_ast(rng):
    draft = parse_program(rng.choice(_PARSING_SEEDS))
    assume(isinstance(draft, A.DraftAst))
    canonical = format_flow(draft)
    commented = _sprinkle(rng, canonical)
    assume(_parses(commented) and parse_program(commented) == draft)  # a `#` inside a string would differ
    out = _sound(commented)
    assert parse(out) == draft
    assert Counter(source_comments(out)) == Counter(re.findall(r"# [ct]\d+", commented)) + \
        Counter(source_comments(canonical))


@settings(max_examples=200, deadline=None)
@given(st.randoms(use_true_random=False))
def test_fuzzed_text_is_formatted_soundly_or_refused(rng):
    text = one_input(rng)
    try:
        before = parse_program(text)
    except ParseError:
        with pytest.raises(ParseError):
            format_source(text)
        return
    out = _sound(text)
    assert parse_program(out) == before
