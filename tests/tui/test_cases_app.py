"""Saved cases in the app, driven by a pilot: the Cases screen (``--cases URL`` and the palette's
"Cases") lists bundles with kind, target, fork point, size and capture; Enter shows the manifest
and history; ``r`` runs a case replay-only and shows each call's rung; ``C`` on a statement saves
a case there and shows (and copies) its hash."""

from __future__ import annotations

import json

import pytest
from screen_text import screen_text, settle, table_rows, text_shown

from flux.cases import Bundle, FileStore, capture_case

from tests.cases.conftest import record_scenario

pytestmark = pytest.mark.anyio
SIZE = (150, 45)


@pytest.fixture
def sc(tmp_path):
    """A real recording (flux record through the scripted provider), made outside the event loop."""
    return record_scenario(tmp_path)


def _broken(b: Bundle) -> Bundle:
    """The same case with a recorded call the run will never make."""
    obj = json.loads(b.data)
    obj["results"].append({"kind": "op", "key": "7", "op": "read", "fingerprint": "1" * 64, "truncated": False,
                           "result": {"content": "x", "view": None}})
    return Bundle.build(**obj)


async def test_cases_screen_lists_opens_and_runs(make_app, tmp_path, sc):
    from flux_tui.screens.cases import CaseDetailScreen, CaseRunScreen, CasesScreen

    store = FileStore(tmp_path / "cases")
    good = capture_case(sc, "s_1", at=1)
    broken = _broken(capture_case(sc, "s_1", at=2))
    store.put(good)
    store.put(broken)
    app = make_app(sc, cases_url=str(tmp_path / "cases"))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, CasesScreen)
        # The head is written in the same call that adds the rows: once it says two, both are in.
        text = await text_shown(pilot, "2 bundle(s)")
        assert "2 bundle(s)" in text, text
        rows = "\n".join(table_rows(app, "#cases-table"))
        for b in (good, broken):
            assert b.hash[:16] in rows, rows
        assert "agent" in rows and "@1 · seq" in rows and "@2 · seq" in rows and "complete" in rows and "KiB" in rows
        # Enter on the good case: its manifest and history.
        table = app.screen.query_one("#cases-table")
        table.move_cursor(row=app.screen.hashes.index(good.hash))
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, CaseDetailScreen)
        text = screen_text(app)
        assert f"case {good.hash}" in text and "manifest" in text and '"fork_after_seq"' in text
        # r: the replay-only run, call by call.
        await pilot.press("r")
        await settle(pilot)
        assert isinstance(app.screen, CaseRunScreen)
        text = await text_shown(pilot, "complete", "2 prefix call(s) verified", "reused 3")
        assert "complete" in text and "2 prefix call(s) verified" in text and "reused 3" in text, text
        rows = "\n".join(table_rows(app, "#run-table"))
        assert "model:2" in rows and "op:1" in rows and "reused" in rows, rows
        assert app.screen.outcome.complete
        # The broken case runs incomplete and says what was never made.
        await pilot.press("escape")
        await pilot.press("escape")
        await settle(pilot)
        table = app.screen.query_one("#cases-table")
        table.move_cursor(row=app.screen.hashes.index(broken.hash))
        await pilot.press("r")
        await settle(pilot)
        text = await text_shown(pilot, "incomplete", "never made: op:7")
        assert "incomplete" in text and "never made: op:7" in text, text
        assert not app.screen.outcome.complete


async def test_no_fixture_store_is_said_on_the_screen(make_app, tmp_path, monkeypatch, sc):
    monkeypatch.delenv("FLUX_FIXTURE_STORE", raising=False)
    monkeypatch.delenv("FLUX_POSTGRES_DSN", raising=False)
    app = make_app(sc)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+k")  # the palette's "Cases"
        await settle(pilot)
        assert "no_fixture_store" in screen_text(app)


async def test_C_on_a_statement_saves_a_case_there(make_app, tmp_path, monkeypatch, sc):
    cases = tmp_path / "team-cases"
    monkeypatch.setenv("FLUX_FIXTURE_STORE", str(cases))
    copied: list[str] = []
    app = make_app(sc)
    monkeypatch.setattr(app, "copy_to_clipboard", copied.append)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.open_session("s_1")
        await settle(pilot)
        await pilot.press("C")
        await settle(pilot)
        saved = FileStore(cases).list()
        assert len(saved) == 1 and copied == [saved[0].hash]
        assert saved[0].summary["fork_at"] == 0
        assert any(saved[0].hash in str(n.message) for n in app._notifications)
        # Again on the same statement: the same hash, one copy.
        await pilot.press("C")
        await settle(pilot)
        assert len(FileStore(cases).list()) == 1 and copied == [saved[0].hash] * 2
        assert any("already saved" in str(n.message) for n in app._notifications)


def _synthetic(n: int, complete: bool = True) -> Bundle:
    """A small fixed bundle (no temp paths or clocks in it): the snapshot's hashes never move."""
    manifest = {
        "format": 1, "kind": "agent" if n % 2 else "flow", "target_name": f"triage-{n}", "code_version": "0" * 16,
        "product_version": "flux-tui test", "recorded_by": "test",
        "registration": {"tools": [{"name": "read", "effect": "read", "writes": False}]},
        "recorded_config": {"model": "scripted"}, "source": {"store": "/cases", "session": "s_1", "turn": 1},
        "fork": {"at": n, "fork_after_seq": 10 + n, "prefix_model_calls": 0},
        "capture": {"complete": complete, "missing": [] if complete else ["model call 2"], "truncated": []},
        "inputs": {"input": f"task {n}", "conversation": [], "plans": []},
    }
    results = [{"kind": "op", "key": str(i), "op": "read", "fingerprint": f"{i:064x}", "truncated": False,
                "result": {"content": "x" * (200 * n), "view": None}} for i in range(n + 1)]
    return Bundle.build(manifest, [], results)


def test_cases_screen_snapshot(snap_compare, tmp_path, monkeypatch):
    from flux_tui.app import FluxApp

    from stores import NOW_MS

    monkeypatch.chdir(tmp_path)
    store = FileStore(tmp_path / "cases")
    for n in range(3):
        store.put(_synthetic(n))
    app = FluxApp(tmp_path / "nostore", now_ms=NOW_MS, display_name="store", poll_interval=None, cases_url="cases")

    async def run_before(pilot) -> None:
        await settle(pilot)

    assert snap_compare(app, terminal_size=(120, 30), run_before=run_before)
