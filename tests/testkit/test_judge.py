"""The judge: verdicts recorded live once (FLUX_GOLDEN=update, a local Anthropic server), then served
offline from judge.jsonl; a miss is a hard error; there is no default judge model."""

from __future__ import annotations

import json

import pytest

from flux.testkit import JudgeMiss, Rubric, Scenario, ScenarioError
from flux.testkit.errors import AssertionFailed

from tests.agent.fake_servers import Answer, FakeAnthropic

from tests.testkit.conftest import KEY

CRITERION = "the answer names the root cause"


def test_judge_records_once_then_serves_offline_and_a_miss_is_hard(pristine, tmp_path, monkeypatch):
    import shutil

    d = tmp_path / "s"
    shutil.copytree(pristine["anthropic"], d)
    sc = Scenario.load(d)
    text = sc.replay().text
    monkeypatch.setenv("FLUX_GOLDEN", "update")
    with FakeAnthropic(api_key=KEY) as srv:
        srv.script(Answer(text='Verdict: {"passed": true, "rationale": "It says the config is the root cause."}'))
        rubric = Rubric("anthropic:judge-model", base_url=srv.base_url, api_key=KEY)
        v = sc.judge(None, CRITERION, text, rubric)
        assert len(srv.requests) == 1
        sent = srv.requests[0].body
    assert v.passed and not v.served and "root cause" in v.rationale
    assert sent["model"] == "judge-model" and sent["max_tokens"] == 512
    assert sent["messages"][0]["content"][0]["text"].startswith("Criterion:\nthe answer names the root cause\n")
    lines = (d / "judge.jsonl").read_text().splitlines()
    assert len(lines) == 1 and list(json.loads(lines[0])) == ["v", "hash", "model", "request", "chunks"]
    assert KEY not in (d / "judge.jsonl").read_text()

    # Offline: servers gone, no key, no golden mode.
    monkeypatch.delenv("FLUX_GOLDEN")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    offline_rubric = Rubric("anthropic:judge-model")
    v2 = sc.assert_judge(None, CRITERION, text, offline_rubric)
    assert v2.passed and v2.served
    with pytest.raises(JudgeMiss, match="has no verdict for this judge request"):
        sc.judge(None, CRITERION, text + " (changed)", offline_rubric)
    with pytest.raises(JudgeMiss):
        sc.judge(None, CRITERION, text, Rubric("anthropic:another-judge"))
    sc.close()


def test_a_failing_verdict_shows_the_rationale(pristine, tmp_path, monkeypatch):
    import shutil

    d = tmp_path / "s"
    shutil.copytree(pristine["openai"], d)
    monkeypatch.setenv("FLUX_GOLDEN", "update")
    with Scenario.load(d) as sc, FakeAnthropic(api_key=KEY) as srv:
        srv.script(Answer(text='{"passed": false, "rationale": "No cause is named."}'))
        rubric = Rubric("anthropic:judge-model", base_url=srv.base_url, api_key=KEY)
        with pytest.raises(AssertionFailed, match="No cause is named"):
            sc.assert_judge(None, "the answer names a person", "some text", rubric)


def test_no_default_judge_model():
    with pytest.raises(TypeError):
        Rubric()  # type: ignore[call-arg]
    with pytest.raises(ScenarioError, match="no default judge model"):
        Rubric("  ")
