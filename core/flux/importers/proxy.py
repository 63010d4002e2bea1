"""``flux proxy``: an OpenAI- and Anthropic-compatible HTTP proxy on 127.0.0.1 that forwards an unmodified
agent's model calls to ``--upstream`` (streaming included) and records the conversation turn by turn
through the importers' shared writer — or, with ``--replay S``, serves a recorded session's responses by
position, refusing a call whose request differs. Requests and responses are redacted before anything is
written; API keys pass through and are never stored. Usage and rules: docs/import.md ("flux proxy")."""

from __future__ import annotations

import asyncio
import http.client
import json
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

from ..canonical import canonical_json, sha256_hex
from ..cassette.redactor import Redactor
from ..errors import FluxError
from ..model.provenance import PROXY_EVENT, proxy_calls
from ..store.events import Custom
from ..store.store import StoreReader
from .model import ImportedRun, ModelCall, ToolUse, Turn
from .writer import LiveRecorder

__all__ = ["ProxyServer", "parse_response", "request_turn"]

_KEY_HEADERS = ("authorization", "x-api-key", "api-key", "openai-api-key")
_HOP = {"host", "content-length", "connection", "accept-encoding", "transfer-encoding", "keep-alive"}


def _api(path: str) -> Optional[str]:
    p = path.split("?")[0].rstrip("/")
    if p.endswith("/chat/completions"):
        return "openai"
    if p.endswith("/messages"):
        return "anthropic"
    return None


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text"))
    return ""


def request_turn(api: str, body: dict) -> tuple[Optional[str], dict[str, tuple[str, bool]]]:
    """What a request says about the conversation: the person's new text (or ``None``), and the tool
    results it carries back (``call id -> (content, is_error)``)."""
    msgs = body.get("messages") if isinstance(body.get("messages"), list) else []
    results: dict[str, tuple[str, bool]] = {}
    if not msgs or not isinstance(msgs[-1], dict):
        return None, results
    if api == "openai":
        k = len(msgs)
        while k > 0 and isinstance(msgs[k - 1], dict) and msgs[k - 1].get("role") == "tool":
            k -= 1
        for m in msgs[k:]:
            results[str(m.get("tool_call_id", ""))] = (_text(m.get("content")), False)
        last = msgs[-1]
        return (_text(last.get("content")) if not results and last.get("role") == "user" else None), results
    last = msgs[-1]
    if last.get("role") != "user":
        return None, results
    content = last.get("content")
    blocks = content if isinstance(content, list) else []
    for b in blocks:
        if isinstance(b, dict) and b.get("type") == "tool_result":
            results[str(b.get("tool_use_id", ""))] = (_text(b.get("content")) if not isinstance(b.get("content"), str)
                                                      else b["content"], bool(b.get("is_error")))
    return (None if results else _text(content)), results


def _sse_data(raw: str) -> list[dict]:
    out = []
    for line in raw.splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data and data != "[DONE]":
                try:
                    obj = json.loads(data)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    out.append(obj)
    return out


