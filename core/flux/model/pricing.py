"""Cost from usage: a built-in price table for common models that a user's prices file extends or
overrides. Prices are USD per million tokens for input, output, cache read and cache write.

This module is the one home of cost: the CLI (``flux show``/``flux sessions``), the session list and
the app all ask :class:`Spend` / :func:`turn_spend` / :func:`session_spend`. The rules:

- a call's cost is the provider-reported cost (``Usage.reported_cost_usd``) when there is one, else
  the table's price of its model times its tokens;
- a call whose model has no price and that spent tokens is *unknown* (``None``), never 0 — a wrong
  zero is worse than a blank; an unpriced call that spent no tokens costs nothing;
- a turn spent its per-call usage (``call_usage`` rows) if it has any, else its ``turn_ended``
  usage, priced by the turn's model or, when the turn names none, the session's model;
- a turn's or session's cost is the sum of its calls' costs, unknown as soon as one call is.

The prices file is JSON: ``{"model-name": {"input": 3.0, "output": 15.0, "cache_read": 0.3,
"cache_write": 3.75}, ...}``. It is read from ``--prices FILE``, else ``$FLUX_PRICES``, else
``<store>/prices.json`` if present. Model names match exactly, then with a ``provider:`` or
``provider/`` prefix stripped, then by the longest table key that prefixes the name
(``claude-sonnet-4-5-20250929`` → ``claude-sonnet-4-5``).
"""

from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..errors import FluxError
from ..store.usage import Usage

__all__ = ["Price", "PriceTable", "BUILTIN_PRICES", "load_price_table", "Spend", "turn_usage_pairs", "turn_spend",
           "session_spend"]


@dataclass(frozen=True, slots=True)
class Price:
    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0

    def cost(self, u: Usage) -> float:
        cache_write = u.cache_creation_input_tokens + (u.cache_creation_1h_input_tokens or 0)
        return (u.input_tokens * self.input + u.output_tokens * self.output
                + u.cache_read_input_tokens * self.cache_read + cache_write * self.cache_write) / 1_000_000


# Public list prices (USD / Mtok) of widely used models. `mock`, `offline` and local models cost 0:
# they run on the user's machine, so 0 is the true price, not a placeholder.
BUILTIN_PRICES: dict[str, Price] = {
    "mock": Price(0, 0, 0, 0),
    "offline": Price(0, 0, 0, 0),
    "scripted": Price(0, 0, 0, 0),
    "claude-opus-4-1": Price(15.0, 75.0, 1.5, 18.75),
    "claude-opus-4": Price(15.0, 75.0, 1.5, 18.75),
    "claude-sonnet-4-5": Price(3.0, 15.0, 0.3, 3.75),
    "claude-sonnet-4-6": Price(3.0, 15.0, 0.3, 3.75),
    "claude-sonnet-4": Price(3.0, 15.0, 0.3, 3.75),
    "claude-haiku-4-5": Price(1.0, 5.0, 0.1, 1.25),
    "claude-3-5-haiku": Price(0.8, 4.0, 0.08, 1.0),
    "gpt-4.1": Price(2.0, 8.0, 0.5, 0.0),
    "gpt-4.1-mini": Price(0.4, 1.6, 0.1, 0.0),
    "gpt-4.1-nano": Price(0.1, 0.4, 0.025, 0.0),
    "gpt-4o": Price(2.5, 10.0, 1.25, 0.0),
    "gpt-4o-mini": Price(0.15, 0.6, 0.075, 0.0),
    "gpt-5": Price(1.25, 10.0, 0.125, 0.0),
    "gpt-5-mini": Price(0.25, 2.0, 0.025, 0.0),
    "gpt-5-nano": Price(0.05, 0.4, 0.005, 0.0),
    "o3": Price(2.0, 8.0, 0.5, 0.0),
    "o4-mini": Price(1.1, 4.4, 0.275, 0.0),
    "gemini-2.5-pro": Price(1.25, 10.0, 0.31, 0.0),
    "gemini-2.5-flash": Price(0.3, 2.5, 0.075, 0.0),
}

LOCAL_PROVIDERS = ("ollama",)


