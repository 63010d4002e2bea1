"""Fixtures for the app's pilot and snapshot tests."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from flux.agent.client import Client
from flux.testkit import Scenario
from tests.testkit.conftest import change_tool_input

sys.path.insert(0, str(Path(__file__).parent))

from stores import NOW_MS  # noqa: E402


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch):
    """The input cursor blink races screenshots (harlequin / pixi-browse)."""
    from textual.widgets import Input

    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)


@pytest.fixture(autouse=True)
def _no_flux_env(monkeypatch):
    monkeypatch.delenv("FLUX_PRICES", raising=False)
    monkeypatch.delenv("FLUX_STORE_DIR", raising=False)


@pytest.fixture
def make_app():
    """FluxApp with a frozen now, a fixed display name and (by default) no background polling."""
    from flux_tui.app import FluxApp

    def make(store, *, poll_interval=None, name="store", **kw):
        return FluxApp(store, now_ms=NOW_MS, display_name=name, poll_interval=poll_interval, **kw)

    return make


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def scenarios(tmp_path: Path, monkeypatch) -> Path:
    """``scenarios/`` (relative, under a temp cwd): ``note`` recorded clean, ``broken`` whose model
    asks another path (the re-drive leaves the recorded world), ``stale-snap`` whose plan snapshot
    names an old file."""
    monkeypatch.chdir(tmp_path)
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "FLUX_GOLDEN"):
        monkeypatch.delenv(k, raising=False)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("# x\n")
    root = Path("scenarios")  # relative: the top bar shows no temp path
    with Client("mock", workspace=ws, auto_approve=True, env_secrets=False) as c:
        Scenario.record(c, "write a quick note", root / "note").close()
    shutil.copytree(root / "note", root / "broken")
    change_tool_input(root / "broken" / "model.jsonl", 2, path="other.txt")
    shutil.copytree(root / "note", root / "stale-snap")
    snap = root / "stale-snap" / "plan.flux.snap"
    snap.write_text(snap.read_text().replace("flux-mock.txt", "old-name.txt"))
    return root


@pytest.fixture
def fixed_workspace(monkeypatch, tmp_path):
    """Snapshots show the workspace: one under a home directory of the test's own, which the
    dialogs draw as ``~/flux-tui-snapshot-ws`` whatever TMPDIR is — and nothing shared with
    another process that might clean the temp directory."""
    home = tmp_path / "home"
    ws = home / "flux-tui-snapshot-ws"
    ws.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    from flux_tui.fmt import display_path

    monkeypatch.setattr("flux_tui.writes.default_workspace", lambda store_dir=None: display_path(ws))
    return ws
