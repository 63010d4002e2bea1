"""Unit tests of the app's building blocks: the virtual list, the highlighter, formatters, keymap."""

from __future__ import annotations

import json

import pytest
from textual.app import App, ComposeResult

from flux_tui.fmt import fmt_cost, fmt_tokens
from flux_tui.highlight import STYLES, highlight_flux
from flux_tui.render import display_statement_text
from flux_tui.widgets.timeline_view import _fold_offsets
from flux_tui.widgets.virtual_list import VirtualList
from screen_text import settle


class Row:
    def __init__(self, key: int, label: str, heading: bool = False, height: int = 1) -> None:
        self.key, self.label, self.heading, self.height = key, label, heading, height


class Rows(VirtualList[Row]):
    @property
    def variable_height(self) -> bool:
        return True

    def row_key(self, row: Row):
        return row.key

    def row_height(self, row: Row, width: int) -> int:
        return row.height

    def is_selectable(self, row: Row) -> bool:
        return not row.heading


class _One(App):
    def __init__(self, widget) -> None:
        super().__init__()
        self._widget = widget

    def compose(self) -> ComposeResult:
        yield self._widget


@pytest.mark.anyio
async def test_virtual_list_cursor_skips_headings_and_keeps_its_row():
    rows = [Row(0, "head", heading=True), Row(1, "b"), Row(2, "a", height=3), Row(3, "head2", heading=True), Row(4, "c")]
    vl = Rows()
    app = _One(vl)
    async with app.run_test(size=(40, 10)) as pilot:
        vl.focus()
        vl.set_rows(rows)
        await settle(pilot)
        assert vl.current.key == 1  # the heading is skipped
        await pilot.press("j")
        assert vl.current.key == 2
        await pilot.press("j")
        assert vl.current.key == 4  # over the second heading
        await pilot.press("k", "k")
        assert vl.current.key == 1
        await pilot.press("k")
        assert vl.current.key == 1  # nothing selectable above
        # lines map to rows through the heights
        assert vl._line_to_row(0) == (0, 0) and vl._line_to_row(2) == (2, 0) and vl._line_to_row(4) == (2, 2)
        assert vl._line_to_row(5) == (3, 0)
        # sort and filter keep the cursor on the same key
        await pilot.press("j")
        assert vl.current.key == 2
        vl.set_sort(lambda r: r.label)
        assert vl.current.key == 2 and [r.key for r in vl.rows] == [2, 1, 4, 0, 3]
        vl.set_filter(lambda r: r.key != 1)
        assert vl.current.key == 2
        vl.set_filter(lambda r: r.key == 4)
        assert vl.current.key == 4  # its row is gone: the nearest selectable one
        vl.set_filter(lambda r: False)
        assert vl.current is None and vl.cursor == -1


@pytest.mark.anyio
async def test_virtual_list_posts_selected_on_enter():
    seen = []
    vl = Rows()
    app = _One(vl)
    async with app.run_test(size=(40, 10), message_hook=seen.append) as pilot:
        vl.focus()
        vl.set_rows([Row(1, "x"), Row(2, "y")])
        await pilot.press("j", "enter")
        await settle(pilot)
    selected = [m for m in seen if isinstance(m, VirtualList.Selected)]
    assert selected and selected[-1].row.key == 2


def _style_of(text, needle):
    start = text.plain.index(needle)
    return [s.style for s in text.spans if s.start <= start < s.end]


def test_highlighter_marks_the_language():
    src = 'flow release\n  # ship it\n  $v = read({"path":"VERSION","n":3})\n  when $v\n    tag = bash("""git\ntag""")\n  return $v'
    t = highlight_flux(src)
    assert t.plain == src
    assert STYLES["keyword"] in _style_of(t, "flow")
    assert STYLES["keyword"] in _style_of(t, "when")
    assert STYLES["comment"] in _style_of(t, "# ship")
    assert STYLES["bind"] in _style_of(t, "$v =")
    assert STYLES["op"] in _style_of(t, "read(")
    assert STYLES["string"] in _style_of(t, '"VERSION"')
    assert STYLES["number"] in _style_of(t, "3})")
    assert STYLES["bind"] in _style_of(t, "tag =")
    assert STYLES["string"] in _style_of(t, "tag\"\"\"")  # inside the triple-quoted string
    assert highlight_flux('broken("unterminated').plain == 'broken("unterminated'  # never raises


def test_statement_text_without_the_flow_wrapper():
    assert display_statement_text("flow\n  x = read({})\n") == "x = read({})"
    assert display_statement_text("when $a\n  b = c()") == "when $a\n  b = c()"


def test_fold_offsets_cut_at_the_width():
    assert _fold_offsets("abcdefghij", 4) == [4, 8]
    assert _fold_offsets("abc", 4) == []
    assert _fold_offsets("日本語テキスト", 4) == [2, 4, 6]  # two cells per character



def test_cost_is_never_zero_when_unknown():
    assert fmt_cost(None) == "?"
    assert fmt_cost(0.0) == "$0"
    assert fmt_cost(0.0028) == "$0.0028"
    assert fmt_cost(12.5) == "$12.50"
    assert fmt_tokens(1240) == "1.2k" and fmt_tokens(23000) == "23k"


def test_keymap_file(tmp_path):
    import click

    from flux_tui.app import load_keymap

    good = tmp_path / "keys.json"
    good.write_text(json.dumps({"session.next_error": "n,f8"}))
    assert load_keymap(good) == {"session.next_error": "n,f8"}
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(click.BadParameter):
        load_keymap(bad)


@pytest.mark.anyio
async def test_keymap_remaps_a_binding_by_id(make_app, tmp_path):
    from stores import build_errors

    app = make_app(build_errors(tmp_path / "e"), keymap={"session.next_error": "x"})
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        tv = app.screen.timeline_view
        await pilot.press("x")
        await settle(pilot)
        assert tv.current.statement.node == 2  # x now jumps to the halted statement
