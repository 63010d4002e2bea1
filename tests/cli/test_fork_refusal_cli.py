"""`flux fork` checks the parent's history before it mints anything (flux's fork refusal,
crates/flux-cli/tests/fork_refusal.rs, ported as data): a parent whose conversation holds a
`tool_use` nobody answered is refused with the call named, a store without cells with flux's
reason — one `error:` line, and no child session, no byte written. The same parents with the call
answered fork (or reach the next check), so the refusal is the history check and nothing else."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.model.history import unanswered_tool_use
from flux.store import Message, StoreWriter
from tests.helpers import tree_digest

# flux's fixture: one session whose conversation ends on an unanswered tool_use — what a crashed
# turn leaves — and the strings its test requires in the refusal.
FLUX_CASE = {
    "messages": [
        {"role": "user", "content": [{"type": "text", "text": "read the note"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "orphan-1", "name": "read", "input": {}}]},
    ],
    "argv": ["fork", "{sid}", "--at", "0", "-m", "mock"],
    "stderr_contains": ["cannot be forked", "tool_use", "orphan-1"],
}
ANSWER = [
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "orphan-1",
                                  "content": [{"type": "text", "text": "the note"}]}]},
    {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
]
NO_CELLS = "is not forkable: no cassette cells recorded (pre-C-43 run, or FLUX_CASSETTE=0)"


def _flux(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).parent / "flux"
    env = dict(os.environ, NO_COLOR="1", HOME=str(cwd / "home"))
    env.pop("FLUX_STORE_DIR", None)
    (cwd / "home").mkdir(exist_ok=True)
    return subprocess.run([str(exe), *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=120)


def _seed(store: Path, messages: list[dict]) -> str:
    with StoreWriter(store) as w:
        sid = w.create_session("mock")
        for m in messages:
            w.append(sid, Message(role=m["role"], content=m["content"]))
    return sid


def _session_count(store: Path) -> int:
    con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True)
    try:
        return con.execute("SELECT COUNT(*) FROM streams").fetchone()[0]
    finally:
        con.close()


def _refused(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 1, (res.stdout, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert "Traceback" not in res.stderr and res.stdout == ""
    return lines[0]


def test_flux_case_an_unanswered_tool_use_is_refused_and_nothing_is_minted(tmp_path: Path) -> None:
    store = tmp_path / "store"
    sid = _seed(store, FLUX_CASE["messages"])
    before, digest = _session_count(store), tree_digest(store)
    assert before == 1
    argv = [a.format(sid=sid) for a in FLUX_CASE["argv"]]
    line = _refused(_flux(*argv, "--store", str(store), cwd=tmp_path))
    for needle in FLUX_CASE["stderr_contains"]:
        assert needle in line, line
    assert line.startswith(f"error: session `{sid}` cannot be forked: tool_use orphan-1 at index 1 is never "
                           "answered by a tool_result (a call to `read`)")
    assert _session_count(store) == before and tree_digest(store) == digest


def test_the_same_parent_with_the_call_answered_gets_past_the_history_check(tmp_path: Path) -> None:
    """flux's fixture has no cells: answered, its refusal is the next check's — flux's reason for a
    store without cells — and still nothing is written."""
    store = tmp_path / "store"
    sid = _seed(store, FLUX_CASE["messages"] + ANSWER)
    digest = tree_digest(store)
    line = _refused(_flux("fork", sid, "--at", "0", "-m", "mock", "--store", str(store), cwd=tmp_path))
    assert line == f"error: session {sid} {NO_CELLS} — the prefix could not come from tape"
    assert "cannot be forked" not in line
    assert tree_digest(store) == digest


def test_a_recorded_session_with_a_killed_call_after_it_is_refused_and_forks_once_answered(
        fixture_store: Path, tmp_path: Path) -> None:
    """flux's real store forks; one unanswered call appended to its conversation (a later turn
    killed mid-call) makes the same fork a refusal that writes nothing."""
    ws = tmp_path / "ws"
    ws.mkdir()
    killed = tmp_path / "killed"
    import shutil

    shutil.copytree(fixture_store, killed)
    with StoreWriter(killed) as w:
        w.append("s_1", Message.text("user", "write it again"))
        w.append("s_1", Message(role="assistant", content=[{"type": "tool_use", "id": "toolu_killed", "name": "write",
                                                            "input": {"path": "NOTES.md", "content": "x"}}]))
    digest = tree_digest(killed)
    args = ["fork", "s_1", "--at", "0", "--inject", '"x"', "--workspace", str(ws)]
    line = _refused(_flux(*args, "--store", str(killed), cwd=tmp_path))
    assert "cannot be forked: tool_use toolu_killed at index" in line and "(a call to `write`)" in line
    assert tree_digest(killed) == digest and _session_count(killed) == 1

    ok = _flux(*args, "--store", str(fixture_store), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("forked session: s_2")
    assert _session_count(fixture_store) == 2


def test_the_fixture_conversation_has_no_unanswered_call(fixture_store: Path) -> None:
    """flux wrote it through its shape-checked log: the check must pass what flux writes."""
    from flux.store.store import StoreReader
    from flux.timemachine.conversation import conversation_before

    with StoreReader(fixture_store) as r:
        assert unanswered_tool_use(conversation_before(r, "s_1", None)) is None


# -- the check itself: its cases, then any conversation ---------------------------------------------


def _use(i: str, name: str = "read") -> dict:
    return {"type": "tool_use", "id": i, "name": name, "input": {}}


def _result(i: str) -> dict:
    return {"type": "tool_result", "tool_use_id": i, "content": []}


CASES = [
    ([], None),
    ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], None),
    (FLUX_CASE["messages"], "tool_use orphan-1 at index 1 is never answered by a tool_result (a call to `read`)"),
    (FLUX_CASE["messages"] + ANSWER, None),
    # parallel calls: one answered, one not — the unanswered one is named
    ([{"role": "user", "content": []}, {"role": "assistant", "content": [_use("a"), _use("b", "bash")]},
      {"role": "user", "content": [_result("a")]}],
     "tool_use b at index 1 is never answered by a tool_result (a call to `bash`)"),
    # answered two messages later is not answered: the result must be in the very next message
    ([{"role": "user", "content": []}, {"role": "assistant", "content": [_use("a")]},
      {"role": "user", "content": [{"type": "text", "text": "killed; a new turn"}]},
      {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}, {"role": "user", "content": [_result("a")]}],
     "tool_use a at index 1 is never answered by a tool_result (a call to `read`)"),
    # a hostile block: no id, no name — still named by what it has
    ([{"role": "assistant", "content": [{"type": "tool_use"}]}], "tool_use None at index 0 is never answered by a tool_result"),
]


@pytest.mark.parametrize("messages, expected", CASES)
def test_unanswered_tool_use_cases(messages, expected) -> None:
    assert unanswered_tool_use(messages) == expected


_block = st.one_of(
    st.builds(lambda i: {"type": "tool_use", "id": i, "name": "op"}, st.sampled_from("abc")),
    st.builds(lambda i: {"type": "tool_result", "tool_use_id": i}, st.sampled_from("abc")),
    st.just({"type": "text", "text": "x"}),
    st.one_of(st.none(), st.integers(), st.text(max_size=3), st.dictionaries(st.text(max_size=3), st.integers())),
)
_message = st.one_of(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", 7]),
                                            "content": st.one_of(st.lists(_block, max_size=4), st.text(max_size=3))}),
                     st.none(), st.integers(), st.text(max_size=3))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_message, max_size=6))
def test_unanswered_tool_use_never_raises_and_is_right(messages) -> None:
    got = unanswered_tool_use(messages)
    uses = [(i, b["id"]) for i, m in enumerate(messages) if isinstance(m, dict) and isinstance(m.get("content"), list)
            for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]

    def answered(i: int, tid: str) -> bool:
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        content = nxt.get("content") if isinstance(nxt, dict) else None
        return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result"
                                                 and b.get("tool_use_id") == tid for b in content)

    first = next(((i, t) for i, t in uses if not answered(i, t)), None)
    if first is None:
        assert got is None
    else:
        assert got is not None and got.startswith(f"tool_use {first[1]} at index {first[0]} is never answered")
