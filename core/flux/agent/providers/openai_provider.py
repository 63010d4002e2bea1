"""The ``openai`` provider: Chat Completions with tools and streaming, through the official ``openai`` SDK,
against api.openai.com or any OpenAI-compatible server given ``base_url`` (Ollama, vLLM, LM Studio).

It translates flux's Anthropic-shaped messages to Chat Completions and the streamed deltas back to
chunks (docs/agent.md). The retry loop, error classification and client handling here
(:func:`stream_with_retries`, :func:`classify_http_failure`, :class:`LoopBoundClient`) serve both providers.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import random
import uuid
import weakref
from typing import Any, AsyncIterator, Callable
from urllib.parse import urlsplit, urlunsplit

from ...errors import FluxError
from ...store.events import Usage
from .base import Chunk, ModelRequest, ProviderError

__all__ = ["OpenAIProvider", "MALFORMED_ARGUMENTS"]

#: Key of the ``input`` a tool_use block gets when the model's arguments are not a JSON object.
MALFORMED_ARGUMENTS = "__malformed_arguments__"

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use",
                 "content_filter": "refusal"}
_PLACEHOLDER_KEY = "sk-no-key-needed-for-local-server"


# ---------------------------------------------------------------------------------------------
# Helpers shared by the HTTP providers (the anthropic provider imports them from here).


class StreamBroken(Exception):
    """The response stream ended before the provider said it was finished (no finish/stop event)."""


def scrub(text: str, secret: str | None) -> str:
    """One line, at most 300 characters, with ``secret`` replaced wherever it appears."""
    if secret:
        text = text.replace(secret, "[redacted]")
    text = " ".join(str(text).split())
    return text if len(text) <= 300 else text[:297] + "..."


def display_url(url: str | None) -> str:
    """``url`` without any user:password part, for error messages."""
    if not url:
        return ""
    try:
        p = urlsplit(url)
        return urlunsplit((p.scheme, p.hostname + (f":{p.port}" if p.port else "") if p.hostname else p.netloc,
                           p.path, "", ""))
    except ValueError:
        return "the configured base URL"


def body_message(body: Any, fallback: str) -> str:
    """The provider's own error message from an error body ``{"error": {"message": …}}`` or similar."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str) and err["message"]:
            return err["message"]
        if isinstance(err, str) and err:
            return err
        if isinstance(body.get("message"), str) and body["message"]:
            return body["message"]
    if isinstance(body, str) and body.strip():
        return body
    return fallback


def retry_after_seconds(headers: Any) -> float | None:
    try:
        v = headers.get("retry-after-ms")
        if v is not None:
            return float(v) / 1000.0
        v = headers.get("retry-after")
        if v is not None:
            return float(v)
    except (TypeError, ValueError, AttributeError):
        return None
    return None


class RetryPolicy:
    """The server's ``Retry-After`` / ``retry-after-ms`` when it gives a sensible one (0–60 s, as the
    SDKs do), else exponential backoff: ``base_delay * 2**attempt`` (±25% jitter), at most ``max_delay``."""

    def __init__(self, max_retries: int, base_delay: float, max_delay: float):
        if max_retries < 0:
            raise FluxError(f"max_retries must be 0 or more, not {max_retries} — pass a non-negative count")
        self.max_retries = max_retries
        self.base_delay = max(0.0, base_delay)
        self.max_delay = max(self.base_delay, max_delay)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None and 0 < retry_after <= 60:
            return retry_after
        return min(self.base_delay * (2 ** attempt) * random.uniform(0.75, 1.25), self.max_delay)


