"""Regenerate the review-page screenshots (PNG) that the README shows: a run, a diff, a test report.

    .venv/bin/python screenshots/pages.py

Builds the demo store with a fixed "now", writes s_1's family pages and the s_1 ↔ s_6 diff page
with the product's own commands, and photographs them in headless Chromium (Debian's).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "core"))

from click.testing import CliRunner  # noqa: E402

from flux.cli import main as flux  # noqa: E402
from flux.demo import build_demo_store  # noqa: E402

NOW_MS = 1_785_200_000_000
SHOTS = [("run.png", "s_1.html", "", "light"), ("run-dark.png", "s_6.html", "#t1-s2", "dark"),
         ("diff-page.png", "diff.html", "", "light"), ("test-report.png", "report.html", "", "light")]


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = build_demo_store(Path(tmp) / "store", now_ms=NOW_MS)
        out = Path(tmp) / "pages"
        runner = CliRunner()
        for args in (["export", "s_1", "--family", "-o", str(out)],
                     ["diff", "s_1", "s_6", "-o", str(out / "diff.html")]):
            res = runner.invoke(flux, args + ["--store", str(store)])
            assert res.exit_code in (0, 1), res.output
        scenarios = Path(tmp) / "scenarios"
        for name in ("write-note", "summarize"):  # two scenarios, one whose plan snapshot drifted
            res = runner.invoke(flux, ["record", name, "write a quick note", "-m", "mock", "--dir", str(scenarios),
                                       "--yes", "--workspace", tmp])
            assert res.exit_code == 0, res.output
        snap = scenarios / "summarize" / "plan.flux.snap"
        snap.write_text(snap.read_text(encoding="utf-8").replace("flux-mock.txt", "notes.txt"), encoding="utf-8")
        import os

        here = os.getcwd()
        os.chdir(tmp)  # the report names scenarios as the user typed their folder
        try:
            res = runner.invoke(flux, ["test", "--dir", "scenarios", "--report", str(out / "report.html")])
        finally:
            os.chdir(here)
        assert res.exit_code == 1, res.output
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium",
                                        args=["--no-sandbox", "--headless", "--disable-gpu"])
            for name, page_file, anchor, scheme in SHOTS:
                page = browser.new_page(viewport={"width": 1100, "height": 820}, color_scheme=scheme)
                page.goto((out / page_file).as_uri() + anchor)
                page.screenshot(path=str(HERE / name))
                page.close()
                print(f"wrote screenshots/{name}")
            browser.close()


if __name__ == "__main__":
    main()
