"""A recording whose tool *input* held a secret stays green under `flux test`: the model's answer
was stored redacted, so the re-drive calls the op with the redacted input — the recording's
``input_hash_redacted``, not its ``input_hash`` — and plans the redacted plan. The same scenario
whose recorded answer was changed is still red."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main

SECRET = "ghp_ABCDEFGHIJKLMNOPQRSTUVWX1234"


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"tool_calls": [{"name": "write", "input": {"path": "cfg.txt",
                                                                               "content": f"token {SECRET}"}}]},
                                  {"text": "done"}]), encoding="utf-8")
    ws = tmp_path / "ws"
    ws.mkdir()
    res = CliRunner().invoke(main, ["record", "sec", "configure it", "-m", f"scripted:{script}", "--dir",
                                    str(tmp_path / "sc"), "--yes", "--workspace", str(ws)])
    assert res.exit_code == 0, res.output
    d = tmp_path / "sc" / "sec"
    for f in d.iterdir():
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f"{f.name} holds the secret"
    return d


def test_the_recording_replays_and_checks_green(scenario):
    res = CliRunner().invoke(main, ["test", str(scenario), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["failed"] == 0 and out["total"] == 1


def test_a_changed_tool_input_is_still_red(scenario):
    model = scenario / "model.jsonl"
    text = model.read_text(encoding="utf-8")
    assert "token [redacted]" in text
    model.write_text(text.replace("token [redacted]", "token [redacted] and more"), encoding="utf-8")
    res = CliRunner().invoke(main, ["test", str(scenario), "--json"])
    assert res.exit_code == 1, res.output
    assert json.loads(res.output)["failed"] == 1
