"""The README's screenshots: spaces between styled spans survive every SVG renderer, and what they
draw does not depend on the machine (no temp directory in a picture)."""

from __future__ import annotations

import asyncio
import importlib.util
import re
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _make_module():
    spec = importlib.util.spec_from_file_location("screenshots_make", ROOT / "screenshots" / "make.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_leading_spaces_move_into_the_span_position():
    make = _make_module()
    svg = '<text class="r1" x="231.8" y="4" textLength="48.8" clip-path="u">&#160;&#160;ab</text>'
    fixed = make.pin_leading_spaces(svg)
    assert ">ab</text>" in fixed
    assert 'x="256.2"' in fixed and 'textLength="24.4"' in fixed
    # a span with no leading space is left alone
    plain = '<text class="r1" x="1" y="4" textLength="24.4" clip-path="u">ab&#160;</text>'
    assert make.pin_leading_spaces(plain) == plain


def test_no_committed_screenshot_starts_a_span_with_a_space():
    shots = sorted((ROOT / "screenshots").glob("*.svg"))
    assert shots, "screenshots/ has no SVG"
    for shot in shots:
        text = shot.read_text()
        assert not re.search(r"<text [^>]*>&#160;", text), f"{shot.name}: a span starts with a space"


def test_no_committed_screenshot_draws_a_temp_directory():
    """A dialog that shows the workspace shows ``~/flux-tui-demo-workspace``, never ``/tmp/…``."""
    shots = sorted((ROOT / "screenshots").glob("*.svg"))
    drawn = [shot.name for shot in shots if "/tmp/" in shot.read_text() or tempfile.gettempdir() in shot.read_text()]
    assert drawn == []
    assert any("~/flux-tui-demo-workspace" in shot.read_text() for shot in shots)


def test_the_shots_workspace_is_the_same_whatever_tmpdir_is(tmp_path, monkeypatch):
    """Two runs of the fork shot under two different TMPDIRs draw the same picture, with the
    workspace under the shots' own home directory."""
    make = _make_module()
    from flux.demo import build_demo_store

    pictures = []
    for run in ("one", "two"):
        tmpdir = tmp_path / f"tmpdir-{run}"
        tmpdir.mkdir()
        monkeypatch.setenv("TMPDIR", str(tmpdir))
        monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
        base = Path(tempfile.mkdtemp())
        store = build_demo_store(base / "demo", now_ms=make.NOW_MS)
        out = base / "out"
        out.mkdir()
        svg = asyncio.run(make.take("fork", store, out)).read_text()
        assert str(tmpdir) not in svg and "~/flux-tui-demo-workspace" in svg
        pictures.append(svg)
    assert pictures[0] == pictures[1]
