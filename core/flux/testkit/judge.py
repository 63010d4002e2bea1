"""The judge: grade free text against a plain-English criterion with an LLM, offline.

The judge's canonical request is hashed and served from the scenario's ``judge.jsonl``; a miss is a
hard :class:`~flux.testkit.errors.JudgeMiss`, never a live call, except under ``FLUX_GOLDEN=update``,
which asks live and appends the verdict. ``Rubric(model)`` must name the judge model (docs/testing.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from ..agent.model_cassette import load_records, redacted_record, request_hash
from ..agent.providers.base import Chunk, ModelRequest, ProviderError, assemble
from ..cassette.redactor import Redactor
from .blocking import run_blocking
from .errors import AssertionFailed, JudgeMiss, ScenarioError, kit_failure
from .golden import Rebaseline, update_mode

__all__ = ["Rubric", "Verdict", "judge", "judge_request", "JUDGE_SYSTEM"]

JUDGE_SYSTEM = (
    "You are a strict grader. You are given a criterion and a text under test. Decide whether the text "
    "satisfies the criterion, judging only what the text says. Reply with one JSON object and nothing else: "
    "{\"passed\": true or false, \"rationale\": \"one or two sentences\"}."
)
JUDGE_MAX_TOKENS = 512


class Rubric:
    """Which model judges. ``model`` is required (``provider:model``); ``base_url``/``api_key`` or a
    ready ``provider`` are only used for a live call under ``FLUX_GOLDEN=update``."""

    def __init__(self, model: str, *, base_url: Optional[str] = None, api_key: Optional[str] = None,
                 provider: Any = None):
        if not isinstance(model, str) or not model.strip():
            raise ScenarioError("name the judge model: Rubric(\"anthropic:claude-haiku-4-5\") — there is no default "
                                "judge model")
        self.name = model.strip()
        self.base_url = base_url
        self.api_key = api_key
        self._provider = provider

    @classmethod
    def model(cls, name: str, **kw: Any) -> "Rubric":  # flux's Rubric::model(...)
        return cls(name, **kw)

    @property
    def request_model(self) -> str:
        for sep in (":", "/"):
            head, _, rest = self.name.partition(sep)
            if rest and head in ("openai", "anthropic", "ollama", "mock", "scripted", "null"):
                return rest
        return self.name

    def provider(self) -> Any:
        if self._provider is None:
            from ..agent.registry import resolve_model

            self._provider = resolve_model(self.name, base_url=self.base_url, api_key=self.api_key).provider
        return self._provider


@dataclass(frozen=True)
class Verdict:
    passed: bool
    rationale: str
    criterion: str
    served: bool  # True when answered from judge.jsonl

    def assert_pass(self) -> "Verdict":
        __tracebackhide__ = kit_failure
        if not self.passed:
            raise AssertionFailed(f"the judge failed the text on: {self.criterion!r}",
                                  detail=f"rationale: {self.rationale or '(none given)'}")
        return self


def judge_request(criterion: str, text: str, rubric: Rubric) -> ModelRequest:
    user = (f"Criterion:\n{criterion}\n\nText under test:\n{text}\n\n"
            f"Does the text satisfy the criterion? Reply with the JSON verdict only.")
    return ModelRequest(model=rubric.request_model, messages=[{"role": "user", "content": [{"type": "text", "text": user}]}],
                        system=JUDGE_SYSTEM, max_tokens=JUDGE_MAX_TOKENS)


def parse_verdict(answer: str, criterion: str, served: bool) -> Verdict:
    """The text from the first ``{`` to the last ``}`` as ``{passed: bool, rationale?: str}``."""
    i, j = answer.find("{"), answer.rfind("}")
    try:
        if i < 0 or j < i:
            raise ValueError("no JSON object")
        data = json.loads(answer[i:j + 1])
        if not isinstance(data, dict) or not isinstance(data.get("passed"), bool):
            raise ValueError("no boolean `passed`")
    except ValueError as e:
        shown = answer if len(answer) <= 200 else answer[:199] + "…"
        raise ScenarioError(f"the judge's answer is not a verdict ({e}): {shown!r} — re-record it with "
                            f"FLUX_GOLDEN=update") from None
    rationale = data.get("rationale")
    return Verdict(data["passed"], rationale if isinstance(rationale, str) else "", criterion, served)


async def _live(rubric: Rubric, request: ModelRequest) -> list[Chunk]:
    chunks: list[Chunk] = []
    async for ch in rubric.provider().stream(request):
        chunks.append(ch)
    return chunks


def judge(scenario: Any, criterion: str, text: str, rubric: Rubric, *, live: Any = None,
          redactor: Optional[Redactor] = None) -> Verdict:
    """Grade ``text`` (docs/testing.md). ``live`` is accepted for flux's signature
    (``judge(&client, …)``); the live judge is the rubric's model, never the agent's."""
    __tracebackhide__ = kit_failure
    if not isinstance(rubric, Rubric):
        raise ScenarioError("pass a Rubric naming the judge model: Rubric(\"provider:model\")")
    red = redactor or getattr(live, "redactor", None) or Redactor()
    req = judge_request(criterion, text, rubric)
    h, _ = request_hash(req, red)
    path = Path(scenario.path) / "judge.jsonl"
    records = load_records(path)
    for r in records:
        if r.hash == h:
            return parse_verdict(assemble([Chunk.from_json(c) for c in r.chunks]).text, criterion, True)
    if not update_mode():
        raise JudgeMiss(f"{path} has no verdict for this judge request (hash {h[:16]}…, model {rubric.name}) — the "
                        f"criterion, the text or the judge model changed, or it was never recorded; record it with a "
                        f"live judge: FLUX_GOLDEN=update")
    try:
        chunks = run_blocking(_live(rubric, req))
    except ProviderError as e:
        raise ScenarioError(f"the live judge call failed: {e}") from None
    verdict = parse_verdict(assemble(chunks).text, criterion, False)
    rec = redacted_record(req, chunks, red)
    path.write_text("".join(r.to_line() for r in records) + rec.to_line(), encoding="utf-8")
    if hasattr(scenario, "rebaselined"):
        scenario.rebaselined.append(Rebaseline(str(path), "judge verdict", f"+ {criterion!r}: passed={verdict.passed}"))
    return verdict
