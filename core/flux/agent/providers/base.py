"""The provider interface every model backend implements, and the canonical request a model cassette hashes.

A provider turns a :class:`ModelRequest` into a stream of :class:`Chunk` records (``{"t": tag, "c":
content}``, stored verbatim in ``model.jsonl``: ``message_start``, ``text_delta``, ``thinking_delta``,
``block``, ``tool_input_delta``, ``usage``, ``done``, ``stream_diagnostic``); :func:`assemble` folds a
stream into the assistant message, usage and stop reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Protocol

from ...errors import FluxError
from ...store.events import Usage

__all__ = ["ModelRequest", "Chunk", "Provider", "ProviderError", "Assembled", "assemble"]


@dataclass
class ModelRequest:
    model: str
    messages: list[dict]
    system: str | None = None
    tools: list[dict] = field(default_factory=list)  # {"name", "description", "input_schema"}
    max_tokens: int = 4096
    temperature: float | None = None
    top_p: float | None = None
    stop_sequences: list[str] = field(default_factory=list)
    thinking: bool = False
    effort: str | None = None
    system_segments: list[dict] = field(default_factory=list)  # {"cache": bool, "text": str}

    def canonical(self) -> dict:
        """The hashed request object of a model cassette line (callers sort keys when serializing)."""
        return {
            "effort": self.effort, "max_tokens": self.max_tokens, "messages": self.messages, "model": self.model,
            "stop_sequences": list(self.stop_sequences), "system": self.system,
            "system_segments": list(self.system_segments), "temperature": self.temperature,
            "thinking": self.thinking, "tools": [{"description": t.get("description", ""), "input_schema": t.get("input_schema", {}),
                                                  "name": t["name"]} for t in self.tools],
            "top_p": self.top_p,
        }


@dataclass(frozen=True)
class Chunk:
    t: str
    c: Any = None

    def to_json(self) -> dict:
        return {"t": self.t, "c": self.c}

    @classmethod
    def from_json(cls, d: dict) -> "Chunk":
        return cls(str(d.get("t", "")), d.get("c"))


class ProviderError(FluxError):
    """A provider call failed. ``retryable`` for 429/5xx/connection drops; ``status`` if HTTP."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False):
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class Provider(Protocol):
    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        """Yield the response as chunks; raise :class:`ProviderError` on failure."""
        ...


@dataclass
class Assembled:
    content: list[dict]  # the assistant message's content blocks
    usage: Usage
    stop_reason: str
    model: str

    @property
    def tool_uses(self) -> list[dict]:
        return [b for b in self.content if b.get("type") == "tool_use"]

    @property
    def text(self) -> str:
        return "".join(b.get("text", "") for b in self.content if b.get("type") == "text")


def assemble(chunks: list[Chunk], model: str = "") -> Assembled:
    """Fold a chunk stream: text deltas coalesce into text blocks, ``block`` chunks are kept whole."""
    content: list[dict] = []
    usage = Usage()
    stop = "end_turn"
    text: list[str] = []
    thinking: list[str] = []

    def flush() -> None:
        if thinking:
            content.append({"type": "thinking", "thinking": "".join(thinking), "signature": ""})
            thinking.clear()
        if text:
            content.append({"type": "text", "text": "".join(text)})
            text.clear()

    for ch in chunks:
        if ch.t == "message_start" and isinstance(ch.c, dict):
            model = ch.c.get("model", model) or model
        elif ch.t == "text_delta":
            text.append(str(ch.c))
        elif ch.t == "thinking_delta":
            thinking.append(str(ch.c))
        elif ch.t == "block" and isinstance(ch.c, dict):
            flush()
            content.append(ch.c)
        elif ch.t == "usage":
            usage = usage + Usage.from_body(ch.c)
        elif ch.t == "done" and isinstance(ch.c, dict):
            stop = str(ch.c.get("stop_reason", stop))
    flush()
    return Assembled(content, usage, stop, model)
