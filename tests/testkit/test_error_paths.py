"""Error-path scenarios: a recorded provider error replays as that error. Recorded for real — the
official openai / anthropic clients against local HTTP servers (one answers 401 on call 2, one is
not listening at all) with ``flux record --allow-error`` — then tested offline.

Green when the agent behaves as recorded; red when it does not (each case has both)."""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.agent.model_cassette import CassetteProvider, ModelRecord, RecordedProviderError, load_records
from flux.agent.providers.base import ModelRequest
from flux.cli import main
from flux.testkit import Scenario
from flux.testkit.cassette import StrictCassette, load_overrides
from flux.testkit.runner import offline_client

from tests.agent.fake_servers import Answer, Fail, FakeAnthropic, FakeOpenAI, ToolCall

KEY = "sk-test-0123456789abcdefghijklmnop"
PROMPT = "find the root cause and write a note"
ENVS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env or {}, catch_exceptions=False)


def _record(kind: str, root: Path, name: str, *replies) -> Path:
    seed = root / f"{name}-seed"
    seed.mkdir(parents=True)
    (seed / "README.md").write_text("# demo\nconfig is wrong\n")
    cls = FakeOpenAI if kind == "openai" else FakeAnthropic
    with cls(api_key=KEY) as srv:
        srv.script(*replies)
        res = run("record", name, PROMPT, "--dir", root, "-m", f"{kind}:test-model", "--base-url", srv.base_url,
                  "--workspace", seed, "--yes", "--allow-error", env={ENVS[kind]: KEY, "FLUX_GOLDEN": None})
    assert res.exit_code == 0, res.output
    assert "kept the error turn as the scenario (--allow-error)" in res.output
    return root / name


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    root = tmp_path_factory.mktemp("error-paths")
    read = Answer(tool_calls=[ToolCall("read", json.dumps({"path": "README.md"}), id="call_read_1")])
    out = {kind: _record(kind, root / kind, "e401", read, Fail(401, "invalid api key")) for kind in ENVS}
    out["auth-first"] = _record("anthropic", root / "auth-first", "e401", Fail(401, "invalid x-api-key"))
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    dead_root = root / "dead"
    res = run("record", "dead", PROMPT, "--dir", dead_root, "-m", "openai:test-model", "--base-url",
              f"http://127.0.0.1:{port}/v1", "--yes", "--allow-error", env={"OPENAI_API_KEY": KEY, "FLUX_GOLDEN": None})
    assert res.exit_code == 0, res.output
    out["dead"] = dead_root / "dead"
    return out


@pytest.fixture
def copy(recorded, tmp_path, offline):
    def make(key: str) -> Path:
        dst = tmp_path / key
        shutil.copytree(recorded[key], dst)
        return dst
    return make


def _test(d: Path):
    res = run("test", d, "--json")
    return res.exit_code, json.loads(res.output)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_401_on_call_2_recorded_with_allow_error_passes_its_own_test(copy, kind):
    """Reproduction: it failed with ``cassette is exhausted`` — the failed call was not recorded."""
    d = copy(kind)
    records = load_records(d / "model.jsonl")
    assert len(records) == 2 and records[0].error is None
    assert records[1].error["status"] == 401 and "invalid api key" in records[1].error["message"]
    code, rep = _test(d)
    assert code == 0, rep["scenarios"][0]
    assert rep["scenarios"][0]["report"]["model_served"] == 2 and rep["fixtures"][0]["ok"] is True


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_the_401_turning_into_an_answer_is_red(copy, kind):
    d = copy(kind)
    lines = (d / "model.jsonl").read_text().splitlines()
    rec = json.loads(lines[1])
    del rec["error"]
    rec["chunks"] = [{"t": "text_delta", "c": "all good"}, {"t": "done", "c": {"stop_reason": "end_turn"}}]
    lines[1] = json.dumps(rec)
    (d / "model.jsonl").write_text("\n".join(lines) + "\n")
    code, rep = _test(d)
    assert code == 1
    assert rep["fixtures"][0]["failure"].startswith("the recording ended in error (openai rejected" if kind == "openai"
                                                    else "the recording ended in error (")


def test_a_changed_request_before_the_401_is_red(copy):
    d = copy("openai")
    toml = (d / "scenario.toml").read_text().replace(PROMPT, "find the root cause")
    (d / "scenario.toml").write_text(toml)
    code, rep = _test(d)
    assert code == 1 and "model call 1: the request differs" in rep["fixtures"][0]["failure"]


def test_a_throw_override_with_the_recorded_message_is_green_and_another_red(copy):
    """Reproduction: a ``throw`` override failed because the re-drive's message gained a
    ``model call N:`` prefix (and every throw counted as a cassette failure)."""
    d = copy("openai")
    msg = load_records(d / "model.jsonl")[1].error["message"]
    (d / "replay.override.json").write_text(json.dumps({"calls": {"2": {"kind": "throw", "status": 401,
                                                                         "code": "auth", "message": msg}}}))
    code, rep = _test(d)
    assert code == 0, rep["fixtures"]
    (d / "replay.override.json").write_text(json.dumps({"calls": {"2": {"kind": "throw", "status": 500,
                                                                         "message": "upstream exploded"}}}))
    code, rep = _test(d)
    assert code == 1
    assert rep["fixtures"][0]["failure"] == (f"the re-drive ended in error: upstream exploded — the recording ended "
                                             f"in error: {msg}")


