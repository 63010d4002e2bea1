"""Host plans read without the general parser: the shape nearly every stored plan has, host statements
``name = op({<JSON object>})`` one a line under a bare ``flow`` header. Anything else is None here and
goes to the general parser, which reads these texts to the same AST (tests/core/test_lang_fastpath.py)."""

from __future__ import annotations

import json
import re
from typing import Any

from flux.canonical import scrub_value

from . import ast as A
from .parse_text import MAX_JSON_DEPTH, RESERVED, json_number

__all__ = ["HOST_PLAN", "HOST_LINE", "host_statement", "read_host_plan", "read_host_plan_lines"]

#: A one-statement host plan, ``flow\n  name = op({<JSON object>})\n``; its groups are the ``$`` (or
#: nothing), the name, the op and the argument text, as :func:`host_statement` takes them.
HOST_PLAN = re.compile(r"flow\n  (\$?)([A-Za-z_][A-Za-z0-9_]*) = ([A-Za-z_][A-Za-z0-9_.\-]*)\((\{.*\})\)\n?", re.S)

#: One statement line of a multi-statement host plan, ``  name = op({<JSON object>})``, with
#: :data:`HOST_PLAN`'s groups (no line break inside: compact JSON writes none, and anything else is
#: left to the general parser).
HOST_LINE = re.compile(r"  (\$?)([A-Za-z_][A-Za-z0-9_]*) = ([A-Za-z_][A-Za-z0-9_.\-]*)\((\{.*\})\)")


def _no_duplicate_keys(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key")
    return out


def _reject_constant(name: str):
    raise ValueError(name)


def read_host_plan(text: str) -> A.DraftAst | None:
    """The one-statement host plan ``text`` is, or None."""
    bind = _statement_of(HOST_PLAN.fullmatch(text))
    return None if bind is None else A.DraftAst(None, (), None, (bind,))


def read_host_plan_lines(text: str) -> A.DraftAst | None:
    """A plan of several host statements, one a line (``flow\\n  a = op({…})\\n  b = op({…})\\n``: how a
    resumable turn's plans are stored), or None. Each line is read as :func:`read_host_plan` reads
    its one statement."""
    if not text.startswith("flow\n  "):
        return None
    lines = text[5:-1 if text.endswith("\n") else None].split("\n")
    body = []
    for line in lines:
        bind = _statement_of(HOST_LINE.fullmatch(line))
        if bind is None:
            return None
        body.append(bind)
    return A.DraftAst(None, (), None, tuple(body))


def _statement_of(m: "re.Match[str] | None") -> "A.Bind | None":
    return None if m is None else host_statement(*m.groups())


def host_statement(sigil: str, name: str, op: str, arg: str) -> "A.Bind | None":
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
