"""The README's screenshots keep the spaces between styled spans in every SVG renderer (issue 11 item 16)."""

from __future__ import annotations

import importlib.util
import re
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