def parse_response(api: str, raw: str, streamed: bool) -> ModelCall:
    """The model call a response (JSON body, or its SSE stream) holds."""
    call = ModelCall()
    if api == "openai":
        if not streamed:
            body = json.loads(raw)
            msg = (body.get("choices") or [{}])[0].get("message") or {}
            call.text = msg.get("content") if isinstance(msg.get("content"), str) else ""
            for tc in msg.get("tool_calls") or []:
                fn = tc.get("function") or {}
                call.tool_uses.append(ToolUse(id=str(tc.get("id", "")), name=str(fn.get("name", "")),
                                              input=_args(fn.get("arguments"))))
            call.usage = _openai_usage(body.get("usage"))
            call.model = body.get("model") if isinstance(body.get("model"), str) else None
            return call
        parts: dict[int, dict] = {}
        for ev in _sse_data(raw):
            call.model = ev.get("model") if isinstance(ev.get("model"), str) else call.model
            if ev.get("usage"):
                call.usage = _openai_usage(ev["usage"])
            for ch in ev.get("choices") or []:
                delta = ch.get("delta") or {}
                call.text += delta.get("content") if isinstance(delta.get("content"), str) else ""
                for tc in delta.get("tool_calls") or []:
                    slot = parts.setdefault(int(tc.get("index", 0)), {"id": "", "name": "", "args": ""})
                    slot["id"] = str(tc.get("id") or slot["id"])
                    fn = tc.get("function") or {}
                    slot["name"] = str(fn.get("name") or slot["name"])
                    slot["args"] += fn.get("arguments") if isinstance(fn.get("arguments"), str) else ""
        for _i, slot in sorted(parts.items()):
            call.tool_uses.append(ToolUse(id=slot["id"], name=slot["name"], input=_args(slot["args"])))
        return call
    if not streamed:
        body = json.loads(raw)
        _anthropic_blocks(call, body.get("content") or [])
        call.usage = _anthropic_usage(body.get("usage"))
        call.model = body.get("model") if isinstance(body.get("model"), str) else None
        return call
    blocks: dict[int, dict] = {}
    usage: dict = {}
    for ev in _sse_data(raw):
        t = ev.get("type")
        if t == "message_start":
            msg = ev.get("message") or {}
            call.model = msg.get("model") if isinstance(msg.get("model"), str) else None
            usage.update(msg.get("usage") or {})
        elif t == "content_block_start":
            blocks[int(ev.get("index", 0))] = dict(ev.get("content_block") or {}, _json="")
        elif t == "content_block_delta":
            b = blocks.setdefault(int(ev.get("index", 0)), {"type": "text", "text": "", "_json": ""})
            d = ev.get("delta") or {}
            if d.get("type") == "text_delta":
                b["text"] = b.get("text", "") + d.get("text", "")
            elif d.get("type") == "thinking_delta":
                b["thinking"] = b.get("thinking", "") + d.get("thinking", "")
            elif d.get("type") == "input_json_delta":
                b["_json"] += d.get("partial_json", "")
        elif t == "message_delta":
            usage.update({k: v for k, v in (ev.get("usage") or {}).items() if v is not None})
    out = []
    for _i, b in sorted(blocks.items()):
        if b.get("type") == "tool_use" and b.get("_json"):
            b["input"] = _args(b["_json"])
        out.append(b)
    _anthropic_blocks(call, out)
    call.usage = _anthropic_usage(usage)
    return call


def _args(raw: Any) -> dict:
    if isinstance(raw, dict):
        return raw
    try:
        v = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except ValueError:
        return {"__malformed_arguments__": raw}
    return v if isinstance(v, dict) else {"value": v}


def _anthropic_blocks(call: ModelCall, blocks: list) -> None:
    for b in blocks:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text":
            call.text += str(b.get("text", ""))
        elif b.get("type") == "thinking":
            call.thinking += str(b.get("thinking", ""))
        elif b.get("type") == "tool_use":
            call.tool_uses.append(ToolUse(id=str(b.get("id", "")), name=str(b.get("name", "")),
                                          input=b.get("input") if isinstance(b.get("input"), dict) else {}))


def _n(v: Any) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else 0


def _openai_usage(u: Any) -> Optional[dict]:
    if not isinstance(u, dict):
        return None
    cached = _n((u.get("prompt_tokens_details") or {}).get("cached_tokens"))
    return {"input_tokens": max(0, _n(u.get("prompt_tokens")) - cached), "cache_read_input_tokens": cached,
            "output_tokens": _n(u.get("completion_tokens"))}


def _anthropic_usage(u: Any) -> Optional[dict]:
    if not isinstance(u, dict) or not u:
        return None
    return {"input_tokens": _n(u.get("input_tokens")), "output_tokens": _n(u.get("output_tokens")),
            "cache_read_input_tokens": _n(u.get("cache_read_input_tokens")),
            "cache_creation_input_tokens": _n(u.get("cache_creation_input_tokens"))}


def _request_hash(body: dict, redactor: Redactor) -> str:
    return sha256_hex(redactor.redact_json_text(canonical_json(body)))


class _Conversation:
    """The turn the proxied agent is in: its calls so far, waiting for the tool results."""

    def __init__(self) -> None:
        self.turn: Optional[Turn] = None
        self.records: list[dict] = []


