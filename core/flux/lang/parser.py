"""Parse Flux-Lang text: :func:`parse` (one flow), :func:`parse_program` (a ``.flux`` module),
:func:`parse_expression` and :func:`formula_tree`, plus the fast path for the host plans nearly every
stored turn holds.

A hand-written recursive-descent parser over the text with a cursor (the grammar is line-sensitive
outside delimiters and whitespace-insensitive inside them), in one file per construct family:
:mod:`.parse_text` (the cursor, words, literals, types), :mod:`.parse_expressions`,
:mod:`.parse_statements` and :mod:`.parse_modules` (flows and declarations). It reads everything
:mod:`flux.lang.formatter` writes plus the looser spellings people and older engines write. Every
error is a :class:`ParseError` whose message is one line: ``line N, col M: <what>``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from flux.canonical import scrub_text, scrub_value

from . import ast as A
from . import program as P
from .parse_expressions import FormulaNode, formula_text
from .parse_modules import ModuleRules
from .parse_text import (CLAUSE_WORDS, FORMULA_FUNCTIONS, MAX_JSON_DEPTH, MAX_NESTING, RESERVED,
                         STATEMENT_KEYWORDS, VALUE_WORDS, ParseError, json_number)

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


# The shape of nearly every stored plan: a host-derived one-statement flow,
# ``flow\n  name = op({<JSON object>})\n``. Recognised here without the general parser.
_HOST_PLAN = re.compile(r"flow\n  (\$?)([A-Za-z_][A-Za-z0-9_]*) = ([A-Za-z_][A-Za-z0-9_.\-]*)\((\{.*\})\)\n?", re.S)


def _no_duplicate_keys(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key")
    return out


def _reject_constant(name: str):
    raise ValueError(name)


def _host_plan_fast(text: str) -> A.DraftAst | None:
    m = _HOST_PLAN.fullmatch(text)
    if m is None:
        return None
    bind = _host_bind(*m.groups())
    if bind is None:
        return None
    return A.DraftAst(None, (), None, (bind,))


# One statement line of a multi-statement host plan: ``  name = op({<JSON object>})`` (no line break
# inside: compact JSON writes none, and anything else is left to the general parser).
_HOST_LINE = re.compile(r"  (\$?)([A-Za-z_][A-Za-z0-9_]*) = ([A-Za-z_][A-Za-z0-9_.\-]*)\((\{.*\})\)")


def _host_plans_fast(text: str) -> A.DraftAst | None:
    """A plan of several host statements, one a line (``flow\n  a = op({…})\n  b = op({…})\n``: how a
    resumable turn's plans are stored), without the general parser; None for anything else. Each
    statement is read as :func:`_host_plan_fast` reads the one of a host plan (tests/core/
    test_parse_fastpath.py compares the result with the general parser's)."""
    if not text.startswith("flow\n  "):
        return None
    lines = text[5:-1 if text.endswith("\n") else None].split("\n")
    body = []
    for line in lines:
        m = _HOST_LINE.fullmatch(line)
        if m is None:
            return None
        bind = _host_bind(*m.groups())
        if bind is None:
            return None
        body.append(bind)
    return A.DraftAst(None, (), None, tuple(body))


def _host_bind(sigil: str, name: str, op: str, arg: str) -> "A.Bind | None":
    """The statement ``name = op(<arg>)`` of a host plan, or None when the general parser must read it."""
    if '"""' in arg or "\r" in arg or (not sigil and name in RESERVED) or op in RESERVED or op == "fmt":
        return None  # (a bare CR is JSON whitespace to json.loads and an error to the general parser)
    try:
        value = json.loads(arg, object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant,
                           parse_int=json_number, parse_float=json_number)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or (
            arg.count("[") + arg.count("{") > MAX_JSON_DEPTH and
            _json_depth_over(value, MAX_JSON_DEPTH)):
        return None
    if "\\u" in arg:
        # `\ud83d` escapes decode to unpaired surrogates: the one rule replaces them.
        value = scrub_value(value)
    return A.Bind(name, A.Call(op, (A.Lit(value),)))


def _json_depth_over(value: Any, limit: int) -> bool:
    """Whether a decoded JSON value nests deeper than ``limit`` containers (iterative)."""
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            v = list(v.values())
        elif not isinstance(v, list):
            continue
        if d > limit:
            return True
        stack.extend((x, d + 1) for x in v if isinstance(x, (dict, list)))
    return False


def parse(text: str) -> A.DraftAst:
    """Parse one flow. Raises :class:`ParseError` (``line N, col M: …``) and nothing else."""
    text = scrub_text(text)
    fast = _host_plan_fast(text)
    if fast is None:
        fast = _host_plans_fast(text)
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