def test_seed_004s_authored_401_before_any_chunk(copy):
    """seed 004: a pure throw before any chunk (an HTTP 401, the log holds only the turn's error).
    Recorded: green. Authored as an override of call 1 with the same error: green. An override that
    answers instead of throwing: red."""
    d = copy("auth-first")
    [rec] = load_records(d / "model.jsonl")
    assert rec.chunks == [] and rec.error["status"] == 401
    assert _test(d)[0] == 0
    (d / "replay.override.json").write_text(json.dumps([{"kind": "throw", "status": 401, "code": "authentication_error",
                                                         "message": rec.error["message"]}]))
    assert _test(d)[0] == 0
    (d / "replay.override.json").write_text(json.dumps([{"kind": "chunks", "chunks": [{"t": "text_delta", "c": "hi"}]}]))
    code, rep = _test(d)
    assert code == 1 and rep["fixtures"][0]["failure"].startswith("the recording ended in error (")


def test_a_dead_endpoint_recorded_with_allow_error_replays_what_happened(copy):
    """Reproduction: the recording said ``not replayable`` under flux test."""
    d = copy("dead")
    [rec] = load_records(d / "model.jsonl")
    assert rec.error is not None and rec.error["status"] is None and "could not talk to openai" in rec.error["message"]
    code, rep = _test(d)
    assert code == 0, rep["scenarios"][0]
    assert rep["scenarios"][0]["replay"] == "n/a (no tool calls to replay)"
    assert "not replayable" not in json.dumps(rep)
    # the agent answering where the endpoint was dead is red
    line = json.loads((d / "model.jsonl").read_text())
    del line["error"]
    line["chunks"] = [{"t": "text_delta", "c": "hello"}]
    (d / "model.jsonl").write_text(json.dumps(line) + "\n")
    assert _test(d)[0] == 1


def test_python_check_reports_the_error_path_clean(copy):
    d = copy("anthropic")
    with Scenario.load(d) as sc:
        client = offline_client(sc)
        try:
            report = sc.check(client)
        finally:
            client.close()
    assert report.is_clean(), report.explain()
    assert report.outcome == "error" and report.error is None


# --- the cassettes, unit by unit -------------------------------------------------------------------


def _req(text: str = "hi") -> ModelRequest:
    return ModelRequest(model="m", messages=[{"role": "user", "content": [{"type": "text", "text": text}]}])


def _drain(provider, request) -> tuple[list, BaseException | None]:
    got: list = []

    async def go():
        async for ch in provider.stream(request):
            got.append(ch)

    try:
        asyncio.run(go())
    except BaseException as e:  # noqa: BLE001 — the test inspects it
        return got, e
    return got, None


def test_partial_chunks_then_the_recorded_error(tmp_path):
    from flux.agent.model_cassette import request_hash

    h, obj = request_hash(_req())
    rec = ModelRecord(h, "m", obj, [{"t": "text_delta", "c": "par"}, {"t": "text_delta", "c": "tial"}],
                      error={"message": "stream reset", "status": 502, "code": "reset", "retryable": True})
    line = rec.to_line()
    assert json.loads(line)["error"]["status"] == 502 and list(json.loads(line))[-1] == "error"
    back = ModelRecord.from_json(json.loads(line))
    for provider in (StrictCassette([back]), CassetteProvider([back])):
        got, err = _drain(provider, _req())
        assert [c.c for c in got] == ["par", "tial"]
        assert isinstance(err, RecordedProviderError) and str(err) == "stream reset" and err.status == 502
        assert err.code == "reset"
    strict = StrictCassette([back])
    _drain(strict, _req())
    assert strict.failures == [] and strict.served == 1
    # retried only when the recording retried: the next record repeats the request
    _got, err = _drain(StrictCassette([back]), _req())
    assert err.retryable is False
    _got, err = _drain(StrictCassette([back, back]), _req())
    assert err.retryable is True
    # a record without an error is unchanged on disk
    plain = ModelRecord(h, "m", obj, [])
    assert "error" not in json.loads(plain.to_line())


def test_a_record_s_error_field_is_read_defensively():
    d = {"v": 1, "hash": "x", "model": "m", "request": {}, "chunks": [],
         "error": {"message": 7, "status": True, "code": 3, "retryable": "yes"}}
    e = ModelRecord.from_json(d).error
    assert e == {"message": "7", "status": None, "code": "3", "retryable": False}
    assert ModelRecord.from_json({**d, "error": "boom"}).error is None
    assert load_overrides(Path("/nonexistent/replay.override.json")) is None


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from flux.agent.providers.base import ProviderError  # noqa: E402

_any = st.recursive(st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8) | st.floats(),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.sampled_from(["message", "status", "code", "retryable", "x"]), inner, max_size=4),
                    max_leaves=8)


@settings(max_examples=150, deadline=None)
@given(error=_any)
def test_any_recorded_error_field_replays_as_a_provider_error_or_nothing(error):
    """A hand-edited ``error`` in model.jsonl is either ignored (not an object) or replayed as a
    ProviderError with a string message — never another exception out of the cassette."""
    from flux.agent.model_cassette import request_hash

    h, obj = request_hash(_req())
    rec = ModelRecord.from_json({"v": 1, "hash": h, "model": "m", "request": obj, "chunks": [], "error": error})
    for provider in (StrictCassette([rec]), CassetteProvider([rec])):
        _got, err = _drain(provider, _req())
        if isinstance(error, dict):
            assert isinstance(err, ProviderError) and isinstance(str(err), str)
            assert err.status is None or isinstance(err.status, int)
        else:
            assert err is None
