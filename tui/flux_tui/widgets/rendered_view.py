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
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..keys import key_table
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

    BINDINGS = key_table("panel", """
        # keys  id      action             label
        W       wrap    toggle_wrap        Wrap  [hidden]
            Wrap long lines (default) or keep them whole and scroll sideways with ←/→
        left    left    scroll_left_cols   Scroll left  [hidden]
            Scroll left (long lines, with wrapping off: W)
        right   right   scroll_right_cols  Scroll right  [hidden]
            Scroll right (long lines, with wrapping off: W)
        down,j  down    scroll_down        Scroll down  [hidden]
            Scroll the panel down a line
        up,k    up      scroll_up          Scroll up  [hidden]
            Scroll the panel up a line
        home,g  top     scroll_home        Top  [hidden]
            Scroll to the top of the panel
        end,G   bottom  scroll_end         Bottom  [hidden]
            Scroll to the end of the panel
    """)

    MAX_LINE = 4000  # unwrapped lines are rendered up to this many cells

    def __init__(self, topic: str, renderable: RenderableType = "", **kw) -> None:
        super().__init__(**kw)
        self.HELP_TOPIC = topic
        self._renderable: RenderableType = renderable
        self._lines: list[Strip] = []
        self._line_lengths: list[int] = []
        self._rendered_width = -1
        self._base = Style()
        self.wrap = True
        self._content_width = 0

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
        if not self.wrap:
            # Unwrapped: lay out as wide as the content wants (within MAX_LINE), scroll sideways.
            from rich.measure import Measurement

            try:
                want = Measurement.get(console, options.update(max_width=self.MAX_LINE), renderable).maximum
            except Exception:  # noqa: BLE001 - a renderable that cannot measure itself: keep the width
                want = width
            render_width = max(width, min(self.MAX_LINE, want))
            options = options.update(width=render_width, min_width=render_width, max_width=render_width)
        lines = console.render_lines(renderable, options, pad=False, new_lines=False)
        base: Style = self.rich_style
        # Styled and padded once here: render_line hands out these strips as they are.
        # Every segment gets a Style (never None): the NO_COLOR monochrome filter reads style.color.
        null = Style.null()
        strips = [Strip([Segment(t, s or null, c) for t, s, c in Segment.apply_style(line, base)]) for line in lines]
        self._line_lengths = [len(strip.text.rstrip()) for strip in strips]
        self._content_width = max([width, *self._line_lengths]) if not self.wrap else width
        self._lines = [strip.crop_extend(0, self._content_width, base) for strip in strips]
        self._base = base
        self._rendered_width = width
        set_virtual_size(self, Size(self._content_width, len(self._lines)))

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
        if not (0 <= line < len(self._lines)):
            return Strip.blank(width, self._base)
        strip = self._lines[line]
        if self.wrap:
            return strip
        # Unwrapped: the visible window of the line, with … where it goes on past either edge.
        x = int(self.scroll_offset.x)
        length = self._line_lengths[line]
        out = strip.crop(x, x + width)
        mark = Strip([Segment("…", self._base + Style(dim=True))])
        if length > x + width:
            out = Strip.join([out.crop(0, width - 1), mark])
        if x > 0 and length > x:
            out = Strip.join([mark, out.crop(1, width)])
        return out

    def action_toggle_wrap(self) -> None:
        self.wrap = not self.wrap
        self._rendered_width = -1
        self._render_lines()
        self.scroll_to(x=0, animate=False, force=True)
        self.refresh()
        self.notify("long lines wrap" if self.wrap else "long lines kept whole — ←/→ scroll, … marks a cut",
                    timeout=2)

    def action_scroll_left_cols(self) -> None:
        if self.wrap:
            self.notify("lines wrap here — W keeps them whole and lets ←/→ scroll", timeout=2)
            return
        self.scroll_to(x=max(0, self.scroll_offset.x - 8), animate=False, force=True)

    def action_scroll_right_cols(self) -> None:
        if self.wrap:
            self.notify("lines wrap here — W keeps them whole and lets ←/→ scroll", timeout=2)
            return
        self.scroll_to(x=self.scroll_offset.x + 8, animate=False, force=True)

    @property
    def plain_text(self) -> str:
        """What the panel shows, as plain text (for tests and copy)."""
        return "\n".join("".join(seg.text for seg in strip).rstrip() for strip in self._lines)
