"""The run and diff pages, read as text: self-contained, every anchor present, secrets scrubbed,
and the store left as it was."""

from __future__ import annotations

import hashlib
import html
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.pages.diff_page import render_diff_page
from flux.pages.html import Scrub, flux_code
from flux.pages.run_page import render_run_page
from flux.store.store import StoreReader
from flux.timemachine.diff import run_diff

from .conftest import ENV_NAME, ENV_VALUE, PLANTED

_EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["'](?!#)(?![\w.-]+\.html(?:#[\w-]*)?["'])""", re.I)


def _store_bytes(store: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(store.iterdir()) if p.is_file()}


def _self_contained(page: str) -> None:
    low = page.lower()
    assert "<script" not in low and "<link" not in low and "@import" not in low and "url(" not in low
    assert "http://" not in low and "https://" not in low
    assert not _EXTERNAL.search(page), _EXTERNAL.search(page)


def _anchors_resolve(page: str) -> set[str]:
    ids = set(re.findall(r'\bid="([^"]+)"', page))
    for target in re.findall(r'href="#([^"]+)"', page):
        assert target in ids, f"#{target} has no element"
    return ids


@pytest.mark.parametrize("sid", ["s_1", "s_2", "s_6", "s_8", "s_9", "s_10", "s_11"])
def test_every_demo_session_renders_self_contained_with_its_anchors(demo_master, sid):
    before = _store_bytes(demo_master)
    with StoreReader(demo_master) as r:
        page = render_run_page(r, sid, scrub=Scrub(env={}))
    assert page.startswith("<!doctype html>") and page.rstrip().endswith("</html>")
    _self_contained(page)
    ids = _anchors_resolve(page)
    assert "t1" in ids
    assert _store_bytes(demo_master) == before, "writing a page changed the store"


def test_statement_anchors_count_the_turn_statements_as_fork_does(demo_master):
    with StoreReader(demo_master) as r:
        page = render_run_page(r, "s_1", scrub=Scrub(env={}))
    turn1 = [a for a in re.findall(r'id="(t1-s\d+)"', page)]
    assert turn1 == [f"t1-s{k}" for k in range(len(turn1))] and len(turn1) >= 3
    assert 'id="c0"' in page  # every cassette cell by its tape index


def test_the_interrupted_turn_is_flagged(demo_master):
    with StoreReader(demo_master) as r:
        page = render_run_page(r, "s_8", scrub=Scrub(env={}))
        clean = render_run_page(r, "s_5", scrub=Scrub(env={}))
    assert "⚠ interrupted" in page
    assert "⚠ interrupted" not in clean


def test_a_fork_child_says_which_cells_came_from_the_source_tape(demo_master):
    with StoreReader(demo_master) as r:
        page = render_run_page(r, "s_6", scrub=Scrub(env={}))
        root = render_run_page(r, "s_1", scrub=Scrub(env={}))
    assert "from s_1's tape" in page and "ran live" in page
    assert "ran live" not in root  # a root session has no source to compare with
    assert '<a href="s_1.html">s_1</a>' in page  # the lineage links to its source's page


def test_sub_agents_nest_under_their_parent(demo_master):
    with StoreReader(demo_master) as r:
        page = render_run_page(r, "s_1", scrub=Scrub(env={}))
    assert re.search(r'<details class="session" open id="s_2"><summary>↳ sub-agent', page)


def _leaks(page: str) -> list[str]:
    forms = []
    for s in PLANTED:
        forms += [s, html.escape(s), json.dumps(s)[1:-1]]
    return [f for f in forms if f in page]


def test_planted_secrets_never_reach_the_page(secret_store):
    env = {ENV_NAME: ENV_VALUE}
    with StoreReader(secret_store) as r:
        page = render_run_page(r, "s_1", scrub=Scrub(env=env))
        d = run_diff(r, "s_1", r, "s_6")
    diff = render_diff_page(d, Scrub(env=env))
    assert _leaks(page) == [] and _leaks(diff) == []
    assert "[redacted]" in page


def test_the_leak_check_sees_a_page_that_was_not_scrubbed(secret_store, monkeypatch):
    """The same store through a scrub that does nothing: every planted secret is on the page, so
    the test above would fail if the page stopped scrubbing."""
    monkeypatch.setattr(Scrub, "__call__", lambda self, text: text if isinstance(text, str) else str(text))
    with StoreReader(secret_store) as r:
        page = render_run_page(r, "s_1", scrub=Scrub(env={ENV_NAME: ENV_VALUE}))
    assert set(PLANTED) <= {s for s in PLANTED if s in page or html.escape(s) in page}


def test_flux_code_marks_roles_and_escapes():
    out = flux_code('x = read(path: "<a> {b}")', Scrub(env={}))
    assert '<span class="fl-bind">x</span>' in out and '<span class="fl-op">read</span>' in out
    assert "&lt;a&gt;" in out and "<a>" not in out
    assert '<span class="fl-interp">{b}</span>' in out


def test_diff_page_marks_the_first_divergence(demo_master):
    with StoreReader(demo_master) as r:
        d = run_diff(r, "s_1", r, "s_6")
        same = run_diff(r, "s_1", r, "s_1")
    page = render_diff_page(d, Scrub(env={}))
    _self_contained(page)
    _anchors_resolve(page)
    fd = d.first_divergence
    assert fd is not None
    assert re.search(r'<tr class="\w+ first row" id="first">', page) and 'href="#first"' in page
    assert f'id="r{fd}"' in page
    assert page.count('class="mark"') == len(d.rows)
    ok = render_diff_page(same, Scrub(env={}))
    assert "The runs are identical" in ok and 'id="first"' not in ok


# -- the CLI ---------------------------------------------------------------------------------------

def test_export_html_by_suffix_and_family(demo_master, tmp_path):
    runner = CliRunner()
    before = _store_bytes(demo_master)
    out = tmp_path / "run.html"
    res = runner.invoke(main, ["export", "s_6", "--store", str(demo_master), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text(encoding="utf-8").startswith("<!doctype html>")
    fam = tmp_path / "fam"
    res = runner.invoke(main, ["export", "s_6", "--store", str(demo_master), "--family", "-o", str(fam), "--json"])
    assert res.exit_code == 0, res.output
    names = sorted(p.name for p in fam.iterdir())
    assert {"s_1.html", "s_6.html"} <= set(names)
    for p in fam.iterdir():  # every page's links to its family resolve inside the folder
        for link in re.findall(r'href="(s_\d+\.html)"', p.read_text(encoding="utf-8")):
            assert (fam / link).is_file(), f"{p.name} links to {link}"
    assert _store_bytes(demo_master) == before


@pytest.mark.parametrize("args, message", [
    (["export", "s_1"], "say which format"),
    (["export", "s_1", "--family"], "give the folder with -o DIR"),
    (["export", "s_1", "--family", "--format", "atif", "-o", "x"], "--family writes HTML pages"),
    (["export", "s_404", "-o", "x.html"], "no session 's_404'"),
])
def test_export_html_errors_are_one_line(demo_master, tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, args + ["--store", str(demo_master)])
    assert res.exit_code == 1
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], res.output
    assert not list(tmp_path.glob("*.html")) and not list(tmp_path.glob(".*.html.*"))


def test_diff_writes_its_page_and_keeps_its_exit_code(demo_master, tmp_path):
    out = tmp_path / "diff.html"
    res = CliRunner().invoke(main, ["diff", "s_1", "s_6", "--store", str(demo_master), "-o", str(out)])
    assert res.exit_code == 1  # the runs differ, as without -o
    page = out.read_text(encoding="utf-8")
    assert "diff <a href=\"s_1.html\">s_1</a> ↔ <a href=\"s_6.html\">s_6</a>" in page
    assert f"s_1 in {demo_master}" in page
