"""SVG snapshots of every screen, from small fixed stores with a frozen "now".

Update the baselines only after looking at them: ``pytest tests/tui --snapshot-update``.
"""

from __future__ import annotations

from pathlib import Path


from screen_text import settle
from stores import (
    NOW_MS, build_diff, build_empty, build_errors, build_gallery, build_interrupted, copy_fixture, tamper_plan_input,
)

SIZE = (120, 40)


def _app(store: Path, name: str):
    from flux_tui.app import FluxApp

    return FluxApp(store, now_ms=NOW_MS, display_name=name, poll_interval=None)


def _keys(*keys: str):
    async def run_before(pilot) -> None:
        await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)

    return run_before


class TestSessionsScreen:
    def test_gallery(self, snap_compare, tmp_path):
        app = _app(build_gallery(tmp_path / "gallery"), "gallery")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys())

    def test_filtered(self, snap_compare, tmp_path):
        app = _app(build_gallery(tmp_path / "gallery"), "gallery")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys("slash", *"claude", "enter"))

    def test_fixture(self, snap_compare, tmp_path):
        app = _app(copy_fixture(tmp_path / "fixture"), "coding-agent-note")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys())


class TestSessionScreen:
    def test_fixture_cell(self, snap_compare, tmp_path):
        app = _app(copy_fixture(tmp_path / "fixture"), "coding-agent-note")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys("enter", "j"))

    def test_errors_denied_cell(self, snap_compare, tmp_path):
        app = _app(build_errors(tmp_path / "errors"), "errors")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys("enter", "n", "n"))

    def test_interrupted(self, snap_compare, tmp_path):
        app = _app(build_interrupted(tmp_path / "interrupted"), "interrupted")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys("enter"))

    def test_observations(self, snap_compare, tmp_path):
        app = _app(build_errors(tmp_path / "errors"), "errors")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys("enter", "o"))


class TestHelp:
    def test_help_on_the_timeline(self, snap_compare, tmp_path):
        app = _app(copy_fixture(tmp_path / "fixture"), "coding-agent-note")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys("enter", "f1"))


class TestLineage:
    def test_root_with_children(self, snap_compare, tmp_path):
        app = _app(build_gallery(tmp_path / "gallery"), "gallery")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys("G", "l"))


class TestNotice:
    def test_unopenable(self, snap_compare, tmp_path):
        store = tmp_path / "not-a-store"
        store.mkdir()
        (store / "events.db").write_text("not sqlite\n")
        app = _app(store, "not-a-store")  # the reason names the store by its display name, not the temp path
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys())

    def test_empty(self, snap_compare, tmp_path):
        app = _app(build_empty(tmp_path / "empty"), "empty")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys())


class TestReplay:
    def test_fixture_replayed(self, snap_compare, tmp_path):
        app = _app(copy_fixture(tmp_path / "fixture"), "coding-agent-note")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys("enter", "r"))

    def test_diverged(self, snap_compare, tmp_path):
        app = _app(tamper_plan_input(copy_fixture(tmp_path / "fixture")), "tampered-plan")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys("enter", "r"))


class TestDiff:
    def test_prompt(self, snap_compare, tmp_path):
        app = _app(build_diff(tmp_path / "diff"), "release")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys("d"))

    def test_side_by_side(self, snap_compare, tmp_path):
        app = _app(build_diff(tmp_path / "diff"), "release")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys("d", "enter"))

    def test_payloads(self, snap_compare, tmp_path):
        app = _app(build_diff(tmp_path / "diff"), "release")
        assert snap_compare(app, terminal_size=SIZE, run_before=_keys("d", "enter", "enter"))


# Every screen at the smallest terminal we promise (80×24) and a big one (200×50): the layout
# adapts (stacked inspector, slimmer turns, narrow sessions columns, the essential footer keys).
SCREENS = {
    "sessions": (build_gallery, "gallery", ()),
    "session": (build_errors, "errors", ("enter", "n")),
    "replay": (copy_fixture, "coding-agent-note", ("enter", "r")),
    "diff": (build_diff, "release", ("d", "enter")),
    "payloads": (build_diff, "release", ("d", "enter", "enter")),
    "help": (copy_fixture, "coding-agent-note", ("enter", "f1")),
    "lineage": (build_gallery, "gallery", ("G", "l")),
    "notice": (build_empty, "empty", ()),
}


import pytest  # noqa: E402


@pytest.mark.parametrize("size", [(80, 24), (200, 50)], ids=["80x24", "200x50"])
@pytest.mark.parametrize("screen", list(SCREENS))
def test_every_screen_at_size(snap_compare, tmp_path, screen, size):
    build, name, keys = SCREENS[screen]
    app = _app(build(tmp_path / name), name)
    assert snap_compare(app, terminal_size=size, run_before=_keys(*keys))
