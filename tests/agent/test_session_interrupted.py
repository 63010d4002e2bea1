"""``Session.interrupted()`` (seed 000: ``if let Some(turn) = session.interrupted()? …``): the
interrupted turn, or ``None`` — and it only reads."""

from __future__ import annotations

from pathlib import Path

from flux.sdk import Client
from flux.store.store import StoreWriter

from tests.helpers import HOST_PLAN, cell, tree_digest, write_turn


def _store(tmp_path: Path) -> tuple[Path, str, str]:
    store = tmp_path / "store"
    with StoreWriter(store) as w:
        done = w.create_session("mock")
        write_turn(w, done, "read a", plan=HOST_PLAN.format(path="a.txt"),
                   cells=[cell("read", {"path": "a.txt"}, "alpha")])
        killed = w.create_session("mock")
        write_turn(w, killed, "read b", plan=HOST_PLAN.format(path="b.txt"),
                   cells=[cell("read", {"path": "b.txt"}, "beta")], end=None)  # the process died here
    return store, done, killed


def test_interrupted_names_the_killed_turn_and_none_otherwise(tmp_path):
    store, done, killed = _store(tmp_path)
    (tmp_path / "ws").mkdir()
    c = Client("mock", store=store, workspace=tmp_path / "ws", env_secrets=False, auto_resurrect=False)
    try:
        before = tree_digest(store)
        turn = c.open_session(killed).interrupted()
        assert turn is not None and turn.turn_number == 1 and turn.user_input == "read b"
        assert turn.turn_id > 0 and "read" in turn.plan_source
        assert c.open_session(done).interrupted() is None
        assert tree_digest(store) == before  # asking writes nothing
        report = c.open_session(killed).resurrect()
        assert report is not None
        assert c.open_session(killed).interrupted() is None  # finished: nothing left to resurrect
    finally:
        c.close()
