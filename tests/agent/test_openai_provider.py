"""The openai provider through the real ``openai`` SDK against a real local HTTP server (fake_servers)."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import pytest

try:  # not skipped: CI must exercise the real SDK, so the test extra carries it
    import openai  # noqa: F401
except ImportError:  # pragma: no cover
    raise ImportError("the provider tests need the openai SDK — the test extra must include it; pip install -e '.[test,openai]'") from None

from flux.agent.providers.base import Chunk, ModelRequest, ProviderError, assemble  # noqa: E402
from flux.agent.providers.openai_provider import (MALFORMED_ARGUMENTS, OpenAIProvider, RetryPolicy,  # noqa: E402
                                                  to_openai_messages)
from flux.errors import FluxError  # noqa: E402
from tests.agent.fake_servers import Answer, Drop, Fail, FakeOpenAI, Raw, ToolCall  # noqa: E402

KEY = "sk-test-0123456789abcdefSECRET"
TOOLS = [{"name": "append", "description": "Append text to a file.",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                           "required": ["path", "content"]}}]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"):
        monkeypatch.delenv(k, raising=False)


@pytest.fixture
def server():
    with FakeOpenAI() as s:
        yield s


def provider(server, **kw) -> OpenAIProvider:
    kw.setdefault("retry_base_delay", 0.001)
    return OpenAIProvider("fake-model", server.base_url, kw.pop("api_key", KEY), **kw)


def request(**kw) -> ModelRequest:
    kw.setdefault("messages", [{"role": "user", "content": [{"type": "text", "text": "write a note"}]}])
    kw.setdefault("tools", TOOLS)
    return ModelRequest(model=kw.pop("model", "fake-model"), **kw)


def collect(p: OpenAIProvider, req: ModelRequest | None = None) -> list[Chunk]:
    async def go():
        return [c async for c in p.stream(req or request())]
    return asyncio.run(go())


def collect_until_error(p: OpenAIProvider, req: ModelRequest | None = None) -> tuple[list[Chunk], ProviderError]:
    got: list[Chunk] = []

    async def go():
        async for c in p.stream(req or request()):
            got.append(c)
    with pytest.raises(ProviderError) as ei:
        asyncio.run(go())
    return got, ei.value


# --- streaming round trips -------------------------------------------------------------------


def test_text_answer_streams_and_assembles(server):
    server.script(Answer(text="Hello from the fake model.", input_tokens=21, output_tokens=5, cached_tokens=4, pieces=4))
    chunks = collect(provider(server))
    assert chunks[0] == Chunk("message_start", {"model": "fake-model"})
    assert [c.c for c in chunks if c.t == "text_delta"] == ["Hello f", "rom the", " fake ", "model."]
    assert [c.t for c in chunks[-2:]] == ["usage", "done"]
    assert sum(1 for c in chunks if c.t == "usage") == 1
    a = assemble(chunks)
    assert a.content == [{"type": "text", "text": "Hello from the fake model."}]
    assert a.stop_reason == "end_turn" and a.model == "fake-model"
    # prompt_tokens 25 of which 4 cached: flux keeps them apart so nothing counts twice
    assert (a.usage.input_tokens, a.usage.cache_read_input_tokens, a.usage.output_tokens) == (21, 4, 5)
    assert all(json.loads(json.dumps(c.to_json())) == c.to_json() for c in chunks)  # JSON-clean for the cassette


def test_served_model_name_is_reported(server):
    server.script(Answer(text="ok", model="fake-model-2025-01-01"))
    assert assemble(collect(provider(server))).model == "fake-model-2025-01-01"


def test_tool_calls_split_across_chunks_are_reassembled(server):
    a1 = json.dumps({"path": "note.txt", "content": "line one\nline two\n"})
    a2 = json.dumps({"path": "other.txt", "content": "ünïcode ✓"}, ensure_ascii=False)
    server.script(Answer(text="Writing two notes.", tool_calls=[ToolCall("append", a1, "call_A"), ToolCall("append", a2, "call_B")],
                         pieces=5))
    chunks = collect(provider(server))
    deltas = [c.c for c in chunks if c.t == "tool_input_delta"]
    assert len(deltas) == 10 and all(d["name"] == "append" for d in deltas)
    assert "".join(d["partial_json"] for d in deltas[:5]) == a1
    assert "".join(d["partial_json"] for d in deltas[5:]) == a2
    a = assemble(chunks)
    assert a.stop_reason == "tool_use"
    assert a.content == [
        {"type": "text", "text": "Writing two notes."},
        {"type": "tool_use", "id": "call_A", "name": "append", "input": json.loads(a1)},
        {"type": "tool_use", "id": "call_B", "name": "append", "input": json.loads(a2)},
    ]


def test_reasoning_content_of_local_servers_becomes_thinking(server):
    server.script(Answer(thinking="The user wants a note.", text="Done."))
    a = assemble(collect(provider(server)))
    assert a.content == [{"type": "thinking", "thinking": "The user wants a note.", "signature": ""},
                         {"type": "text", "text": "Done."}]


@pytest.mark.parametrize("finish,stop", [("length", "max_tokens"), ("content_filter", "refusal"), ("stop", "end_turn")])
def test_finish_reasons_are_normalised(server, finish, stop):
    server.script(Answer(text="partial", stop=finish))
    assert assemble(collect(provider(server))).stop_reason == stop


def test_tool_call_reported_with_finish_stop_is_still_tool_use(server):
    server.script(Answer(tool_calls=[ToolCall("append", '{"path": "a", "content": "b"}')], stop="stop"))
    assert assemble(collect(provider(server))).stop_reason == "tool_use"


def test_calls_all_sent_on_index_zero_are_kept_apart(server):
    """Older Ollama sends every tool call with index 0 (distinct ids, complete arguments)."""
    def ch(delta, finish=None):
        return {"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    server.script(Raw([
        ch({"role": "assistant", "content": ""}),
        ch({"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a"}'}}]}),
        ch({"tool_calls": [{"index": 0, "id": "c2", "type": "function", "function": {"name": "read", "arguments": '{"path": "b"}'}}]}),
        ch({}, "stop"), "[DONE]"]))
    a = assemble(collect(provider(server)))
    assert [(b["id"], b["input"]) for b in a.tool_uses] == [("c1", {"path": "a"}), ("c2", {"path": "b"})]
    assert a.stop_reason == "tool_use" and a.usage.input_tokens == 0


# --- malformed tool arguments ----------------------------------------------------------------


@pytest.mark.parametrize("raw", ['{"path": "note.txt", "content": ', "[1, 2]", '"just a string"', "{'single': 'quotes'}"])
def test_malformed_arguments_become_a_marked_input(server, raw):
    server.script(Answer(tool_calls=[ToolCall("append", raw, "call_bad")]))
    a = assemble(collect(provider(server)))
    assert a.tool_uses == [{"type": "tool_use", "id": "call_bad", "name": "append", "input": {MALFORMED_ARGUMENTS: raw}}]
    assert a.stop_reason == "tool_use"


def test_empty_arguments_mean_no_arguments(server):
    server.script(Answer(tool_calls=[ToolCall("list_files", "", "call_0")]))
    assert assemble(collect(provider(server))).tool_uses[0]["input"] == {}


def test_malformed_arguments_go_back_as_valid_json(server):
    """History holding a malformed call must not make the next request invalid for strict servers."""
    server.script(Answer(text="ok"))
    bad = {MALFORMED_ARGUMENTS: '{"path": '}
    collect(provider(server), request(messages=[
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "append", "input": bad}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "is_error": True,
                                      "content": [{"type": "text", "text": "arguments are not JSON"}]}]}]))
    sent = server.requests[0].body["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == bad


# --- what goes over the wire -----------------------------------------------------------------


def test_request_translation_on_the_wire(server):
    server.script(Answer(text="ok"))
    req = request(
        system="You are a careful agent.",
        system_segments=[{"cache": True, "text": "Workspace: /w"}],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "write a note"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "plan", "signature": ""},
                {"type": "text", "text": "Appending."},
                {"type": "tool_use", "id": "call_1", "name": "append", "input": {"path": "note.txt", "content": "hi"}},
                {"type": "tool_use", "id": "call_2", "name": "append", "input": {"path": "../x", "content": "no"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": [{"type": "text", "text": "appended 2 bytes"}], "is_error": False},
                {"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": "path escapes the workspace"}], "is_error": True},
                {"type": "text", "text": "and then stop"}]},
        ],
        max_tokens=512, temperature=0.2, top_p=0.9, stop_sequences=["STOP"])
    collect(provider(server), req)
    body = server.requests[0].body
    assert server.requests[0].path == "/v1/chat/completions"
    assert body["model"] == "fake-model" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 512 and "max_completion_tokens" not in body  # a local server: max_tokens
    assert (body["temperature"], body["top_p"], body["stop"]) == (0.2, 0.9, ["STOP"])
    assert body["tools"] == [{"type": "function", "function": {"name": "append", "description": "Append text to a file.",
                                                               "parameters": TOOLS[0]["input_schema"]}}]
    assert body["messages"] == [
        {"role": "system", "content": "You are a careful agent.\n\nWorkspace: /w"},
        {"role": "user", "content": "write a note"},
        {"role": "assistant", "content": "Appending.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "append", "arguments": '{"path": "note.txt", "content": "hi"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "append", "arguments": '{"path": "../x", "content": "no"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "appended 2 bytes"},
        {"role": "tool", "tool_call_id": "call_2", "content": "Error: path escapes the workspace"},
        {"role": "user", "content": "and then stop"},
    ]


def test_real_openai_endpoint_gets_max_completion_tokens_and_effort():
    p = OpenAIProvider("gpt-x", api_key=KEY)
    params = p.request_params(request(max_tokens=300, effort="low", tools=[]))
    assert params["max_completion_tokens"] == 300 and "max_tokens" not in params
    assert params["reasoning_effort"] == "low" and "tools" not in params


def test_images_and_plain_string_content_translate():
    msgs = to_openai_messages(request(messages=[
        {"role": "user", "content": "plain"},
        {"role": "user", "content": [{"type": "text", "text": "see"},
                                     {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}}]}]))
    assert msgs == [{"role": "user", "content": "plain"},
                    {"role": "user", "content": [{"type": "text", "text": "see"},
                                                 {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}]}]


def test_api_key_travels_only_in_the_authorization_header(server):
    server.script(Answer(text="ok"))
    collect(provider(server))
    rec = server.requests[0]
    assert rec.headers["authorization"] == f"Bearer {KEY}"
    assert KEY.encode() not in rec.raw
    assert [k for k, v in rec.headers.items() if KEY in v] == ["authorization"]


def test_local_server_without_key_gets_a_placeholder(server):
    server.script(Answer(text="ok"))
    p = OpenAIProvider("fake-model", server.base_url, retry_base_delay=0.001)
    assert assemble(collect(p)).text == "ok"
    auth = server.requests[0].headers["authorization"]
    assert auth.startswith("Bearer ") and len(auth) > len("Bearer ")


def test_key_from_environment(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.script(Answer(text="ok"))
    collect(OpenAIProvider("fake-model", server.base_url, retry_base_delay=0.001))
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_missing_key_for_the_real_endpoint_is_a_clear_error():
    with pytest.raises(ProviderError) as ei:
        OpenAIProvider("gpt-4.1-mini")
    assert str(ei.value) == "OPENAI_API_KEY is not set — export it or pass --base-url for a local server"


def test_repr_never_shows_the_key(server):
    assert KEY not in repr(provider(server)) and server.base_url in repr(provider(server))


def test_missing_sdk_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)  # what an absent package looks like to import
    with pytest.raises(FluxError) as ei:
        OpenAIProvider("gpt-4.1-mini", api_key=KEY)
    assert str(ei.value) == "the openai provider needs the openai package — pip install 'flux-tui[openai]'"


# --- failures and retries --------------------------------------------------------------------


def test_401_is_not_retried_and_never_echoes_the_key(server):
    server.script(Fail(401, f"Incorrect API key provided: {KEY}. You can find your API key at https://example"))
    got, err = collect_until_error(provider(server))
    assert got == [] and len(server.requests) == 1
    assert err.status == 401 and err.retryable is False
    msg = str(err)
    assert "rejected the API key" in msg and "OPENAI_API_KEY" in msg and "Incorrect API key provided" in msg
    assert KEY not in msg and "\n" not in msg


def test_server_side_key_check(server):
    """A server that wants a key refuses a wrong one: the 401 path end to end, not scripted."""
    with FakeOpenAI(api_key="sk-right-key") as strict:
        strict.script(Answer(text="never served"))
        _, err = collect_until_error(provider(strict))
        assert err.status == 401 and len(strict.requests) == 1 and KEY not in str(err)
        assert assemble(collect(provider(strict, api_key="sk-right-key"))).text == "never served"


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_transient_status_is_retried_then_succeeds(server, status):
    server.script(Fail(status, "slow down" if status == 429 else "upstream hiccup", headers={"retry-after": "0"}),
                  Answer(text="made it"))
    a = assemble(collect(provider(server)))
    assert a.text == "made it" and len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body  # the same request, resent


@pytest.mark.parametrize("max_retries", [0, 1, 3])
def test_always_500_gives_up_after_max_retries_plus_one_attempts(server, max_retries):
    server.always(Fail(500, "the model server exploded"))
    _, err = collect_until_error(provider(server, max_retries=max_retries))
    attempts = max_retries + 1
    assert len(server.requests) == attempts
    assert err.status == 500 and err.retryable is True
    msg = str(err)
    assert "the model server exploded" in msg and f"after {attempts} attempt" in msg and "\n" not in msg


def test_rate_limit_that_never_lifts(server):
    server.always(Fail(429, "Rate limit reached for requests"))
    _, err = collect_until_error(provider(server, max_retries=2))
    assert len(server.requests) == 3 and err.status == 429 and "Rate limit reached" in str(err)


def test_backoff_is_exponential(server):
    server.always(Fail(503, "busy"))
    p = provider(server, max_retries=3, retry_base_delay=0.05)
    t0 = time.monotonic()
    collect_until_error(p)
    elapsed = time.monotonic() - t0
    assert 0.26 <= elapsed < 5  # 0.05 + 0.1 + 0.2, ±25% jitter, plus three round trips
    policy = RetryPolicy(5, 1.0, 10.0)
    assert 0.75 <= policy.delay(0, None) <= 1.25 and 6 <= policy.delay(3, None) <= 10
    assert policy.delay(5, None) == 10.0  # capped
    assert policy.delay(0, 4.0) == 4.0 and policy.delay(3, 0.01) == 0.01  # the server's Retry-After wins…
    assert 0.75 <= policy.delay(0, 0) <= 1.25 and 0.75 <= policy.delay(0, 3600) <= 1.25  # …unless it is absurd


def test_retry_after_ms_from_the_server_is_honoured(server):
    server.script(Fail(429, "slow down", headers={"retry-after-ms": "300"}), Answer(text="ok"))
    t0 = time.monotonic()
    assert assemble(collect(provider(server, retry_base_delay=0.0))).text == "ok"
    assert time.monotonic() - t0 >= 0.3


@pytest.mark.parametrize("status,words", [(404, "check the model name"), (400, "fix the request"), (403, "may use this model")])
def test_client_errors_are_not_retried(server, status, words):
    server.script(Fail(status, "The model `nope` does not exist"))
    _, err = collect_until_error(provider(server))
    assert len(server.requests) == 1 and err.status == status and not err.retryable
    assert words in str(err) and "does not exist" in str(err)


def test_slow_first_byte_and_slow_stream_still_complete(server):
    server.script(Answer(text="patience pays", first_byte_delay=0.6, event_delay=0.05))
    t0 = time.monotonic()
    a = assemble(collect(provider(server, timeout=5.0)))
    assert a.text == "patience pays" and time.monotonic() - t0 >= 0.6
    assert len(server.requests) == 1


def test_no_answer_within_the_timeout_is_retried_then_an_error(server):
    server.always(Answer(text="too late", first_byte_delay=1.0))
    _, err = collect_until_error(provider(server, timeout=0.2, max_retries=1))
    assert len(server.requests) == 2 and err.retryable and "did not answer in time" in str(err)


def test_connection_dropped_before_the_answer_is_retried(server):
    server.script(Drop(), Answer(text="second try"))
    assert assemble(collect(provider(server))).text == "second try"
    assert len(server.requests) == 2


def test_connection_dropped_every_time_is_a_clear_error(server):
    server.always(Drop())
    _, err = collect_until_error(provider(server, max_retries=2))
    assert len(server.requests) == 3 and err.retryable and err.status is None
    assert f"could not talk to openai at {server.base_url}" in str(err) and "--base-url" in str(err)


def test_connection_dropped_mid_stream_is_a_clear_error_without_repeating_text(server):
    server.script(Answer(text="half of this arrives", pieces=6, drop_after=4), Answer(text="unused"))
    got, err = collect_until_error(provider(server))
    assert len(server.requests) == 1 and server.pending == 1  # not retried: the caller already has text
    assert got[0].t == "message_start" and [c.t for c in got[1:]] == ["text_delta"] * 3
    assert err.retryable and "stream broke after 4 chunks" in str(err) and "run the turn again" in str(err)


def test_stream_that_ends_without_finishing_is_an_error(server):
    server.script(Raw([{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": "m",
                        "choices": [{"index": 0, "delta": {"content": "trunc"}, "finish_reason": None}]}]))
    got, err = collect_until_error(provider(server))
    assert [c.t for c in got] == ["message_start", "text_delta"] and "finish_reason" in str(err)


def test_error_event_before_any_content_is_retried(server):
    server.script(Raw([{"error": {"message": "The server had an error while processing your request.", "type": "server_error"}}]),
                  Answer(text="recovered"))
    assert assemble(collect(provider(server))).text == "recovered" and len(server.requests) == 2


def test_unreachable_server_is_a_clear_error():
    with FakeOpenAI() as s:
        url = s.base_url
    p = OpenAIProvider("m", url, KEY, max_retries=1, retry_base_delay=0.001)
    _, err = collect_until_error(p)
    assert "could not talk to openai" in str(err) and KEY not in str(err)


# --- the fake server itself speaks the wire format the SDK expects -----------------------------


def test_fake_server_json_mode_parses_with_the_sdk(server):
    import openai

    server.script(Answer(text="plain json", tool_calls=[ToolCall("append", '{"path": "n"}', "call_9")]))

    async def go():
        client = openai.AsyncOpenAI(api_key=KEY, base_url=server.base_url, max_retries=0)
        try:
            return await client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "x"}])
        finally:
            await client.close()
    r = asyncio.run(go())
    assert r.choices[0].message.content == "plain json" and r.choices[0].finish_reason == "tool_calls"
    assert r.choices[0].message.tool_calls[0].function.arguments == '{"path": "n"}'
    assert r.usage.prompt_tokens == 11


# --- end to end: `flux run -m openai:NAME --base-url …` records a replayable run -------------------


def _flux(*args, env=None):
    from click.testing import CliRunner

    from flux.cli import agent as _agent  # noqa: F401  (registers `run`)
    from flux.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], env=env or {})


def _store_bytes(store) -> list[tuple[str, bytes]]:
    return [(str(p), p.read_bytes()) for p in sorted(store.rglob("*")) if p.is_file()]


def test_flux_run_openai_writes_the_note_records_and_replays(server, tmp_path, ws):
    from flux.model.session import load_session
    from flux.store.store import StoreReader

    note = {"path": "note.txt", "content": "written through the openai provider\n"}
    server.script(Answer(text="I'll write the note.", tool_calls=[ToolCall("append", json.dumps(note), "call_note")], pieces=4,
                         input_tokens=120, output_tokens=30),
                  Answer(text="Wrote note.txt.", input_tokens=160, output_tokens=6))
    s = tmp_path / "S"
    res = _flux("run", "-m", "openai:fake-model", "--base-url", server.base_url, "--store", s, "--workspace", ws, "--yes",
                "write a note", env={"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": ""})
    assert res.exit_code == 0, res.output
    assert "Wrote note.txt." in res.stdout
    assert (ws / "note.txt").read_text() == note["content"]
    # two model calls; the second carries the tool result back as a role:tool message
    assert len(server.requests) == 2
    msgs = server.requests[1].body["messages"]
    assert msgs[0]["role"] == "system"
    call_msg = next(m for m in msgs if m.get("tool_calls"))
    assert call_msg["tool_calls"][0]["id"] == "call_note" and json.loads(call_msg["tool_calls"][0]["function"]["arguments"]) == note
    tool_msg = next(m for m in msgs if m["role"] == "tool")
    assert tool_msg["tool_call_id"] == "call_note" and not tool_msg["content"].startswith("Error")
    assert [t["function"]["name"] for t in server.requests[0].body["tools"]].count("append") == 1
    # the run is recorded: turn ok, the append cell, usage of both calls
    with StoreReader(s) as r:
        sess = load_session(r, "last")
    [turn] = sess.turns
    assert (turn.user_input, turn.outcome, turn.answer) == ("write a note", "ok", "Wrote note.txt.")
    assert [c.rec.op for c in sess.cells] == ["append"] and not sess.cells[0].rec.is_error
    # replay is faithful
    rep = _flux("replay", "last", "--store", s, "--json")
    assert rep.exit_code == 0, rep.output
    rj = json.loads(rep.stdout)
    assert rj["diverged"] is None and rj["cells_consumed"] == rj["cells_total"] == 1
    # the key is in no store file
    files = _store_bytes(s)
    assert files and not [p for p, b in files if KEY.encode() in b]


def test_flux_run_openai_malformed_arguments_go_back_as_a_tool_error(server, tmp_path, ws):
    server.script(Answer(tool_calls=[ToolCall("append", '{"path": "note.txt", "content": "unterminated', "call_bad")]),
                  Answer(text="Sorry, giving up."))
    s = tmp_path / "S"
    res = _flux("run", "-m", "openai:fake-model", "--base-url", server.base_url, "--store", s, "--workspace", ws, "--yes",
                "write a note", env={"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": ""})
    assert res.exit_code == 0, res.output
    assert not (ws / "note.txt").exists()
    tool_msg = next(m for m in server.requests[1].body["messages"] if m["role"] == "tool")
    assert tool_msg["tool_call_id"] == "call_bad" and tool_msg["content"].startswith("Error: ")
    assert "not a JSON object" in tool_msg["content"]
    from flux.model.session import load_session
    from flux.store.store import StoreReader

    with StoreReader(s) as r:
        [turn] = load_session(r, "last").turns
    assert (turn.outcome, turn.answer) == ("ok", "Sorry, giving up.")


def test_flux_run_openai_rejected_key_ends_the_turn_with_a_clear_error(server, tmp_path, ws):
    server.always(Fail(401, f"Incorrect API key provided: {KEY}"))
    s = tmp_path / "S"
    res = _flux("run", "-m", "openai:fake-model", "--base-url", server.base_url, "--store", s, "--workspace", ws, "--yes",
                "write a note", env={"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": ""})
    assert res.exit_code == 1 and "rejected the API key" in res.stderr and KEY not in res.output
    assert len(server.requests) == 1  # a rejected key is not retried, by the provider or the loop
    assert not [p for p, b in _store_bytes(s) if KEY.encode() in b]
