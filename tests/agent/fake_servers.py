"""Real HTTP servers on 127.0.0.1 that speak the OpenAI Chat Completions and Anthropic Messages wire
formats, for testing the providers through the official SDKs (no SDK is mocked).

A server runs ``http.server.ThreadingHTTPServer`` on an ephemeral port in a background thread. Each
test scripts it with a queue of replies, served one per request in order:

* :class:`Answer` — a model turn (text, thinking, tool calls whose argument JSON is split across
  several stream chunks, usage, stop reason), rendered as SSE when the request has ``"stream": true``
  and as one JSON body otherwise; it can also be slow (before the first byte, between events) or drop
  the connection after N events;
* :class:`Fail` — an HTTP error with the provider's error body (401, 429 with ``retry-after``, 500…);
* :class:`Drop` — the connection is closed without any answer;
* :class:`Raw` — literal stream events, for wire-level oddities.

``server.always(reply)`` answers every request once the queue is empty (e.g. always-500); with
neither, an unscripted request gets a 500 saying so. Every request is recorded (method, path, lower-
cased headers, raw body, parsed JSON) in ``server.requests``. ``FakeOpenAI(api_key=K)`` answers 401 to
any request that does not carry ``K`` (as a bearer token or ``x-api-key``), like a real endpoint.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ToolCall", "Answer", "Fail", "Drop", "Raw", "Recorded", "FakeServer", "FakeOpenAI", "FakeAnthropic",
           "split"]


@dataclass
class ToolCall:
    name: str
    arguments: str  # the raw argument JSON text, exactly as the "model" produces it (may be malformed)
    id: str | None = None


@dataclass
class Answer:
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    thinking: str = ""
    signature: str = "sig-fake-0001"
    input_tokens: int = 11
    output_tokens: int = 7
    cached_tokens: int = 0
    stop: str | None = None  # default: tool calls → tool use, else end of turn
    model: str | None = None  # default: the request's model
    pieces: int = 3  # fragments per text / per tool argument string
    first_byte_delay: float = 0.0
    event_delay: float = 0.0
    drop_after: int | None = None  # close the connection after this many stream events


@dataclass
class Fail:
    status: int
    message: str
    error_type: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Drop:
    """Read the request, then close the connection without answering."""


@dataclass
class Raw:
    """Stream these events verbatim: OpenAI ``data`` payloads (dicts, or ``"[DONE]"``), or Anthropic
    ``(event_name, data)`` pairs."""

    events: list[Any]


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any


def split(s: str, n: int) -> list[str]:
    """``s`` in ``n`` nearly equal non-empty pieces (fewer if ``s`` is short)."""
    if not s:
        return []
    n = max(1, min(n, len(s)))
    size, rem = divmod(len(s), n)
    out, i = [], 0
    for k in range(n):
        j = i + size + (1 if k < rem else 0)
        out.append(s[i:j])
        i = j
    return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self.do_POST()

    def do_POST(self) -> None:
        try:
            self._handle()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
            self.close_connection = True

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        fake = self.server.fake
        fake._record(Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, raw, body))
        self.close_connection = True
        if not fake.accepts(self.command, self.path):
            return self._json(404, fake.error_body(404, f"no route {self.command} {self.path}", None))
        if fake.api_key is not None:
            given = {self.headers.get("x-api-key"), (self.headers.get("authorization") or "").removeprefix("Bearer ")}
            if fake.api_key not in given:
                return self._json(401, fake.error_body(401, "invalid api key", None))
        reply = fake._next()
        if reply is None:
            return self._json(500, fake.error_body(500, "the fake server has no scripted reply for this request", None))
        if isinstance(reply, Drop):
            self._drop()
        elif isinstance(reply, Fail):
            self._json(reply.status, fake.error_body(reply.status, reply.message, reply.error_type), reply.headers)
        elif isinstance(reply, Raw):
            self._sse([fake.raw_event(e) for e in reply.events])
        else:
            streaming = isinstance(body, dict) and bool(body.get("stream"))
            if reply.first_byte_delay:
                time.sleep(reply.first_byte_delay)
            if streaming:
                self._sse(fake.render_stream(reply, body), reply.event_delay, reply.drop_after)
            else:
                self._json(200, fake.render_json(reply, body or {}))

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: list[bytes], delay: float = 0.0, drop_after: int | None = None) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        self.end_headers()
        for i, ev in enumerate(events):
            if drop_after is not None and i >= drop_after:
                return self._drop()
            if delay and i:
                time.sleep(delay)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(ev), ev))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def _drop(self) -> None:
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: "FakeServer"


class FakeServer:
    """Base of the two wire formats; use :class:`FakeOpenAI` or :class:`FakeAnthropic`."""

    def __init__(self, api_key: str | None = None) -> None:
        self.api_key = api_key  # when set, a request without it (bearer or x-api-key) gets a 401
        self._queue: deque = deque()
        self._always: Any = None
        self._lock = threading.Lock()
        self.requests: list[Recorded] = []
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.fake = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    # scripting ---------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Any) -> "FakeServer":
        with self._lock:
            self._queue.extend(replies)
        return self

    def always(self, reply: Any) -> "FakeServer":
        self._always = reply
        return self

    @property
    def pending(self) -> int:
        return len(self._queue)

    def _next(self) -> Any:
        with self._lock:
            return self._queue.popleft() if self._queue else self._always

    def _record(self, r: Recorded) -> None:
        with self._lock:
            self.requests.append(r)

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "FakeServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # wire format (subclasses) ------------------------------------------------------------------
    def accepts(self, method: str, path: str) -> bool:
        raise NotImplementedError

    def error_body(self, status: int, message: str, error_type: str | None) -> Any:
        raise NotImplementedError

    def render_stream(self, a: Answer, request: dict) -> list[bytes]:
        raise NotImplementedError

    def render_json(self, a: Answer, request: dict) -> Any:
        raise NotImplementedError

    def raw_event(self, e: Any) -> bytes:
        raise NotImplementedError


class FakeOpenAI(FakeServer):
    """``POST /v1/chat/completions``; ``base_url`` is ``http://127.0.0.1:PORT/v1``."""

    @property
    def base_url(self) -> str:
        return self.root + "/v1"

    def accepts(self, method: str, path: str) -> bool:
        return method == "POST" and path.rstrip("/").endswith("/v1/chat/completions")

    def error_body(self, status: int, message: str, error_type: str | None) -> Any:
        default = {401: "invalid_request_error", 429: "rate_limit_exceeded"}.get(status, "server_error")
        return {"error": {"message": message, "type": error_type or default, "param": None, "code": None}}

    @staticmethod
    def _stop(a: Answer) -> str:
        return a.stop or ("tool_calls" if a.tool_calls else "stop")

    @staticmethod
    def _usage(a: Answer) -> dict:
        return {"prompt_tokens": a.input_tokens + a.cached_tokens, "completion_tokens": a.output_tokens,
                "total_tokens": a.input_tokens + a.cached_tokens + a.output_tokens,
                "prompt_tokens_details": {"cached_tokens": a.cached_tokens, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}}

    def raw_event(self, e: Any) -> bytes:
        return b"data: " + (e.encode() if isinstance(e, str) else json.dumps(e).encode()) + b"\n\n"

    def render_stream(self, a: Answer, request: dict) -> list[bytes]:
        model = a.model or request.get("model", "fake")
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1700000000, "model": model}

        def chunk(delta: dict, finish: str | None = None) -> dict:
            return {**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}

        out: list[Any] = [chunk({"role": "assistant", "content": ""})]
        out += [chunk({"reasoning_content": p}) for p in split(a.thinking, a.pieces)]
        out += [chunk({"content": p}) for p in split(a.text, a.pieces)]
        for i, tc in enumerate(a.tool_calls):
            out.append(chunk({"tool_calls": [{"index": i, "id": tc.id or f"call_fake_{i}", "type": "function",
                                              "function": {"name": tc.name, "arguments": ""}}]}))
            out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]})
                    for p in split(tc.arguments, a.pieces)]
        out.append(chunk({}, self._stop(a)))
        if (request.get("stream_options") or {}).get("include_usage"):
            out.append({**base, "choices": [], "usage": self._usage(a)})
        out.append("[DONE]")
        return [self.raw_event(e) for e in out]

    def render_json(self, a: Answer, request: dict) -> Any:
        msg: dict[str, Any] = {"role": "assistant", "content": a.text or None, "refusal": None}
        if a.tool_calls:
            msg["tool_calls"] = [{"id": tc.id or f"call_fake_{i}", "type": "function",
                                  "function": {"name": tc.name, "arguments": tc.arguments}}
                                 for i, tc in enumerate(a.tool_calls)]
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 1700000000,
                "model": a.model or request.get("model", "fake"),
                "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": self._stop(a)}],
                "usage": self._usage(a)}


