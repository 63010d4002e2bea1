"""The anthropic provider through the real ``anthropic`` SDK against a real local HTTP server (fake_servers)."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import pytest

try:  # not skipped: CI must exercise the real SDK, so the test extra carries it
    import anthropic  # noqa: F401
except ImportError:  # pragma: no cover
    raise ImportError("the provider tests need the anthropic SDK — the test extra must include it; pip install -e '.[test,anthropic]'") from None

from flux.agent.providers.anthropic_provider import AnthropicProvider, thinking_budget  # noqa: E402
from flux.agent.providers.base import Chunk, ModelRequest, ProviderError, assemble  # noqa: E402
from flux.agent.providers.openai_provider import MALFORMED_ARGUMENTS  # noqa: E402
from flux.errors import FluxError  # noqa: E402
from tests.agent.fake_servers import Answer, Drop, Fail, FakeAnthropic, Raw, ToolCall  # noqa: E402

KEY = "sk-ant-api03-test-0123456789SECRET"
TOOLS = [{"name": "append", "description": "Append text to a file.",
          "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                           "required": ["path", "content"]}}]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(k, raising=False)


@pytest.fixture
def server():
    with FakeAnthropic() as s:
        yield s


def provider(server, **kw) -> AnthropicProvider:
    kw.setdefault("retry_base_delay", 0.001)
    return AnthropicProvider("claude-fake", server.base_url, kw.pop("api_key", KEY), **kw)


def request(**kw) -> ModelRequest:
    kw.setdefault("messages", [{"role": "user", "content": [{"type": "text", "text": "write a note"}]}])
    kw.setdefault("tools", TOOLS)
    return ModelRequest(model=kw.pop("model", "claude-fake"), **kw)


def collect(p: AnthropicProvider, req: ModelRequest | None = None) -> list[Chunk]:
    async def go():
        return [c async for c in p.stream(req or request())]
    return asyncio.run(go())


def collect_until_error(p: AnthropicProvider, req: ModelRequest | None = None) -> tuple[list[Chunk], ProviderError]:
    got: list[Chunk] = []

    async def go():
        async for c in p.stream(req or request()):
            got.append(c)
    with pytest.raises(ProviderError) as ei:
        asyncio.run(go())
    return got, ei.value


def ev(name: str, **data):
    return (name, {"type": name, **data})


# --- streaming round trips -------------------------------------------------------------------


def test_text_answer_streams_and_assembles(server):
    server.script(Answer(text="Hello from the fake Claude.", input_tokens=30, output_tokens=9, cached_tokens=1200, pieces=4))
    chunks = collect(provider(server))
    assert chunks[0] == Chunk("message_start", {"model": "claude-fake"})
    texts = [c.c for c in chunks if c.t == "text_delta"]
    assert len(texts) == 4 and "".join(texts) == "Hello from the fake Claude."
    assert [c.t for c in chunks[-2:]] == ["usage", "done"] and sum(c.t == "usage" for c in chunks) == 1
    a = assemble(chunks)
    assert a.content == [{"type": "text", "text": "Hello from the fake Claude."}] and a.stop_reason == "end_turn"
    # message_start said output 1, message_delta said 9 (cumulative): counted once, as 9
    assert (a.usage.input_tokens, a.usage.output_tokens, a.usage.cache_read_input_tokens) == (30, 9, 1200)
    assert all(json.loads(json.dumps(c.to_json())) == c.to_json() for c in chunks)


def test_tool_use_split_across_input_json_deltas(server):
    a1 = json.dumps({"path": "note.txt", "content": "created by the fake\n"})
    a2 = json.dumps({"path": "b.txt", "content": "ünïcode ✓"}, ensure_ascii=False)
    server.script(Answer(text="I'll write them.", tool_calls=[ToolCall("append", a1, "toolu_1"), ToolCall("append", a2, "toolu_2")],
                         pieces=6))
    chunks = collect(provider(server))
    deltas = [c.c for c in chunks if c.t == "tool_input_delta"]
    assert len(deltas) == 12 and {d["name"] for d in deltas} == {"append"}
    assert "".join(d["partial_json"] for d in deltas[:6]) == a1
    a = assemble(chunks)
    assert a.stop_reason == "tool_use"
    assert a.content == [{"type": "text", "text": "I'll write them."},
                         {"type": "tool_use", "id": "toolu_1", "name": "append", "input": json.loads(a1)},
                         {"type": "tool_use", "id": "toolu_2", "name": "append", "input": json.loads(a2)}]
    # each block arrives whole once its content_block_stop is seen, in order
    assert [c.c["id"] for c in chunks if c.t == "block"] == ["toolu_1", "toolu_2"]


def test_thinking_is_one_block_with_its_signature(server):
    server.script(Answer(thinking="The user wants a note, so append.", signature="EqQBCkYIARgC", text="Done."))
    req = request(thinking=True, max_tokens=8000)
    chunks = collect(provider(server), req)
    assert not [c for c in chunks if c.t == "thinking_delta"]
    a = assemble(chunks)
    assert a.content == [{"type": "thinking", "thinking": "The user wants a note, so append.", "signature": "EqQBCkYIARgC"},
                         {"type": "text", "text": "Done."}]
    assert server.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 4000}


def test_thinking_budget_rules():
    assert thinking_budget(4096) == 2048 and thinking_budget(1500) == 1024 and thinking_budget(200000) == 32000
    assert thinking_budget(1025) == 1024
    with pytest.raises(ProviderError, match="thinking needs max_tokens above 1024"):
        thinking_budget(1024)


def test_thinking_with_too_few_tokens_fails_before_any_request(server):
    _, err = collect_until_error(provider(server), request(thinking=True, max_tokens=512))
    assert server.requests == [] and not err.retryable and "turn thinking off" in str(err)


def test_redacted_thinking_and_unknown_stop_reasons(server):
    server.script(Raw([
        ev("message_start", message={"id": "m", "type": "message", "role": "assistant", "model": "claude-fake", "content": [],
                                     "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}),
        ev("content_block_start", index=0, content_block={"type": "redacted_thinking", "data": "ENCRYPTED"}),
        ev("content_block_stop", index=0),
        ev("content_block_start", index=1, content_block={"type": "text", "text": "Hi"}),
        ev("content_block_delta", index=1, delta={"type": "text_delta", "text": " there"}),
        ev("content_block_stop", index=1),
        ev("message_delta", delta={"stop_reason": "pause_turn", "stop_sequence": None}, usage={"output_tokens": 3}),
        ev("message_stop")]))
    a = assemble(collect(provider(server)))
    assert a.content == [{"type": "redacted_thinking", "data": "ENCRYPTED"}, {"type": "text", "text": "Hi there"}]
    assert a.stop_reason == "end_turn" and (a.usage.input_tokens, a.usage.output_tokens) == (5, 3)


@pytest.mark.parametrize("stop", ["max_tokens", "stop_sequence", "refusal", "end_turn"])
def test_stop_reasons_pass_through(server, stop):
    server.script(Answer(text="x", stop=stop))
    assert assemble(collect(provider(server))).stop_reason == stop


def test_tool_input_given_whole_at_block_start(server):
    """Compatible servers may put the full input in content_block_start and send no deltas."""
    server.script(Raw([
        ev("message_start", message={"id": "m", "type": "message", "role": "assistant", "model": "claude-fake", "content": [],
                                     "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}),
        ev("content_block_start", index=0, content_block={"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}}),
        ev("content_block_stop", index=0),
        ev("message_delta", delta={"stop_reason": "tool_use", "stop_sequence": None}, usage={"output_tokens": 4}),
        ev("message_stop")]))
    assert assemble(collect(provider(server))).tool_uses == [{"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}}]


@pytest.mark.parametrize("raw", ['{"path": "note.txt", "content": ', "[1]", "nope"])
def test_malformed_tool_input_becomes_a_marked_input(server, raw):
    server.script(Answer(tool_calls=[ToolCall("append", raw, "toolu_bad")]))
    a = assemble(collect(provider(server)))
    assert a.tool_uses == [{"type": "tool_use", "id": "toolu_bad", "name": "append", "input": {MALFORMED_ARGUMENTS: raw}}]


# --- what goes over the wire -----------------------------------------------------------------


def test_request_translation_on_the_wire(server):
    server.script(Answer(text="ok"))
    req = request(
        system="You are careful.",
        system_segments=[{"cache": True, "text": "Tools manual"}, {"cache": False, "text": "Workspace: /w"}],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "write a note"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "offline thought", "signature": ""},   # no signature: dropped
                {"type": "thinking", "thinking": "real thought", "signature": "SIG"},
                {"type": "text", "text": ""},                                          # empty: dropped
                {"type": "tool_use", "id": "toolu_1", "name": "append", "input": {"path": "note.txt", "content": "hi"}, "extra": 1}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "path escapes"}], "is_error": True},
                {"type": "text", "text": "try again"}]},
        ],
        max_tokens=2048, temperature=0.3, stop_sequences=["END"], effort="high")
    collect(provider(server), req)
    rec = server.requests[0]
    assert rec.path == "/v1/messages" and "anthropic-version" in rec.headers
    body = rec.body
    assert body["model"] == "claude-fake" and body["max_tokens"] == 2048 and body["stream"] is True
    assert body["system"] == [{"type": "text", "text": "You are careful."},
                              {"type": "text", "text": "Tools manual", "cache_control": {"type": "ephemeral"}},
                              {"type": "text", "text": "Workspace: /w"}]
    assert body["tools"] == TOOLS
    assert body["stop_sequences"] == ["END"] and body["temperature"] == 0.3 and "top_p" not in body
    assert body["output_config"] == {"effort": "high"} and "thinking" not in body
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "write a note"}]},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "real thought", "signature": "SIG"},
            {"type": "tool_use", "id": "toolu_1", "name": "append", "input": {"path": "note.txt", "content": "hi"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "path escapes"}], "is_error": True},
            {"type": "text", "text": "try again"}]},
    ]


def test_plain_system_string_and_system_role_messages(server):
    server.script(Answer(text="ok"))
    collect(provider(server), request(system="Be brief.", tools=[], messages=[
        {"role": "system", "content": [{"type": "text", "text": "Extra rule."}]},
        {"role": "user", "content": "hi"}]))
    body = server.requests[0].body
    assert body["system"] == "Be brief.\n\nExtra rule." and "tools" not in body
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]


def test_base_url_with_v1_suffix_is_accepted(server):
    server.script(Answer(text="ok"))
    p = AnthropicProvider("claude-fake", server.base_url + "/v1/", KEY, retry_base_delay=0.001)
    assert assemble(collect(p)).text == "ok" and server.requests[0].path == "/v1/messages"


def test_api_key_travels_only_in_the_auth_header(server):
    server.script(Answer(text="ok"))
    collect(provider(server))
    rec = server.requests[0]
    carrying = [k for k, v in rec.headers.items() if KEY in v]
    assert carrying in (["x-api-key"], ["authorization"])  # the SDK's choice of auth header
    assert KEY.encode() not in rec.raw


def test_key_from_environment_and_placeholder_for_local(server, monkeypatch):
    server.script(Answer(text="a"), Answer(text="b"))
    collect(AnthropicProvider("claude-fake", server.base_url, retry_base_delay=0.001))
    assert any(v for k, v in server.requests[0].headers.items() if k in ("x-api-key", "authorization"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    collect(AnthropicProvider("claude-fake", server.base_url, retry_base_delay=0.001))
    assert any(KEY in v for v in server.requests[1].headers.values())


def test_missing_key_for_the_real_endpoint_is_a_clear_error():
    with pytest.raises(ProviderError) as ei:
        AnthropicProvider("claude-sonnet-4-5")
    assert str(ei.value) == "ANTHROPIC_API_KEY is not set — export it or pass --base-url for a local server"


def test_missing_sdk_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(FluxError) as ei:
        AnthropicProvider("claude-sonnet-4-5", api_key=KEY)
    assert str(ei.value) == "the anthropic provider needs the anthropic package — pip install 'flux-tui[anthropic]'"


def test_one_provider_serves_several_event_loops(server):
    """The sync convenience runs a loop per turn: the provider must not reuse a dead loop's client."""
    server.script(Answer(text="one"), Answer(text="two"))
    p = provider(server)
    assert assemble(collect(p)).text == "one" and assemble(collect(p)).text == "two"


