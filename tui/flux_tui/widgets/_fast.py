"""Changing a scroll view's virtual size without a screen-wide layout pass."""

from __future__ import annotations

from textual.geometry import Size
from textual.widget import Widget

__all__ = ["set_virtual_size"]


def set_virtual_size(widget: Widget, size: Size) -> None:
    """``widget.virtual_size = size``, but without re-laying out the screen when the widget's own
    size does not depend on it (fixed / fractional height) and its scrollbars stay as they are.

    ``Widget.virtual_size`` is a ``layout=True`` reactive: assigning it reflows every widget on the
    screen, which made each cursor step that changed a panel's content cost a full layout.
    """
    if size == widget.virtual_size:
        return
    height = widget.styles.height
    if not widget.is_mounted or height is None or height.is_auto or not widget.container_size:
        widget.virtual_size = size
        return
    before = (widget.show_vertical_scrollbar, widget.show_horizontal_scrollbar)
    widget.set_reactive(Widget.virtual_size, size)
    widget._scroll_update(size)
    if (widget.show_vertical_scrollbar, widget.show_horizontal_scrollbar) != before:
        widget.refresh(layout=True)
    else:
        widget.refresh()
