"""``scripted:PATH``: serves model turns, in order, from a JSON or JSONL file (tests, demos, benchmarks).

Each entry is one response (text and tool calls, a raw chunk stream as ``model.jsonl`` holds it, or
an error), served first in, first out whatever the request; running out is an error that says how
many were served. The file format is in docs/agent.md ("Models").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import AsyncIterator, Iterable

from ...canonical import compact_json
from ...errors import FluxError
from .base import Chunk, ModelRequest, ProviderError

__all__ = ["ScriptedProvider", "load_script", "response_chunks"]


def load_script(path: str | Path) -> list[dict]:
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise FluxError(f"cannot read the script {p}: {e.strerror or e} — scripted:PATH names a JSON/JSONL file") from None
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except ValueError as e:
            raise FluxError(f"the script {p} is not valid JSON ({e})") from None
    else:
        data = []
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                data.append(json.loads(line))
            except ValueError as e:
                raise FluxError(f"the script {p}, line {n}, is not valid JSON ({e})") from None
    for i, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise FluxError(f"the script {p}: entry {i + 1} must be a JSON object (text/tool_calls, chunks or error)")
    return data


def response_chunks(entry: dict, model: str, index: int) -> list[Chunk]:
    """The chunk stream of one scripted response (raises ProviderError for an ``error`` entry)."""
    if "error" in entry:
        err = entry["error"]
        msg = err if isinstance(err, str) else compact_json(err)
        raise ProviderError(msg, status=entry.get("status"), retryable=bool(entry.get("retryable", False)))
    if "chunks" in entry:
        return [Chunk.from_json(c) for c in entry["chunks"] if isinstance(c, dict)]
    out = [Chunk("message_start", {"model": model})]
    if entry.get("thinking"):
        out.append(Chunk("thinking_delta", str(entry["thinking"])))
    if entry.get("text"):
        out.append(Chunk("text_delta", str(entry["text"])))
    calls = entry.get("tool_calls", entry.get("tool_use")) or []
    if isinstance(calls, dict):
        calls = [calls]
    for k, call in enumerate(calls, 1):
        if not isinstance(call, dict) or "name" not in call:
            raise ProviderError(f"scripted response {index + 1}: tool call {k} needs a name")
        inp = call.get("input", {})
        out.append(Chunk("tool_input_delta", {"name": call["name"], "partial_json": compact_json(inp)}))
        out.append(Chunk("block", {"type": "tool_use", "id": str(call.get("id") or f"toolu_s{index + 1:03d}_{k:03d}"),
                                   "name": str(call["name"]), "input": inp}))
    if isinstance(entry.get("usage"), dict):
        out.append(Chunk("usage", entry["usage"]))
    stop = entry.get("stop_reason") or ("tool_use" if calls else "end_turn")
    out.append(Chunk("done", {"stop_reason": stop}))
    return out


class ScriptedProvider:
    name = "scripted"

    def __init__(self, path: str | Path | None = None, *, responses: Iterable[dict] | None = None,
                 model: str = "scripted"):
        if (path is None) == (responses is None):
            raise FluxError("ScriptedProvider needs a script file or a responses list (exactly one)")
        self.responses = load_script(path) if path is not None else [dict(r) for r in responses or []]
        self.source = str(path) if path is not None else "<responses>"
        self.model = model
        self.served = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        if self.served >= len(self.responses):
            raise ProviderError(f"the scripted provider ran out of responses ({self.served} served from {self.source}) "
                                f"— add more entries to the script")
        i = self.served
        self.served += 1
        for ch in response_chunks(self.responses[i], request.model, i):
            yield ch

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"ScriptedProvider({self.source!r}, served={self.served}/{len(self.responses)})"


