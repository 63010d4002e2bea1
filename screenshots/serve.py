"""Regenerate screenshots/serve.png: the time machine served to a browser (`flux-tui --serve`),
photographed in headless Chromium (Debian's) after Enter opened a session.

    .venv/bin/python screenshots/serve.py
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "core"))

from flux.demo import build_demo_store  # noqa: E402

NOW_MS = 1_785_200_000_000


def main() -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        build_demo_store(Path(tmp) / "demo", now_ms=NOW_MS)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = subprocess.Popen([sys.executable, "-m", "flux_tui", "--serve", "--store", "demo", "--port", str(port)],
                                  cwd=tmp, env=dict(os.environ, HOME=tmp),  # the header shows ~/demo
                                  stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            print(server.stderr.readline().strip())
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=os.environ.get("FLUX_CHROMIUM", "/usr/bin/chromium"), args=[
                    "--no-sandbox", "--headless", "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", "--no-first-run", "--use-gl=swiftshader", "--enable-unsafe-swiftshader"])
                page = browser.new_page(viewport={"width": 1280, "height": 720})
                page.goto(f"http://127.0.0.1:{port}/")
                page.wait_for_timeout(12_000)  # the app starts in its own process
                page.click("#terminal")
                page.keyboard.press("Enter")
                page.wait_for_timeout(6_000)
                page.screenshot(path=str(HERE / "serve.png"))
                browser.close()
        finally:
            os.killpg(server.pid, signal.SIGINT)
            server.wait(timeout=30)
    print(f"wrote {HERE / 'serve.png'}")


if __name__ == "__main__":
    main()
