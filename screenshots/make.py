"""Regenerate the app screenshots (SVG) that the README and docs show.

    .venv/bin/python screenshots/make.py            # all of them, into screenshots/
    .venv/bin/python screenshots/make.py session    # only the named ones

Each shot runs the real app headless (120×40) on a freshly built demo store with a fixed "now" and
a workspace under a home directory of the shots' own (drawn ``~/flux-tui-demo-workspace`` whatever
TMPDIR is), so the output only changes when the app or the demo store changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import os
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for sub in ("core", "tui"):
    sys.path.insert(0, str(ROOT / sub))

from textual.widgets import Input  # noqa: E402
from textual.worker import WorkerCancelled, WorkerFailed  # noqa: E402

NOW_MS = 1_785_200_000_000  # the demo store's "now" and the app's frozen clock
SIZE = (120, 40)


async def settle(pilot, rounds: int = 3) -> None:
    for _ in range(rounds):
        await pilot.pause()
        try:
            await pilot.app.workers.wait_for_complete()
        except (WorkerCancelled, WorkerFailed):
            pass
        await pilot.pause()


async def keys(pilot, *names: str) -> None:
    for name in names:
        await pilot.press(name)
        await settle(pilot)


async def open_session(pilot, session_id: str, *then: str) -> None:
    pilot.app.open_session(session_id)
    await settle(pilot)
    await keys(pilot, *then)


def _first_error_session(app) -> str:
    """The demo session to show off: error cells first, then the most cells."""
    from flux.model.session import load_session

    best, score = "s_1", (-1, -1)
    for row in app.reader.list_sessions():
        d = load_session(app.reader, row.id)
        s = (min(1, sum(1 for c in d.cells if c.flagged_error)), len(d.cells))
        if s > score:
            best, score = row.id, s
    return best


def _first(app, predicate) -> str | None:
    screen = app.screen
    for item in screen.table.rows:
        if item.summary is not None and predicate(item):
            return item.id
    return None


async def shot_sessions(pilot) -> None:
    pass


async def shot_filter(pilot) -> None:
    await keys(pilot, "slash", *"tokenizer")
    await pilot.pause(0.5)
    await settle(pilot)
    await keys(pilot, "enter")


async def shot_session(pilot) -> None:
    sid = _first_error_session(pilot.app)
    await open_session(pilot, sid, "n")


async def shot_interrupted(pilot) -> None:
    sid = _first(pilot.app, lambda it: it.summary.interrupted) or "s_1"
    await open_session(pilot, sid, "j", "j")


async def shot_observations(pilot) -> None:
    await open_session(pilot, "s_1", "o")


async def shot_lineage(pilot) -> None:
    source = _first(pilot.app, lambda it: it.summary.lineage is not None)
    src = pilot.app.screen.table.source
    sid = next((it.summary.lineage.source for it in src if it.summary and it.summary.lineage), "s_1") if source else "s_1"
    await open_session(pilot, sid, "l")


async def shot_help(pilot) -> None:
    await open_session(pilot, "s_1", "f1")


async def shot_palette(pilot) -> None:
    await open_session(pilot, "s_1", "ctrl+p")
    for name in "error":
        await pilot.press(name)
    await pilot.pause(0.5)
    await settle(pilot)


# The demo store is deterministic given NOW_MS: s_5 is the authored release flow (parallel + saga,
# faithful on replay), s_9 the same flow killed mid-run with a newer VERSION.
RELEASE, RELEASE_KILLED = "s_5", "s_9"


async def shot_replay(pilot) -> None:
    await open_session(pilot, RELEASE, "r")


async def shot_diff(pilot) -> None:
    await open_session(pilot, RELEASE_KILLED, "d")
    for name in RELEASE:
        await pilot.press(name)
    await settle(pilot)
    await keys(pilot, "enter")


async def shot_narrow(pilot) -> None:
    """The session screen at 80×24: inspector above the tabs, slim turns column, essential keys."""
    sid = _first_error_session(pilot.app)
    await open_session(pilot, sid, "n")


def inject_fork(store: Path) -> str:
    """`flux fork s_1 --at 1 --inject '"injected"'` (offline, before the app opens the store)."""
    from flux.agent.client import Client
    from flux.timemachine import fork_session

    ws = store.parent / "fork-diff-ws"
    ws.mkdir(exist_ok=True)
    c = Client("mock", store=store, workspace=ws, env_secrets=False)
    try:
        return fork_session(c, "s_1", 1, inject="injected").session
    finally:
        c.close()


async def shot_fork_diff(pilot) -> None:
    """`d` on an inject fork of the adaptive s_1: the child lacks the injected read's cell; the
    rows after it stay paired with the same calls (aligned as a sequence)."""
    child = max((row.id for row in pilot.app.reader.list_sessions()), key=lambda sid: int(sid[2:]))
    await open_session(pilot, child, "d", "enter")


SIZES = {"narrow": (80, 24)}  # shots not at SIZE


WORKSPACE_NAME = "flux-tui-demo-workspace"


@contextlib.contextmanager
def fixed_home(base: Path):
    """While a shot runs: ``HOME`` is ``base/home`` and the write dialogs' default workspace is
    ``~/flux-tui-demo-workspace`` under it — the same picture on every machine and under any TMPDIR."""
    import flux_tui.writes
    from flux_tui.fmt import display_path

    home = base / "home"
    ws = home / WORKSPACE_NAME
    ws.mkdir(parents=True, exist_ok=True)
    saved_home, saved_default = os.environ.get("HOME"), flux_tui.writes.default_workspace
    os.environ["HOME"] = str(home)
    flux_tui.writes.default_workspace = lambda store_dir=None: display_path(ws)
    try:
        yield ws
    finally:
        flux_tui.writes.default_workspace = saved_default
        if saved_home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = saved_home


@contextlib.contextmanager
def steady_cursors():
    """While a shot runs, the inputs' and editors' cursors do not blink: a shot taken mid-blink
    would differ from the same shot taken a moment later."""
    from textual.widgets import Input, TextArea

    saved = Input._toggle_cursor, TextArea._toggle_cursor_blink_visible
    Input._toggle_cursor = lambda self: None
    TextArea._toggle_cursor_blink_visible = lambda self: None
    try:
        yield
    finally:
        Input._toggle_cursor, TextArea._toggle_cursor_blink_visible = saved


async def until_checked(pilot) -> None:
    for _ in range(200):
        await settle(pilot)
        screen = pilot.app.screen
        if getattr(screen, "position", "") is not None and (screen.preview is not None or screen.problem is not None):
            return
        await pilot.pause(0.05)


async def shot_fork(pilot) -> None:
    await open_session(pilot, RELEASE, "f")
    await until_checked(pilot)


async def shot_gate(pilot) -> None:
    await shot_fork(pilot)
    await keys(pilot, "ctrl+r")


async def shot_resurrect(pilot) -> None:
    await open_session(pilot, RELEASE_KILLED, "R")


async def shot_whatif(pilot) -> None:
    """What if s_1's failing test run (cell #2) had passed: the dialog, checked."""
    from flux_tui.widgets.editors import JsonTextArea

    await open_session(pilot, "s_1")
    tv = pilot.app.screen.timeline_view
    tv.move_cursor(tv.find_row(("cell", 2)))
    await keys(pilot, "w")
    await until_whatif(pilot)
    pilot.app.screen.query_one("#whatif-value", JsonTextArea).load_text('"..\\n2 passed in 0.03s\\n[exit 0]"')
    await until_whatif(pilot)


