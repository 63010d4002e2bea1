"""``null`` — a provider that fails every call. Hermetic tests use it to prove no model is asked."""

from __future__ import annotations

from typing import AsyncIterator

from .base import Chunk, ModelRequest, ProviderError

__all__ = ["NullProvider"]


class NullProvider:
    name = "null"

    def __init__(self, model: str = "null"):
        self.model = model
        self.calls = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        self.calls += 1
        raise ProviderError("the null provider refuses every model call (hermetic mode) — pick a real model with -m")
        yield  # pragma: no cover - makes this an async generator
