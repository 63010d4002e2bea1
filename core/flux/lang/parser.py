"""Parse Flux-Lang text: :func:`parse` (one flow), :func:`parse_program` (a ``.flux`` module),
:func:`parse_expression` and :func:`formula_tree`. Recursive descent, one module per construct
family (:mod:`.parse_text`, :mod:`.parse_expressions`, :mod:`.parse_statements`,
:mod:`.parse_modules`); every error is a one-line :class:`ParseError`.
"""

from __future__ import annotations

from typing import Any, Iterable

from flux.canonical import scrub_text

from . import ast as A
from . import program as P
from .host_plans import read_host_plan, read_host_plan_lines
from .parse_expressions import FormulaNode, formula_text
from .parse_modules import ModuleRules
from .parse_text import (CLAUSE_WORDS, FORMULA_FUNCTIONS, MAX_JSON_DEPTH, MAX_NESTING, RESERVED,
                         STATEMENT_KEYWORDS, VALUE_WORDS, ParseError)

__all__ = ["ParseError", "parse", "parse_program", "parse_expression", "formula_text", "new_parser", "RESERVED",
           "STATEMENT_KEYWORDS", "CLAUSE_WORDS", "VALUE_WORDS", "FORMULA_FUNCTIONS", "MAX_NESTING",
           "MAX_JSON_DEPTH"]


class _Parser(ModuleRules):
    """One parse of one text: the cursor and every construct family's rules."""


class _RecordingParser(_Parser):
    """A parse that also keeps what the lossless formatter needs: every comment, where each
    statement starts and ends, the span of each top-level flow, and object templates with their
    fields in the author's order (such an AST is for writing text only; it does not compare equal)."""

    def __init__(self, src: str):
        super().__init__(src)
        self.comments = {}
        self.statement_starts: dict[int, int] = {}
        self.statement_ends: dict[int, int] = {}
        self.top_level_flows: list[tuple[int, int, A.DraftAst]] = []

    def statement(self, indent: int) -> "A.Node | None":
        start = self.pos
        node = super().statement(indent)
        if node is not None:
            self.statement_starts[id(node)] = start
            self.statement_ends[id(node)] = self.pos
        return node

    def _flow_decl(self, header_indent: int) -> A.DraftAst:
        start = self.pos
        draft = super()._flow_decl(header_indent)
        if header_indent == 0:
            self.top_level_flows.append((start, self.pos, draft))
        return draft

    def make_obj(self, fields: dict, puns: Iterable[str] = ()) -> A.Node:
        obj = A.Obj(fields)
        object.__setattr__(obj, "fields", tuple(fields.items()))
        object.__setattr__(obj, "author_puns", frozenset(puns))
        return obj


def new_parser(text: str, record: bool = False) -> _Parser:
    """A parser over ``text``; ``record=True`` also keeps comments, statement spans and author order
    (:class:`_RecordingParser`)."""
    return (_RecordingParser if record else _Parser)(text)


def parse(text: str) -> A.DraftAst:
    """Parse one flow. Raises :class:`ParseError` (``line N, col M: …``) and nothing else."""
    text = scrub_text(text)
    fast = read_host_plan(text)
    if fast is None:
        fast = read_host_plan_lines(text)
    if fast is not None:
        return fast
    return _Parser(text).flow()


def parse_program(text: str) -> "P.Module":
    """Parse a ``.flux`` module: a lone flow (a DraftAst) or a :class:`~flux.lang.program.Program`.

    Raises :class:`ParseError` and nothing else."""
    return _Parser(text).program()


def parse_expression(text: str, formula: bool = False) -> A.Node:
    """Parse one inline expression (the formatter uses it to verify native spellings).

    ``formula=True`` reads an ``expr`` formula as stored (bare names, no call-argument puns).
    """
    p = _Parser(text)
    p.no_puns = formula
    node = p.expression()
    p.sp()
    if p.pos != p.n:
        raise p.error(f"unexpected {p._here()} after the expression")
    return node


def formula_tree(formula: str) -> Any:
    """The operator tree of a stored ``expr`` formula, for the interpreter to evaluate.

    Leaves are ``Var``/``Lit``/``Jq`` nodes; inner nodes are objects with ``op`` (``"+"``,
    ``"&&"``, ``"!"``, ``"neg"``, or a function name) and ``args``.
    """
    p = _Parser(formula)
    p.no_puns = True
    p.formula_leaves = True
    tree = p._binary(1)
    if isinstance(tree, FormulaNode) and tree.op == "'":
        tree = tree.args[0]
    p.sp()
    if p.pos != p.n:
        raise p.error(f"unexpected {p._here()} in formula")
    return tree
