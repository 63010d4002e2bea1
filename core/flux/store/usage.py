"""Token usage as flux stores it (flux's ``Usage`` record): its own small module so that cheap
code paths (the session listing, pricing) can use it without loading every event type."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_1h_input_tokens: int | None = None  # newer writers; absent in flux 0.26.0
    reasoning_tokens: int = 0
    audio_input_tokens: int = 0
    audio_output_tokens: int = 0
    reported_cost_usd: float | None = None

    @classmethod
    def from_body(cls, d: Any) -> "Usage":
        # Hot path (every call_usage / turn_ended row): direct, and junk coerces to serde's default.
        if not isinstance(d, dict):
            return cls()
        g = d.get

        def n(key: str) -> int:
            v = g(key, 0)
            return v if type(v) is int else (int(v) if type(v) is float and math.isfinite(v) else 0)

        one_h = g("cache_creation_1h_input_tokens")
        cost = g("reported_cost_usd")
        return cls(n("input_tokens"), n("output_tokens"), n("cache_creation_input_tokens"), n("cache_read_input_tokens"),
                   one_h if type(one_h) is int else None, n("reasoning_tokens"), n("audio_input_tokens"),
                   n("audio_output_tokens"), float(cost) if type(cost) in (int, float) and math.isfinite(cost) else None)

    def __add__(self, other: "Usage") -> "Usage":
        a1, b1 = self.cache_creation_1h_input_tokens, other.cache_creation_1h_input_tokens
        a2, b2 = self.reported_cost_usd, other.reported_cost_usd
        return Usage(  # positional, declared order: a session list adds one per (turn, model)
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
            None if a1 is None and b1 is None else (a1 or 0) + (b1 or 0),
            self.reasoning_tokens + other.reasoning_tokens,
            self.audio_input_tokens + other.audio_input_tokens,
            self.audio_output_tokens + other.audio_output_tokens,
            None if a2 is None and b2 is None else (a2 or 0) + (b2 or 0),
        )

    @property
    def total_tokens(self) -> int:
        return (self.input_tokens + self.output_tokens + self.cache_creation_input_tokens
                + self.cache_read_input_tokens + (self.cache_creation_1h_input_tokens or 0))

    def to_body(self) -> dict[str, Any]:
        """Declared field order, ``None`` fields omitted (serde ``skip_serializing_if``)."""
        out: dict[str, Any] = {}
        for name in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                     "cache_creation_1h_input_tokens", "reasoning_tokens", "audio_input_tokens", "audio_output_tokens",
                     "reported_cost_usd"):
            v = getattr(self, name)
            if v is not None:
                out[name] = v
        return out
