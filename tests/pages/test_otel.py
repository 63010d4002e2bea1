"""The OpenTelemetry export: OTLP/JSON to a file, and OTLP/HTTP through the official exporter to a
real receiver on 127.0.0.1 that decodes what arrives with the OTLP protobuf schema."""

from __future__ import annotations

import html
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from flux.cli import main

from .conftest import ENV_NAME, ENV_VALUE, PLANTED, SHAPED

IN_SPANS = tuple(s for s in PLANTED if s != SHAPED[2])  # (the plan, where SHAPED[2] is planted, is not a span)


class _Receiver:
    """An OTLP/HTTP trace receiver: POST /v1/traces, protobuf bodies decoded and kept."""

    def __init__(self, status: int = 200):
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        received = self.received = []
        raw = self.raw = []
        self.paths = []
        paths = self.paths

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                paths.append((self.path, self.headers.get("Content-Type")))
                raw.append(body)
                req = ExportTraceServiceRequest()
                req.ParseFromString(body)
                received.append(req)
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self):
        return [s for req in self.received for rs in req.resource_spans for ss in rs.scope_spans for s in ss.spans]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = _Receiver()
    yield r
    r.close()


def _file_spans(doc):
    return [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def test_otlp_json_is_one_trace_with_every_parent_present(demo_master, tmp_path):
    out = tmp_path / "s1.otlp.json"
    res = CliRunner().invoke(main, ["export", "s_1", "--store", str(demo_master), "--format", "otel", "-o", str(out)])
    assert res.exit_code == 0, res.output
    spans = _file_spans(json.loads(out.read_text(encoding="utf-8")))
    ids = {s["spanId"] for s in spans}
    assert len({s["traceId"] for s in spans}) == 1 and len(ids) == len(spans)
    roots = [s for s in spans if "parentSpanId" not in s]
    assert [r["name"] for r in roots] == ["invoke_agent s_1"]
    assert all(s.get("parentSpanId", next(iter(ids))) in ids for s in spans)
    assert all(int(s["endTimeUnixNano"]) >= int(s["startTimeUnixNano"]) for s in spans)
    attrs = {s["name"]: {a["key"]: a["value"] for a in s["attributes"]} for s in spans}
    chat = next(v for k, v in attrs.items() if k.startswith("chat "))
    assert chat["gen_ai.operation.name"] == {"stringValue": "chat"} and int(chat["gen_ai.usage.input_tokens"]["intValue"]) > 0
    tool = attrs["execute_tool read"]
    assert tool["gen_ai.tool.name"] == {"stringValue": "read"}
    errors = [s for s in spans if s["status"]["code"] == 2]
    assert any(s["name"] == "execute_tool run_tests" for s in errors)  # the recorded failing test run
    again = CliRunner().invoke(main, ["export", "s_1", "--store", str(demo_master), "--format", "otel"])
    assert _file_spans(json.loads(again.output)) == spans  # the same session gives the same trace


def test_spans_sent_to_a_collector_arrive_whole(demo_master, tmp_path, receiver):
    res = CliRunner().invoke(main, ["export", "s_1", "--store", str(demo_master), "--endpoint", receiver.url, "--json"])
    assert res.exit_code == 0, res.output
    assert receiver.paths == [("/v1/traces", "application/x-protobuf")]
    got = receiver.spans()
    file = _file_spans(json.loads(CliRunner().invoke(
        main, ["export", "s_1", "--store", str(demo_master), "--format", "otel"]).output))
    assert sorted(s.name for s in got) == sorted(s["name"] for s in file)
    assert {s.span_id.hex() for s in got} == {s["spanId"] for s in file}
    by_id = {s.span_id: s for s in got}
    for s in got:
        if s.parent_span_id:
            assert s.parent_span_id in by_id
    assert json.loads(res.output)["spans"] == len(got)


def test_planted_secrets_never_reach_the_spans(secret_store, tmp_path, receiver, monkeypatch):
    monkeypatch.setenv(ENV_NAME, ENV_VALUE)
    out = tmp_path / "s1.json"
    runner = CliRunner()
    assert runner.invoke(main, ["export", "s_1", "--store", str(secret_store), "--format", "otel", "-o", str(out)]).exit_code == 0
    assert runner.invoke(main, ["export", "s_1", "--store", str(secret_store), "--endpoint", receiver.url]).exit_code == 0
    text = out.read_text(encoding="utf-8")
    wire = b"".join(receiver.raw)
    for s in PLANTED:
        assert s not in text and json.dumps(s)[1:-1] not in text and s.encode() not in wire, s
    assert "[redacted]" in text


def test_the_secret_check_sees_unscrubbed_spans(secret_store, monkeypatch):
    """Without the scrub every secret planted where a span reads is in the export: the test above
    can fail."""
    from flux.pages.html import Scrub

    monkeypatch.setenv(ENV_NAME, ENV_VALUE)
    monkeypatch.setattr(Scrub, "__call__", lambda self, text: text)
    out = CliRunner().invoke(main, ["export", "s_1", "--store", str(secret_store), "--format", "otel"]).output
    assert [s for s in IN_SPANS if s not in out and html.escape(s) not in out] == []


def test_a_collector_that_refuses_is_one_error_line(demo_master):
    r = _Receiver(status=400)
    try:
        res = CliRunner().invoke(main, ["export", "s_1", "--store", str(demo_master), "--endpoint", r.url])
    finally:
        r.close()
    assert res.exit_code == 1
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: the collector at") and "did not take the spans" in lines[0]


@pytest.mark.parametrize("args, message", [
    (["--endpoint", "ftp://x"], "must be an http(s) URL"),
    (["--endpoint", "http://127.0.0.1:1", "-o", "x.json"], "give one of the two"),
    (["--endpoint", "http://127.0.0.1:1", "--format", "html"], "--endpoint sends OpenTelemetry spans"),
])
def test_otel_argument_errors_are_one_line(demo_master, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, ["export", "s_1", "--store", str(demo_master)] + args)
    assert res.exit_code == 1
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0], res.output
