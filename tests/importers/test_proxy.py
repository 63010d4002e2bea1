"""`flux proxy`: the official `openai` and `anthropic` clients, as the agent, talk to a fake upstream
on 127.0.0.1 through the proxy; the run is recorded as a session (turns, cells from the tool results
the agent sends back, usage), the key never stored; then replayed with the upstream stopped, and a
changed request refused."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from flux.importers.proxy import ProxyServer
from flux.model.session import load_session
from flux.store.store import StoreReader
from tests.agent.fake_servers import Answer, FakeAnthropic, FakeOpenAI, ToolCall

KEY = "sk-proj-" + "K" * 40


class _Running:
    def __init__(self, server: ProxyServer):
        self.server = server
        self.thread = threading.Thread(target=server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> list[str]:
        self.server.shutdown()
        self.thread.join()
        return self.server.finish()


TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "read a file",
                                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]


def _openai_agent(base_url: str, stream: bool, question: str = "what is in a.txt?") -> str:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    msgs: list[dict] = [{"role": "user", "content": question}]
    for _ in range(4):
        if stream:
            text, calls = "", {}
            for ch in client.chat.completions.create(model="gpt-4.1-mini", messages=msgs, tools=TOOLS, stream=True,
                                                     stream_options={"include_usage": True}):
                for c in ch.choices:
                    text += c.delta.content or ""
                    for tc in c.delta.tool_calls or []:
                        slot = calls.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                        slot["id"] = tc.id or slot["id"]
                        slot["name"] = (tc.function.name if tc.function else None) or slot["name"]
                        slot["args"] += (tc.function.arguments if tc.function else None) or ""
            tool_calls = [{"id": s["id"], "type": "function", "function": {"name": s["name"], "arguments": s["args"]}}
                          for _i, s in sorted(calls.items())]
        else:
            r = client.chat.completions.create(model="gpt-4.1-mini", messages=msgs, tools=TOOLS)
            m = r.choices[0].message
            text = m.content or ""
            tool_calls = [{"id": t.id, "type": "function", "function": {"name": t.function.name,
                                                                         "arguments": t.function.arguments}}
                          for t in m.tool_calls or []]
        if not tool_calls:
            return text
        msgs.append({"role": "assistant", "content": text or None, "tool_calls": tool_calls})
        for t in tool_calls:
            path = json.loads(t["function"]["arguments"])["path"]
            msgs.append({"role": "tool", "tool_call_id": t["id"], "content": f"contents of {path}: hello"})
    raise AssertionError("the agent did not finish")


@pytest.mark.parametrize("stream", [True, False])
def test_openai_agent_recorded_through_the_proxy_then_replayed_with_the_upstream_stopped(tmp_path, stream):
    store = tmp_path / "store"
    up = FakeOpenAI()
    up.script(Answer(tool_calls=[ToolCall("read_file", '{"path": "a.txt"}', id="call_1")], input_tokens=50,
                     output_tokens=9),
              Answer(text="a.txt says hello", input_tokens=80, output_tokens=6))
    with up:
        proxy = _Running(ProxyServer(str(store), upstream=up.root))
        answer = _openai_agent(proxy.root + "/v1", stream)
        sessions = proxy.stop()
        assert len(up.requests) == 2 and up.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert answer == "a.txt says hello"
    [sid] = sessions
    with StoreReader(store) as r:
        detail = load_session(r, sid)
    [turn] = detail.turns
    assert turn.user_input == "what is in a.txt?" and turn.outcome == "ok" and turn.answer == "a.txt says hello"
    assert [(c.op, c.rec.content) for c in detail.cells] == [("read_file", "contents of a.txt: hello")]
    data = b"".join(p.read_bytes() for p in store.rglob("*") if p.is_file())
    assert KEY.encode() not in data and KEY[8:30].encode() not in data  # the key passed through, never stored
    # replay: the upstream is gone; the same agent gets the same answers, offline
    proxy = _Running(ProxyServer(str(store), replay=sid))
    assert _openai_agent(proxy.root + "/v1", stream) == "a.txt says hello"
    import openai

    with pytest.raises(openai.APIStatusError) as e:  # positional: a third call is past the recording
        _openai_agent(proxy.root + "/v1", stream)
    assert e.value.status_code == 409
    proxy.stop()
    assert "call 3 is past the recording (2 call(s))" in proxy.server.failure
    # a changed request (another question) is refused loudly, naming the call
    proxy = _Running(ProxyServer(str(store), replay=sid))
    with pytest.raises(openai.APIStatusError) as e:
        _openai_agent(proxy.root + "/v1", stream, question="what is in b.txt?")
    assert e.value.status_code == 409
    proxy.stop()
    assert "call 1 differs from the recorded request" in proxy.server.failure


def test_anthropic_agent_recorded_and_replayed_streaming(tmp_path):
    import anthropic

    store = tmp_path / "store"
    up = FakeAnthropic()
    up.script(Answer(tool_calls=[ToolCall("read_file", '{"path": "a.txt"}', id="toolu_1")]), Answer(text="hello it is"))
    tools = [{"name": "read_file", "description": "read", "input_schema": {"type": "object",
                                                                           "properties": {"path": {"type": "string"}}}}]

    def agent(base: str) -> str:
        client = anthropic.Anthropic(base_url=base, api_key=KEY, max_retries=0)
        msgs: list = [{"role": "user", "content": "read a.txt"}]
        for _ in range(3):
            with client.messages.stream(model="claude-sonnet-4-5", max_tokens=256, messages=msgs, tools=tools) as s:
                msg = s.get_final_message()
            uses = [b for b in msg.content if b.type == "tool_use"]
            if not uses:
                return "".join(b.text for b in msg.content if b.type == "text")
            msgs.append({"role": "assistant", "content": [b.model_dump() for b in msg.content]})
            msgs.append({"role": "user", "content": [{"type": "tool_result", "tool_use_id": u.id, "content": "hello"}
                                                     for u in uses]})
        raise AssertionError("no answer")

    with up:
        proxy = _Running(ProxyServer(str(store), upstream=up.root))
        assert agent(proxy.root) == "hello it is"
        [sid] = proxy.stop()
    with StoreReader(store) as r:
        detail = load_session(r, sid)
    assert [(c.op, c.rec.content) for c in detail.cells] == [("read_file", "hello")]
    assert detail.row.model == "claude-sonnet-4-5"
    proxy = _Running(ProxyServer(str(store), replay=sid))
    assert agent(proxy.root) == "hello it is"
    proxy.stop()
    assert proxy.server.failure is None


def test_proxy_refuses_bad_setups_in_one_line(tmp_path):
    from flux.errors import FluxError

    with pytest.raises(FluxError, match="one of them"):
        ProxyServer(str(tmp_path / "s"))
    with pytest.raises(FluxError, match="not an http"):
        ProxyServer(str(tmp_path / "s"), upstream="ftp://x")


def _start_cli(*args: str):
    import os
    import subprocess
    import sys

    flux_bin = Path(sys.executable).parent / "flux"
    p = subprocess.Popen([str(flux_bin), "proxy", *args, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = p.stdout.readline()
    assert line.startswith("flux proxy on http://127.0.0.1:"), line + p.stderr.read()
    return p, line.split()[3]


def _stop_cli(p) -> tuple[int, str, str]:
    import signal

    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    return p.returncode, out, err


def test_flux_proxy_verb_records_then_replays_offline_and_stops_on_sigint(tmp_path):
    store = tmp_path / "store"
    up = FakeOpenAI()
    up.script(Answer(tool_calls=[ToolCall("read_file", '{"path": "a.txt"}', id="call_1")]), Answer(text="a.txt says hello"))
    with up:
        p, url = _start_cli("--store", str(store), "--upstream", up.root)
        assert _openai_agent(url + "/v1", True) == "a.txt says hello"
        rc, out, err = _stop_cli(p)
    assert rc == 0, err
    assert "recorded 2 model call(s) into s_1" in out and err == ""
    p, url = _start_cli("--store", str(store), "--replay", "s_1")  # the upstream is closed
    assert _openai_agent(url + "/v1", True) == "a.txt says hello"
    rc, out, err = _stop_cli(p)
    assert rc == 0 and "served 2 of 2 recorded call(s) of s_1" in out, err
    p, url = _start_cli("--store", str(store), "--replay", "s_1")
    import openai

    with pytest.raises(openai.APIStatusError):
        _openai_agent(url + "/v1", True, question="and b.txt?")
    rc, out, err = _stop_cli(p)
    assert rc == 1
    last = err.strip().splitlines()[-1]
    assert last.startswith("error: flux proxy --replay s_1: call 1 differs from the recorded request")


def test_flux_proxy_stopped_the_moment_it_says_where_it_listens_stops_cleanly(tmp_path):
    """A script that reads the address line and sends Ctrl-C at once: the handler is already in
    place, so the proxy ends with its summary and exit 0, never a KeyboardInterrupt traceback."""
    p, _ = _start_cli("--store", str(tmp_path / "store"), "--upstream", "http://127.0.0.1:9")
    rc, out, err = _stop_cli(p)
    assert rc == 0 and "Traceback" not in err, err
    assert "recorded 0 model call(s) into no session" in out


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from flux.importers.proxy import parse_response, request_turn  # noqa: E402

_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(
                         ["messages", "role", "content", "type", "tool_call_id", "tool_use_id", "choices", "delta",
                          "tool_calls", "index", "function", "arguments", "usage", "message", "text"]), inner, max_size=4),
                     max_leaves=30)


@settings(max_examples=150, deadline=None)
@given(api=st.sampled_from(["openai", "anthropic"]), body=st.dictionaries(st.sampled_from(["messages", "model"]), _json))
def test_request_turn_reads_any_request_body_without_crashing(api, body):
    try:
        said, results = request_turn(api, body)
    except (TypeError, ValueError, AttributeError, KeyError, IndexError):
        return  # (the proxy logs it as a conversation it cannot follow; the agent still has its answer)
    assert said is None or isinstance(said, str)
    assert isinstance(results, dict)


@settings(max_examples=150, deadline=None)
@given(api=st.sampled_from(["openai", "anthropic"]), streamed=st.booleans(), doc=_json)
def test_parse_response_of_hostile_upstream_text_fails_only_as_an_exception_the_proxy_catches(api, streamed, doc):
    import json as _j

    raw = _j.dumps(doc) if not streamed else "".join(f"data: {_j.dumps(x)}\n\n" for x in (doc if isinstance(doc, list) else [doc]))
    try:
        call = parse_response(api, raw, streamed)
    except Exception as e:  # the proxy catches every exception here and records nothing
        assert not isinstance(e, (SystemExit, KeyboardInterrupt))
        return
    assert isinstance(call.text, str) and isinstance(call.thinking, str)
    assert call.model is None or isinstance(call.model, str)
    assert all(isinstance(u.id, str) and isinstance(u.name, str) and isinstance(u.input, dict) for u in call.tool_uses)
    assert call.usage is None or all(isinstance(v, int) and v >= 0 for v in call.usage.values())


def test_flux_proxy_json_says_where_it_listens_and_what_it_recorded(tmp_path):
    """--json: the first line is the address (a script starting it on --port 0 reads the port from
    it), the last one what was recorded — the same facts as the text lines."""
    import json
    import os
    import signal
    import subprocess
    import sys

    store = tmp_path / "store"
    up = FakeOpenAI()
    up.script(Answer(text="hello"))
    with up:
        p = subprocess.Popen([str(Path(sys.executable).parent / "flux"), "proxy", "--store", str(store), "--upstream",
                              up.root, "--port", "0", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        first = json.loads(p.stdout.readline())
        assert first["mode"] == "record" and first["upstream"] == up.root
        assert first["openai_base_url"] == first["listening"] + "/v1" and int(first["listening"].rsplit(":", 1)[1]) > 0
        assert _openai_agent(first["openai_base_url"], True) == "hello"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    assert json.loads(out.strip().splitlines()[-1]) == {"recorded_calls": 1, "sessions": ["s_1"]}


@pytest.mark.parametrize("body", [b"[" * 100_000 + b"]" * 100_000, b'{"n": ' + b"1" * 5000 + b"}", b"\xff{}", b"[1]"],
                         ids=["nested-past-the-stack", "long-int", "not-utf8", "not-an-object"])
def test_a_request_body_that_is_no_json_object_is_answered_400_and_the_proxy_serves_on(tmp_path, body):
    import urllib.error
    import urllib.request

    proxy = _Running(ProxyServer(str(tmp_path / "store"), upstream="http://127.0.0.1:9"))
    try:
        req = urllib.request.Request(proxy.root + "/v1/chat/completions", data=body,
                                     headers={"content-type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=30)
        assert err.value.code == 400 and b"not a JSON object" in err.value.read()
        again = urllib.request.Request(proxy.root + "/v1/chat/completions", data=b"[]")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(again, timeout=30)
        assert err.value.code == 400  # the handler survived: the next request is answered too
    finally:
        assert proxy.stop() == []