class PriceTable:
    def __init__(self, prices: Mapping[str, Price]):
        self.prices = dict(prices)

    def lookup(self, model: str) -> Price | None:
        if not model:
            return None
        if model in self.prices:
            return self.prices[model]
        bare = model
        for sep in (":", "/"):
            if sep in bare:
                provider, rest = bare.split(sep, 1)
                if provider in LOCAL_PROVIDERS:
                    return Price(0, 0, 0, 0)
                bare = rest
        if bare in self.prices:
            return self.prices[bare]
        best = None
        for key in self.prices:
            if bare.startswith(key) and (best is None or len(key) > len(best)):
                best = key
        return self.prices[best] if best else None

    def cost(self, model: str, usage: Usage) -> float | None:
        """USD for one usage record, or ``None`` when the model's price is unknown."""
        if usage.reported_cost_usd is not None:
            return usage.reported_cost_usd
        price = self.lookup(model)
        return None if price is None else price.cost(usage)


def _price_number(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) and f >= 0 else None


def _parse_prices_file(path: Path) -> dict[str, Price]:
    """Input validation only: every way a hostile prices file can be wrong is one FluxError line."""
    hint = "expected {\"model\": {\"input\": 3.0, \"output\": 15.0}}"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FluxError(f"prices file {path} does not exist — pass an existing JSON file") from None
    except OSError as e:
        raise FluxError(f"prices file {path} cannot be read ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise FluxError(f"prices file {path} is not a regular file — pass a JSON file")
    if st.st_size > 16 * 1024 * 1024:
        raise FluxError(f"prices file {path} is {st.st_size} bytes — too large for a price table; {hint}")
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise FluxError(f"prices file {path} is not valid JSON ({reason}) — {hint}") from None
    except RecursionError:
        raise FluxError(f"prices file {path} is nested too deeply to be a price table — {hint}") from None
    if not isinstance(raw, dict):
        raise FluxError(f"prices file {path} must be a JSON object of model → prices")
    out = {}
    for model, p in raw.items():
        nums = [_price_number(p.get(k, 0)) for k in ("input", "output", "cache_read", "cache_write")] if isinstance(p, dict) else [None]
        if any(n is None for n in nums):
            raise FluxError(f"prices file {path}: entry {model[:80]!r} needs finite, non-negative numeric input/output "
                            f"(and optional cache_read/cache_write) per Mtok")
        out[model] = Price(*nums)
    return out


def load_price_table(prices_file: str | os.PathLike[str] | None = None, store_dir: str | os.PathLike[str] | None = None) -> PriceTable:
    """Built-in prices, extended/overridden by the user's prices file if one is configured."""
    table = dict(BUILTIN_PRICES)
    path: Path | None = None
    if prices_file:
        path = Path(prices_file)
    elif os.environ.get("FLUX_PRICES"):
        path = Path(os.environ["FLUX_PRICES"])
    elif store_dir is not None and (Path(store_dir) / "prices.json").is_file():
        path = Path(store_dir) / "prices.json"
    if path is not None:
        table.update(_parse_prices_file(path))
    return PriceTable(table)


class Spend:
    """What some calls spent: summed usage, cost in USD (``None``: unknown) and the unpriced models.

    ``prices=None`` tallies usage only (``usd`` stays 0.0: nobody asked for a cost).
    """

    __slots__ = ("prices", "usage", "usd", "unpriced_models")

    def __init__(self, prices: PriceTable | None):
        self.prices = prices
        self.usage = Usage()
        self.usd: float | None = 0.0
        self.unpriced_models: tuple[str, ...] = ()

    def add(self, model: str, usage: Usage) -> "Spend":
        self.usage = self.usage + usage
        if self.prices is None:
            return self
        c = self.prices.cost(model, usage)
        if c is None:
            if usage.total_tokens:
                self.usd = None
                if model not in self.unpriced_models:
                    self.unpriced_models = self.unpriced_models + (model,)
        elif self.usd is not None:
            self.usd += c
        return self

    def add_all(self, pairs) -> "Spend":
        for model, usage in pairs:
            self.add(model, usage)
        return self


def turn_usage_pairs(turn, session_model: str = "") -> list:
    """What a turn spent, as ``(model, usage)``: its per-call rows, else its ``turn_ended`` usage
    (priced by the turn's model, else the session's)."""
    if turn.calls:
        return list(turn.call_models)
    return [(turn.model or session_model, turn.usage)] if turn.usage is not None else []


def turn_spend(prices: PriceTable | None, turn, session_model: str = "") -> Spend:
    return Spend(prices).add_all(turn_usage_pairs(turn, session_model))


def session_spend(prices: PriceTable | None, turns, session_model: str = "") -> Spend:
    spend = Spend(prices)
    for t in turns:
        spend.add_all(turn_usage_pairs(t, session_model))
    return spend
