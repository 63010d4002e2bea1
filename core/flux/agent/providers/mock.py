"""``mock``: the offline, deterministic coding agent (no key, no network), the default model.

Per turn it plays a fixed script read from the request alone, so a model cassette can serve it:
``glob`` to explore (when offered), ``append`` the note ``flux-mock.txt`` as flux's mock does, then
answer ``Finished.`` (or why the note could not be written). Usage is about 4 bytes per token.
"""

from __future__ import annotations

import asyncio
from typing import AsyncIterator

from ...canonical import canonical_json, compact_json
from .base import Chunk, ModelRequest

__all__ = ["MockProvider", "NOTE_PATH", "NOTE_CONTENT"]

NOTE_PATH = "flux-mock.txt"
NOTE_CONTENT = "created by flux mock\n"


def _turn_results(messages: list[dict]) -> list[dict]:
    """The tool_result blocks since the last user message that carries text (this turn's).

    That message opens the turn, and results it carries are earlier ones: a fork's re-plan prompt
    rides in the same user message as the copied conversation's last tool results, after them."""
    results: list[dict] = []
    for m in reversed(messages):
        if m.get("role") != "user":
            continue
        blocks = m.get("content") or []
        if isinstance(blocks, str) or any(isinstance(b, dict) and b.get("type") == "text" for b in blocks):
            break
        trs = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if not trs:
            break
        results[:0] = trs
    return results


def _result_text(tr: dict) -> str:
    return "".join(b.get("text", "") for b in tr.get("content") or [] if isinstance(b, dict))


class MockProvider:
    name = "mock"

    def __init__(self, model: str = "mock", *, delay_s: float = 0.0):
        self.model = model
        self.delay_s = delay_s
        self.calls = 0

    def plan(self, request: ModelRequest) -> dict:
        """The scripted response for ``request``: ``{"text"?, "tool_use"?}``."""
        tools = {t["name"] for t in request.tools}
        results = _turn_results(request.messages)
        done = len(results)
        script = []
        if "glob" in tools:
            script.append(("glob", {"pattern": "*"}))
        if "append" in tools:
            script.append(("append", {"content": NOTE_CONTENT, "path": NOTE_PATH}))
        if done < len(script):
            name, inp = script[done]
            return {"tool_use": {"type": "tool_use", "id": f"toolu_mock_{done + 1:02d}", "name": name, "input": inp}}
        if not script:
            return {"text": "Finished. (no tools were offered, so I only answered)"}
        last = results[-1] if results else None
        if last is not None and last.get("is_error"):
            why = next((ln.strip() for ln in _result_text(last).splitlines() if ln.strip()), "the tool failed")
            return {"text": f"I could not write the note: {why}"}
        return {"text": "Finished."}

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        self.calls += 1
        resp = self.plan(request)
        yield Chunk("message_start", {"model": request.model})
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        in_tokens = max(1, len(canonical_json(request.canonical()).encode()) // 4)
        if "tool_use" in resp:
            tu = resp["tool_use"]
            partial = compact_json(tu["input"])
            yield Chunk("tool_input_delta", {"name": tu["name"], "partial_json": partial})
            yield Chunk("block", tu)
            out_tokens = max(1, len(partial) // 4 + 8)
            stop = "tool_use"
        else:
            text = resp["text"]
            yield Chunk("text_delta", text)
            out_tokens = max(1, len(text) // 4 + 8)
            stop = "end_turn"
        yield Chunk("usage", {"input_tokens": in_tokens, "output_tokens": out_tokens, "cache_creation_input_tokens": 0,
                              "cache_read_input_tokens": 0, "reasoning_tokens": 0, "audio_input_tokens": 0,
                              "audio_output_tokens": 0})
        yield Chunk("done", {"stop_reason": stop})
