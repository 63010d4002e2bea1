"""The app on a Postgres store: the sessions list shows a session another process is recording
appear and grow, with no refresh key (the app polls the store's newest ``global_seq``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flux.store import Message, StoreWriter
from flux.store.store import store_location
from screen_text import screen_text, settle

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio

_RECORDER = """
import sys
from flux.store import Message, StoreWriter
loc, n = sys.argv[1], int(sys.argv[2])
with StoreWriter(loc) as w:
    sid = w.create_session("elsewhere-model") if n == 0 else "s_2"
    for i in range(max(n, 1)):
        w.append(sid, Message.text("user", f"message {i}"))
"""


def _record_elsewhere(loc: Path, n: int) -> None:
    subprocess.run([sys.executable, "-c", _RECORDER, str(loc), str(n)], cwd=REPO, check=True, timeout=120,
                   env={**os.environ})


async def _wait_for(pilot, predicate, tries: int = 100) -> None:
    for _ in range(tries):
        await pilot.pause(0.1)
        if predicate():
            return
    await settle(pilot)


async def test_a_session_recorded_elsewhere_appears_and_grows(make_app, pg_url):
    loc = store_location(pg_url)
    with StoreWriter(loc) as w:
        w.append(w.create_session("mock"), Message.text("user", "hello"))
    app = make_app(loc, poll_interval=0.1)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        table = app.screen.table
        assert [it.id for it in table.rows] == ["s_1"]
        _record_elsewhere(loc, 0)  # another process starts s_2
        await _wait_for(pilot, lambda: table.row_count == 2)
        await settle(pilot)
        assert [it.id for it in table.rows] == ["s_2", "s_1"]
        assert "elsewhere-model" in screen_text(app)
        _record_elsewhere(loc, 3)  # … and records into it
        await _wait_for(pilot, lambda: app.summaries.get("s_2") is not None and app.summaries["s_2"].row.msg_count == 4)
        await settle(pilot)
        assert app.summaries["s_2"].row.msg_count == 4
        assert table.current.id == "s_1"  # the cursor stayed on its session
