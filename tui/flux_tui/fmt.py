"""Small text formatters shared by the screens: cost, tokens, durations, outcomes, paths."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from flux.cassette.replay import OFF_TAPE_CLI_WAY_OUT, OFF_TAPE_HALT
from flux.store.events import Usage
from flux.model.wording import cost_text, tokens_text, usage_text
from flux.timefmt import age, iso_ms

__all__ = [
    "fmt_cost", "fmt_tokens", "fmt_usage", "fmt_duration", "fmt_age", "iso_ms", "outcome_style",
    "one_line", "lineage_mark", "display_path", "in_user_words", "table_cell",
]

OK_OUTCOMES = frozenset({"ok", "completed", "resumed", "resurrected", "accepted", "answered"})
BAD_OUTCOMES = frozenset({"error", "failed", "halted", "cancelled", "compile_error", "max_iter", "rejected"})


# Lineage marks as the app draws them: glyphs every monospace font has (⑂ is rare in fonts).
LINEAGE_MARKS = {"fork": "⋔ fork", "what-if": "? what-if", "sub-agent": "↳ sub-agent", "check": "✓ check",
                 "a2a": "⇄ a2a", "child": "↳ child"}


def display_path(path: str | Path) -> str:
    """A directory as the app shows it: under the home directory as ``~/…`` (the same on every
    machine for the same place, and what ``expanduser`` reads back), else absolute."""
    try:
        home = Path.home()
        p = Path(path).expanduser().resolve()
        if p == home:
            return "~"
        if home in p.parents:
            return "~/" + str(p.relative_to(home))
        return str(p)
    except (OSError, RuntimeError, ValueError):
        return str(path)


def lineage_mark(lineage) -> str:
    return LINEAGE_MARKS.get(lineage.kind, lineage.kind)


def fmt_cost(cost: float | None, *, unknown: str = "?") -> str:
    """USD; ``None`` is an unknown price and never prints as $0 (the CLI's wording: one function)."""
    return cost_text(cost, unknown=unknown)


def fmt_tokens(n: int) -> str:
    return tokens_text(n)


def fmt_usage(u: Usage) -> str:
    """Tokens in · out · cache (the CLI's wording); no tokens at all read "none reported"."""
    return usage_text(u)


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


# The engine's recorded halt for a call the tape cannot serve keeps flux's wording (the scope's type
# and the CLI flag); the app says what happened and its own way out.
_OFF_TAPE_IN_WORDS = ("has no recorded cell left to serve it (the recording never made this call), so the run "
                      "halted here instead of dispatching it live")
_OFF_TAPE_WAY_OUT = "a what-if (w) with F3 off tape: live runs it for real"


def in_user_words(text: str) -> str:
    """A recorded engine message as the app shows it: flux's internal names (a halted off-tape
    call's scope type, the CLI's flag) replaced by what happened and the app's way out."""
    if OFF_TAPE_HALT not in text:
        return text
    text = text.replace(f"{OFF_TAPE_HALT} — {OFF_TAPE_CLI_WAY_OUT}", f"{_OFF_TAPE_IN_WORDS} — {_OFF_TAPE_WAY_OUT}")
    return text.replace(OFF_TAPE_HALT, _OFF_TAPE_IN_WORDS)


def failure_line(error: str, what: str = "") -> Text:
    """A failure as the dialogs and marks show it: ``✗ what: error``, the mark and ``what`` bold."""
    return Text.assemble((f"✗ {what}: " if what else "✗ ", "bold red"), (error, "red"))


def table_cell(text: str, style: str | None = None) -> Text:
    """A data-table cell: one line, cut with an ellipsis where the column ends."""
    return Text(text, style=style or "", no_wrap=True, overflow="ellipsis")
