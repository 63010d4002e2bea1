"""``flux-tui --serve`` in a real browser: headless Chromium (Debian's) driven by Playwright opens
the served page with every request to another host refused. The terminal is drawn by xterm.js
on a canvas, so what the app shows is read from the bytes the page's websocket receives: the
sessions list appears, Enter opens a session, the served app says it is read-only, and the store's
bytes are unchanged when the browser is gone."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pages.browsers import launch, need_browser
from tests.helpers import tree_digest
from tests.servers import free_port

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def _serve(store: Path, *extra: str) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "flux_tui", "--serve", "--store", str(store),
                             "--port", str(port), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    line = proc.stderr.readline()  # the server says where it serves before it accepts
    assert "serving the time machine" in line, line + proc.stderr.read()
    return proc, port


def _stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


class _Screen:
    """The text the served app has drawn so far (escape sequences removed)."""

    def __init__(self) -> None:
        self.raw: list[bytes] = []

    def frame(self, payload) -> None:
        self.raw.append(payload if isinstance(payload, bytes) else payload.encode("utf-8", "replace"))

    @property
    def text(self) -> str:
        return ANSI.sub("", b"".join(self.raw).decode("utf-8", "replace"))

    def wait_for(self, page, *needles: str, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if all(n in self.text for n in needles):
                return
            page.wait_for_timeout(200)
        missing = [n for n in needles if n not in self.text]
        raise AssertionError(f"the served app never showed {missing}; it showed: {self.text[-1500:]!r}")


@pytest.fixture
def served(demo: Path):
    need_browser()
    before = tree_digest(demo)
    proc, port = _serve(demo)
    try:
        yield demo, port
    finally:
        _stop(proc)
    assert tree_digest(demo) == before, "browsing in the browser changed the store"


def test_served_app_lists_sessions_opens_one_and_is_read_only(served):
    from playwright.sync_api import sync_playwright

    store, port = served
    origin = f"http://127.0.0.1:{port}"
    screen, elsewhere = _Screen(), []
    with sync_playwright() as p:
        browser = launch(p)
        ctx = browser.new_context(viewport={"width": 1400, "height": 900})

        def route(r):
            if r.request.url.startswith(origin):
                r.continue_()
            else:
                elsewhere.append(r.request.url)
                r.abort()
        ctx.route("**/*", route)
        page = ctx.new_page()
        page.on("websocket", lambda ws: ws.on("framereceived", screen.frame))
        page.goto(origin + "/")
        screen.wait_for(page, "s_1", "read-only", "served without --allow-write")
        page.click("#terminal")
        page.keyboard.press("Home")
        page.keyboard.press("Enter")
        before = len(screen.text)
        screen.wait_for(page, "turn 1")
        assert "turn 1" in screen.text[before:], "Enter did not open a session"
        browser.close()
    assert elsewhere == [], f"the served page asked other hosts for {elsewhere}"


def test_serve_refuses_a_taken_port_and_a_missing_store_in_one_line(demo: Path, tmp_path: Path):
    proc, port = _serve(demo)
    try:
        taken = subprocess.run([sys.executable, "-m", "flux_tui", "--serve", "--store", str(demo), "--port", str(port)],
                               capture_output=True, text=True, timeout=60)
    finally:
        _stop(proc)
    assert taken.returncode == 1 and taken.stderr.startswith("error: cannot listen on 127.0.0.1:"), taken.stderr
    assert len(taken.stderr.strip().splitlines()) == 1
    missing = subprocess.run([sys.executable, "-m", "flux_tui", "--serve", "--store", str(tmp_path / "nope")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and missing.stderr.startswith("error: ") and "does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr + taken.stderr
    stray = subprocess.run([sys.executable, "-m", "flux_tui", "--store", str(demo), "--allow-write"],
                           capture_output=True, text=True, timeout=60)
    assert stray.returncode == 1 and "--allow-write go(es) with --serve" in stray.stderr
