"""A plan's stored text (``plan_source``) redacted on its decoded values, then formatted.

Escapes in the formatted text can hide a secret from the text passes, so the plan's literals and
quoted strings are redacted as values first, the plan is formatted from the result, and the text
passes run over it as a last guard. A plan with nothing to redact keeps its text.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any, Callable, Optional

from ..errors import FluxError
from ..lang import ast as A
from ..lang.formatter import format_flow
from .redactor import Redactor, same_json, secret_name

__all__ = ["redact_draft", "redacted_plan_source"]

# The string fields a plan spells as quoted strings (identifiers are left to the text passes).
_QUOTED_FIELDS = frozenset({"template", "purpose", "message", "label", "source"})


def redact_draft(draft: Any, redactor: Redactor) -> Any:
    """``draft`` with every literal and quoted string redacted (the same object when nothing changed)."""

    def walk(x: Any) -> Any:
        if isinstance(x, A.Lit):
            v = redactor.redact_value(x.value)
            return x if same_json(v, x.value) else A.Lit(v)
        if isinstance(x, A.Obj):
            new_fields = []
            changed = False
            for k, node in x.fields:
                if isinstance(k, str) and secret_name(k) and isinstance(node, A.Lit) and node.value is not None \
                        and not isinstance(node.value, (bool, dict, list)) and node.value != redactor.marker:
                    new = A.Lit(redactor.marker)
                else:
                    new = walk(node)
                rk = redactor.redact(k) if isinstance(k, str) else k
                changed = changed or new is not node or rk != k
                new_fields.append((rk, new))
            return replace(x, fields=tuple(new_fields)) if changed else x
        if isinstance(x, A.ThingRef):
            v = redactor.redact(x.value)
            return x if v == x.value else replace(x, value=v)
        if isinstance(x, tuple):
            items = [walk(i) for i in x]
            return x if all(a is b for a, b in zip(items, x)) else tuple(items)
        if is_dataclass(x) and not isinstance(x, type):
            changes = {}
            for f in fields(x):
                v = getattr(x, f.name)
                if f.name in _QUOTED_FIELDS and isinstance(v, str):
                    nv: Any = redactor.redact(v)
                    if nv != v:
                        changes[f.name] = nv
                    continue
                nv = walk(v)
                if nv is not v:
                    changes[f.name] = nv
            return replace(x, **changes) if changes else x
        return x

    return walk(draft)


def redacted_plan_source(text: str, redactor: Redactor, draft: Any = None,
                         rebuild: Optional[Callable[[Any], Optional[str]]] = None) -> str:
    """The stored form of a plan whose formatted text is ``text``: ``redact(text)`` when the
    redactor finds nothing in its decoded strings, else the plan formatted from its redacted values
    (``rebuild(redacted draft)`` — default ``format_flow`` of :func:`redact_draft` — then the text
    passes). ``draft``: the plan, or a value ``rebuild`` formats (a host plan's op input)."""
    if redactor.finds_nothing(text) and redactor.sees_all_of(text):
        return text
    if draft is None:
        return redactor.redact(text)
    try:
        if rebuild is None:
            red = redact_draft(draft, redactor)
            if red is draft:
                return redactor.redact(text)
            formatted: Optional[str] = format_flow(red)
        else:
            red = redactor.redact_value(draft)
            if same_json(red, draft):
                return redactor.redact(text)
            formatted = rebuild(red)
    except (FluxError, RecursionError, TypeError, ValueError):
        formatted = None
    if formatted is None:  # the redacted plan has no spelling: every line that changed goes
        return redactor.redact(_without_changed_lines(text, redactor))
    return redactor.redact(formatted)


def _without_changed_lines(text: str, redactor: Redactor) -> str:
    return "\n".join(line if redactor.redact_json_text(line) == line else redactor.marker
                     for line in text.split("\n"))
