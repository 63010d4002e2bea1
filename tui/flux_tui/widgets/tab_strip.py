"""The row of tab labels over the session screen's bottom panel and the underline bar below the
active one, drawn as two lines of one widget (with the keys, clicks and hover of Textual's tabs)."""

from __future__ import annotations


from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.content import Content, ContentText
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.renderables.bar import Bar
from textual.strip import Strip
from textual.widget import Widget

__all__ = ["TabStrip", "TabHandle"]


class TabHandle:
    """One tab of a :class:`~.bottom_tabs.BottomTabs`: what ``TabbedContent.get_tab`` gives (its ``label`` and
    ``display``), without a widget behind it."""

    def __init__(self, strip: "TabStrip", tab_id: str, label: ContentText, panel_id: str) -> None:
        self._strip = strip
        self.id = tab_id
        self.panel_id = panel_id
        self._label = Content.from_text(label)
        self._display = True

    @property
    def label(self) -> Content:
        return self._label

    @label.setter
    def label(self, label: ContentText) -> None:
        self._label = Content.from_text(label)
        self._strip.tabs_changed(animate=True)

    @property
    def label_text(self) -> str:
        return self._label.plain

    @property
    def display(self) -> bool:
        return self._display

    @property
    def width(self) -> int:
        """Cells the tab takes: its label and one cell of padding each side (``Tab``'s ``padding: 0 1``)."""
        return self._label.cell_length + 2


