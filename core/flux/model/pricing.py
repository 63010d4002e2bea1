"""Cost from usage: the one home of cost for the CLI, the session list, the test kit's budget and the app.

The built-in table (``flux/prices.json``) is extended or overridden by a user's prices file
(``--prices``, ``$FLUX_PRICES``, ``<store>/prices.json``); prices are USD per million tokens. A call with
spent tokens and no price is *unknown* (``None``), never 0. The file format, the long-context tier and
how a model name finds its row are in docs/store-format.md.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Mapping, Optional

from ..errors import FluxError
from ..store.usage import Usage

__all__ = ["Price", "LongContext", "PriceTable", "BUILTIN_PRICES", "load_price_table", "parse_prices", "Spend",
           "turn_usage_pairs", "turn_spend", "session_spend"]


@dataclass(frozen=True, slots=True)
class LongContext:
    """A row's long-context tier: above ``above_input_tokens`` prompt tokens, these rates apply to
    the whole call."""

    above_input_tokens: int
    input: float
    output: float
    cache_read: float
    cache_write: float


@dataclass(frozen=True, slots=True)
class Price:
    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0
    reasoning: float = 0.0
    audio_input: float = 0.0
    audio_output: float = 0.0
    long_context: Optional[LongContext] = None

    def cost(self, u: Usage) -> float:
        cache_write = u.cache_creation_input_tokens + (u.cache_creation_1h_input_tokens or 0)
        rates: Any = self
        lc = self.long_context
        if lc is not None and u.input_tokens + cache_write + u.cache_read_input_tokens > lc.above_input_tokens:
            rates = lc
        return (u.input_tokens * rates.input + u.output_tokens * rates.output
                + u.cache_read_input_tokens * rates.cache_read + cache_write * rates.cache_write
                + u.reasoning_tokens * self.reasoning + u.audio_input_tokens * self.audio_input
                + u.audio_output_tokens * self.audio_output) / 1_000_000


# --- reading entries (the built-in table and a user's file share this one parser) ----------------

_RATE_KEYS = ("input", "output", "cache_read", "cache_write", "reasoning", "audio_input", "audio_output")
_TIER_KEYS = ("input", "output", "cache_read", "cache_write")
_SUFFIX = "_per_mtok"
_HINT = 'expected {"model": {"input": 3.0, "output": 15.0}} (USD per million tokens; *_per_mtok names work too)'


def _rate(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) and f >= 0 else None


def _keyed(obj: dict, allowed: tuple[str, ...], extra: tuple[str, ...], where: str) -> dict[str, Any]:
    """``obj``'s keys with the ``_per_mtok`` spelling folded in; an unknown key, or a rate given
    under both spellings, is a FluxError naming it."""
    out: dict[str, Any] = {}
    for k, v in obj.items():
        name = k[: -len(_SUFFIX)] if isinstance(k, str) and k.endswith(_SUFFIX) else k
        if name not in allowed and k not in extra:
            known = ", ".join((*allowed, *extra))
            raise FluxError(f"{where}: unknown key {str(k)[:60]!r} — known keys: {known} (or the *{_SUFFIX} names)")
        key = k if k in extra else name
        if key in out:
            raise FluxError(f"{where}: {key!r} is given twice (once as {key}{_SUFFIX}) — keep one")
        out[key] = v
    return out


def _rates(d: dict[str, Any], keys: tuple[str, ...], where: str) -> dict[str, float]:
    out = {}
    for k in keys:
        if k in d:
            r = _rate(d[k])
            if r is None:
                raise FluxError(f"{where}: {k} must be a finite, non-negative number of USD per million tokens, "
                                f"got {str(d[k])[:40]!r}")
            out[k] = r
    return out


def _entry(model: str, raw: object, base: Optional[Price], where: str) -> Price:
    if not isinstance(raw, dict):
        raise FluxError(f"{where}: entry {model[:80]!r} must be an object of rates — {_HINT}")
    at = f"{where}: entry {model[:80]!r}"
    d = _keyed(raw, _RATE_KEYS, ("long_context",), at)
    r = _rates(d, _RATE_KEYS, at)
    for k in ("input", "output"):
        if k not in r:
            raise FluxError(f"{at} has no {k} rate — every entry needs input and output (or {k}{_SUFFIX})")
    inherit = base
    cache_read = r.get("cache_read", inherit.cache_read if inherit else r["input"])
    cache_write = r.get("cache_write", inherit.cache_write if inherit else r["input"])
    lc = inherit.long_context if inherit else None
    if "long_context" in d:
        lc = _tier(d["long_context"], f"{at}, long_context")
    return Price(r["input"], r["output"], cache_read, cache_write, r.get("reasoning", 0.0),
                 r.get("audio_input", 0.0), r.get("audio_output", 0.0), lc)


def _tier(raw: object, where: str) -> Optional[LongContext]:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise FluxError(f'{where} must be an object: {{"above_input_tokens": N, "input": …, "output": …}}')
    d = _keyed(raw, _TIER_KEYS, ("above_input_tokens",), where)
    n = d.get("above_input_tokens")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise FluxError(f"{where}: above_input_tokens must be a non-negative whole number of prompt tokens")
    r = _rates(d, _TIER_KEYS, where)
    for k in ("input", "output"):
        if k not in r:
            raise FluxError(f"{where} has no {k} rate — a long-context tier needs input and output")
    return LongContext(n, r["input"], r["output"], r.get("cache_read", r["input"]), r.get("cache_write", r["input"]))


def parse_prices(raw: object, where: str, base: Mapping[str, Price] | None = None) -> dict[str, Price]:
    """Entries of a prices object (``{"model": {rates}}``), validated. ``base`` is the table the
    entries extend: an entry that overrides a row keeps that row's unspecified cache rates."""
    if not isinstance(raw, dict):
        raise FluxError(f"{where} must be a JSON object of model → prices — {_HINT}")
    base = base or {}
    return {str(model): _entry(str(model), p, base.get(model), where) for model, p in raw.items()}


