"""A recorded session as OpenTelemetry spans, for Langfuse, Phoenix, Jaeger and other OTLP tools.

One trace per session (agent, turn, model-call and tool spans, named after the GenAI semantic
conventions), with ids derived from the store rows so an export is repeatable and every string
scrubbed. :func:`otlp_json` writes OTLP/JSON; :func:`send_otlp` posts to a collector (the ``otel``
extra). Span names, attributes and times are in docs/cli.md ("OpenTelemetry").
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .errors import FluxError
from .model.session import SessionDetail, Turn
from .store.events import CallUsage, OpRecorded, Run

__all__ = ["SpanRecord", "session_spans", "otlp_json", "send_otlp"]

SCOPE = "flux-tui"
_CONTENT_LIMIT = 4096  # characters of a cell's content or a prompt kept on a span


@dataclass
class SpanRecord:
    """One span, independent of any encoding."""

    name: str
    trace_id: bytes  # 16 bytes
    span_id: bytes  # 8 bytes
    parent_id: bytes | None
    start_ns: int
    end_ns: int
    kind: str  # "internal" | "client"
    attributes: dict[str, str | int | float | bool] = field(default_factory=dict)
    error: str | None = None  # the status description of a failed span


def _id(n: int, *parts: object) -> bytes:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()[:n]


def _cut(text: str) -> str:
    return text if len(text) <= _CONTENT_LIMIT else text[:_CONTENT_LIMIT] + "…"


def session_spans(detail: SessionDetail, scrub: Callable[[str], str], *, store_key: str = "") -> list[SpanRecord]:
    """The spans of ``detail``; ``store_key`` (e.g. the store's path) keeps two stores' ``s_1`` apart."""
    trace = _id(16, "trace", store_key, detail.id, detail.row.created_at)
    root_id = _id(8, "session", store_key, detail.id)
    turns = detail.turns
    start = detail.row.created_at
    end = max([detail.row.updated_at] + [t.ended_at_ms or t.started_at_ms for t in turns])
    model = scrub(detail.row.model or "")
    spans = [SpanRecord(f"invoke_agent {detail.id}", trace, root_id, None, start * 1_000_000, end * 1_000_000,
                        "internal", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": detail.id,
                                     "gen_ai.request.model": model, "flux.session.id": detail.id,
                                     "flux.session.turns": len(turns)})]
    for t in turns:
        spans.extend(_turn_spans(detail, t, trace, root_id, scrub, store_key))
    return spans


def _turn_spans(detail: SessionDetail, t: Turn, trace: bytes, root_id: bytes, scrub: Callable[[str], str],
                store_key: str) -> list[SpanRecord]:
    turn_id = _id(8, "turn", store_key, detail.id, t.turn_id)
    events = detail.turn_events(t)
    last_ts = max([t.started_at_ms, t.ended_at_ms or 0] + [e.ts for e in events])
    model = scrub(t.model or detail.row.model or "")
    usage = t.effective_usage
    attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": model,
                             "flux.turn.number": t.number, "flux.turn.outcome": t.outcome,
                             "flux.turn.prompt": scrub(_cut(t.user_input)),
                             "gen_ai.usage.input_tokens": usage.input_tokens,
                             "gen_ai.usage.output_tokens": usage.output_tokens}
    if t.answer:
        attrs["flux.turn.answer"] = scrub(_cut(t.answer))
    failed = t.outcome not in ("ok", "resurrected", "pending")
    out = [SpanRecord(f"turn {t.number}", trace, turn_id, root_id, t.started_at_ms * 1_000_000,
                      last_ts * 1_000_000, "internal", attrs, error=f"turn ended {t.outcome}" if failed else None)]
    prev = t.started_at_ms
    calls = 0
    for e in events:
        body = e.body
        if isinstance(body, CallUsage):
            calls += 1
            u = body.usage
            call_model = scrub(body.model or model)
            out.append(SpanRecord(f"chat {call_model}", trace, _id(8, "call", store_key, detail.id, e.global_seq),
                                  turn_id, prev * 1_000_000, e.ts * 1_000_000, "client",
                                  {"gen_ai.operation.name": "chat", "gen_ai.request.model": call_model,
                                   "gen_ai.usage.input_tokens": u.input_tokens,
                                   "gen_ai.usage.output_tokens": u.output_tokens,
                                   "gen_ai.usage.cache_read_input_tokens": u.cache_read_input_tokens,
                                   "flux.call.index": calls}))
        elif isinstance(body, Run) and isinstance(body.event, OpRecorded):
            r = body.event
            op = scrub(r.op)
            cell_attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": op,
                                          "flux.cell.step": scrub(r.step), "flux.cell.is_error": r.is_error,
                                          "flux.cell.denied": r.denied, "flux.cell.redacted": r.redacted,
                                          "flux.cell.truncated": r.truncated, "flux.cell.input_hash": r.input_hash,
                                          "flux.cell.content": scrub(_cut(r.content))}
            if r.input_view is not None:
                cell_attrs["flux.cell.input"] = scrub(_cut(r.input_view))
            err = ("denied" if r.denied else "tool error") if (r.is_error or r.denied) else None
            out.append(SpanRecord(f"execute_tool {op}", trace, _id(8, "cell", store_key, detail.id, e.global_seq),
                                  turn_id, prev * 1_000_000, e.ts * 1_000_000, "internal", cell_attrs, error=err))
        prev = max(prev, e.ts)
    return out


# -- OTLP/JSON --------------------------------------------------------------------------------------

def _any_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}  # int64 as a string, as the JSON mapping says
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def otlp_json(spans: Sequence[SpanRecord], *, service: str = "flux-tui") -> dict[str, Any]:
    """An OTLP ``ExportTraceServiceRequest`` in its JSON encoding (hex ids, nanosecond strings)."""
    from . import __version__

    encoded = []
    for s in spans:
        span: dict[str, Any] = {
            "traceId": s.trace_id.hex(), "spanId": s.span_id.hex(), "name": s.name,
            "kind": 3 if s.kind == "client" else 1,  # SPAN_KIND_CLIENT / SPAN_KIND_INTERNAL
            "startTimeUnixNano": str(s.start_ns), "endTimeUnixNano": str(max(s.end_ns, s.start_ns)),
            "attributes": [{"key": k, "value": _any_value(v)} for k, v in s.attributes.items()],
            "status": {"code": 2, "message": s.error} if s.error else {"code": 1},
        }
        if s.parent_id is not None:
            span["parentSpanId"] = s.parent_id.hex()
        encoded.append(span)
    return {"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": SCOPE, "version": __version__}, "spans": encoded}],
    }]}


# -- OTLP/HTTP through the official exporter -----------------------------------------------------------

def send_otlp(spans: Sequence[SpanRecord], endpoint: str, *, service: str = "flux-tui", timeout_s: float = 5.0) -> None:
    """POST ``spans`` to an OTLP/HTTP collector (``…/v1/traces`` is added when the URL has no path)
    with the OpenTelemetry SDK's exporter. Raises one-line :class:`FluxError`\\ s."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.sdk.trace.export import SpanExportResult
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, SpanKind, TraceFlags
        from opentelemetry.trace.status import Status, StatusCode
    except ImportError:
        raise FluxError("sending to a collector needs the OpenTelemetry exporter: pip install 'flux-tui[otel]'") from None
    from urllib.parse import urlsplit

    from . import __version__

    if urlsplit(endpoint).scheme not in ("http", "https") or not urlsplit(endpoint).netloc:
        raise FluxError(f"--endpoint must be an http(s) URL of an OTLP/HTTP collector, not {endpoint[:200]!r}")
    if urlsplit(endpoint).path in ("", "/"):
        endpoint = endpoint.rstrip("/") + "/v1/traces"
    resource = Resource.create({"service.name": service})
    scope = InstrumentationScope(SCOPE, __version__)

    def ctx(trace_id: bytes, span_id: bytes) -> Any:
        return SpanContext(int.from_bytes(trace_id, "big"), int.from_bytes(span_id, "big"), is_remote=False,
                           trace_flags=TraceFlags(TraceFlags.SAMPLED))

    sdk_spans = [ReadableSpan(
        name=s.name, context=ctx(s.trace_id, s.span_id),
        parent=ctx(s.trace_id, s.parent_id) if s.parent_id is not None else None, resource=resource,
        attributes=dict(s.attributes), kind=SpanKind.CLIENT if s.kind == "client" else SpanKind.INTERNAL,
        status=Status(StatusCode.ERROR, s.error) if s.error else Status(StatusCode.OK),
        start_time=s.start_ns, end_time=max(s.end_ns, s.start_ns), instrumentation_scope=scope) for s in spans]
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=timeout_s)
    log = logging.getLogger("opentelemetry.exporter.otlp.proto.http")
    level = log.level
    log.setLevel(logging.CRITICAL)  # its retry warnings would break the one-line error
    try:
        result = exporter.export(sdk_spans)
    finally:
        exporter.shutdown()
        log.setLevel(level)
    if result is not SpanExportResult.SUCCESS:
        raise FluxError(f"the collector at {endpoint} did not take the spans (unreachable, or it refused them)")
