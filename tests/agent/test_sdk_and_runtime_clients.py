"""The two clients: the runtime's (``flux.agent.Client``) records turns and never travels in time;
the SDK's (``flux.sdk.Client``) is the same client whose sessions fork, resurrect, ask what-if and
finish an interrupted turn before the next one."""

from __future__ import annotations

from pathlib import Path

import pytest

from flux.agent.client import Client as RuntimeClient
from flux.agent.session import Session as RuntimeSession
from flux.errors import FluxError
from flux.sdk import Client, Session
from flux.store.store import StoreWriter

from tests.helpers import HOST_PLAN, cell, tree_digest, write_turn


def _killed_store(tmp_path: Path) -> tuple[Path, str, Path]:
    store = tmp_path / "store"
    with StoreWriter(store) as w:
        killed = w.create_session("mock")
        write_turn(w, killed, "read b", plan=HOST_PLAN.format(path="b.txt"),
                   cells=[cell("read", {"path": "b.txt"}, "beta")], end=None)  # the process died here
    ws = tmp_path / "ws"
    ws.mkdir()
    return store, killed, ws


def _turns_ended(client, session: str) -> int:
    return client.writer.conn.execute(
        "SELECT count(*) FROM events WHERE stream = ? AND kind = 'turn_ended'", (session,)).fetchone()[0]


def test_the_sdk_client_finishes_the_interrupted_turn_before_the_next(tmp_path):
    store, killed, ws = _killed_store(tmp_path)
    heard: list[str] = []
    with Client("mock", store=store, workspace=ws, env_secrets=False,
                on_resurrect=lambda kind, value: heard.append(kind)) as c:
        s = c.open_session(killed)
        assert isinstance(s, Session)
        out = s.send_sync("write a quick note")
        assert out.resurrected is not None and out.resurrected.outcome == "resurrected"
        assert heard == ["plan", "report"]
        assert _turns_ended(c, killed) == 2  # the killed turn, then the new one


def test_the_runtime_client_leaves_an_interrupted_turn_alone(tmp_path):
    store, killed, ws = _killed_store(tmp_path)
    with RuntimeClient("mock", store=store, workspace=ws, env_secrets=False) as c:
        s = c.open_session(killed)
        assert type(s) is RuntimeSession
        assert not hasattr(s, "fork") and not hasattr(s, "what_if") and not hasattr(c, "what_if_over")
        before = tree_digest(store)
        with pytest.raises(FluxError, match="takes the time machine — open the session with flux.sdk.Client"):
            s.send_sync("write a quick note", resurrect=True)
        assert tree_digest(store) == before  # refused before anything was written
        out = s.send_sync("write a quick note")
        assert out.resurrected is None
        assert _turns_ended(c, killed) == 1  # the new turn only: the killed one was left as it was


def test_the_runtime_client_takes_no_time_machine_options(tmp_path):
    with pytest.raises(TypeError, match="auto_resurrect"):
        RuntimeClient("mock", store=tmp_path / "a", workspace=tmp_path, auto_resurrect=True)
    with Client("mock", store=tmp_path / "b", workspace=tmp_path, auto_resurrect=False) as c:
        assert c.auto_resurrect is False
        out = c.session().send_sync("write a quick note")
        assert out.ok and out.resurrected is None
