"""A scrolling panel for one Rich renderable, on the Line API.

Updating a ``Static`` inside a scroll container re-lays out the whole screen on every change; the
inspector changes on every cursor step, so it would cost a full reflow per key. This panel renders
the renderable to strips itself (at the panel's width, again on resize) and only changes its
virtual size: a cursor step repaints one panel.
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ._fast import set_virtual_size

__all__ = ["RenderedView"]


class RenderedView(ScrollView, can_focus=True):
    DEFAULT_CSS = """
    RenderedView {
        overflow-x: hidden;
        overflow-y: scroll;  /* a scrollbar that never toggles: toggling it re-lays out the screen */
        scrollbar-size-vertical: 1;
        background: $surface;
    }
    """

    BINDINGS = [
        Binding("down,j", "scroll_down", "Scroll down", show=False, id="panel.down", tooltip="Scroll the panel down a line"),
        Binding("up,k", "scroll_up", "Scroll up", show=False, id="panel.up", tooltip="Scroll the panel up a line"),
        Binding("home,g", "scroll_home", "Top", show=False, id="panel.top", tooltip="Scroll to the top of the panel"),
        Binding("end,G", "scroll_end", "Bottom", show=False, id="panel.bottom", tooltip="Scroll to the end of the panel"),
    ]

    def __init__(self, topic: str, renderable: RenderableType = "", **kw) -> None:
        super().__init__(**kw)
        self.HELP_TOPIC = topic
        self._renderable: RenderableType = renderable
        self._lines: list[Strip] = []
        self._rendered_width = -1
        self._base = Style()

    def show(self, renderable: RenderableType, *, keep_scroll: bool = False) -> None:
        self._renderable = renderable
        self._rendered_width = -1
        self._render_lines()
        if not keep_scroll:
            self.scroll_to(y=0, animate=False)
        self.refresh()

    def _width(self) -> int:
        return max(1, self.scrollable_content_region.width)

    def _render_lines(self) -> None:
        width = self._width()
        if not self.is_mounted or self.size.width == 0:
            return
        console = self.app.console
        options = console.options.update(width=width, min_width=width, max_width=width, height=None, highlight=False)
        renderable = self._renderable
        if isinstance(renderable, str):
            renderable = Text(renderable)
        lines = console.render_lines(renderable, options, pad=False, new_lines=False)
        base: Style = self.rich_style
        # Styled and padded once here: render_line hands out these strips as they are.
        # Every segment gets a Style (never None): the NO_COLOR monochrome filter reads style.color.
        null = Style.null()
        self._lines = [Strip([Segment(t, s or null, c) for t, s, c in
                              Segment.apply_style(Segment.adjust_line_length(line, width, base), base)], width)
                       for line in lines]
        self._base = base
        self._rendered_width = width
        set_virtual_size(self, Size(width, len(self._lines)))

    def on_resize(self, event: events.Resize) -> None:
        if self._width() != self._rendered_width:
            self._render_lines()
            self.refresh()

    def on_mount(self) -> None:
        self._render_lines()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._rendered_width = -1

    def render_line(self, y: int) -> Strip:
        width = self._width()
        if self._rendered_width != width:
            self._render_lines()
        line = int(self.scroll_offset.y) + y
        if 0 <= line < len(self._lines):
            return self._lines[line]
        return Strip.blank(width, self._base)

    @property
    def plain_text(self) -> str:
        """What the panel shows, as plain text (for tests and copy)."""
        return "\n".join("".join(seg.text for seg in strip).rstrip() for strip in self._lines)