def test_abandoning_the_stream_early_is_clean(server):
    server.script(Answer(text="a long answer in many pieces", pieces=10), Answer(text="next"))
    p = provider(server)

    async def go():
        agen = p.stream(request())
        async for c in agen:
            if c.t == "text_delta":
                break
        await agen.aclose()
        return [c async for c in p.stream(request())]
    assert assemble(asyncio.run(go())).text == "next"


# --- failures and retries --------------------------------------------------------------------


def test_401_is_not_retried_and_never_echoes_the_key(server):
    server.script(Fail(401, f"invalid x-api-key: {KEY}"))
    got, err = collect_until_error(provider(server))
    assert got == [] and len(server.requests) == 1 and err.status == 401 and not err.retryable
    assert "rejected the API key" in str(err) and "ANTHROPIC_API_KEY" in str(err) and KEY not in str(err)


def test_server_side_key_check():
    with FakeAnthropic(api_key="sk-ant-right") as strict:
        strict.script(Answer(text="served"))
        _, err = collect_until_error(provider(strict))
        assert err.status == 401 and "invalid api key" in str(err)
        assert assemble(collect(provider(strict, api_key="sk-ant-right"))).text == "served"


@pytest.mark.parametrize("status", [429, 500, 529])
def test_transient_status_is_retried_then_succeeds(server, status):
    server.script(Fail(status, "Overloaded" if status == 529 else "transient", headers={"retry-after": "0"}),
                  Answer(text="made it"))
    assert assemble(collect(provider(server))).text == "made it" and len(server.requests) == 2


