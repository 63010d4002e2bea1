"""Scenarios recorded for real — ``flux record`` through the OpenAI-compatible and Anthropic
providers against local HTTP servers (tests/agent/fake_servers.py) — once per session, then
copied for each test, which runs with the servers stopped and no API key set."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main

from tests.agent.fake_servers import Answer, FakeAnthropic, FakeOpenAI, ToolCall

KEY = "sk-test-0123456789abcdefghijklmnop"
INPUT = "find the root cause and write a note"
ENV_KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "FLUX_GOLDEN")


def answers() -> list[Answer]:
    return [
        Answer(tool_calls=[ToolCall("read", json.dumps({"path": "README.md"}), id="call_read_1")]),
        Answer(tool_calls=[ToolCall("append", json.dumps({"path": "note.txt", "content": "root cause: config\n"}),
                                    id="call_append_1")]),
        Answer(text="Wrote note.txt — the root cause is the config."),
    ]


def seed(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "README.md").write_text("# demo project\nconfig is wrong\n")
    return d


def record(kind: str, dest: Path, replies: list | None = None, input_text: str = INPUT) -> Path:
    """``flux record`` against a fresh local server of ``kind``; the server is stopped on return."""
    server_cls = FakeOpenAI if kind == "openai" else FakeAnthropic
    env_key = "OPENAI_API_KEY" if kind == "openai" else "ANTHROPIC_API_KEY"
    ws = seed(dest.parent / f"{dest.name}-seed")
    with server_cls(api_key=KEY) as srv:
        srv.script(*(replies or answers()))
        res = CliRunner().invoke(main, ["record", dest.name, input_text, "--dir", str(dest.parent), "-m", f"{kind}:test-model",
                                        "--base-url", srv.base_url, "--workspace", str(ws), "--yes"],
                                 env={env_key: KEY, "FLUX_GOLDEN": None})
    assert res.exit_code == 0, res.output
    assert not (ws / "note.txt").exists(), "record must not touch the seed workspace"
    return dest


def change_tool_input(model_jsonl: Path, call: int, **input_changes) -> None:
    """Tamper with a recorded model answer: call ``call`` (1-based)'s tool_use input gets
    ``input_changes`` (the model "answered differently")."""
    lines = model_jsonl.read_text().splitlines()
    rec = json.loads(lines[call - 1])
    for ch in rec["chunks"]:
        if ch["t"] == "block" and ch["c"].get("type") == "tool_use":
            ch["c"]["input"].update(input_changes)
    lines[call - 1] = json.dumps(rec)
    model_jsonl.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="session")
def pristine(tmp_path_factory) -> dict[str, Path]:
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    root = tmp_path_factory.mktemp("recorded")
    return {kind: record(kind, root / kind) for kind in ("openai", "anthropic")}


@pytest.fixture
def offline(monkeypatch):
    """No key, no golden mode, and no socket may connect anywhere."""
    for k in ENV_KEYS:
        monkeypatch.delenv(k, raising=False)

    def refuse(self, *a, **kw):
        raise OSError("network access in an offline test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


@pytest.fixture(params=["openai", "anthropic"])
def scenario_dir(request, pristine, tmp_path, offline) -> Path:
    dst = tmp_path / request.param
    shutil.copytree(pristine[request.param], dst)
    return dst


@pytest.fixture
def openai_dir(pristine, tmp_path, offline) -> Path:
    dst = tmp_path / "openai"
    shutil.copytree(pristine["openai"], dst)
    return dst
