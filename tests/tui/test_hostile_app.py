"""The app survives every store the readers survive: corrupted stores (the corruptors of
``tests/hostile/corrupt.py``) driven through the pilot — the sessions list, Enter on a session,
every tab, every browsing key — and no crash, no worker that raised, no "loading…" left once the
work is done. Plus the two reproductions from the hostile-input round: a ``call_usage`` whose
``usage`` is null and an observation whose ``kind`` is a number."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hostile.corrupt import build_base, make_variant
from tests.tui.screen_text import screen_text, settle
from tests.tui.stores import NOW_MS

from flux.store import Observation, StoreWriter

# keys that browse (none writes), in batches (one settle each): every tab, turns, errors, the
# conversation's scope, copy, zoom, the split, the panels, the inspector, replay
SESSION_KEYS = [("o", "e", "p", "c", "a"), ("right_square_bracket", "left_square_bracket", "n"),
                ("y", "z", "z", "greater_than_sign"), ("3", "2", "down", "enter"), ("r",)]
STALE = ("loading…", "reading turn", "opening the store…", "opening…", "replaying…")


def _app(store: Path, session: str | None = None):
    from flux_tui.app import FluxApp

    return FluxApp(store, now_ms=NOW_MS, display_name="hostile", poll_interval=None, session=session)


async def _drive(store: Path) -> list[str]:
    """Every screen the pilot reached, as text; fails the test on a crash, a worker that raised or a
    screen still "loading" after its work finished."""
    from flux_tui.screens.session import SessionScreen
    from flux_tui.screens.sessions import SessionsScreen

    seen: list[str] = []
    app = _app(store)

    def check(where: str) -> None:
        text = screen_text(app)
        seen.append(text)
        stale = [s for s in STALE if s in text]
        assert not stale, f"{where}: still {stale[0]!r} after every worker finished:\n{text}"

    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        check("sessions")
        sessions = app.screen
        assert isinstance(sessions, SessionsScreen)
        rows = sessions.table.row_count
        for i in sorted({0, rows - 1}) if rows else ():  # the newest session and the oldest
            sessions.table.move_cursor(i)
            await pilot.press("enter")
            await settle(pilot, 2)
            check(f"session row {i}")
            if isinstance(app.screen, SessionScreen):
                for keys in SESSION_KEYS if i == 0 else SESSION_KEYS[-1:]:
                    await pilot.press(*keys)
                    await settle(pilot, 2)
                    check(f"session row {i}, after {' '.join(keys)}")
            while not isinstance(app.screen, SessionsScreen):
                await pilot.press("escape")
                await settle(pilot, 1)
        for keys in [("s", "t"), ("l",), ("escape", "R"), ("escape",)]:
            await pilot.press(*keys)
            await settle(pilot, 2)
            check(f"sessions after {' '.join(keys)}")
    return seen


@pytest.fixture(scope="module")
def base_store(tmp_path_factory) -> Path:
    return build_base(tmp_path_factory.mktemp("hostile-base") / "store")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2 ** 31 - 1))
def test_the_app_survives_corrupted_stores(base_store, tmp_path_factory, seed):
    dst = tmp_path_factory.mktemp("variant") / "store"
    done = make_variant(base_store, dst, seed)
    try:
        asyncio.run(asyncio.wait_for(_drive(dst), timeout=120))
    except AssertionError as e:
        raise AssertionError(f"seed {seed} ({'; '.join(done)}): {e}") from None
    finally:
        shutil.rmtree(dst.parent, ignore_errors=True)


# -- the two reproductions ------------------------------------------------------------------------


def _set_payload(store: Path, kind: str, edit) -> None:
    con = sqlite3.connect(store / "events.db")
    try:
        rows = con.execute("SELECT rowid, payload FROM events WHERE kind = ?", (kind,)).fetchall()
        assert rows, f"no {kind} event to corrupt"
        for rowid, payload in rows:
            obj = json.loads(payload)
            edit(obj["data"])
            con.execute("UPDATE events SET payload = ? WHERE rowid = ?", (json.dumps(obj), rowid))
        con.commit()
    finally:
        con.close()


@pytest.mark.anyio
async def test_a_null_call_usage_opens_instead_of_loading_forever(tmp_path):
    """Reproduction: ``call_usage.usage = null`` left the session screen on "loading…" for good."""
    store = build_base(tmp_path / "store")
    _set_payload(store, "call_usage", lambda data: data.__setitem__("usage", None))
    app = _app(store, session="s_1")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        text = screen_text(app)
        assert "loading…" not in text
        assert "turn 1 of 1" in text and "hello 0" in text  # the turn reads, its answer shown
        assert "calls   1 ·" in text and "usage   none reported" in text  # the call counted, no usage


@pytest.mark.anyio
async def test_an_observation_whose_kind_is_a_number_is_shown(tmp_path):
    """Reproduction: an observation with ``kind: 7`` raised TypeError in the Observations tab."""
    store = build_base(tmp_path / "store")
    with StoreWriter(store) as w:
        turn_id = w.conn.execute("SELECT turn_id FROM events WHERE stream = 's_1' AND kind = 'turn_ended'").fetchone()[0]
        w.append("s_1", Observation(kind="tool_call", phase="turn", data={"n": 1}), turn_id=turn_id)
    _set_payload(store, "observation", lambda data: data.__setitem__("kind", 7))
    app = _app(store, session="s_1")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("o")
        await settle(pilot)
        text = screen_text(app)
        assert "1 observation(s)" in text
        assert "#10 7  turn" in text


@pytest.mark.anyio
async def test_a_screen_worker_that_raises_is_reported_not_left_loading(tmp_path, monkeypatch):
    """A session screen whose read raises something unexpected says so (toast and notice): Textual
    posts a worker's failure to its screen only, which had no handler, so it stayed "loading…"."""
    from tests.tui.stores import build_gallery

    store = build_gallery(tmp_path / "store")

    def boom(*a, **kw):
        raise RuntimeError("the disk said no")

    monkeypatch.setattr("flux_tui.screens.session_load.load_session", boom)
    app = _app(store, session="s_1")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        for _ in range(20):
            await pilot.pause(0.05)
        text = screen_text(app)
        assert "loading…" not in text
        assert "Cannot read this session" in text and "RuntimeError: the disk said no" in text
        assert any("Reading the session failed" in n.message for n in app._notifications)
