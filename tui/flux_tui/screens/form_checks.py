"""Checks of what the user types into the time machine's dialogs — a JSON value, a Flux-Lang plan,
a policy file — each ``None`` when it is fine, else one line saying what is wrong."""

from __future__ import annotations

import json

from flux.errors import FluxError

__all__ = ["json_problem", "flux_problem", "policy_problem", "recorded_json"]


def json_problem(text: str) -> str | None:
    """``None`` when ``text`` is one JSON value, else the parser's complaint with its line/column."""
    try:
        json.loads(text)
    except ValueError as e:
        msg = getattr(e, "msg", str(e))
        line, col = getattr(e, "lineno", None), getattr(e, "colno", None)
        return f"{msg} (line {line}, column {col})" if line else msg
    return None


def flux_problem(text: str) -> str | None:
    """``None`` when ``text`` parses as Flux-Lang, else the parse error (one line)."""
    from flux.lang.parser import parse

    try:
        parse(text)
    except FluxError as e:
        return str(e).splitlines()[0]
    except RecursionError:
        return "the plan nests too deeply to parse"
    return None


def recorded_json(content: str | None) -> str:
    """The recorded result as the JSON value an inject puts back (a string stays a string)."""
    return json.dumps(content if content is not None else "", ensure_ascii=False)


def policy_problem(path: str) -> str | None:
    """``None`` when ``path`` is a policy file ``flux what-if --policy`` accepts, else why not."""
    from flux.agent.approver import load_policy

    if not path.strip():
        return "type the path of a policy file (TOML or JSON: allow, deny, ask, default)"
    try:
        load_policy(path.strip())
    except FluxError as e:
        return str(e).splitlines()[0]
    return None
