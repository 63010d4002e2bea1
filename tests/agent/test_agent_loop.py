"""End-to-end turns with the mock and scripted providers into a real store directory, then read
back with the store's own read models and replayed hermetically."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from flux.agent.approver import CallbackApprover
from flux.agent.loop import provider_history
from flux.agent.ops import op
from flux.agent.providers.scripted import ScriptedProvider
from flux.errors import FluxError, SessionNotFound
from flux.lang.parser import ParseError, parse
from flux.model.session import load_session
from flux.store.events import Run, StepFailed
from flux.store.store import StoreReader
from flux.timemachine.replay import replay_session


def kinds(store: Path, sid: str = "s_1") -> list[str]:
    with StoreReader(store) as r:
        out = []
        for e in r.events(sid):
            k = e.kind
            if isinstance(e.body, Run):
                k = "run:" + e.body.event.TAG
            out.append(k)
        return out


def detail(store: Path, sid: str = "last"):
    with StoreReader(store) as r:
        return load_session(r, sid)


def faithful(store: Path, sid: str = "last"):
    with StoreReader(store) as r:
        rep = replay_session(r, sid)
    assert rep.diverged is None, rep.diverged
    assert rep.cells_consumed == rep.cells_total > 0
    return rep


def scripted(*responses) -> ScriptedProvider:
    return ScriptedProvider(responses=list(responses))


def test_mock_turn_is_recorded_in_flux_order_and_replays(make_client, store, ws):
    c = make_client("mock", auto_approve=True)
    s = c.session()
    out = s.send_sync("write a quick note")
    assert (out.outcome, out.answer) == ("ok", "Finished.")
    assert (ws / "flux-mock.txt").read_text() == "created by flux mock\n"
    assert [p.phase for p in out.plans] == ["gather", "execute"]
    assert out.model_calls == 3 and out.usage.input_tokens > 0 and out.cost == 0.0
    ks = kinds(store)
    assert ks[:3] == ["session_started", "message", "turn_started"]
    # §2.6: plan, step_started, op_recorded, step result — per tool call
    assert ks[3:11] == ["plan_attempted", "run:step_started", "run:op_recorded", "run:step_succeeded"] * 2
    assert ks[11] == "run:flow_returned"
    assert ks[12:15] == ["call_usage"] * 3
    assert ks[15] == "turn_ended"
    obs_end = 16 + ks[16:].index("message")
    assert set(ks[16:obs_end]) == {"observation"}
    assert ks[obs_end:] == ["message"] * 5
    d = detail(store)
    [turn] = d.turns
    assert turn.outcome == "ok" and turn.iterations == 3 and turn.calls == 3
    obs_kinds = {ob.kind for _, ob in d.observations(turn)}
    assert {"turn.iteration", "model.call", "tool_call", "tool.started", "tool.ended"} <= obs_kinds
    # every turn-scoped row carries the turn id; messages and run rows never do
    with StoreReader(store) as r:
        for e in r.events("s_1"):
            if e.kind in ("plan_attempted", "call_usage", "turn_ended", "observation"):
                assert e.turn_id == turn.turn_id
            else:
                assert e.turn_id is None
    faithful(store)


def test_conversation_is_a_valid_provider_history_and_continues(make_client, store):
    c = make_client("mock", auto_approve=True)
    s = c.session()
    s.send_sync("write a quick note")
    c2 = make_client("mock", auto_approve=True)
    s2 = c2.open_session("last")
    assert s2.id == s.id
    hist = s2.history
    assert hist == provider_history(hist)  # already valid as stored
    assert [m["role"] for m in hist] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    assert hist[1]["content"][0]["type"] == "tool_use" and hist[2]["content"][0]["type"] == "tool_result"
    out = s2.send_sync("and another")
    assert out.outcome == "ok"
    d = detail(store)
    assert len(d.turns) == 2 and len(d.conversation) == 12
    # the second turn's first request resent the whole first turn
    faithful(store)


def test_scripted_turn_tool_error_invalid_args_unknown_tool_and_op_raising(make_client, store, ws):
    @op(effect="pure")
    def explode(x: str) -> str:
        """Always fails."""
        raise RuntimeError("kaboom")

    from flux.agent.builtin_ops import coding_ops

    prov = scripted(
        {"tool_calls": [{"name": "read", "input": {"path": "missing.txt"}},
                        {"name": "read", "input": {"pathh": "README.md"}},
                        {"name": "no_such_tool", "input": {}},
                        {"name": "explode", "input": {"x": "1"}},
                        {"name": "read", "input": "not an object"}],
         "usage": {"input_tokens": 100, "output_tokens": 20}},
        {"text": "Done, with errors.", "usage": {"input_tokens": 150, "output_tokens": 5}},
    )
    c = make_client(prov, model="scripted", ops=coding_ops(ws) + [explode], auto_approve=True)
    out = c.session().send_sync("try things")
    assert out.outcome == "ok" and out.answer == "Done, with errors."
    statuses = [(t.name, t.status) for t in out.tool_calls]
    assert statuses == [("read", "error"), ("read", "invalid"), ("no_such_tool", "invalid"), ("explode", "error"),
                        ("read", "invalid")]
    assert "missing required argument(s): path" in out.tool_calls[1].content
    assert "unknown tool `no_such_tool`" in out.tool_calls[2].content
    assert out.tool_calls[3].content == "op `explode` raised RuntimeError: kaboom"
    # only the dispatched calls became plans and cells; invalid ones went straight back to the model
    assert len(out.plans) == 2 and len(out.cells) == 2
    assert all(c_.is_error for c_ in out.cells)
    assert out.usage.input_tokens == 250 and out.usage.output_tokens == 25
    d = detail(store)
    tool_results = [b for m in d.conversation for b in m.content if b.get("type") == "tool_result"]
    assert len(tool_results) == 5 and all(b["is_error"] for b in tool_results)
    faithful(store)


def test_denial_is_a_denied_cell_and_a_tool_error_for_the_model(make_client, store, ws):
    c = make_client("mock")  # default approver: deny all
    out = c.session().send_sync("write a quick note")
    assert out.outcome == "ok"
    assert out.answer.startswith("I could not write the note: denied by policy: `append`")
    assert not (ws / "flux-mock.txt").exists()
    assert [cell.denied for cell in out.cells] == [True, True]
    d = detail(store)
    assert all(c_.rec.denied and c_.rec.is_error for c_ in d.cells)
    fails = [e.body.event for e in d.run_events if isinstance(e.body.event, StepFailed)]
    assert len(fails) == 2 and "denied by policy" in fails[0].error
    rep = faithful(store)
    assert all(p.halt_kind == "denied" for p in rep.plans)


def test_callback_approver_decides_per_call(make_client, ws):
    seen = []

    def decide(req):
        seen.append((req.op, req.effect))
        return req.effect == "read"

    c = make_client("mock", approver=CallbackApprover(decide))
    out = c.session().send_sync("write a quick note")
    assert seen == [("glob", "read"), ("append", "write")]
    assert [t.status for t in out.tool_calls] == ["ok", "denied"]


def test_policy_file_allows_reads_and_denies_writes(make_client, tmp_path, ws):
    pol = tmp_path / "policy.toml"
    pol.write_text('default = "deny"\nallow = ["effect:read"]\n')
    c = make_client("mock", policy=pol)
    out = c.session().send_sync("write a quick note")
    assert [t.status for t in out.tool_calls] == ["ok", "denied"]
    assert "denied by policy: `append` (effect write) is denied by policy.toml (default)" in out.tool_calls[1].content


def test_iteration_cap_ends_max_iter_with_empty_answer(make_client, store):
    loop = [{"tool_calls": [{"name": "glob", "input": {"pattern": "*.md"}}]}] * 5
    c = make_client(scripted(*loop), model="scripted", auto_approve=True, max_iter=3)
    out = c.session().send_sync("loop forever")
    assert (out.outcome, out.answer, out.iterations, out.model_calls) == ("max_iter", "", 3, 3)
    d = detail(store)
    assert d.turns[0].outcome == "max_iter"
    roles = [m.role for m in d.conversation]
    assert roles[-1] == "assistant" and all(a != b for a, b in zip(roles, roles[1:]))
    faithful(store)


def test_retryable_errors_are_retried_then_the_turn_errors(make_client, store):
    slept = []

    async def sleep(s):
        slept.append(s)

    prov = scripted({"error": "rate limited", "status": 429, "retryable": True},
                    {"error": "overloaded", "status": 529, "retryable": True},
                    {"text": "made it", "usage": {"input_tokens": 1, "output_tokens": 1}})
    from flux.agent.loop import RetryPolicy

    c = make_client(prov, model="scripted", auto_approve=True, sleep=sleep, retry=RetryPolicy(attempts=3, base_delay_s=0.5))
    out = c.session().send_sync("hi")
    assert (out.outcome, out.answer) == ("ok", "made it")
    assert slept == [0.5, 1.0]
    prov2 = scripted(*[{"error": "upstream 503: service unavailable", "status": 503, "retryable": True}] * 3)
    c2 = make_client(prov2, model="scripted", auto_approve=True, sleep=sleep, retry=RetryPolicy(attempts=3, base_delay_s=0.5))
    out = c2.session().send_sync("hi again")
    assert out.outcome == "error" and out.answer == "upstream 503: service unavailable"
    prov3 = scripted({"error": "invalid api key", "status": 401})
    c3 = make_client(prov3, model="scripted", auto_approve=True, sleep=sleep)
    out = c3.session().send_sync("third")
    assert out.outcome == "error" and out.answer == "invalid api key" and prov3.served == 1
    with StoreReader(store) as r:
        sessions = {s.id for s in r.list_sessions()}
    for sid in sessions:
        d = detail(store, sid)
        assert all(t.ended for t in d.turns)
        roles = [m.role for m in d.conversation]
        assert roles[0] == "user" and roles[-1] == "assistant"
    failed_calls = [ob for _, ob in detail(store, "s_2").observations(detail(store, "s_2").turns[0])
                    if ob.kind == "model.call" and not ob.data["ok"]]
    assert len(failed_calls) == 3 and failed_calls[0].data["status"] == 503


def test_ctrl_c_mid_tool_ends_the_turn_cancelled(make_client, store, ws):
    @op(effect="pure")
    def interrupt(x: str) -> str:
        raise KeyboardInterrupt

    prov = scripted({"tool_calls": [{"name": "interrupt", "input": {"x": "1"}}, {"name": "interrupt", "input": {"x": "2"}}]})
    c = make_client(prov, model="scripted", ops=[interrupt], auto_approve=True)
    s = c.session()
    out = s.send_sync("go")
    assert (out.outcome, out.answer) == ("cancelled", "(turn cancelled)")
    d = detail(store)
    assert d.turns[0].outcome == "cancelled" and d.turns[0].ended
    hist = provider_history([m.to_body() for m in d.conversation])
    assert [m["role"] for m in hist] == ["user", "assistant", "user", "assistant"]
    assert len([b for b in hist[2]["content"] if b["type"] == "tool_result"]) == 2


def test_asyncio_cancellation_records_cancelled_and_propagates(make_client, store):
    class Slow:
        name = "slow"

        def __init__(self):
            self.streaming: asyncio.Event | None = None

        async def stream(self, request):
            self.streaming.set()
            await asyncio.sleep(30)
            yield  # pragma: no cover

    slow = Slow()
    c = make_client(slow, model="slow", auto_approve=True)
    s = c.session()

    async def main():
        slow.streaming = asyncio.Event()
        task = asyncio.create_task(s.send("wait"))
        await asyncio.wait_for(slow.streaming.wait(), 10)  # the model call is in flight
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert detail(store).turns[0].outcome == "cancelled"


def test_secrets_from_env_and_op_output_never_reach_any_store_file(tmp_path, ws, monkeypatch):
    from flux.agent.client import Client

    env_secret = "envsecret-7f3a9c2e1b"
    monkeypatch.setenv("DEPLOY_API_KEY", env_secret)
    file_secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2"
    (ws / ".env").write_text(f"GITHUB_TOKEN={file_secret}\nDB_PASSWORD=hunter2hunter2\n")
    (ws / "conf.txt").write_text(f"the deploy key is {env_secret}\n")
    store = tmp_path / "secret-store"
    prov = scripted(
        {"tool_calls": [{"name": "read", "input": {"path": ".env"}}, {"name": "read", "input": {"path": "conf.txt"}},
                        {"name": "bash", "input": {"command": "echo $DEPLOY_API_KEY; cat .env"}},
                        {"name": "write", "input": {"path": "copy.txt", "content": f"key={env_secret}"}}]},
        {"text": f"The token is {file_secret} and the key {env_secret}."},
    )
    cassette = tmp_path / "model.jsonl"
    c = Client(prov, model="scripted", store=store, workspace=ws, auto_approve=True, model_cassette=cassette)
    out = c.session().send_sync(f"use {env_secret} please")
    c.close()
    assert out.outcome == "ok"
    # the model saw the real file contents; the bash env never had the secret
    assert file_secret in out.tool_calls[0].content and env_secret in out.tool_calls[1].content
    assert env_secret not in out.tool_calls[2].content.splitlines()[0]
    files = list(store.iterdir()) + [cassette]
    for f in files:
        data = f.read_bytes()
        for secret in (env_secret, file_secret, "hunter2hunter2"):
            assert secret.encode() not in data, (f.name, secret)
    d = detail(store)
    assert any(c_.rec.redacted for c_ in d.cells)
    faithful(store)


def test_truncated_cell_at_the_cassette_cap(make_client, ws, store):
    (ws / "big.txt").write_text("x" * 5000)
    prov = scripted({"tool_calls": [{"name": "read", "input": {"path": "big.txt"}}]}, {"text": "big"})
    c = make_client(prov, model="scripted", auto_approve=True, cassette_cap=1000)
    out = c.session().send_sync("read it")
    assert len(out.tool_calls[0].content) == 5000  # the model got all of it
    [cell] = detail(store).cells
    assert cell.rec.truncated and len(cell.rec.content) == 1000


def test_cassette_off_records_plans_but_no_cells(make_client, store):
    c = make_client("mock", auto_approve=True, cassette=False)
    out = c.session().send_sync("write a quick note")
    assert out.outcome == "ok" and out.cells == [] and len(out.plans) == 2
    assert "run:op_recorded" not in kinds(store)


def test_braces_in_tool_input_survive_the_plan_and_replay(make_client, store, ws):
    content = "f'{{x}}' and {name} and }}"
    prov = scripted({"tool_calls": [{"name": "write", "input": {"path": "t.txt", "content": content}}]}, {"text": "ok"})
    c = make_client(prov, model="scripted", auto_approve=True)
    c.session().send_sync("write braces")
    assert (ws / "t.txt").read_text() == content
    faithful(store)


def test_authored_flow_run_is_resumable_recorded_and_replayable(make_client, store, ws):
    src = '''flow release
  version = read({"path":"README.md"})
  parallel
    branch a
      grep({"pattern":"def"})
    branch b
      glob({"pattern":"*.py"})
  saga
    step
      write({"path":"out.txt","content":"v"})
    undo
      write({"path":"out.txt","content":""})
    step
      bash({"command":"exit 1"})
'''
    c = make_client("mock", auto_approve=True)
    out = c.session().run_flow_sync(src)
    assert out.outcome == "halted" and "exit 1" in out.answer
    d = detail(store)
    [turn] = d.turns
    assert turn.user_input == "<flow run>" and turn.outcome == "halted"
    [plan] = turn.accepted_plans
    assert plan.phase is None and parse(plan.plan_source).name == "release"
    run_kinds = [e.body.event.TAG for e in d.run_events]
    assert "statement_completed" in run_kinds and run_kinds[-1] == "plan_halted"
    ops_called = [c_.op for c_ in d.cells]
    # the parallel branches run at once: their cells are in completion order (flux's), either way
    assert ops_called[0] == "read" and sorted(ops_called[1:3]) == ["glob", "grep"]
    assert ops_called[3:] == ["write", "bash", "write"]  # the saga's undo ran
    rep = faithful(store)
    assert rep.plans[0].halt_kind == "runtime"


def test_flow_with_unknown_op_or_bad_syntax_writes_nothing(make_client, store):
    c = make_client("mock", auto_approve=True)
    s = c.session()
    with pytest.raises(FluxError, match="unknown op"):
        s.run_flow_sync('flow\n  x = frobnicate({"a":1})\n')
    with pytest.raises(ParseError, match="line 2, col 7"):
        s.run_flow_sync("flow\n  x = = read(\n")
    assert kinds(store) == ["session_started"]


def test_flow_confirm_gate_goes_to_the_approver(make_client, store):
    src = 'flow\n  confirm "really write?"\n    x = write({"path":"c.txt","content":"y"})\n'
    c = make_client("mock")  # deny-all refuses the confirm gate
    out = c.session().run_flow_sync(src)
    assert out.outcome == "halted" and "confirmation" in out.answer


def test_model_cassette_tee_and_fifo_serving(make_client, tmp_path, store, ws):
    from flux.agent.client import Client
    from flux.agent.model_cassette import load_records
    from flux.canonical import canonical_json, sha256_hex

    tape = tmp_path / "model.jsonl"
    c = make_client("mock", auto_approve=True, model_cassette=tape)
    c.session().send_sync("write a quick note")
    recs = load_records(tape)
    assert len(recs) == 3
    line = tape.read_text().splitlines()[0]
    assert list(json.loads(line)) == ["v", "hash", "model", "request", "chunks"]
    for r in recs:
        assert r.hash == sha256_hex(canonical_json(r.request))
    # serve it back: no live call for the same conversation in a fresh store and workspace
    from flux.agent.providers.null import NullProvider

    ws2 = tmp_path / "ws2"
    ws2.mkdir()
    for p in ws.iterdir():
        if p.is_file() and p.name != "flux-mock.txt":
            (ws2 / p.name).write_text(p.read_text())
    (ws2 / "src").mkdir()
    (ws2 / "src/app.py").write_text((ws / "src/app.py").read_text())
    null = NullProvider(model="mock")
    c2 = Client(null, model="mock", store=tmp_path / "s2", workspace=ws2, auto_approve=True, env_secrets=False,
                serve_model_cassette=tape)
    out = c2.session().send_sync("write a quick note")
    c2.close()
    assert out.outcome == "ok" and out.answer == "Finished."
    assert (c2.model_server.hits, c2.model_server.model_live, null.calls) == (3, 0, 0)
    # a different prompt misses and falls through to the (null) live provider, counted
    c3 = Client(NullProvider(model="mock"), model="mock", store=tmp_path / "s3", workspace=ws2, auto_approve=True,
                env_secrets=False, serve_model_cassette=tape, retry=__import__("flux.agent.loop", fromlist=["x"]).RetryPolicy(1))
    out = c3.session().send_sync("something else")
    c3.close()
    assert out.outcome == "error" and c3.model_server.model_live == 1 and "null provider" in out.answer


def test_fixture_model_jsonl_hashes_verify(tmp_path):
    from tests.helpers import fixture_dir
    from flux.agent.model_cassette import CassetteProvider, load_records
    from flux.canonical import canonical_json, sha256_hex

    recs = load_records(fixture_dir() / "model.jsonl")
    assert len(recs) == 4
    assert all(r.hash == sha256_hex(canonical_json(r.request)) for r in recs)
    srv = CassetteProvider(recs)
    assert srv.unconsumed == 4


def test_in_memory_client_leaves_nothing_behind(ws):
    from flux.agent.client import Client

    c = Client("mock", workspace=ws, auto_approve=True, env_secrets=False)
    d = c.store_dir
    out = c.session().send_sync("write a quick note")
    assert out.outcome == "ok" and len(c.sessions()) == 1
    c.close()
    assert not d.exists()


def test_empty_prompt_and_unknown_session(make_client):
    c = make_client("mock")
    with pytest.raises(FluxError, match="prompt is empty"):
        c.session().send_sync("  ")
    with pytest.raises(SessionNotFound, match="no session 's_99'"):
        c.open_session("s_99")


def _cells_fail(monkeypatch):
    """Make every cassette-cell append fail as a full disk would (other rows still write)."""
    import sqlite3

    from flux.store.events import OpRecorded
    from flux.store.store import StoreWriter

    real = StoreWriter.append

    def append(self, stream, body, *a, **kw):
        if isinstance(body, Run) and isinstance(body.event, OpRecorded):
            raise sqlite3.OperationalError("database or disk is full")
        return real(self, stream, body, *a, **kw)

    monkeypatch.setattr(StoreWriter, "append", append)
    real_text = StoreWriter.append_text

    def append_text(self, stream, kind, payload, *a, **kw):  # the recorder writes its cells as text
        if kind == "run" and payload.startswith('{"kind":"run","data":{"event":"op_recorded"'):
            raise sqlite3.OperationalError("database or disk is full")
        return real_text(self, stream, kind, payload, *a, **kw)

    monkeypatch.setattr(StoreWriter, "append_text", append_text)


def test_a_cell_that_cannot_be_written_fails_the_turn_loudly(make_client, store, ws, monkeypatch):
    _cells_fail(monkeypatch)
    prov = scripted({"tool_calls": [{"name": "write", "input": {"path": "out.txt", "content": "hi"}},
                                    {"name": "write", "input": {"path": "never.txt", "content": "no"}}]},
                    {"text": "never reached"})
    c = make_client(prov, model="scripted", auto_approve=True)
    out = c.session().send_sync("write it")
    assert out.outcome == "error" and out.model_calls == 1
    assert out.error.startswith("op `write` ran but its cassette cell could not be recorded (OperationalError: database or disk is full)")
    assert (ws / "out.txt").read_text() == "hi" and not (ws / "never.txt").exists()  # it ran; the next op did not
    d = detail(store)
    [t] = d.turns
    assert (t.outcome, t.answer) == ("error", out.error) and d.cells == []


def test_a_flow_whose_cell_cannot_be_written_ends_in_error(make_client, store, ws, monkeypatch):
    _cells_fail(monkeypatch)
    c = make_client("mock", auto_approve=True)
    out = c.session().run_flow_sync('flow\n  a = write({"path":"a.txt","content":"1"})\n  b = write({"path":"b.txt","content":"2"})\n')
    assert out.outcome == "error" and "op `write` ran but its cassette cell could not be recorded" in out.error
    assert (ws / "a.txt").exists() and not (ws / "b.txt").exists()
    assert detail(store).turns[0].outcome == "error"


def test_an_on_event_callback_that_raises_is_logged_and_the_turn_goes_on(make_client, store, caplog):
    def broken(ev):
        raise ValueError("renderer bug")

    c = make_client("mock", auto_approve=True)
    with caplog.at_level("ERROR", logger="flux.agent.loop"):
        out = c.session().send_sync("write a quick note", on_event=broken)
    assert out.outcome == "ok"
    failures = [r for r in caplog.records if "on_event callback failed" in r.getMessage()]
    assert failures and failures[0].exc_info[1].args == ("renderer bug",)


def test_the_turns_cost_is_priced_per_call_like_flux_show(make_client, store):
    from flux.model.pricing import Price, PriceTable, turn_spend

    prices = PriceTable({"scripted": Price(1.0, 0.0)})
    prov = scripted({"tool_calls": [{"name": "read", "input": {"path": "README.md"}}],
                     "usage": {"input_tokens": 100, "reported_cost_usd": 0.5}},
                    {"text": "done", "usage": {"input_tokens": 1_000_000}})
    c = make_client(prov, model="scripted", auto_approve=True, prices=prices)
    out = c.session().send_sync("read it")
    assert out.cost == pytest.approx(1.5)  # the reported call as reported, the other from the table
    d = detail(store)
    assert turn_spend(prices, d.turns[0], d.row.model).usd == pytest.approx(out.cost)
