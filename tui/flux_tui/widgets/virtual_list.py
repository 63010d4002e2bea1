"""A virtual list on Textual's Line API (the toolong pattern): rows in memory, only the lines on
screen rendered, multi-line and non-selectable rows, and a sorted, filtered view that keeps the
cursor on its row."""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from typing import Any, Callable, Generic, Hashable, Sequence, TypeVar

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..keys import key_table
from ._fast import set_virtual_size
from .list_cursor import ListCursor

__all__ = ["VirtualList", "text_to_strip"]

T = TypeVar("T")


def text_to_strip(text: Text, width: int, console: Console, style: Style | None = None) -> Strip:
    """One line of Rich ``Text`` → a ``Strip`` exactly ``width`` cells wide (ellipsis if longer)."""
    text = text.copy()
    text.no_wrap = True
    text.end = ""
    if style is not None:
        text.style = style
    text.truncate(width, overflow="ellipsis", pad=True)
    # Every segment carries a Style (never None): Textual's NO_COLOR (monochrome) filter reads
    # ``segment.style.color`` and a None style crashed the app under NO_COLOR=1.
    null = Style.null()
    segments = [Segment(t, s or null, c) for t, s, c in text.render(console, end="")]
    return Strip(segments, width).crop_extend(0, width, style or null)


class _ListMessage(Message):
    """What a list posts: ``control`` is the list; a ``coalesced`` message replaces the same
    list's older one still in the queue (only the newest cursor or window matters)."""

    coalesced = False

    def __init__(self, vlist: "VirtualList") -> None:
        super().__init__()
        self.vlist = vlist

    @property
    def control(self) -> "VirtualList":
        return self.vlist

    def can_replace(self, message: Message) -> bool:
        return self.coalesced and type(message) is type(self) and message.vlist is self.vlist  # type: ignore[attr-defined]