async def shot_whatif_diff(pilot) -> None:
    await shot_whatif(pilot)
    await keys(pilot, "ctrl+r")


async def shot_whatif_replan(pilot) -> None:
    """The same what-if, re-planned: this turn only (F4), a live model turn (F5) with mock."""
    await shot_whatif(pilot)
    await keys(pilot, "f4", "f5")
    pilot.app.screen.query_one("#whatif-model", Input).value = "mock"
    await until_whatif(pilot)


async def until_whatif(pilot) -> None:
    for _ in range(200):
        await settle(pilot)
        s = pilot.app.screen
        if getattr(s, "_ready", False) and (s.preview is not None or s.problem is not None):
            return
        await pilot.pause(0.05)


SHOTS = {
    "sessions": shot_sessions,
    "filter": shot_filter,
    "session": shot_session,
    "interrupted": shot_interrupted,
    "observations": shot_observations,
    "lineage": shot_lineage,
    "help": shot_help,
    "palette": shot_palette,
    "notice": None,  # an unopenable store
    "replay": shot_replay,
    "diff": shot_diff,
    "narrow": shot_narrow,
    "fork": shot_fork,
    "gate": shot_gate,
    "resurrect": shot_resurrect,
    "whatif": shot_whatif,
    "whatif-diff": shot_whatif_diff,
    "whatif-replan": shot_whatif_replan,
    "fork-diff": shot_fork_diff,  # writes a fork: keep it last
}