async def stream_with_retries(provider: str, policy: RetryPolicy, attempt_stream: Callable[[], AsyncIterator[Chunk]],
                              classify: Callable[[BaseException], "Failure"]) -> AsyncIterator[Chunk]:
    """Run ``attempt_stream`` until it completes, retrying retryable failures that happen before the
    first chunk is yielded; anything else becomes a :class:`ProviderError`."""
    attempt = 0
    while True:
        yielded = 0
        try:
            async for ch in attempt_stream():
                yielded += 1
                yield ch
            return
        except ProviderError:
            raise
        except Exception as exc:  # noqa: BLE001 — every SDK/transport failure is classified below
            failure = classify(exc)
            if failure.retryable and not yielded and attempt < policy.max_retries:
                await asyncio.sleep(policy.delay(attempt, failure.retry_after))
                attempt += 1
                continue
            attempts = attempt + 1
            if failure.retryable and yielded:
                msg = (f"{provider}: the response stream broke after {yielded} chunks ({failure.detail}) "
                       f"— nothing was retried so no text repeats; run the turn again")
            elif failure.retryable:
                msg = f"{failure.message} (gave up after {attempts} attempt{'s' if attempts != 1 else ''}) — {failure.hint}"
            else:
                msg = f"{failure.message} — {failure.hint}"
            raise ProviderError(msg, status=failure.status, retryable=failure.retryable) from None


class Failure:
    """A classified failure: the one-line message, what to do, status and whether to retry."""

    def __init__(self, message: str, hint: str, *, status: int | None = None, retryable: bool = False,
                 retry_after: float | None = None, detail: str = ""):
        self.message, self.hint, self.status = message, hint, status
        self.retryable, self.retry_after = retryable, retry_after
        self.detail = detail or message