class FakeAnthropic(FakeServer):
    """``POST /v1/messages``; ``base_url`` is ``http://127.0.0.1:PORT`` (the SDK adds ``/v1``)."""

    @property
    def base_url(self) -> str:
        return self.root

    def accepts(self, method: str, path: str) -> bool:
        return method == "POST" and path.split("?")[0].rstrip("/") == "/v1/messages"

    def error_body(self, status: int, message: str, error_type: str | None) -> Any:
        default = {401: "authentication_error", 429: "rate_limit_error", 529: "overloaded_error",
                   404: "not_found_error"}.get(status, "api_error" if status >= 500 else "invalid_request_error")
        return {"type": "error", "error": {"type": error_type or default, "message": message}}

    @staticmethod
    def _stop(a: Answer) -> str:
        return a.stop or ("tool_use" if a.tool_calls else "end_turn")

    @staticmethod
    def _sse(name: str, data: Any) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    def raw_event(self, e: Any) -> bytes:
        name, data = e
        return self._sse(name, data)

    def _blocks(self, a: Answer) -> list[dict]:
        blocks: list[dict] = []
        if a.thinking:
            blocks.append({"type": "thinking", "thinking": a.thinking, "signature": a.signature})
        if a.text:
            blocks.append({"type": "text", "text": a.text})
        for i, tc in enumerate(a.tool_calls):
            blocks.append({"type": "tool_use", "id": tc.id or f"toolu_fake_{i}", "name": tc.name,
                           "arguments": tc.arguments})
        return blocks

    def render_stream(self, a: Answer, request: dict) -> list[bytes]:
        model = a.model or request.get("model", "fake")
        ev: list[tuple[str, Any]] = [("message_start", {"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": a.input_tokens, "output_tokens": 1, "cache_read_input_tokens": a.cached_tokens,
                      "cache_creation_input_tokens": 0}}}), ("ping", {"type": "ping"})]
        for i, b in enumerate(self._blocks(a)):
            if b["type"] == "thinking":
                ev.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
                ev += [("content_block_delta", {"type": "content_block_delta", "index": i,
                                                "delta": {"type": "thinking_delta", "thinking": p}})
                       for p in split(b["thinking"], a.pieces)]
                ev.append(("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "signature_delta", "signature": b["signature"]}}))
            elif b["type"] == "text":
                ev.append(("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}}))
                ev += [("content_block_delta", {"type": "content_block_delta", "index": i,
                                                "delta": {"type": "text_delta", "text": p}})
                       for p in split(b["text"], a.pieces)]
            else:
                ev.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                    "type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}}))
                ev += [("content_block_delta", {"type": "content_block_delta", "index": i,
                                                "delta": {"type": "input_json_delta", "partial_json": p}})
                       for p in split(b["arguments"], a.pieces)]
            ev.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
        ev.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": self._stop(a), "stop_sequence": None},
                                     "usage": {"output_tokens": a.output_tokens}}))
        ev.append(("message_stop", {"type": "message_stop"}))
        return [self._sse(n, d) for n, d in ev]

    def render_json(self, a: Answer, request: dict) -> Any:
        content = []
        for b in self._blocks(a):
            if b["type"] == "tool_use":
                try:
                    inp = json.loads(b["arguments"] or "{}")
                except ValueError:
                    inp = {}
                content.append({"type": "tool_use", "id": b["id"], "name": b["name"], "input": inp})
            else:
                content.append(b)
        return {"id": "msg_fake", "type": "message", "role": "assistant", "model": a.model or request.get("model", "fake"),
                "content": content, "stop_reason": self._stop(a), "stop_sequence": None,
                "usage": {"input_tokens": a.input_tokens, "output_tokens": a.output_tokens,
                          "cache_read_input_tokens": a.cached_tokens, "cache_creation_input_tokens": 0}}
