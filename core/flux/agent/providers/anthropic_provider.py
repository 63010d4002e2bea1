"""The ``anthropic`` provider: the Messages API with tools, thinking and streaming, through the official
``anthropic`` SDK (``messages.create(stream=True)``, raw server-sent events).

flux messages are already Anthropic-shaped: each block is reduced to the fields the API knows, and
the stream's events become chunks (docs/agent.md). Retries, errors and key handling are the openai
provider's (:func:`.openai_provider.stream_with_retries`).
"""

from __future__ import annotations

from typing import Any, AsyncIterator

from ...store.events import Usage
from .base import Chunk, ModelRequest, ProviderError
from .openai_provider import (Failure, SdkProvider, StreamBroken, classify_http_failure, display_url, parse_arguments,
                              stream_with_retries, usage_chunk)

__all__ = ["AnthropicProvider"]

_STOP_REASONS = {"end_turn": "end_turn", "max_tokens": "max_tokens", "stop_sequence": "stop_sequence",
                 "tool_use": "tool_use", "refusal": "refusal", "pause_turn": "end_turn",
                 "model_context_window_exceeded": "max_tokens"}
_RETRYABLE_ERROR_TYPES = ("overloaded_error", "api_error", "rate_limit_error", "timeout_error")
_PLACEHOLDER_KEY = "sk-ant-no-key-needed-for-local-server"


def _clean_block(b: dict) -> dict | None:
    t = b.get("type")
    if t == "text":
        text = str(b.get("text", ""))
        return {"type": "text", "text": text} if text else None
    if t == "tool_use":
        return {"type": "tool_use", "id": str(b.get("id", "")), "name": str(b.get("name", "")),
                "input": b.get("input") if isinstance(b.get("input"), dict) else {}}
    if t == "tool_result":
        content = b.get("content")
        if isinstance(content, list):
            content = [c for c in (_clean_block(x) for x in content if isinstance(x, dict)) if c is not None]
        out = {"type": "tool_result", "tool_use_id": str(b.get("tool_use_id", "")), "content": content or ""}
        if b.get("is_error"):
            out["is_error"] = True
        return out
    if t == "thinking":
        if not b.get("signature"):
            return None
        return {"type": "thinking", "thinking": str(b.get("thinking", "")), "signature": str(b["signature"])}
    if t == "redacted_thinking":
        return {"type": "redacted_thinking", "data": str(b.get("data", ""))}
    if t == "image":
        return {"type": "image", "source": b.get("source") or {}}
    return None


def to_anthropic_messages(request: ModelRequest) -> tuple[list[dict], list[str]]:
    """The Messages API ``messages`` for ``request``, and the text of any ``system``-role messages."""
    messages: list[dict] = []
    extra_system: list[str] = []
    for msg in request.messages:
        blocks = msg.get("content")
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        if msg.get("role") == "system":
            extra_system += [str(b.get("text", "")) for b in blocks or [] if isinstance(b, dict) and b.get("text")]
            continue
        cleaned = [c for c in (_clean_block(b) for b in blocks or [] if isinstance(b, dict)) if c is not None]
        if cleaned:
            messages.append({"role": "assistant" if msg.get("role") == "assistant" else "user", "content": cleaned})
    return messages, extra_system