@pytest.mark.parametrize("max_retries", [0, 2])
def test_always_500_gives_up_after_max_retries_plus_one_attempts(server, max_retries):
    server.always(Fail(500, "Internal server error"))
    _, err = collect_until_error(provider(server, max_retries=max_retries))
    assert len(server.requests) == max_retries + 1 and err.status == 500 and err.retryable
    assert "Internal server error" in str(err) and f"after {max_retries + 1} attempt" in str(err)


def test_400_is_not_retried(server):
    server.script(Fail(400, "max_tokens: must be greater than thinking.budget_tokens"))
    _, err = collect_until_error(provider(server))
    assert len(server.requests) == 1 and err.status == 400 and "budget_tokens" in str(err)


def test_overloaded_error_event_before_content_is_retried(server):
    server.script(Raw([ev("error", error={"type": "overloaded_error", "message": "Overloaded"})]), Answer(text="ok"))
    assert assemble(collect(provider(server))).text == "ok" and len(server.requests) == 2


def test_overloaded_error_event_mid_stream_is_a_clear_error(server):
    start = ev("message_start", message={"id": "m", "type": "message", "role": "assistant", "model": "claude-fake",
                                         "content": [], "stop_reason": None, "stop_sequence": None,
                                         "usage": {"input_tokens": 5, "output_tokens": 1}})
    server.script(Raw([start, ev("content_block_start", index=0, content_block={"type": "text", "text": ""}),
                       ev("content_block_delta", index=0, delta={"type": "text_delta", "text": "Hal"}),
                       ev("error", error={"type": "overloaded_error", "message": "Overloaded"})]))
    got, err = collect_until_error(provider(server))
    assert [c.t for c in got] == ["message_start", "text_delta"] and len(server.requests) == 1
    assert err.retryable and "Overloaded" in str(err) and "run the turn again" in str(err)


