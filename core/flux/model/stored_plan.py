"""Parsing a plan a store holds: the one place that turns *any* failure into "does not parse".

A stored ``plan_source`` is hostile input (deep nesting, huge integers, lone surrogates can raise more
than ``ParseError``). Every reader of stored plans calls :func:`parse_stored_plan`, so one bad plan is
one counted "plan does not parse", never a failure of the whole store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

from ..errors import FluxError

if TYPE_CHECKING:
    from ..lang import ast as A

__all__ = ["StoredPlanError", "parse_stored_plan", "statements_before_last_plan", "stored_plan_key"]

# What parsing, formatting or hashing hostile text can raise besides the language's own errors.
_HOSTILE = (RecursionError, ValueError, UnicodeError, OverflowError, MemoryError, TypeError, IndexError, KeyError,
            AttributeError)


class StoredPlanError(FluxError):
    """A stored plan that cannot be parsed (or keyed); the message is one line."""


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    head = text[0] if text else ""
    return f"{type(e).__name__}: {head[:160]}" if not isinstance(e, FluxError) else head[:240]


def parse_stored_plan(source: str | None) -> "tuple[A.DraftAst, str]":
    """``(draft, flow_key)`` of a stored plan; :class:`StoredPlanError` for any failure."""
    from ..lang.hashes import flow_key
    from ..lang.parser import parse

    if not isinstance(source, str):
        raise StoredPlanError("the plan_source is not text")
    try:
        draft = parse(source)
        return draft, flow_key(draft.name, draft.body)
    except StoredPlanError:
        raise
    except FluxError as e:
        raise StoredPlanError(_one_line(e)) from None
    except _HOSTILE as e:
        raise StoredPlanError(f"the plan is hostile to the parser ({_one_line(e)})") from None


def stored_plan_key(source: str | None) -> str | None:
    """The plan's flow_key, or None when it does not parse."""
    try:
        return parse_stored_plan(source)[1]
    except StoredPlanError:
        return None


def statements_before_last_plan(accepted_sources: "Sequence[str]",
                                count: "Callable[[str], int] | None" = None) -> int:
    """How many top-level statements a turn's accepted plans (their sources, in order) hold before
    the last one: what a statement of the last plan is offset by when the turn's plans are laid end
    to end — how `flux fork --turn T --at N` counts, and so how every note numbers a statement of a
    turn (in an adaptive turn every tool call is a one-statement plan, so a plan's own node is 0).
    ``count``: a source's number of statements (default: its parse's; a faster reader of the same
    plans may be passed). A plan that does not parse (or is not text) counts none."""
    total = 0
    for source in accepted_sources[:-1]:
        if not isinstance(source, str):
            continue
        try:
            total += count(source) if count is not None else len(parse_stored_plan(source)[0].body)
        except FluxError:
            pass
    return total
