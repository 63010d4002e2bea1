"""A registered secret the model streamed in two ``tool_input_delta`` pieces: the recording holds it
nowhere, and the scenario stays green under `flux test` — the cassette keeps the stream's pieces
(re-cut after redaction), so the re-drive counts the chunks the recording counted."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from flux.cli import main

SECRET = "SPLITSECRETVALUE0042"


def _script(path: Path) -> None:
    inp = {"path": "t.txt", "content": f"tok {SECRET} end"}
    text = json.dumps(inp, separators=(",", ":"))
    cut = text.index(SECRET) + 6  # inside the secret
    chunks = [{"t": "message_start", "c": {"model": "scripted"}},
              {"t": "tool_input_delta", "c": {"name": "write", "partial_json": text[:cut]}},
              {"t": "tool_input_delta", "c": {"name": "write", "partial_json": text[cut:]}},
              {"t": "block", "c": {"type": "tool_use", "id": "toolu_1", "name": "write", "input": inp}},
              {"t": "done", "c": {"stop_reason": "tool_use"}}]
    path.write_text(json.dumps([{"chunks": chunks}, {"text": "done"}]), encoding="utf-8")


def test_a_secret_split_across_deltas_is_kept_nowhere_and_the_scenario_is_green(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET)
    script = tmp_path / "s.json"
    _script(script)
    ws = tmp_path / "ws"
    ws.mkdir()
    res = CliRunner().invoke(main, ["record", "split", "write it", "-m", f"scripted:{script}", "--dir",
                                    str(tmp_path / "sc"), "--yes", "--workspace", str(ws)])
    assert res.exit_code == 0, res.output
    d = tmp_path / "sc" / "split"
    for f in d.iterdir():
        if f.is_file():
            data = f.read_bytes()
            assert SECRET.encode() not in data and SECRET[:6].encode() + SECRET[6:].encode() not in data, f.name
    records = [json.loads(line) for line in (d / "model.jsonl").read_text(encoding="utf-8").splitlines()]
    deltas = [c for r in records for c in (r.get("chunks") or r.get("response", {}).get("chunks") or [])
              if isinstance(c, dict) and c.get("t") == "tool_input_delta"]
    assert len(deltas) in (0, 2)  # (when the record keeps chunks at all: as many pieces as were streamed)
    res = CliRunner().invoke(main, ["test", str(d), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["failed"] == 0