def test_slow_first_byte_and_slow_stream_still_complete(server):
    server.script(Answer(text="patience", thinking="slow", first_byte_delay=0.5, event_delay=0.05))
    t0 = time.monotonic()
    a = assemble(collect(provider(server, timeout=5.0), request(thinking=True)))
    assert a.text == "patience" and time.monotonic() - t0 >= 0.5 and len(server.requests) == 1


def test_no_answer_within_the_timeout_is_retried_then_an_error(server):
    server.always(Answer(text="late", first_byte_delay=1.0))
    _, err = collect_until_error(provider(server, timeout=0.2, max_retries=1))
    assert len(server.requests) == 2 and err.retryable and "did not answer in time" in str(err)


def test_connection_dropped_before_the_answer_is_retried(server):
    server.script(Drop(), Drop(), Answer(text="third time"))
    assert assemble(collect(provider(server))).text == "third time" and len(server.requests) == 3


def test_connection_dropped_mid_stream_is_a_clear_error(server):
    server.script(Answer(text="this will be cut", pieces=5, drop_after=5), Answer(text="unused"))
    got, err = collect_until_error(provider(server))
    assert len(server.requests) == 1 and server.pending == 1
    assert [c.t for c in got] == ["message_start", "text_delta", "text_delta"]
    assert err.retryable and "stream broke after 3 chunks" in str(err) and KEY not in str(err)


def test_stream_ending_before_message_stop_is_an_error(server):
    server.script(Raw([ev("message_start", message={"id": "m", "type": "message", "role": "assistant", "model": "c",
                                                    "content": [], "stop_reason": None, "stop_sequence": None,
                                                    "usage": {"input_tokens": 1, "output_tokens": 1}})]))
    got, err = collect_until_error(provider(server))
    assert [c.t for c in got] == ["message_start"] and "message_stop" in str(err)


# --- the fake server itself speaks the wire format the SDK expects -----------------------------


