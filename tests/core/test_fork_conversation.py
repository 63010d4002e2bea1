"""What a re-planned fork's model is shown: S's conversation as it stood at the fork point
(flux.timemachine.conversation) — checked on the request bodies real provider SDKs sent to local
servers (tests/agent/fake_servers.py), and on the stored ``compacted`` event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from flux.agent.client import Client
from flux.agent.loop import provider_history
from flux.cli import main
from flux.store.events import Compacted
from flux.store.store import StoreReader
from flux.timemachine import fork_session
from flux.timemachine.conversation import turn_prefix
from tests.agent.fake_servers import Answer, FakeAnthropic, FakeOpenAI

KEY = "sk-test-0123456789abcdefghijklmnop"


def _compacted(store: Path, sid: str) -> list[dict]:
    with StoreReader(store) as r:
        evs = [e for e in r.events(sid, kinds=("compacted",))]
    assert len(evs) == 1
    assert isinstance(evs[0].body, Compacted)
    return evs[0].body.messages


def _texts(blocks) -> list[str]:
    if isinstance(blocks, str):
        return [blocks]
    return [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]


def test_replan_fork_of_the_demo_shows_the_fork_turns_exchanges_before_n(demo: Path, tmp_path: Path) -> None:
    """s_1 @ 3 is the edit of turn 1: the model sees the task, and the task/read/run_tests
    exchanges with their results — not the edit, the passing run or the answer after it."""
    pytest.importorskip("anthropic")
    ws = tmp_path / "ws"
    ws.mkdir()
    with FakeAnthropic(api_key=KEY) as srv:
        srv.script(Answer(text="Forked and stopped."))
        res = CliRunner().invoke(main, ["fork", "s_1", "--at", "3", "-m", "anthropic:test-model", "--prompt",
                                        "try another fix", "--store", str(demo), "--workspace", str(ws), "--yes",
                                        "--json"],
                                 env={"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": srv.base_url})
        assert res.exit_code == 0, res.output
        sent = srv.requests[0].body["messages"]
    fid = json.loads(res.stdout)["session"]
    shape = [(m["role"], [b["type"] + (":" + b["name"] if b["type"] == "tool_use" else "") for b in m["content"]])
             for m in sent]
    assert shape == [
        ("user", ["text"]),
        ("assistant", ["text", "tool_use:task"]), ("user", ["tool_result"]),
        ("assistant", ["tool_use:read"]), ("user", ["tool_result"]),
        ("assistant", ["text", "tool_use:run_tests"]), ("user", ["tool_result", "text"]),
    ]
    assert _texts(sent[0]["content"]) == ["the tokenizer test fails on empty input — fix it"]
    assert "FAILURES" in json.dumps(sent[-1]["content"][0])  # the failing run's result: the state at the fork
    assert _texts(sent[-1]["content"]) == ["try another fix"]
    body = json.dumps(sent)
    assert "toolu_f4_1" not in body and "2 passed" not in body and "Fixed:" not in body
    # Stored as flux stores a fork's conversation: one compacted event, a valid provider history.
    stored = _compacted(demo, fid)
    assert stored == provider_history(stored) and len(stored) == 7 and stored[-1]["role"] == "user"
    assert [m["role"] for m in stored] == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]


def test_replan_fork_of_the_real_fixture_sends_the_task_not_the_answer(fixture_store: Path, tmp_path: Path) -> None:
    """The fixture's conversation is the task and flux's final "Finished."; forking at 0 must not
    show the model the answer of the run it branches away from (flux would)."""
    pytest.importorskip("openai")
    ws = tmp_path / "ws"
    ws.mkdir()
    with FakeOpenAI(api_key=KEY) as srv:
        srv.script(Answer(text="A different note."))
        c = Client("openai:test-model", base_url=srv.base_url, api_key=KEY, store=fixture_store, workspace=ws,
                   env_secrets=False, auto_approve=True)
        try:
            res = fork_session(c, "s_1", 0, prompt="write a shorter note")
        finally:
            c.close()
        sent = srv.requests[0].body["messages"]
    assert res.turn is not None and res.turn.ok and res.answer == "A different note."
    convo = [m for m in sent if m["role"] != "system"]
    assert [m["role"] for m in convo] == ["user"]
    assert convo[0]["content"] == "write a quick note\n\nwrite a shorter note"
    assert "Finished." not in json.dumps(sent)
    assert _compacted(fixture_store, res.session) == [
        {"role": "user", "content": [{"type": "text", "text": "write a quick note"}]}]


def test_replan_fork_on_openai_shape_keeps_tool_calls_paired(demo: Path, tmp_path: Path) -> None:
    """The same demo fork on the OpenAI wire: every assistant tool call is answered by a ``tool``
    message, no ``tool`` message answers a call the request does not hold."""
    pytest.importorskip("openai")
    ws = tmp_path / "ws"
    ws.mkdir()
    with FakeOpenAI(api_key=KEY) as srv:
        srv.script(Answer(text="ok"))
        c = Client("openai:test-model", base_url=srv.base_url, api_key=KEY, store=demo, workspace=ws,
                   env_secrets=False, auto_approve=True)
        try:
            fork_session(c, "s_1", 2)
        finally:
            c.close()
        sent = srv.requests[0].body["messages"]
    calls = [tc["id"] for m in sent if m["role"] == "assistant" for tc in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in sent if m["role"] == "tool"]
    assert calls == answered == ["toolu_f1_1", "toolu_f2_1"]  # task and read; run_tests (@2) is the fork point
    assert "FAILURES" not in json.dumps(sent)
    assert "Continue from the current forked state. The original task was: the tokenizer test fails" in json.dumps(sent)


# ---- the cut itself, on hand-built turns ------------------------------------------------------------


def _use(i: str, name: str, inp: dict | None = None) -> dict:
    return {"type": "tool_use", "id": i, "name": name, "input": inp or {"k": i}}


def _res(i: str, err: bool = False) -> dict:
    return {"type": "tool_result", "tool_use_id": i, "content": [{"type": "text", "text": f"r{i}"}], "is_error": err}


def _a(*blocks) -> dict:
    return {"role": "assistant", "content": list(blocks)}


def _u(*blocks) -> dict:
    return {"role": "user", "content": list(blocks)}


def test_parallel_calls_are_kept_or_dropped_together() -> None:
    turn = [_a(_use("1", "read")), _u(_res("1")),
            _a(_use("2", "grep"), _use("3", "glob")), _u(_res("2"), _res("3")),
            _a({"type": "text", "text": "done"})]
    calls = [("read", {"k": "1"}), ("grep", {"k": "2"}), ("glob", {"k": "3"})]
    assert turn_prefix(turn, calls[:3], 2) == turn[:2]  # the fork is at glob: its sibling grep goes too
    assert turn_prefix(turn, calls[:2], 1) == turn[:2]  # at grep
    assert turn_prefix(turn, calls[:1], 0) == []


def test_an_exchange_without_results_ends_the_copy_and_no_orphan_result_is_kept() -> None:
    turn = [_a(_use("1", "read")), _u(_res("1"), _res("zz")),  # zz answers nothing
            _a(_use("2", "edit"), _use("3", "bash")), _u(_res("2"))]  # bash never got a result
    calls = [("read", {"k": "1"}), ("edit", {"k": "2"}), ("bash", {"k": "3"}), ("write", None)]
    got = turn_prefix(turn, calls, 3)
    assert got == [_a(_use("1", "read")), _u(_res("1"))]


def test_invalid_calls_have_no_plan_and_stay_before_the_fork_point() -> None:
    turn = [_a(_use("1", "nope")), _u(_res("1", err=True)),  # refused: unknown tool, no plan
            _a(_use("2", "read")), _u(_res("2")),
            _a(_use("3", "read", {"bad": 1})), _u(_res("3", err=True)),  # refused: bad input
            _a(_use("4", "edit")), _u(_res("4"))]
    calls = [("read", {"k": "2"}), ("edit", {"k": "4"})]
    assert turn_prefix(turn, calls, 1) == turn[:6]
    # a call that ran (no error) but matches no plan: the copy stops rather than guess
    assert turn_prefix(turn, [("grep", {"k": "x"}), ("edit", {"k": "4"})], 1) == turn[:2]


_ids = st.sampled_from(["a", "b", "c", "d", "e", "f"])
_names = st.sampled_from(["read", "edit", "bash"])
_block = st.one_of(
    st.builds(lambda i, n: _use(i, n), _ids, _names),
    st.builds(lambda i, e: _res(i, e), _ids, st.booleans()),
    st.just({"type": "text", "text": "t"}),
)
_msg = st.builds(lambda r, bs: {"role": r, "content": bs}, st.sampled_from(["user", "assistant"]),
                 st.lists(_block, max_size=4))


@settings(max_examples=150, deadline=None)
@given(st.lists(_msg, max_size=8), st.lists(st.tuples(_names, st.none()), min_size=1, max_size=5), st.data())
def test_the_cut_never_leaves_an_unanswered_call_or_an_orphan_result(turn, calls, data) -> None:
    before = data.draw(st.integers(min_value=0, max_value=len(calls) - 1))
    out = turn_prefix(turn, calls, before)
    assert len(out) % 2 == 0 and len(out) <= len(turn)
    for k in range(0, len(out), 2):
        a, u = out[k], out[k + 1]
        assert a["role"] == "assistant" and u["role"] == "user"
        uses = [b["id"] for b in a["content"] if b.get("type") == "tool_use"]
        got = [b["tool_use_id"] for b in u["content"] if b.get("type") == "tool_result"]
        assert uses and set(uses) <= set(got) and set(got) <= set(uses) and len(got) == len(set(got))
    # calls that ran (a result that is not an error) are plans: never more than lie before the fork
    ran = [b for m in out if m["role"] == "user" for b in m["content"]
           if b.get("type") == "tool_result" and not b.get("is_error")]
    assert len(ran) <= before


# ---- call_of reads only as far as the first call; the conversation is read through the kind index ----

from flux.lang import ast as A  # noqa: E402
from flux.lang.parser import parse  # noqa: E402
from flux.timemachine import conversation as conv_mod  # noqa: E402
from flux.timemachine.conversation import call_of, conversation_at, conversation_before  # noqa: E402
from flux.timemachine.engine import calls_in  # noqa: E402

_STMTS = [
    'a = 1', 'b = "x"', 'c = read({"path":"a"})', 'd = write({"path":"b","body":"c"})',
    'when $a\n    e = grep({"pattern":"x"})', 'each i in [1,2] -> out\n    f = fetch({"url":"u"})',
    'g = { k: $a }', 'log({"m":"hi"})', 'h = [1, 2]',
    'unless $b\n    k = list({"dir":"d"})\n    m = stat({"path":"p"})',  # two calls in one statement
]


@settings(max_examples=120, deadline=None)
@given(picks=st.lists(st.sampled_from(_STMTS), min_size=1, max_size=6))
def test_call_of_is_the_first_call_in_source_order(picks):
    draft = parse("flow\n" + "".join(f"  {s}\n" for s in picks))
    calls = calls_in(draft.body)
    body = draft.body
    if len(body) == 1 and isinstance(body[0], A.Bind) and isinstance(body[0].value, A.Call) \
            and len(body[0].value.args) == 1 and isinstance(body[0].value.args[0], A.Lit):
        expected = (body[0].value.op, body[0].value.args[0].value)
    else:
        expected = (calls[0].op, None) if calls else (None, None)
    assert call_of(draft) == expected


def test_the_conversation_read_through_the_kind_index_is_the_stream_order_read(demo: Path, monkeypatch) -> None:
    """conversation_at/before read message, compacted and turn_started rows with ``sparse=True``: the
    same rows, in the same order, as the plain read along the stream — every turn of every demo session."""
    def outputs():
        out = []
        with StoreReader(demo) as r:
            for row in r.list_sessions():
                for t in r.events(row.id, kinds=("turn_started",)):
                    out.append(conversation_before(r, row.id, t.global_seq))
                    for before in range(3):
                        out.append(conversation_at(r, row.id, t.global_seq, [("read", None)] * 3, before))
                out.append(conversation_before(r, row.id, None))
        return out

    new = outputs()
    real_events = StoreReader.events

    def plain(self, stream, **kw):
        kw.pop("sparse", None)
        return real_events(self, stream, **kw)

    monkeypatch.setattr(StoreReader, "events", plain)
    old = outputs()
    assert new == old and any(new)