class TabStrip(Widget, can_focus=True):
    """The row of tab labels and the underline bar below it, drawn as two lines of one widget.

    The component classes restate ``Tab``'s, ``Tabs``' and ``Underline``'s default CSS, so every
    theme colours it the same way."""

    class Chosen(Message):
        """A click or ←/→ asks for this tab (the tabs above decide what shows)."""

        def __init__(self, tab_id: str) -> None:
            super().__init__()
            self.tab_id = tab_id

    ALLOW_SELECT = False
    COMPONENT_CLASSES = {"tab-strip--tab", "tab-strip--hover", "tab-strip--active", "underline--bar"}
    DEFAULT_CSS = """
    TabStrip {
        width: 100%;
        height: 2;
        &.-over-label {
            pointer: pointer;
        }
        & > .tab-strip--tab {
            color: $foreground 50%;
        }
        & > .tab-strip--hover {
            color: $foreground;
        }
        & > .tab-strip--active {
            color: $foreground;
        }
        & > .underline--bar {
            color: $block-cursor-background;
            background: $foreground 10%;
        }
        &:focus {
            & > .tab-strip--active {
                text-style: $block-cursor-text-style;
                color: $block-cursor-foreground;
                background: $block-cursor-background;
            }
            & > .underline--bar {
                background: $foreground 30%;
            }
        }
        &:ansi {
            & > .tab-strip--tab, & > .tab-strip--hover {
                text-style: dim;
            }
            & > .tab-strip--active {
                text-style: not dim bold;
            }
            & > .underline--bar {
                color: $block-cursor-background;
                background: $border-blurred;
            }
        }
    }
    """

    BINDINGS = [
        Binding("left", "previous_tab", "Previous tab", show=False),
        Binding("right", "next_tab", "Next tab", show=False),
    ]

    highlight_start: reactive[float] = reactive(0.0)
    highlight_end: reactive[float] = reactive(0.0)
    scroll_offset: reactive[float] = reactive(0.0)

    def __init__(self, tabs: list[tuple[str, ContentText, str]], *, active: str, id: str | None = None) -> None:
        super().__init__(id=id)
        self.tabs = [TabHandle(self, tab_id, label, panel_id) for tab_id, label, panel_id in tabs]
        self.active = active
        self._hover: str | None = None
        self._placed = False  # the underline is under the active tab (else the next move does not animate)
        start, end = self._span(active)
        self.set_reactive(TabStrip.highlight_start, float(start))
        self.set_reactive(TabStrip.highlight_end, float(end))

    # -- geometry ---------------------------------------------------------------------------------

    def _shown(self) -> list[TabHandle]:
        return [t for t in self.tabs if t._display]

    def _spans(self) -> list[tuple[TabHandle, int, int]]:
        """(tab, x0, x1) of every shown tab, in the strip's unscrolled coordinates."""
        spans = []
        x = 0
        for t in self._shown():
            w = t.width
            spans.append((t, x, x + w))
            x += w
        return spans

    def _span(self, tab_id: str) -> tuple[int, int]:
        """The label's columns (without its padding): where the underline highlights."""
        for t, x0, x1 in self._spans():
            if t.id == tab_id:
                return x0 + 1, x1 - 1
        return 0, 0

    def _content_width(self) -> int:
        return max(sum(t.width for t in self._shown()), self.size.width)

    def _target_scroll(self) -> int:
        """Textual's ``scroll_to_center(active tab)``: the active tab centred when the tabs are
        wider than the strip, within the scrollable range."""
        width = self.size.width
        total = self._content_width()
        if total <= width or width <= 0:
            return 0
        for t, x0, x1 in self._spans():
            if t.id == self.active:
                centre = x0 + (x1 - x0) // 2
                return max(0, min(total - width, centre - width // 2))
        return 0

    def tab_at(self, x: int) -> TabHandle | None:
        x += round(self.scroll_offset)
        for t, x0, x1 in self._spans():
            if x0 <= x < x1:
                return t
        return None

    # -- state ------------------------------------------------------------------------------------

    def tabs_changed(self, animate: bool) -> None:
        """Labels or shown tabs changed, or the active tab: move the underline and the scroll."""
        start, end = self._span(self.active)
        target = self._target_scroll()
        if animate and self._placed and self.is_mounted and self.app.animation_level != "none":
            self.animate("highlight_start", float(start), duration=0.3, level="basic")
            self.animate("highlight_end", float(end), duration=0.3, level="basic")
            self.animate("scroll_offset", float(target), duration=0.2, level="basic")
        else:
            self.highlight_start, self.highlight_end, self.scroll_offset = float(start), float(end), float(target)
        self.refresh()

    def on_resize(self) -> None:
        self._placed = True
        self.tabs_changed(animate=False)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    # -- drawing ----------------------------------------------------------------------------------

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return sum(t.width for t in self._shown())

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return 2

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        offset = round(self.scroll_offset)
        total = self._content_width()
        if y == 0:
            segments = []
            pad = Style.from_color(bgcolor=base.bgcolor)
            used = 0
            for t, x0, x1 in self._spans():
                if t.id == self.active:
                    name = "tab-strip--active"
                elif t.id == self._hover:
                    name = "tab-strip--hover"
                else:
                    name = "tab-strip--tab"
                style = self.get_component_rich_style(name)
                tab_pad = Style.from_color(bgcolor=style.bgcolor) if style.bgcolor is not None else pad
                segments += [Segment(" ", tab_pad), Segment(t.label_text, style), Segment(" ", tab_pad)]
                used = x1
            if used < total:
                segments.append(Segment(" " * (total - used), pad))
            strip = Strip(segments, total)
        elif y == 1:
            bar_style = self.get_component_rich_style("underline--bar")
            bar = Bar(highlight_range=(self.highlight_start, self.highlight_end),
                      highlight_style=Style.from_color(bar_style.color),
                      background_style=Style.from_color(bar_style.bgcolor))
            console = self.app.console
            lines = console.render_lines(bar, console.options.update_width(total), style=base, pad=False)
            strip = Strip(lines[0] if lines else [], total)
        else:
            return Strip.blank(width, base)
        return strip.crop(offset, offset + width).extend_cell_length(width, base)

    # -- keys and mouse ---------------------------------------------------------------------------

    def _potentially_active(self) -> list[TabHandle]:
        return self._shown()

    def _move(self, direction: int) -> None:
        tabs = self._potentially_active()
        if not tabs:
            return
        ids = [t.id for t in tabs]
        if self.active not in ids:
            target = tabs[0 if direction == 1 else -1]
        else:
            target = tabs[(ids.index(self.active) + direction) % len(tabs)]
        self.post_message(self.Chosen(target.id))

    def action_next_tab(self) -> None:
        self._move(+1)

    def action_previous_tab(self) -> None:
        self._move(-1)

    def on_click(self, event: events.Click) -> None:
        tab = self.tab_at(event.x)
        self.focus()
        event.stop()
        if tab is not None:
            self.post_message(self.Chosen(tab.id))

    def on_mouse_move(self, event: events.MouseMove) -> None:
        tab = self.tab_at(event.x) if event.y == 0 else None
        hover = tab.id if tab is not None else None
        self.set_class(hover is not None, "-over-label")
        if hover != self._hover:
            self._hover = hover
            self.refresh()

    def on_leave(self, event: events.Leave) -> None:
        self.set_class(False, "-over-label")
        if self._hover is not None:
            self._hover = None
            self.refresh()