def test_fake_server_json_mode_parses_with_the_sdk(server):
    import anthropic

    server.script(Answer(text="plain", thinking="t", tool_calls=[ToolCall("append", '{"path": "n"}', "toolu_9")]))

    async def go():
        client = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.base_url, max_retries=0)
        try:
            return await client.messages.create(model="claude-fake", max_tokens=100,
                                                messages=[{"role": "user", "content": "x"}])
        finally:
            await client.close()
    m = asyncio.run(go())
    assert [b.type for b in m.content] == ["thinking", "text", "tool_use"]
    assert m.content[2].input == {"path": "n"} and m.stop_reason == "tool_use" and m.usage.output_tokens == 7


def test_fake_server_stream_parses_with_the_sdk_stream_helper(server):
    """The SDK's own accumulator (messages.stream) agrees with our chunk assembly."""
    import anthropic

    args = json.dumps({"path": "note.txt", "content": "x"})
    server.script(Answer(text="Note:", tool_calls=[ToolCall("append", args, "toolu_1")], pieces=4))

    async def go():
        client = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.base_url, max_retries=0)
        try:
            async with client.messages.stream(model="claude-fake", max_tokens=100,
                                              messages=[{"role": "user", "content": "x"}]) as s:
                return await s.get_final_message()
        finally:
            await client.close()
    m = asyncio.run(go())
    assert m.content[0].text == "Note:" and m.content[1].input == json.loads(args) and m.usage.output_tokens == 7


# --- end to end: `flux run -m anthropic:NAME --base-url …` records a replayable run ----------------


def _flux(*args, env=None):
    from click.testing import CliRunner

    from flux.cli import agent as _agent  # noqa: F401  (registers `run`)
    from flux.cli import main

    return CliRunner().invoke(main, [str(a) for a in args], env=env or {})


@pytest.mark.parametrize("suffix", ["", "/v1"])
def test_flux_run_anthropic_writes_the_note_records_and_replays(server, tmp_path, ws, suffix):
    from flux.model.session import load_session
    from flux.store.store import StoreReader

    note = {"path": "note.txt", "content": "written through the anthropic provider\n"}
    server.script(Answer(text="Writing it.", tool_calls=[ToolCall("append", json.dumps(note), "toolu_note")], pieces=5,
                         input_tokens=300, output_tokens=40, cached_tokens=1000),
                  Answer(text="Wrote note.txt.", input_tokens=350, output_tokens=8))
    s = tmp_path / "S"
    res = _flux("run", "-m", "anthropic:claude-fake", "--base-url", server.base_url + suffix, "--store", s,
                "--workspace", ws, "--yes", "write a note", env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": ""})
    assert res.exit_code == 0, res.output
    assert "Wrote note.txt." in res.stdout
    assert (ws / "note.txt").read_text() == note["content"]
    assert len(server.requests) == 2 and server.requests[1].path == "/v1/messages"
    msgs = server.requests[1].body["messages"]
    assert msgs[1]["role"] == "assistant" and msgs[1]["content"][-1] == {"type": "tool_use", "id": "toolu_note",
                                                                         "name": "append", "input": note}
    [result] = [b for b in msgs[2]["content"] if b["type"] == "tool_result"]
    assert result["tool_use_id"] == "toolu_note" and not result.get("is_error")
    with StoreReader(s) as r:
        sess = load_session(r, "last")
    [turn] = sess.turns
    assert (turn.user_input, turn.outcome, turn.answer) == ("write a note", "ok", "Wrote note.txt.")
    assert [c.rec.op for c in sess.cells] == ["append"]
    rep = _flux("replay", "last", "--store", s, "--json")
    assert rep.exit_code == 0, rep.output
    rj = json.loads(rep.stdout)
    assert rj["diverged"] is None and rj["cells_consumed"] == rj["cells_total"] == 1
    files = [(p, p.read_bytes()) for p in s.rglob("*") if p.is_file()]
    assert files and not [p for p, b in files if KEY.encode() in b]


def test_flux_run_anthropic_server_down_is_a_turn_error_with_the_message(server, tmp_path, ws):
    server.always(Fail(529, "Overloaded", headers={"retry-after-ms": "5"}))
    s = tmp_path / "S"
    res = _flux("run", "-m", "anthropic:claude-fake", "--base-url", server.base_url, "--store", s, "--workspace", ws,
                "--yes", "write a note", env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": ""})
    assert res.exit_code == 1 and "Overloaded" in res.stderr and "turn ended error" in res.stderr
    assert len(server.requests) == 4  # the provider's default max_retries=3, and no second layer of retries
    from flux.model.session import load_session
    from flux.store.store import StoreReader

    with StoreReader(s) as r:
        [turn] = load_session(r, "last").turns
    assert turn.outcome == "error" and "Overloaded" in (turn.answer or "")