class VirtualList(ListCursor, ScrollView, Generic[T], can_focus=True):
    """A cursor list over an in-memory sequence that renders only visible lines."""

    BINDINGS = key_table("list", """
        # keys           id         action       label
        down,j           down       cursor_down  Down  [hidden]
            Move the cursor to the next row
        up,k             up         cursor_up    Up  [hidden]
            Move the cursor to the previous row
        pagedown,ctrl+d  page_down  page_down    Page down  [hidden]
            Move the cursor one page down
        pageup,ctrl+u    page_up    page_up      Page up  [hidden]
            Move the cursor one page up
        home,g           first      first        First  [hidden]
            Jump to the first row
        end,G            last       last         Last  [hidden]
            Jump to the last row
        enter            select     select       Select  [hidden]
            Act on the row under the cursor
    """)

    COMPONENT_CLASSES = {
        "vlist--cursor",
        "vlist--cursor-blur",
        "vlist--header",
        "vlist--heading",
        "vlist--empty",
    }

    DEFAULT_CSS = """
    VirtualList {
        overflow-x: hidden;
        overflow-y: auto;
        scrollbar-size-vertical: 1;
        background: $surface;
    }
    VirtualList > .vlist--cursor { background: $accent 45%; }
    VirtualList > .vlist--cursor-blur { background: $accent 20%; }
    VirtualList > .vlist--header { color: $text-muted; text-style: bold; background: $panel; }
    VirtualList > .vlist--heading { color: $text-muted; }
    VirtualList > .vlist--empty { color: $text-muted; text-style: italic; }
    """

    HELP_TOPIC = "list"

    cursor: reactive[int] = reactive(-1, init=False)

    class Highlighted(_ListMessage):
        """The cursor moved to a row (``row`` is None when the list is empty)."""

        coalesced = True

        def __init__(self, vlist: "VirtualList", index: int, row: Any) -> None:
            super().__init__(vlist)
            self.index, self.row = index, row

    class Selected(_ListMessage):
        """Enter (or a double click) on a row."""

        def __init__(self, vlist: "VirtualList", index: int, row: Any) -> None:
            super().__init__(vlist)
            self.index, self.row = index, row

    class WindowChanged(_ListMessage):
        """The visible window of rows changed (scroll, resize, new rows). Coalesced."""

        coalesced = True

        def __init__(self, vlist: "VirtualList", start: int, end: int) -> None:
            super().__init__(vlist)
            self.start, self.end = start, end

    def __init__(self, *, show_header: bool = False, empty_text: str = "nothing here", name: str | None = None,
                 id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.show_header = show_header
        self.empty_text = empty_text
        self._source: list[T] = []
        self._view: list[int] = []  # indices into _source, in display order
        self._sort_key: Callable[[T], Any] | None = None
        self._sort_reverse = False
        self._filter: Callable[[T], bool] | None = None
        self._offsets: list[int] | None = None  # prefix sums of row heights (None: all rows 1 line)
        self._total_lines = 0
        self._layout_width = -1
        self._version = 0
        self._strip_cache: LRUCache[tuple, Strip] = LRUCache(1024)
        self._selectable_cache: dict[int, bool] = {}

    # -- subclass hooks -------------------------------------------------------------------------

    def row_key(self, row: T) -> Hashable:
        return id(row)

    def row_height(self, row: T, width: int) -> int:
        return 1

    @property
    def variable_height(self) -> bool:
        return False

    def is_selectable(self, row: T) -> bool:
        return True

    def render_row(self, row: T, index: int, line: int, width: int, selected: bool) -> Text:
        return Text(str(row))

    def render_header(self, width: int) -> Text:
        return Text("")

    # -- data -----------------------------------------------------------------------------------

    @property
    def rows(self) -> list[T]:
        """The rows in display order (after filter and sort)."""
        return [self._source[i] for i in self._view]

    @property
    def row_count(self) -> int:
        return len(self._view)

    @property
    def source(self) -> list[T]:
        return self._source

    def row_at(self, index: int) -> T | None:
        if 0 <= index < len(self._view):
            return self._source[self._view[index]]
        return None

    @property
    def current(self) -> T | None:
        return self.row_at(self.cursor)

    def arrange(self, view: list[int]) -> list[int]:
        """Final say over the order of the filtered, sorted source indices (a tree view groups)."""
        return view

    def set_rows(self, rows: Sequence[T], *, keep_cursor: bool = True, cursor_key: Hashable | None = None) -> None:
        """Replace the source rows; the cursor stays on the same key (or ``cursor_key``) if present."""
        key = cursor_key
        if key is None and keep_cursor and self.current is not None:
            key = self.row_key(self.current)
        self._source = list(rows)
        self._rebuild(key)

    def set_sort(self, key: Callable[[T], Any] | None, reverse: bool = False) -> None:
        self._sort_key = key
        self._sort_reverse = reverse
        self._rebuild(self.row_key(self.current) if self.current is not None else None)

    def set_filter(self, predicate: Callable[[T], bool] | None) -> None:
        self._filter = predicate
        self._rebuild(self.row_key(self.current) if self.current is not None else None)

    def resort(self) -> None:
        """Re-apply sort and filter (rows' sort values changed)."""
        self._rebuild(self.row_key(self.current) if self.current is not None else None)

    def refresh_rows(self) -> None:
        """Rows changed in place (same order and heights): re-render visible lines."""
        self._version += 1
        self._strip_cache.clear()
        self.refresh()

    def index_of_key(self, key: Hashable) -> int | None:
        for vi, si in enumerate(self._view):
            if self.row_key(self._source[si]) == key:
                return vi
        return None

    def _rebuild(self, cursor_key: Hashable | None) -> None:
        idx = range(len(self._source))
        if self._filter is not None:
            f = self._filter
            idx = [i for i in idx if f(self._source[i])]
        view = list(idx)
        if self._sort_key is not None:
            k = self._sort_key
            view.sort(key=lambda i: k(self._source[i]), reverse=self._sort_reverse)
        self._view = self.arrange(view)
        self._layout_width = -1
        self._selectable_cache.clear()
        self._relayout()
        new_cursor = None
        if cursor_key is not None:
            new_cursor = self.index_of_key(cursor_key)
        if new_cursor is None:
            new_cursor = min(max(self.cursor, 0), len(self._view) - 1) if self._view else -1
            if new_cursor >= 0 and not self._selectable(new_cursor):
                new_cursor = self._nearest_selectable(new_cursor, 1)
        self._version += 1
        self._strip_cache.clear()
        if new_cursor != self.cursor:
            self.cursor = new_cursor
        else:
            self._post_highlight()
        self._scroll_cursor_into_view()
        self.refresh()
        self._post_window()

    # -- geometry -------------------------------------------------------------------------------

    @property
    def _header_lines(self) -> int:
        return 1 if self.show_header else 0

    def _content_width(self) -> int:
        return max(1, self.scrollable_content_region.width)

    def _relayout(self) -> None:
        width = self._content_width()
        if self.variable_height:
            heights = (max(1, self.row_height(self._source[i], width)) for i in self._view)
            self._offsets = [0, *accumulate(heights)]
            self._total_lines = self._offsets[-1]
        else:
            self._offsets = None
            self._total_lines = len(self._view)
        self._layout_width = width
        set_virtual_size(self, Size(width, self._total_lines + self._header_lines))

    def _line_to_row(self, line: int) -> tuple[int, int]:
        """Content line → (row index, line within the row)."""
        if self._offsets is None:
            return line, 0
        i = bisect_right(self._offsets, line) - 1
        return i, line - self._offsets[i]

    def _row_span(self, index: int) -> tuple[int, int]:
        """(first content line, height) of a row."""
        if self._offsets is None:
            return index, 1
        return self._offsets[index], self._offsets[index + 1] - self._offsets[index]

    @property
    def _page_lines(self) -> int:
        return max(1, self.scrollable_content_region.height - self._header_lines)

    def visible_range(self) -> tuple[int, int]:
        """[start, end) of the rows at least partly on screen."""
        if not self._view:
            return 0, 0
        top = int(self.scroll_offset.y)
        first, _ = self._line_to_row(min(top, max(0, self._total_lines - 1)))
        last, _ = self._line_to_row(min(top + self._page_lines - 1, max(0, self._total_lines - 1)))
        return first, min(len(self._view), last + 1)

    def on_resize(self, event: events.Resize) -> None:
        if self._content_width() != self._layout_width:
            self._relayout()
            self._strip_cache.clear()
            self._scroll_cursor_into_view()
        self._post_window()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if round(old_value) != round(new_value):
            self._post_window()

    def _post_window(self) -> None:
        start, end = self.visible_range()
        self.post_message(self.WindowChanged(self, start, end))

    # -- rendering ------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self._content_width()
        if width != self._layout_width:
            # The content width changed without a resize (a scrollbar came or went): lines painted
            # at the old width must be painted again.
            self._relayout()
            self._strip_cache.clear()
            self.call_after_refresh(self.refresh)
        base = self.rich_style
        if y < self._header_lines:
            style = base + self.get_component_rich_style("vlist--header")
            key = ("header", width, self._version)
            strip = self._strip_cache.get(key)
            if strip is None:
                strip = text_to_strip(self.render_header(width), width, self.app.console, style)
                self._strip_cache[key] = strip
            return strip
        line = int(self.scroll_offset.y) + y - self._header_lines
        if not self._view:
            if line == 0 and self.empty_text:
                style = base + self.get_component_rich_style("vlist--empty")
                return text_to_strip(Text(" " + self.empty_text), width, self.app.console, style)
            return Strip.blank(width, base)
        if line >= self._total_lines or line < 0:
            return Strip.blank(width, base)
        index, sub = self._line_to_row(line)
        selected = index == self.cursor
        focused = self.has_focus
        key = (index, sub, selected, selected and focused, width, self._version)
        strip = self._strip_cache.get(key)
        if strip is None:
            row = self._source[self._view[index]]
            text = self.render_row(row, index, sub, width, selected)
            style = base
            if selected:
                style = base + self.get_component_rich_style("vlist--cursor" if focused else "vlist--cursor-blur")
            strip = text_to_strip(text, width, self.app.console, style)
            self._strip_cache[key] = strip
        return strip

    def on_focus(self) -> None:
        self._strip_cache.clear()
        self.refresh()

    def on_blur(self) -> None:
        self._strip_cache.clear()
        self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strip_cache.clear()
