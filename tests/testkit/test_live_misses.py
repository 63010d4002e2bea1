"""``check(…, on_miss="live")`` and ``flux test --live-misses``: a model call the recording cannot
answer goes to the configured provider — a real local HTTP server speaking OpenAI's API through the
official client — and every miss is counted in ``model_live``. Strict stays the default."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.testkit import Scenario
from flux.testkit.errors import ScenarioError
from flux.testkit.runner import live_client, offline_client

from tests.agent.fake_servers import Answer, FakeOpenAI, ToolCall
from tests.testkit.conftest import ENV_KEYS, KEY, answers


@pytest.fixture
def missing(pristine, tmp_path, monkeypatch):
    """The recorded OpenAI scenario with the recorded requests of ``calls`` made unrecognisable:
    those calls miss."""
    for k in ENV_KEYS:
        monkeypatch.delenv(k, raising=False)

    def make(*calls: int) -> Path:
        d = tmp_path / "s"
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(pristine["openai"], d)
        lines = (d / "model.jsonl").read_text().splitlines()
        for n in calls:
            rec = json.loads(lines[n - 1])
            rec["hash"] = "0" * 64
            lines[n - 1] = json.dumps(rec)
        (d / "model.jsonl").write_text("\n".join(lines) + "\n")
        return d
    return make


def _check(d: Path, client_of, **kw):
    with Scenario.load(d) as sc:
        client = client_of(sc)
        try:
            return sc.check(client, **kw)
        finally:
            client.close()


def test_strict_is_the_default_and_stops_at_the_first_miss(missing):
    rep = _check(missing(2, 3), offline_client)
    assert rep.model_live == 1 and rep.model_served == 1 and not rep.is_clean()
    assert rep.error.startswith("model call 2: the request differs from the recorded one")


def test_live_misses_go_to_the_provider_and_every_miss_is_counted(missing, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI(api_key=KEY) as srv:
        srv.script(*answers()[1:])  # the live model answers as the recording did
        rep = _check(missing(2, 3), lambda sc: live_client(sc, base_url=srv.base_url), on_miss="live")
        assert len(srv.requests) == 2  # it spent: two live calls
    assert rep.model_live == 2 and rep.model_served == 1 and rep.error is None
    assert not rep.plan_changed and not rep.left_world  # the same answers: the same plan, the same world
    assert not rep.is_clean() and "model live 2" in rep.status()  # as flux: is_clean() needs model_live == 0


def test_after_a_live_miss_the_next_call_is_served_from_the_recording_again(missing, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI(api_key=KEY) as srv:
        srv.script(*answers()[1:])
        rep = _check(missing(2), lambda sc: live_client(sc, base_url=srv.base_url), on_miss="live")
        assert len(srv.requests) == 1
    assert (rep.model_live, rep.model_served) == (1, 2) and rep.model_unconsumed == 0


def test_a_live_answer_that_differs_is_a_changed_plan(missing, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeOpenAI(api_key=KEY) as srv:
        srv.script(Answer(tool_calls=[ToolCall("append", json.dumps({"path": "other.txt", "content": "x\n"}),
                                               id="call_append_1")]),
                   Answer(text="done"))
        rep = _check(missing(2, 3), lambda sc: live_client(sc, base_url=srv.base_url), on_miss="live")
    assert rep.model_live == 2 and (rep.plan_changed or rep.left_world)


def test_flux_test_live_misses_through_the_cli(missing, monkeypatch):
    d = missing(2, 3)
    strict = CliRunner().invoke(main, ["test", str(d), "--json"])
    rep = json.loads(strict.output)["scenarios"][0]["report"]
    assert strict.exit_code == 1 and rep["model_live"] == 1
    with FakeOpenAI(api_key=KEY) as srv:
        srv.script(*answers()[1:])
        res = CliRunner().invoke(main, ["test", str(d), "--json", "--live-misses", "--base-url", srv.base_url],
                                 env={"OPENAI_API_KEY": KEY})
        assert len(srv.requests) == 2
    out = json.loads(res.output)
    assert out["scenarios"][0]["report"]["model_live"] == 2 and out["scenarios"][0]["report"]["error"] is None
    assert res.exit_code == 1 and out["fixtures"][0]["ok"] is False  # live calls: not clean, as in flux


def test_bad_live_arguments_are_one_line(missing):
    d = missing()
    with pytest.raises(ScenarioError, match="on_miss='sometimes'"):
        _check(d, offline_client, on_miss="sometimes")
    res = CliRunner().invoke(main, ["test", str(d), "-m", "openai:x"])
    assert res.exit_code == 1 and res.output.startswith("error: -m/--base-url choose where --live-misses")
    res = CliRunner().invoke(main, ["test", str(d), "--live-misses", "--replay-only"])
    assert res.exit_code == 1 and res.output.count("\n") == 1