class ProxyServer(ThreadingHTTPServer):
    """The proxy (see the module doc). ``serve_forever()`` in a thread; ``shutdown()`` then
    :meth:`finish` to write a turn left without an answer and close the store."""

    daemon_threads = True

    def __init__(self, store: str, *, upstream: Optional[str] = None, replay: Optional[str] = None,
                 host: str = "127.0.0.1", port: int = 0, log: Callable[[str], None] = lambda s: None):
        if (upstream is None) == (replay is None):
            raise FluxError("give --upstream URL to record, or --replay SESSION to serve a recording (one of them)")
        self.store = store
        self.log = log
        self.redactor = Redactor()
        self.lock = threading.Lock()
        self.replay_records: Optional[list[dict]] = None
        self.served = 0
        self.calls = 0
        self.failure: Optional[str] = None
        if replay is not None:
            with StoreReader(store) as reader:
                row = reader.resolve_session(replay)
                self.replay_records = proxy_calls(reader, row.id)
            if not self.replay_records:
                raise FluxError(f"{row.id} holds no call recorded by flux proxy — record one with flux proxy --upstream URL")
            self.replay_id = row.id
        else:
            parts = urlsplit(upstream or "")
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise FluxError(f"--upstream {upstream!r} is not an http(s) URL — e.g. https://api.openai.com")
            self.upstream = parts
        self.conv = _Conversation()
        self.jobs: "queue.Queue[Optional[tuple]]" = queue.Queue()
        self.recorder: Optional[LiveRecorder] = None
        self.sessions: list[str] = []
        self.worker = threading.Thread(target=self._write_turns, daemon=True) if replay is None else None
        if self.worker is not None:
            self.worker.start()
        super().__init__((host, port), _Handler)

    # ---------------------------------------------------------------- recording (one thread owns the store)
    def _write_turns(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                break
            turn, model, records, secrets, api = job
            try:
                if self.recorder is None:
                    self.recorder = LiveRecorder(self.store, ImportedRun(format=f"proxy:{api}", version="1", agent="proxy",
                                                                         model=model or "unknown"))
                for s in secrets:
                    self.recorder.register_secret(s)
                sid = asyncio.run(self.recorder.add_turn(turn, [Custom(name=PROXY_EVENT, payload=r) for r in records]))
                if sid not in self.sessions:
                    self.sessions.append(sid)
            except Exception as e:  # (the agent keeps its answers; the recording says why it stopped)
                self.failure = f"the proxy could not record a turn ({type(e).__name__}: {e})"
                self.log(f"error: {self.failure}")
            finally:
                self.jobs.task_done()

    def note_call(self, api: str, body: dict, call: ModelCall, record: dict, secrets: list[str]) -> None:
        """One proxied call: fold it into the conversation; queue the turn it completes."""
        with self.lock:
            said, results = request_turn(api, body)
            conv = self.conv
            if conv.turn is not None:
                for c in conv.turn.calls:
                    for u in c.tool_uses:
                        if u.id in results:
                            u.result, u.is_error = results[u.id]
            if said is not None or conv.turn is None:
                if conv.turn is not None:  # the person spoke again before the turn was answered
                    self._queue(api, body, secrets, "the agent started a new turn before this one was answered")
                conv.turn = Turn(user=said or "")
            conv.turn.calls.append(call)
            conv.records.append(record)
            if not call.tool_uses:
                self._queue(api, body, secrets, None)

    def _queue(self, api: str, body: dict, secrets: list[str], error: Optional[str]) -> None:
        conv = self.conv
        turn = conv.turn
        if turn is None:
            return
        turn.error = error
        for c in turn.calls:
            for u in c.tool_uses:
                if u.result is None:
                    u.result = "(the agent sent no result for this call)"
                    u.is_error = True
        self.jobs.put((turn, str(body.get("model") or ""), conv.records, list(secrets), api))
        self.conv = _Conversation()

    def finish(self) -> list[str]:
        """Write what is pending, stop the writer; the sessions recorded."""
        if self.worker is not None:
            with self.lock:
                if self.conv.turn is not None:
                    self._queue("openai", {}, [], "the proxy stopped before the agent's answer")
            self.jobs.put(None)
            self.worker.join()
            if self.recorder is not None:
                self.recorder.close()
        self.server_close()
        return self.sessions


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ProxyServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._error(404, "flux proxy forwards POST …/chat/completions and POST …/messages only")

    def do_POST(self) -> None:
        api = _api(self.path)
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        if api is None:
            return self._error(404, f"flux proxy does not serve {self.path} — only …/chat/completions and …/messages")
        try:
            body = json.loads(raw.decode("utf-8"))
            if not isinstance(body, dict):
                raise ValueError
        except (ValueError, UnicodeDecodeError, RecursionError):  # (nested past the stack: not a request either)
            return self._error(400, "the request body is not a JSON object")
        srv = self.server
        if srv.replay_records is not None:
            return self._replay(api, body)
        return self._forward(api, body, raw)

    # ------------------------------------------------------------------ replay
    def _replay(self, api: str, body: dict) -> None:
        srv = self.server
        with srv.lock:
            n = srv.served
            srv.served += 1
        records = srv.replay_records or []
        if n >= len(records):
            msg = (f"flux proxy --replay {srv.replay_id}: call {n + 1} is past the recording ({len(records)} call(s)) — "
                   "the agent made more model calls than recorded; record again")
            srv.failure = srv.failure or msg
            srv.log(f"error: {msg}")
            return self._error(409, msg)
        rec = records[n]
        got = _request_hash(body, srv.redactor)
        if got != rec.get("request_hash") or api != rec.get("api"):
            msg = (f"flux proxy --replay {srv.replay_id}: call {n + 1} differs from the recorded request "
                   f"({api} {got[:12]} ≠ {rec.get('api')} {str(rec.get('request_hash'))[:12]}) — the agent changed; "
                   "record again")
            srv.failure = srv.failure or msg
            srv.log(f"error: {msg}")
            return self._error(409, msg)
        data = str(rec.get("body", "")).encode("utf-8")
        self.send_response(int(rec.get("status") or 200))
        self.send_header("content-type", str(rec.get("content_type") or "application/json"))
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    # ------------------------------------------------------------------ record
    def _forward(self, api: str, body: dict, raw: bytes) -> None:
        srv = self.server
        up = srv.upstream
        secrets = [v.split(" ", 1)[-1] for k, v in self.headers.items() if k.lower() in _KEY_HEADERS and v]
        conn_cls = http.client.HTTPSConnection if up.scheme == "https" else http.client.HTTPConnection
        conn = conn_cls(up.hostname, up.port, timeout=600)
        base = up.path.rstrip("/")
        path = self.path
        if base and not path.startswith(base + "/"):
            path = base + (path if not path.startswith("/v1/") or not base.endswith("/v1") else path[3:])
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        headers["accept-encoding"] = "identity"
        try:
            conn.request("POST", path, body=raw, headers=headers)
            resp = conn.getresponse()
        except OSError as e:
            conn.close()
            return self._error(502, f"flux proxy: the upstream {up.geturl()} did not answer ({e})")
        ctype = resp.getheader("content-type") or "application/json"
        streamed = "text/event-stream" in ctype
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in _HOP and k.lower() != "content-encoding":
                self.send_header(k, v)
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        got = bytearray()
        try:
            while True:
                piece = resp.read1(65536) if streamed else resp.read(65536)
                if not piece:
                    break
                got += piece
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        finally:
            conn.close()
        text = got.decode("utf-8", errors="replace")
        if resp.status != 200:
            return
        try:
            call = parse_response(api, text, streamed)
        except Exception:  # (whatever the upstream sent: the agent has it, the recording says so)
            srv.log(f"error: flux proxy: call {srv.calls + 1}: the upstream's answer is not a {api} response — not recorded")
            return
        red = srv.redactor
        for s in secrets:
            red.register(s)
        with srv.lock:
            srv.calls += 1
            n = srv.calls
        record = {"n": n, "api": api, "path": self.path, "request_hash": _request_hash(body, red), "status": resp.status,
                  "content_type": ctype, "body": red.redact(text)}
        try:
            srv.note_call(api, body, call, record, secrets)
        except Exception as e:  # (a request whose conversation makes no sense: not recorded, said once)
            srv.log(f"error: flux proxy: call {n}: the conversation could not be followed ({type(e).__name__}) — not recorded")

    def _error(self, status: int, message: str) -> None:
        data = json.dumps({"error": {"type": "flux_proxy_error", "message": message}}).encode("utf-8")
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