async def take(name: str, store: Path, out: Path) -> Path:
    from flux_tui.app import FluxApp

    if name == "notice":
        bad = store.parent / "not-a-store"
        bad.mkdir(exist_ok=True)
        (bad / "events.db").write_text("this is not a database\n")
        app = FluxApp(bad, now_ms=NOW_MS, display_name="~/not-a-store", poll_interval=None)
        run = shot_sessions
    else:
        if name == "fork-diff":
            inject_fork(store)
        app = FluxApp(store, now_ms=NOW_MS, display_name="~/.cache/flux-tui/demo", poll_interval=None)
        run = SHOTS[name]
    with fixed_home(store.parent), steady_cursors():
        async with app.run_test(size=SIZES.get(name, SIZE)) as pilot:
            await settle(pilot)
            await run(pilot)
            await settle(pilot)
            svg = app.export_screenshot(title=f"flux-tui · {name}")
    path = out / f"{name}.svg"
    path.write_text(pin_leading_spaces(svg))
    return path


_SPAN = re.compile(r'(<text [^>]*?x=")([0-9.]+)("[^>]*?textLength=")([0-9.]+)("[^>]*>)((?:&#160;)+)([^<]*</text>)')


def pin_leading_spaces(svg: str) -> str:
    """Move a text span's leading spaces into its x position.

    Textual writes a span that starts with spaces as ``&#160;&#160;word`` at the span's first
    cell; some SVG renderers (librsvg, some browsers) drop that leading run, so two styled spans
    read run together (``sourceanthropic``). Starting the span at its first visible cell shows
    the same picture everywhere.
    """

    def fix(m: "re.Match[str]") -> str:
        lead = m.group(6).count("&#160;")
        rest = m.group(7)[: -len("</text>")]
        cells = lead + len(html.unescape(rest))
        width = float(m.group(4)) / cells if cells else 0.0
        x = float(m.group(2)) + lead * width
        length = float(m.group(4)) - lead * width
        return f"{m.group(1)}{x:g}{m.group(3)}{length:g}{m.group(5)}{m.group(7)}"

    return _SPAN.sub(fix, svg)


def main(argv: list[str]) -> int:
    from flux.demo import build_demo_store

    names = argv or list(SHOTS)
    unknown = [n for n in names if n not in SHOTS]
    if unknown:
        print(f"unknown shot(s): {', '.join(unknown)} — choose from {', '.join(SHOTS)}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="flux-tui-shots-") as tmp:
        store = build_demo_store(Path(tmp) / "demo", now_ms=NOW_MS)
        for name in names:
            path = asyncio.run(take(name, store, HERE))
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