def thinking_budget(max_tokens: int) -> int:
    if max_tokens <= 1024:
        raise ProviderError(f"thinking needs max_tokens above 1024 (it is {max_tokens}) "
                            f"— raise max_tokens or turn thinking off")
    return min(max(1024, max_tokens // 2), 32000, max_tokens - 1)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class AnthropicProvider(SdkProvider):
    """The Messages API through the official SDK. ``base_url`` for a proxy or compatible server."""

    name = sdk = "anthropic"
    client_class = "AsyncAnthropic"
    env = "ANTHROPIC"
    placeholder_key = _PLACEHOLDER_KEY

    @staticmethod
    def normalize_url(url: str) -> str:
        url = url.rstrip("/")
        return url[:-3] if url.endswith("/v1") else url  # the SDK adds /v1 itself

    def request_params(self, request: ModelRequest) -> dict:
        """The keyword arguments of ``messages.create`` for ``request``."""
        messages, extra_system = to_anthropic_messages(request)
        params: dict[str, Any] = {"model": request.model or self.model, "max_tokens": request.max_tokens,
                                  "messages": messages, "stream": True}
        head = [t for t in [request.system, *extra_system] if t]
        if request.system_segments:
            blocks = [{"type": "text", "text": t} for t in head]
            for seg in request.system_segments:
                if seg.get("text"):
                    b: dict[str, Any] = {"type": "text", "text": seg["text"]}
                    if seg.get("cache"):
                        b["cache_control"] = {"type": "ephemeral"}
                    blocks.append(b)
            if blocks:
                params["system"] = blocks
        elif head:
            params["system"] = "\n\n".join(head)
        if request.tools:
            params["tools"] = [{"name": t["name"], "description": t.get("description", ""),
                                "input_schema": t.get("input_schema") or {"type": "object", "properties": {}}}
                               for t in request.tools]
        if request.stop_sequences:
            params["stop_sequences"] = list(request.stop_sequences)
        if request.thinking:
            params["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget(request.max_tokens)}
        if request.effort:
            params["output_config"] = {"effort": request.effort}
        extra = {k: v for k, v in (("temperature", request.temperature), ("top_p", request.top_p)) if v is not None}
        if extra:
            params["extra_body"] = extra
        return params

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        async for ch in stream_with_retries(self.name, self.policy, lambda: self._attempt(request), self._classify):
            yield ch

    def _classify(self, exc: BaseException) -> Failure:
        import anthropic

        return classify_http_failure(self.name, "ANTHROPIC_API_KEY", exc, sdk=anthropic,
                                     url=display_url(self.base_url), api_key=self._api_key,
                                     retryable_error_types=_RETRYABLE_ERROR_TYPES)

    async def _attempt(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        params = self.request_params(request)  # before any I/O: a bad request is not retried
        stream = await self._clients.get().messages.create(**params)
        try:
            usage: dict[str, int] = {}
            blocks: dict[int, dict] = {}
            stop_reason: str | None = None
            stopped = False
            async for ev in stream:
                et = getattr(ev, "type", None)
                if et == "message_start":
                    msg = ev.message
                    yield Chunk("message_start", {"model": getattr(msg, "model", None) or request.model or self.model})
                    self._update_usage(usage, getattr(msg, "usage", None))
                elif et == "content_block_start":
                    cb = ev.content_block
                    ct = getattr(cb, "type", None)
                    state: dict[str, Any] = {"type": ct, "parts": []}
                    if ct == "text":
                        if getattr(cb, "text", ""):
                            yield Chunk("text_delta", cb.text)
                    elif ct == "tool_use":
                        state.update(id=cb.id, name=cb.name, input=getattr(cb, "input", None))
                    elif ct == "thinking":
                        state.update(signature=getattr(cb, "signature", "") or "")
                        if getattr(cb, "thinking", ""):
                            state["parts"].append(cb.thinking)
                    elif ct == "redacted_thinking":
                        state.update(data=getattr(cb, "data", ""))
                    blocks[ev.index] = state
                elif et == "content_block_delta":
                    d = ev.delta
                    dt = getattr(d, "type", None)
                    state = blocks.setdefault(ev.index, {"type": None, "parts": []})
                    if dt == "text_delta":
                        yield Chunk("text_delta", d.text)
                    elif dt == "input_json_delta":
                        if d.partial_json:
                            state["parts"].append(d.partial_json)
                            yield Chunk("tool_input_delta", {"name": state.get("name", ""), "partial_json": d.partial_json})
                    elif dt == "thinking_delta":
                        state["parts"].append(d.thinking)
                    elif dt == "signature_delta":
                        state["signature"] = d.signature
                elif et == "content_block_stop":
                    state = blocks.pop(ev.index, None) or {}
                    block = self._finish_block(state)
                    if block is not None:
                        yield Chunk("block", block)
                elif et == "message_delta":
                    stop_reason = getattr(ev.delta, "stop_reason", None) or stop_reason
                    self._update_usage(usage, getattr(ev, "usage", None))
                elif et == "message_stop":
                    stopped = True
            if not stopped and stop_reason is None:
                raise StreamBroken("the stream ended before message_stop")
            if usage:
                yield usage_chunk(Usage(**usage))
            yield Chunk("done", {"stop_reason": _STOP_REASONS.get(stop_reason or "end_turn", "end_turn")})
        finally:
            await stream.close()

    @staticmethod
    def _update_usage(usage: dict[str, int], u: Any) -> None:
        """Later reports overwrite earlier ones field by field (message_delta's counts are cumulative)."""
        if u is None:
            return
        for name in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
            v = _int(getattr(u, name, None))
            if v is not None:
                usage[name] = v

    @staticmethod
    def _finish_block(state: dict) -> dict | None:
        t = state.get("type")
        if t == "tool_use":
            raw = "".join(state["parts"])
            start_input = state.get("input")
            inp = parse_arguments(raw) if raw or not isinstance(start_input, dict) else start_input
            return {"type": "tool_use", "id": state.get("id", ""), "name": state.get("name", ""), "input": inp}
        if t == "thinking":
            return {"type": "thinking", "thinking": "".join(state["parts"]), "signature": state.get("signature", "")}
        if t == "redacted_thinking":
            return {"type": "redacted_thinking", "data": state.get("data", "")}
        return None