def _transport_errors() -> tuple[tuple[type, ...], tuple[type, ...]]:
    """The timeout and transport exception classes of the HTTP library under the SDKs (``httpx2`` in
    current releases, ``httpx`` before): a stream that breaks mid-body raises them unwrapped."""
    timeouts: list[type] = []
    transport: list[type] = []
    for name in ("httpx2", "httpx"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        timeouts.append(mod.TimeoutException)
        transport.append(mod.TransportError)
    return tuple(timeouts), tuple(transport)


def classify_http_failure(provider: str, key_env: str, exc: BaseException, *, sdk: Any, url: str,
                          api_key: str | None, retryable_error_types: tuple[str, ...] = ()) -> Failure:
    """Map an SDK / transport exception to a :class:`Failure` (shared by both HTTP providers)."""
    timeouts, transport = _transport_errors()
    where = f" at {url}" if url else ""
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        msg = scrub(body_message(getattr(exc, "body", None), getattr(exc, "message", "") or str(exc)), api_key)
        etype = ""
        body = getattr(exc, "body", None)
        if isinstance(body, dict):
            err = body.get("error", body)
            if isinstance(err, dict) and isinstance(err.get("type"), str):
                etype = err["type"]
        retry_after = retry_after_seconds(getattr(exc.response, "headers", {}))
        if status < 400:  # an error event inside a 200 stream (e.g. overloaded_error)
            return Failure(f"{provider} reported {etype or 'an error'} mid-stream{where}: {msg}",
                           "run the turn again", retryable=etype in retryable_error_types or etype == "rate_limit_error",
                           retry_after=retry_after, detail=msg)
        if status == 401:
            return Failure(f"{provider} rejected the API key (401{where}): {msg}",
                           f"check {key_env}, or pass the right key for this server", status=401)
        if status == 403:
            return Failure(f"{provider} refused access (403{where}): {msg}",
                           f"check that the key in {key_env} may use this model", status=403)
        if status == 429 or etype in ("rate_limit_error",):
            return Failure(f"{provider} is rate limiting (429{where}): {msg}",
                           "wait a minute and run the turn again, or lower the request rate",
                           status=status, retryable=True, retry_after=retry_after, detail=msg)
        if status >= 500 or status in (408, 409) or etype in retryable_error_types:
            return Failure(f"{provider} failed with {status}{where}: {msg}",
                           "the server is having trouble; run the turn again later",
                           status=status, retryable=True, retry_after=retry_after, detail=msg)
        if status == 404:
            return Failure(f"{provider} answered 404{where}: {msg}",
                           "check the model name and --base-url", status=404)
        return Failure(f"{provider} refused the request ({status}{where}): {msg}",
                       "fix the request (model name, parameters) and run again", status=status)
    if isinstance(exc, (sdk.APITimeoutError, asyncio.TimeoutError, *timeouts)):
        return Failure(f"{provider} did not answer in time{where}",
                       "raise the timeout or check that the server is responsive",
                       retryable=True, detail="timed out")
    if isinstance(exc, (sdk.APIConnectionError, StreamBroken, ConnectionError, *transport)):
        cause = exc.__cause__ or exc.__context__
        detail = scrub(str(cause) if isinstance(exc, sdk.APIConnectionError) and cause else str(exc), api_key) \
            or type(exc).__name__
        return Failure(f"could not talk to {provider}{where}: {detail}",
                       "check --base-url and that the server is running" if url
                       else "check the network connection", retryable=True, detail=detail)
    if isinstance(exc, sdk.APIError):  # an error event inside an otherwise fine stream
        msg = scrub(body_message(getattr(exc, "body", None), str(exc)), api_key)
        return Failure(f"{provider} reported an error mid-stream{where}: {msg}",
                       "run the turn again", retryable=True, detail=msg)
    return Failure(f"{provider} call failed{where}: {scrub(f'{type(exc).__name__}: {exc}', api_key)}",
                   "this looks like a bug in the provider adapter; report it with the model name")


class LoopBoundClient:
    """One SDK client per running event loop: building one costs ~0.1 s (TLS setup), and an HTTP
    connection pool must not outlive the loop it was made on (the sync convenience runs a loop per turn)."""

    def __init__(self, factory: Callable[[], Any]):
        self._factory = factory
        self._client: Any = None
        self._loop: Any = None

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is None or self._loop() is not loop:
            self._client = self._factory()
            self._loop = weakref.ref(loop)
        return self._client

    async def aclose(self) -> None:
        client, self._client, self._loop = self._client, None, None
        if client is not None:
            await client.close()


def missing_sdk(provider: str) -> FluxError:
    return FluxError(f"the {provider} provider needs the {provider} package — pip install 'flux-tui[{provider}]'")


def usage_chunk(u: Usage) -> Chunk:
    return Chunk("usage", u.to_body())


# ---------------------------------------------------------------------------------------------
# flux → Chat Completions


def _text_of(content: Any) -> str:
    """The text of a tool_result's content (a string or a list of text/image blocks)."""
    if isinstance(content, str):
        return content
    parts = []
    for b in content or []:
        if isinstance(b, dict):
            if b.get("type") == "text":
                parts.append(str(b.get("text", "")))
            elif b.get("type") == "image":
                parts.append("[image]")
    return "\n".join(parts)


def _image_url(block: dict) -> dict | None:
    src = block.get("source") or {}
    if src.get("type") == "base64":
        return {"type": "image_url", "image_url": {"url": f"data:{src.get('media_type', 'image/png')};base64,{src.get('data', '')}"}}
    if src.get("type") == "url":
        return {"type": "image_url", "image_url": {"url": src.get("url", "")}}
    return None


def to_openai_messages(request: ModelRequest) -> list[dict]:
    """The Chat Completions ``messages`` for a flux request (docs/agent.md, "How the providers translate")."""
    out: list[dict] = []
    system = [request.system] if request.system else []
    system += [s.get("text", "") for s in request.system_segments if s.get("text")]
    if system:
        out.append({"role": "system", "content": "\n\n".join(system)})
    for msg in request.messages:
        role = msg.get("role")
        blocks = msg.get("content")
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        blocks = [b for b in blocks or [] if isinstance(b, dict)]
        if role == "system":
            out.append({"role": "system", "content": "\n".join(_text_of([b]) for b in blocks)})
        elif role == "assistant":
            text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
            calls = [{"id": str(b.get("id", "")), "type": "function",
                      "function": {"name": str(b.get("name", "")),
                                   "arguments": json.dumps(b.get("input") or {}, ensure_ascii=False)}}
                     for b in blocks if b.get("type") == "tool_use"]
            m: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                m["tool_calls"] = calls
            if text or calls:
                out.append(m)
        else:  # user
            for b in blocks:
                if b.get("type") == "tool_result":
                    text = _text_of(b.get("content"))
                    if b.get("is_error"):
                        text = "Error: " + text
                    out.append({"role": "tool", "tool_call_id": str(b.get("tool_use_id", "")), "content": text})
            parts: list[dict] = []
            for b in blocks:
                if b.get("type") == "text":
                    parts.append({"type": "text", "text": str(b.get("text", ""))})
                elif b.get("type") == "image" and (img := _image_url(b)):
                    parts.append(img)
            if parts and all(p["type"] == "text" for p in parts):
                out.append({"role": "user", "content": "\n\n".join(p["text"] for p in parts)})
            elif parts:
                out.append({"role": "user", "content": parts})
    return out


def to_openai_tools(request: ModelRequest) -> list[dict]:
    return [{"type": "function", "function": {"name": t["name"], "description": t.get("description", ""),
                                              "parameters": t.get("input_schema") or {"type": "object", "properties": {}}}}
            for t in request.tools]


def parse_arguments(raw: str) -> dict:
    """A tool call's arguments as a dict; not-a-JSON-object → ``{MALFORMED_ARGUMENTS: raw}``."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return {MALFORMED_ARGUMENTS: raw}
    return value if isinstance(value, dict) else {MALFORMED_ARGUMENTS: raw}


def openai_usage(u: Any) -> Usage:
    """Chat Completions usage → flux Usage: ``input_tokens`` excludes the cached prompt tokens, which
    go to ``cache_read_input_tokens``; ``output_tokens`` includes reasoning (also in ``reasoning_tokens``)."""
    def get(obj: Any, name: str) -> int:
        v = getattr(obj, name, None) if obj is not None else None
        return v if isinstance(v, int) and not isinstance(v, bool) else 0

    pd = getattr(u, "prompt_tokens_details", None)
    cd = getattr(u, "completion_tokens_details", None)
    cached = get(pd, "cached_tokens")
    return Usage(input_tokens=max(0, get(u, "prompt_tokens") - cached), output_tokens=get(u, "completion_tokens"),
                 cache_read_input_tokens=cached, reasoning_tokens=get(cd, "reasoning_tokens"),
                 audio_input_tokens=get(pd, "audio_tokens"), audio_output_tokens=get(cd, "audio_tokens"))


class _ToolCall:
    __slots__ = ("id", "name", "args")

    def __init__(self, id: str, name: str):
        self.id, self.name, self.args = id, name, []


class SdkProvider:
    """What the official-SDK providers share: the model, a base URL and key from the arguments or
    ``<ENV>_BASE_URL`` / ``<ENV>_API_KEY`` (no key needed with a base URL: a local server), our retry
    policy (the SDK's own retries are off), and one SDK client per event loop."""

    name = ""
    sdk = ""  # import name of the SDK (an optional extra, imported when a provider is made)
    client_class = ""  # its async client
    env = ""  # environment variable prefix
    placeholder_key = ""  # sent to a local server that needs none

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, *,
                 max_retries: int = 3, timeout: float = 60.0, retry_base_delay: float = 0.5,
                 retry_max_delay: float = 20.0):
        try:
            sdk = importlib.import_module(self.sdk)
        except ImportError:
            raise missing_sdk(self.sdk) from None
        self.model = model
        self.base_url = self.normalize_url(base_url or os.environ.get(f"{self.env}_BASE_URL") or "") or None
        key = api_key or os.environ.get(f"{self.env}_API_KEY") or None
        if key is None and self.base_url is None:
            raise ProviderError(f"{self.env}_API_KEY is not set — export it or pass --base-url for a local server")
        self._api_key = key or self.placeholder_key
        self.timeout = timeout
        self.policy = RetryPolicy(max_retries, retry_base_delay, retry_max_delay)
        client = getattr(sdk, self.client_class)
        self._clients = LoopBoundClient(lambda: client(
            api_key=self._api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0))

    @staticmethod
    def normalize_url(url: str) -> str:
        return url.rstrip("/")

    @property
    def max_retries(self) -> int:
        return self.policy.max_retries

    async def aclose(self) -> None:
        """Close the HTTP client (optional; it is also dropped when its event loop ends)."""
        await self._clients.aclose()

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(model={self.model!r}, base_url={display_url(self.base_url)!r})"


class OpenAIProvider(SdkProvider):
    """Chat Completions through the official SDK. ``base_url`` for OpenAI-compatible local servers."""

    name = sdk = "openai"
    client_class = "AsyncOpenAI"
    env = "OPENAI"
    placeholder_key = _PLACEHOLDER_KEY

    def request_params(self, request: ModelRequest) -> dict:
        """The keyword arguments of ``chat.completions.create`` for ``request``."""
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": to_openai_messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        # api.openai.com wants max_completion_tokens (reasoning models refuse max_tokens); the
        # compatible servers (Ollama, llama.cpp, LM Studio, older vLLM) know max_tokens.
        params["max_tokens" if self.base_url else "max_completion_tokens"] = request.max_tokens
        if request.tools:
            params["tools"] = to_openai_tools(request)
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if request.top_p is not None:
            params["top_p"] = request.top_p
        if request.stop_sequences:
            params["stop"] = list(request.stop_sequences)
        if request.effort:
            params["reasoning_effort"] = request.effort
        return params

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        async for ch in stream_with_retries(self.name, self.policy, lambda: self._attempt(request), self._classify):
            yield ch

    def _classify(self, exc: BaseException) -> Failure:
        import openai

        return classify_http_failure(self.name, "OPENAI_API_KEY", exc, sdk=openai, url=display_url(self.base_url),
                                     api_key=self._api_key)

    async def _attempt(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        params = self.request_params(request)
        stream = await self._clients.get().chat.completions.create(**params)
        try:
            started = False
            calls: dict[int, _ToolCall] = {}
            order: list[int] = []
            finish: str | None = None
            usage = None
            async for chunk in stream:
                if not started:
                    started = True
                    yield Chunk("message_start", {"model": getattr(chunk, "model", None) or request.model or self.model})
                if getattr(chunk, "usage", None) is not None:
                    usage = chunk.usage
                for choice in chunk.choices or []:
                    if getattr(choice, "index", 0) not in (0, None):
                        continue  # n=1: only the first choice exists
                    delta = choice.delta
                    if delta is not None:
                        extra = getattr(delta, "model_extra", None) or {}
                        for key in ("reasoning_content", "reasoning"):
                            if isinstance(extra.get(key), str) and extra[key]:
                                yield Chunk("thinking_delta", extra[key])
                        if delta.content:
                            yield Chunk("text_delta", delta.content)
                        if getattr(delta, "refusal", None):
                            yield Chunk("text_delta", delta.refusal)
                        for tc in delta.tool_calls or []:
                            idx = tc.index if isinstance(tc.index, int) else len(order)
                            fn = tc.function
                            name = (fn.name if fn is not None else None) or ""
                            cur = calls.get(idx)
                            # Some servers (older Ollama) send every call with index 0: a new id with a
                            # name on an index already in use starts a new call.
                            if cur is not None and tc.id and cur.id and tc.id != cur.id and name:
                                idx = max(calls) + 1
                                cur = None
                            if cur is None:
                                cur = calls[idx] = _ToolCall(tc.id or "", name)
                                order.append(idx)
                            else:
                                cur.id = cur.id or (tc.id or "")
                                cur.name = cur.name or name
                            frag = (fn.arguments if fn is not None else None) or ""
                            if frag:
                                cur.args.append(frag)
                                yield Chunk("tool_input_delta", {"name": cur.name, "partial_json": frag})
                    if choice.finish_reason:
                        finish = choice.finish_reason
            if finish is None:
                raise StreamBroken("the stream ended without a finish_reason")
            for idx in sorted(order):
                c = calls[idx]
                yield Chunk("block", {"type": "tool_use", "id": c.id or f"call_{uuid.uuid4().hex[:24]}",
                                      "name": c.name, "input": parse_arguments("".join(c.args))})
            if usage is not None:
                yield usage_chunk(openai_usage(usage))
            stop = _STOP_REASONS.get(finish, "end_turn")
            if calls and stop == "end_turn":
                stop = "tool_use"  # servers that report "stop" for a tool call
            yield Chunk("done", {"stop_reason": stop})
        finally:
            await stream.close()

