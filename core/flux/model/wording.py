"""How numbers and states read, in one place: ``flux show`` and the app call these, so the CLI and
the app say the same thing the same way (``$0`` not ``$0.0000``, ``none reported`` not
``0 in / 0 out``, ``1.2k in · 80 out``)."""

from __future__ import annotations

from ..store.usage import Usage

__all__ = ["cost_text", "tokens_text", "usage_text", "outcome_text"]


def cost_text(cost: float | None, *, unknown: str = "?") -> str:
    """USD. ``None`` is an unknown price (a model without one) and never prints as ``$0``."""
    if cost is None:
        return unknown
    if cost == 0:
        return "$0"
    if cost < 0.01:
        return f"${cost:.4f}"
    if cost < 100:
        return f"${cost:.2f}"
    return f"${cost:,.0f}"


def tokens_text(n: int) -> str:
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k".replace(".0k", "k")
    return f"{n / 1_000_000:.1f}M".replace(".0M", "M")


def usage_text(u: Usage, *, none: str = "none reported") -> str:
    """``1.2k in · 80 out · 1.2k cache-read …``; a usage with no tokens at all reads ``none``."""
    if not u.total_tokens:
        return none
    parts = [f"{tokens_text(u.input_tokens)} in", f"{tokens_text(u.output_tokens)} out"]
    if u.cache_read_input_tokens:
        parts.append(f"{tokens_text(u.cache_read_input_tokens)} cache-read")
    cw = u.cache_creation_input_tokens + (u.cache_creation_1h_input_tokens or 0)
    if cw:
        parts.append(f"{tokens_text(cw)} cache-write")
    if u.reasoning_tokens:
        parts.append(f"{tokens_text(u.reasoning_tokens)} reasoning")
    return " · ".join(parts)


# flux ends an agent turn "ok" and an authored flow run "completed": both mean the turn finished
# well, and a list mixing the two words reads as two different states. JSON keeps flux's word.
_OUTCOME_WORDS = {"completed": "ok"}


def outcome_text(outcome: str | None) -> str:
    if outcome is None:
        return "–"
    return _OUTCOME_WORDS.get(outcome, outcome)
