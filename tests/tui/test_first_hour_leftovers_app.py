"""A new user's first hour, the app's leftovers: each test is built from its reproduction."""

from __future__ import annotations

import subprocess
import sys
from contextlib import contextmanager

import pytest
from click.testing import CliRunner
from hypothesis import assume, given, settings, strategies as st

from screen_text import screen_text, settle
from stores import NOW_MS, build_chain, build_interrupted

pytestmark = pytest.mark.anyio

SIZE = (120, 40)


def _app(store, **kw):
    from flux_tui.app import FluxApp

    kw.setdefault("display_name", "store")
    return FluxApp(store, now_ms=NOW_MS, poll_interval=None, **kw)


# -- the session screen follows the liveness lease --------------------------------------------------

_HOLD_LEASE = """
import sys
from flux.store.lease import SessionLease
lease = SessionLease.acquire(sys.argv[1], sys.argv[2])
print("held", flush=True)
sys.stdin.read()
"""


@contextmanager
def _live_writer(store, session: str):
    """A real second process holding ``session``'s lease, as a writer recording a turn does."""
    child = subprocess.Popen([sys.executable, "-c", _HOLD_LEASE, str(store), session], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        yield child.pid
    finally:
        child.stdin.close()
        child.wait(timeout=10)


async def _open(store, session: str):
    app = _app(store, session=session)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(pilot)
        text = screen_text(app)
        info = " ".join(app.screen.query_one("#turn-info").plain_text.split())
        await pilot.press("R")
        await settle(pilot)
        pushed = type(app.screen).__name__
        toasts = [n.message for n in app._notifications]
    return text, info, pushed, toasts


async def test_a_session_whose_writer_is_alive_shows_as_recording_not_interrupted(tmp_path):
    """Reproduction: the session screen flagged a turn a live writer was recording as interrupted
    (and offered R on it) — the session list and flux show asked the lease, the screen did not."""
    store = build_interrupted(tmp_path / "st")
    with _live_writer(store, "s_2") as pid:
        text, info, pushed, toasts = await _open(store, "s_2")
    header = text.splitlines()[0]
    assert "● recording" in header and "interrupted" not in header
    assert "  1 ● pending" in text.splitlines()[2]  # the turn list's marker
    assert f"● recording — turn 1 is being recorded by pid {pid} — live, not interrupted" in info
    assert pushed == "SessionScreen"  # R does not open the resurrect panel on a live turn
    assert any("s_2 has no interrupted turn — turn 1 is being recorded by pid" in t for t in toasts)


async def test_the_same_session_with_its_writer_gone_is_interrupted(tmp_path):
    """The other side: once the writer's process is gone its lease is free and the turn reads
    interrupted again — the flag follows the lease, it is not a constant."""
    store = build_interrupted(tmp_path / "st")
    with _live_writer(store, "s_2"):
        pass
    text, info, pushed, _ = await _open(store, "s_2")
    assert "⚠ interrupted" in text.splitlines()[0] and "recording" not in text
    assert "⚠ interrupted at statement 1 — R resurrects turn 1" in info
    assert pushed == "ResurrectScreen"


# -- the inspector speaks the user's words, not the engine's type names ----------------------------

_ENGINE_NAMES = ("OffTape::Halt", "Frozen scope", "--off-tape")


def _halted_what_if(tmp_path):
    """The chain store and ``flux what-if s_1 --substitute-at 0='"C"'``: b reads C, a call the
    recording never made, and the what-if halts there (off tape: halt) — recorded as flux words it."""
    from flux.cli import main

    store = build_chain(tmp_path / "c")
    result = CliRunner().invoke(main, ["what-if", "s_1", "--store", str(store), "--substitute-at", '0="C"'])
    assert result.exit_code == 0, result.output
    assert "this Frozen scope is OffTape::Halt" in result.output  # the CLI keeps flux's text
    return store


async def test_an_off_tape_halt_reads_in_user_words_in_the_inspector_and_the_plan(tmp_path):
    """Reproduction: the inspector of a what-if that halted off tape said ``… and this Frozen scope
    is OffTape::Halt — rerun with --off-tape live …`` (the engine's type name and the CLI's flag)."""
    app = _app(_halted_what_if(tmp_path), session="s_2")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tv = app.screen.timeline_view
        shown = {}
        for kind in ("statement", "cell"):
            row = next(i for i, r in enumerate(tv.rows) if r.kind == kind and (r.cell or r.statement) is not None
                       and ("halt" in (r.statement.status if r.statement else "") or (r.cell and r.cell.flagged_error)))
            tv.move_cursor(row)
            await settle(pilot)
            shown[kind] = " ".join(app.screen.query_one("#inspector").plain_text.split())
        plan = screen_text(app)
    for text in (*shown.values(), plan):
        assert not any(name in text for name in _ENGINE_NAMES), text
    words = ("has no recorded cell left to serve it (the recording never made this call), so the run halted here "
             "instead of dispatching it live — a what-if (w) with F3 off tape: live runs it for real")
    assert words in shown["statement"] and words in shown["cell"]


@settings(max_examples=150, deadline=None)
@given(st.text(), st.text(), st.booleans())
def test_user_words_replace_the_engine_names_and_nothing_else(before, after, way_out):
    """Any text around the recorded halt keeps every character; the engine's names go; a text
    without the halt comes back as it was."""
    from flux.cassette.replay import OFF_TAPE_CLI_WAY_OUT, OFF_TAPE_HALT
    from flux_tui.fmt import in_user_words

    assume("OffTape" not in before + after and "Frozen" not in before + after)
    assert in_user_words(before + after) == before + after
    out = in_user_words(before + OFF_TAPE_HALT + (f" — {OFF_TAPE_CLI_WAY_OUT}" if way_out else "") + after)
    assert out.startswith(before) and out.endswith(after)
    assert "OffTape" not in out and "Frozen" not in out and ("--off-tape" in out) == ("--off-tape" in before + after)


# -- the Tests list fits its width; the sessions footer shows the keys that work -------------------


async def _tests_list(scenarios, size):
    from flux_tui.app import FluxApp

    app = FluxApp(tests_dir=scenarios, poll_interval=None)
    async with app.run_test(size=size) as pilot:
        for _ in range(600):
            screen = app.screen
            if len(screen.results) == len(screen.targets) and not screen.running:
                break
            await pilot.pause(0.05)
        await settle(pilot)
        table = app.screen.query_one("#tests-table")
        return screen_text(app).splitlines(), table.virtual_size.width - table.size.width


@pytest.mark.parametrize("width", [80, 120, 200])
async def test_the_tests_list_keeps_plan_snapshot_and_cuts_with_an_ellipsis(scenarios, width):
    """Reproduction: at 120 columns the Tests list's rows ran past the screen's edge, cutting the
    failing checks mid-word with nothing to say the text goes on."""
    lines, overflow = await _tests_list(scenarios, (width, 24))
    rows = {line.split()[0]: line for line in lines[3:6]}
    assert set(rows) == {"broken", "note", "stale-snap"}, lines[:8]
    assert "✓ faithful · ✗ plan snapshot" in rows["stale-snap"]
    assert overflow <= 0  # no row is wider than the table: nothing is cut by the screen's edge
    # the failing rows' last column is either whole or ends in "…" inside the screen
    assert rows["broken"].endswith("…") or width >= 200
    assert "first divergence" in lines[2]


@pytest.mark.parametrize(("row", "shown", "hidden"), [(0, ["D Delete", "y Copy id"], []),
                                                      (1, ["y Copy id"], ["D Delete"])])
async def test_the_sessions_footer_shows_copy_id_and_delete_where_they_act(tmp_path, row, shown, hidden):
    """Reproduction: ``y`` (copy the id) and ``D`` (delete) worked on the sessions list but the
    footer never showed them. D is offered on a row the time machine made (a what-if here)."""
    store = _halted_what_if(tmp_path)  # s_2 (newest, first) is a what-if of s_1, a recording
    app = _app(store)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.screen.table.move_cursor(row)
        await settle(pilot)
        assert app.screen.table.current.id == ("s_2", "s_1")[row]
        footer = screen_text(app).splitlines()[-1]
    for key in shown:
        assert key in footer, footer
    for key in hidden:
        assert key not in footer, footer
