"""`flux run -m openai:NAME` / `-m anthropic:NAME` with --base-url against local servers speaking the
real wire formats (tests/agent/fake_servers.py): the model appends a note, the run is recorded and
replays faithfully, and the API key is in no store file."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from flux.cli import agent as _agent  # noqa: F401
from flux.cli import main

from tests.agent.fake_servers import Answer, FakeAnthropic, FakeOpenAI, ToolCall

KEY = "sk-test-0123456789abcdefghijklmnop"


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_sdk_provider_writes_the_note_records_and_replays(tmp_path, ws, kind):
    pytest.importorskip(kind)
    server_cls = FakeOpenAI if kind == "openai" else FakeAnthropic
    env_key = "OPENAI_API_KEY" if kind == "openai" else "ANTHROPIC_API_KEY"
    s = tmp_path / "S"
    with server_cls(api_key=KEY) as srv:
        srv.script(
            Answer(tool_calls=[ToolCall("append", json.dumps({"path": "note.txt", "content": "hello from the model\n"}))]),
            Answer(text="Wrote note.txt."),
        )
        res = CliRunner().invoke(main, ["run", "-m", f"{kind}:test-model", "--base-url", srv.base_url, "--store", str(s),
                                        "--workspace", str(ws), "--yes", "--json", "write the note"],
                                 env={env_key: KEY})
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["outcome"] == "ok" and out["answer"] == "Wrote note.txt." and out["model"] == f"{kind}:test-model"
    assert (ws / "note.txt").read_text() == "hello from the model\n"
    rep = CliRunner().invoke(main, ["replay", "last", "--store", str(s), "--json"])
    data = json.loads(rep.stdout)
    assert data["diverged"] is None and data["cells_consumed"] == data["cells_total"] == 1
    for f in s.iterdir():
        assert KEY.encode() not in f.read_bytes(), f.name


def test_http_errors_end_the_turn_error_with_the_providers_message(tmp_path, ws):
    pytest.importorskip("openai")
    s = tmp_path / "S"
    with FakeOpenAI(api_key=KEY) as srv:
        res = CliRunner().invoke(main, ["run", "-m", "openai:test-model", "--base-url", srv.base_url, "--store", str(s),
                                        "--workspace", str(ws), "--json", "hi"], env={"OPENAI_API_KEY": "sk-wrong-key-000000000000"})
    assert res.exit_code == 1
    out = json.loads(res.stdout)
    assert out["outcome"] == "error" and out["answer"]
    assert json.loads(CliRunner().invoke(main, ["sessions", "--store", str(s), "--json"]).stdout)["sessions"][0]["interrupted"] is None
