"""Small text formatters shared by the screens: cost, tokens, durations, outcomes."""

from __future__ import annotations

from flux.store.events import Usage
from flux.timefmt import age, iso_ms

__all__ = [
    "fmt_cost", "fmt_tokens", "fmt_usage", "fmt_duration", "fmt_age", "iso_ms", "outcome_style",
    "one_line", "lineage_mark",
]

OK_OUTCOMES = frozenset({"ok", "completed", "resumed", "resurrected", "accepted", "answered"})
BAD_OUTCOMES = frozenset({"error", "failed", "halted", "cancelled", "compile_error", "max_iter", "rejected"})


# Lineage marks as the app draws them: glyphs every monospace font has (⑂ is rare in fonts).
LINEAGE_MARKS = {"fork": "⋔ fork", "what-if": "? what-if", "sub-agent": "↳ sub-agent", "check": "✓ check",
                 "a2a": "⇄ a2a", "child": "↳ child"}


def lineage_mark(lineage) -> str:
    return LINEAGE_MARKS.get(lineage.kind, lineage.kind)


def fmt_cost(cost: float | None, *, unknown: str = "?") -> str:
    """USD; ``None`` is an unknown price and never prints as $0."""
    if cost is None:
        return unknown
    if cost == 0:
        return "$0"
    if cost < 0.01:
        return f"${cost:.4f}"
    if cost < 100:
        return f"${cost:.2f}"
    return f"${cost:,.0f}"


def fmt_tokens(n: int) -> str:
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k".replace(".0k", "k")
    return f"{n / 1_000_000:.1f}M".replace(".0M", "M")


def fmt_usage(u: Usage) -> str:
    parts = [f"{fmt_tokens(u.input_tokens)} in", f"{fmt_tokens(u.output_tokens)} out"]
    if u.cache_read_input_tokens:
        parts.append(f"{fmt_tokens(u.cache_read_input_tokens)} cache-read")
    cw = u.cache_creation_input_tokens + (u.cache_creation_1h_input_tokens or 0)
    if cw:
        parts.append(f"{fmt_tokens(cw)} cache-write")
    if u.reasoning_tokens:
        parts.append(f"{fmt_tokens(u.reasoning_tokens)} reasoning")
    return " · ".join(parts)


def fmt_duration(ms: int | None) -> str:
    if ms is None:
        return "–"
    if ms < 1000:
        return f"{ms}ms"
    s = ms / 1000
    if s < 60:
        return f"{s:.1f}s"
    m, s = divmod(int(s), 60)
    if m < 60:
        return f"{m}m{s:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def fmt_age(ms: int, now: int | None) -> str:
    return age(ms, now)


def outcome_style(outcome: str | None) -> str:
    if outcome is None:
        return "dim"
    if outcome == "pending":
        return "yellow"
    if outcome in OK_OUTCOMES:
        return "green"
    if outcome in BAD_OUTCOMES:
        return "red"
    return ""


def one_line(s: str, limit: int = 200) -> str:
    """First line of ``s``, whitespace-collapsed, at most ``limit`` chars (with …)."""
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 1] + "…"
