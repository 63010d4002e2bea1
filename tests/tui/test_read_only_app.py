"""``flux-tui --read-only`` (and the app served to a browser without ``--allow-write``): every
write the app can make — fork, resurrect, delete, accepting a golden — is refused in one line and
leaves the store's bytes as they were; the same actions in a writable app do write."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.store import StoreWriter
from flux_tui.app import READ_ONLY_FLAG, app_args
from screen_text import screen_text, settle
from tests.helpers import cell, tree_digest, write_turn

pytestmark = pytest.mark.anyio

SIZE = (120, 40)
PLAN = 'flow\n  a = read({"path":"A"})\n  b = read({"path":"B"})\n'


def _store(path: Path) -> Path:
    """s_1 a recording; s_2 a fork of it (deletable)."""
    with StoreWriter(path) as w:
        s1 = w.create_session("mock")
        write_turn(w, s1, "go", plan=PLAN, cells=[cell("read", {"path": "A"}, "a"), cell("read", {"path": "B"}, "b")])
        s2 = w.create_session("mock", context={"agent_id": f"fork:{s1}@1", "correlation_id": s1})
        write_turn(w, s2, "<fork>", plan=PLAN, cells=[cell("read", {"path": "A"}, "a"), cell("read", {"path": "B"}, "B!")])
    return path


async def _fork_inject(app, pilot) -> str:
    """Open s_1, fork it offline with the recorded value, return the dialog's text afterwards."""
    import time

    from flux_tui.screens.fork import ForkScreen

    app.open_session("s_1")
    await settle(pilot)
    await pilot.press("f")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        await settle(pilot)
        screen = app.screen
        if isinstance(screen, ForkScreen) and (screen.preview is not None or screen.problem is not None):
            break
        await pilot.pause(0.05)
    await pilot.press("ctrl+r")
    for _ in range(100):
        await settle(pilot)
        if not isinstance(app.screen, ForkScreen) or app.screen.running is None:
            break
        await pilot.pause(0.05)
    return screen_text(app)


@pytest.mark.parametrize("read_only", [True, False])
async def test_fork_is_refused_read_only_and_writes_when_writable(make_app, tmp_path, monkeypatch, read_only):
    monkeypatch.chdir(tmp_path)
    store = _store(tmp_path / "st")
    before = tree_digest(store)
    app = make_app(store, read_only=READ_ONLY_FLAG if read_only else None)
    async with app.run_test(size=SIZE) as pilot:
        text = await _fork_inject(app, pilot)
    if read_only:
        assert "not forked: read-only: started with --read-only" in text, text
        assert tree_digest(store) == before
    else:
        assert "not forked" not in text and tree_digest(store) != before


@pytest.mark.parametrize("read_only", [True, False])
async def test_delete_is_refused_read_only(make_app, tmp_path, read_only):
    from flux_tui.screens.delete import DeleteScreen

    store = _store(tmp_path / "st")
    before = tree_digest(store)
    app = make_app(store, read_only=READ_ONLY_FLAG if read_only else None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.table
        while table.current is not None and table.current.id != "s_2":
            await pilot.press("down")
            await settle(pilot)
        await pilot.press("D")
        await settle(pilot)
        assert isinstance(app.screen, DeleteScreen)
        await pilot.press("y")
        for _ in range(100):
            await settle(pilot)
            if "deleting" not in screen_text(app):
                break
            await pilot.pause(0.05)
        text = screen_text(app)
    if read_only:
        assert "nothing was deleted: read-only" in text, text
        assert tree_digest(store) == before
    else:
        assert tree_digest(store) != before


async def test_the_read_only_app_says_so_when_it_opens(make_app, tmp_path):
    store = _store(tmp_path / "st")
    app = make_app(store, read_only=READ_ONLY_FLAG)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert any("read-only: started with --read-only" in n.message for n in app._notifications)
    app = make_app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert not any("read-only" in n.message for n in app._notifications)


def test_served_app_arguments_are_absolute_and_read_only(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = app_args(Path("st"), None, "s_1", None, None, None, read_only=True)
    assert args == ["--store", str(tmp_path / "st"), "--session", "s_1", "--read-only"]
    assert "--read-only" not in app_args(Path("st"), None, None, None, None, None, read_only=False)


def test_serve_without_the_extra_names_it(tmp_path, monkeypatch):
    import builtins

    from flux_tui.app import main

    store = _store(tmp_path / "st")
    real = builtins.__import__

    def no_textual_serve(name, *a, **kw):
        if name.startswith("textual_serve"):
            raise ImportError(name)
        return real(name, *a, **kw)
    monkeypatch.setattr(builtins, "__import__", no_textual_serve)
    res = CliRunner().invoke(main, ["--serve", "--store", str(store)])
    assert res.exit_code == 1
    assert res.output.strip() == "error: flux-tui --serve needs the serve extra: pip install 'flux-tui[serve]'"


@pytest.fixture
def stale_snapshot(tmp_path: Path, monkeypatch) -> Path:
    """One recorded scenario whose plan snapshot is stale: `u` on the Tests screen would rewrite it."""
    from flux.agent.client import Client
    from flux.testkit import Scenario

    monkeypatch.chdir(tmp_path)
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "FLUX_GOLDEN"):
        monkeypatch.delenv(k, raising=False)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("# x\n")
    with Client("mock", workspace=ws, auto_approve=True, env_secrets=False) as c:
        Scenario.record(c, "write a quick note", tmp_path / "scenarios" / "note").close()
    snap = tmp_path / "scenarios" / "note" / "plan.flux.snap"
    snap.write_text(snap.read_text().replace("flux-mock.txt", "old-name.txt"))
    return tmp_path / "scenarios"


@pytest.mark.parametrize("read_only", [True, False])
async def test_accepting_a_golden_is_refused_read_only(make_app, stale_snapshot, read_only):
    snap = stale_snapshot / "note" / "plan.flux.snap"
    before = snap.read_bytes()
    app = make_app(None, tests_dir=stale_snapshot, read_only=READ_ONLY_FLAG if read_only else None)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        for _ in range(500):
            await pilot.pause(0.02)
            screen = app.screen
            if getattr(screen, "targets", None) and len(screen.results) == len(screen.targets) and not screen.running:
                break
        await pilot.press("u")
        await settle(pilot)
        if not read_only:
            await pilot.press("y", "enter")
            for _ in range(500):
                await pilot.pause(0.02)
                if snap.read_bytes() != before and not app.screen.running:
                    break
    notes = [n.message for n in app._notifications]
    if read_only:
        assert any(n.startswith("not accepted — read-only") for n in notes), notes
        assert snap.read_bytes() == before
    else:
        assert snap.read_bytes() != before


@pytest.mark.parametrize("read_only", [True, False])
async def test_saving_a_case_is_refused_read_only(make_app, tmp_path, monkeypatch, read_only):
    monkeypatch.setenv("FLUX_FIXTURE_STORE", str(tmp_path / "cases"))
    store = _store(tmp_path / "st")
    app = make_app(store, session="s_1", read_only=READ_ONLY_FLAG if read_only else None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("C")
        for _ in range(200):
            await pilot.pause(0.05)
            if any("case" in n.message for n in app._notifications):
                break
    notes = [n.message for n in app._notifications if "case" in n.message]
    if read_only:
        assert notes and notes[0].startswith("case not saved — read-only"), notes
        assert not (tmp_path / "cases").exists()
    else:
        assert notes and "read-only" not in notes[0]