# --- the built-in table ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Builtin:
    prices: dict[str, Price]
    aliases: dict[str, str]
    local_providers: tuple[str, ...]
    provider_prefixes: tuple[str, ...]
    region_prefixes: tuple[str, ...]


@lru_cache(maxsize=1)
def _builtin() -> _Builtin:
    doc = json.loads(resources.files("flux").joinpath("prices.json").read_text(encoding="utf-8"))
    return _Builtin(parse_prices(doc["models"], "the built-in prices.json"), dict(doc["aliases"]),
                    tuple(doc["local_providers"]), tuple(doc["provider_prefixes"]),
                    tuple(doc["bedrock_region_prefixes"]))


BUILTIN_PRICES: dict[str, Price] = dict(_builtin().prices)  # a copy: callers may not change the table


_DATED = re.compile(r"-(\d{8}|\d{4}-\d{2}-\d{2})$")
_FREE = Price(0, 0, 0, 0)


class PriceTable:
    def __init__(self, prices: Mapping[str, Price]):
        self.prices = dict(prices)

    def lookup(self, model: str) -> Price | None:
        if not model:
            return None
        p = self.prices.get(model)
        if p is not None:
            return p
        b = _builtin()
        bare = model
        if ":" in bare and "/" not in bare.split(":", 1)[0]:
            provider, rest = bare.split(":", 1)  # our provider:model spec (anthropic:claude-…)
            if provider in b.local_providers:
                return _FREE
            bare = rest
        if "/" in bare and bare.split("/", 1)[0] in b.provider_prefixes:
            provider, rest = bare.split("/", 1)  # flux's provider/model spec (openrouter/deepseek/…)
            if provider in b.local_providers:
                return _FREE
            bare = rest
        for candidate in self._candidates(bare, b):
            p = self.prices.get(candidate)
            if p is not None:
                return p
        m = _DATED.search(bare)
        return self.prices.get(bare[: m.start()]) if m else None

    @staticmethod
    def _candidates(bare: str, b: _Builtin) -> list[str]:
        out = [bare]
        for region in b.region_prefixes:
            if bare.startswith(region) and bare[len(region):].startswith("anthropic."):
                out.append(bare[len(region):])
        if bare in b.aliases:
            out.append(b.aliases[bare])
        return out

    def cost(self, model: str, usage: Usage) -> float | None:
        """USD for one usage record, or ``None`` when the model's price is unknown."""
        if usage.reported_cost_usd is not None:
            return usage.reported_cost_usd
        price = self.lookup(model)
        return None if price is None else price.cost(usage)


def _parse_prices_file(path: Path, base: Mapping[str, Price]) -> dict[str, Price]:
    """Input validation only: every way a hostile prices file can be wrong is one FluxError line."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise FluxError(f"prices file {path} does not exist — pass an existing JSON file") from None
    except OSError as e:
        raise FluxError(f"prices file {path} cannot be read ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise FluxError(f"prices file {path} is not a regular file — pass a JSON file")
    if st.st_size > 16 * 1024 * 1024:
        raise FluxError(f"prices file {path} is {st.st_size} bytes — too large for a price table; {_HINT}")
    try:
        raw = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise FluxError(f"prices file {path} is not valid JSON ({reason}) — {_HINT}") from None
    except RecursionError:
        raise FluxError(f"prices file {path} is nested too deeply to be a price table — {_HINT}") from None
    return parse_prices(raw, f"prices file {path}", base)


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
        table.update(_parse_prices_file(path, table))
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
