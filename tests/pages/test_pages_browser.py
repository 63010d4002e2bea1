"""The review pages (run, diff, test report) in a real browser: headless Chromium (Debian's) driven by Playwright loads each
page from disk with every network request refused — it renders, its anchors scroll to their
targets, no request leaves the page, and both colour schemes read (text contrast ≥ 4.5:1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main

from tests.pages.browsers import launch, need_browser


@pytest.fixture(scope="module")
def browser(pages):
    """(After ``pages``: the demo store is built before Playwright runs its event loop.)"""
    need_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch(p)
        yield b
        b.close()


@pytest.fixture(scope="module")
def pages(demo_master, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pages")
    runner = CliRunner()
    res = runner.invoke(main, ["export", "s_1", "--store", str(demo_master), "--family", "-o", str(out)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(main, ["diff", "s_1", "s_6", "--store", str(demo_master), "-o", str(out / "diff.html")])
    assert res.exit_code == 1, res.output
    sc = out / "scenarios"
    for name in ("clean", "drifted"):
        res = runner.invoke(main, ["record", name, "write a quick note", "-m", "mock", "--dir", str(sc), "--yes",
                                   "--workspace", str(out)])
        assert res.exit_code == 0, res.output
    snap = sc / "drifted" / "plan.flux.snap"
    snap.write_text(snap.read_text(encoding="utf-8") + "drift\n", encoding="utf-8")
    res = runner.invoke(main, ["test", "--dir", str(sc), "--report", str(out / "report.html")])
    assert res.exit_code == 1, res.output
    return out


def _open(browser, url: str, scheme: str = "light"):
    ctx = browser.new_context(color_scheme=scheme, viewport={"width": 1100, "height": 900})
    requests: list[str] = []

    def route(r):
        requests.append(r.request.url)
        if r.request.url.startswith("file://"):
            r.continue_()
        else:
            r.abort()
    ctx.route("**/*", route)
    page = ctx.new_page()
    page.goto(url)
    return ctx, page, requests


_CONTRAST = """() => {
  const rgb = s => s.match(/\\d+(\\.\\d+)?/g).slice(0, 3).map(Number);
  const lum = c => { const [r, g, b] = c.map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
                     return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  const ratio = (a, b) => { const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p); return (x + 0.05) / (y + 0.05); };
  const body = getComputedStyle(document.body);
  const pre = getComputedStyle(document.querySelector('pre'));
  return { bg: body.backgroundColor, body: ratio(rgb(body.color), rgb(body.backgroundColor)),
           pre: ratio(rgb(pre.color), rgb(pre.backgroundColor)) };
}"""


@pytest.mark.parametrize("name", ["s_1.html", "s_6.html", "s_2.html", "diff.html", "report.html"])
def test_a_page_renders_offline_with_no_request_leaving_it(pages, browser, name):
    ctx, page, requests = _open(browser, (pages / name).as_uri())
    try:
        assert page.locator("h1").first.inner_text().strip()
        assert all(u.startswith("file://") for u in requests), requests
        assert len(requests) == 1  # the page itself: nothing else is fetched
        missing = page.evaluate("""() => [...document.querySelectorAll('a[href^="#"]')]
            .map(a => a.getAttribute('href').slice(1)).filter(id => !document.getElementById(id))""")
        assert missing == []
    finally:
        ctx.close()


def test_a_statement_anchor_scrolls_to_its_statement(pages, browser):
    ctx, page, _ = _open(browser, (pages / "s_1.html").as_uri() + "#t2-s0")
    try:
        top = page.evaluate("() => document.getElementById('t2-s0').getBoundingClientRect().top")
        assert 0 <= top < 200, top
        first = page.evaluate("() => window.scrollY")
        assert first > 0
    finally:
        ctx.close()
    ctx, page, _ = _open(browser, (pages / "diff.html").as_uri())
    try:
        page.click("text=Go to the first divergence")
        top = page.evaluate("() => document.getElementById('first').getBoundingClientRect().top")
        assert 0 <= top < 200, top
    finally:
        ctx.close()
    ctx, page, _ = _open(browser, (pages / "report.html").as_uri())
    try:
        page.click("a[href^='#f']")  # the failing scenario's row links to its failure
        target = page.evaluate("() => location.hash.slice(1)")
        top = page.evaluate(f"() => document.getElementById('{target}').getBoundingClientRect().top")
        assert target.startswith("f") and 0 <= top < 900, (target, top)  # in view (the page may be too short to scroll)
    finally:
        ctx.close()


def test_both_colour_schemes_read(pages, browser):
    seen = {}
    for scheme in ("light", "dark"):
        ctx, page, _ = _open(browser, (pages / "s_1.html").as_uri(), scheme)
        try:
            c = page.evaluate(_CONTRAST)
        finally:
            ctx.close()
        assert c["body"] >= 4.5 and c["pre"] >= 4.5, (scheme, c)
        seen[scheme] = c["bg"]
    assert seen["light"] != seen["dark"]
