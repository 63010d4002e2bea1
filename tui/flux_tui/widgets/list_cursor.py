"""The virtual list's cursor: it stops only on selectable rows, keeps its row in view (a heading
right above it scrolls in too), steps by row, page, first and last, and follows clicks."""

from __future__ import annotations

from textual import events

__all__ = ["ListCursor"]


class ListCursor:
    """Mixed into :class:`~.virtual_list.VirtualList`, whose ``cursor``, view and geometry
    (``_view``, ``_row_span``, ``_line_to_row``, ``_page_lines``) it moves over."""

    def _selectable(self, index: int) -> bool:
        r = self._selectable_cache.get(index)
        if r is None:
            r = self.is_selectable(self._source[self._view[index]])
            self._selectable_cache[index] = r
        return r

    def _nearest_selectable(self, index: int, prefer: int = 1) -> int:
        """``index`` if selectable, else the nearest selectable row (``prefer`` direction first), else -1."""
        if 0 <= index < len(self._view) and self._selectable(index):
            return index
        for step in (prefer, -prefer):
            i = self._next_selectable(index, step)
            if i is not None:
                return i
        return -1

    def _next_selectable(self, start: int, step: int) -> int | None:
        i = start + step
        while 0 <= i < len(self._view):
            if self._selectable(i):
                return i
            i += step
        return None

    def validate_cursor(self, value: int) -> int:
        if not self._view:
            return -1
        return min(max(value, 0), len(self._view) - 1)

    def watch_cursor(self, old: int, new: int) -> None:
        self._scroll_cursor_into_view()
        for idx in (old, new):
            if 0 <= idx < len(self._view):
                start, h = self._row_span(idx)
                self.refresh_lines(start + self._header_lines, h)
        self._post_highlight()

    def _post_highlight(self) -> None:
        self.post_message(self.Highlighted(self, self.cursor, self.current))

    def _scroll_cursor_into_view(self) -> None:
        if not (0 <= self.cursor < len(self._view)):
            return
        start, h = self._row_span(self.cursor)
        top = int(self.scroll_offset.y)
        page = self._page_lines
        # A heading row right above the cursor row scrolls in with it.
        if self._offsets is not None and self.cursor > 0 and not self._selectable(self.cursor - 1):
            hs, _ = self._row_span(self.cursor - 1)
            if start - hs < page:
                start_vis = hs
            else:
                start_vis = start
        else:
            start_vis = start
        if start_vis < top:
            self.scroll_to(y=start_vis, animate=False)
        elif start + h > top + page:
            self.scroll_to(y=max(start + h - page, 0) if h <= page else start, animate=False)

    def move_cursor(self, index: int) -> None:
        """Put the cursor on ``index`` (or the nearest selectable row)."""
        if not self._view:
            return
        index = min(max(index, 0), len(self._view) - 1)
        index = self._nearest_selectable(index, 1)
        if index >= 0:
            self.cursor = index

    def action_cursor_down(self) -> None:
        nxt = self._next_selectable(self.cursor, 1)
        if nxt is not None:
            self.cursor = nxt

    def action_cursor_up(self) -> None:
        prv = self._next_selectable(self.cursor, -1)
        if prv is not None:
            self.cursor = prv

    def _row_after_lines(self, lines: int) -> int:
        if not self._view:
            return -1
        start, _ = self._row_span(max(self.cursor, 0))
        target = min(max(start + lines, 0), max(self._total_lines - 1, 0))
        return self._line_to_row(target)[0]

    def action_page_down(self) -> None:
        if self._view:
            i = self._row_after_lines(self._page_lines)
            self.move_cursor(i)
            self.scroll_to(y=self.scroll_offset.y + self._page_lines, animate=False)
            self._scroll_cursor_into_view()

    def action_page_up(self) -> None:
        if self._view:
            i = self._nearest_selectable(self._row_after_lines(-self._page_lines), -1)
            if i >= 0:
                self.cursor = i
            self.scroll_to(y=max(0, self.scroll_offset.y - self._page_lines), animate=False)
            self._scroll_cursor_into_view()

    def action_first(self) -> None:
        self.move_cursor(0)
        self.scroll_to(y=0, animate=False)

    def action_last(self) -> None:
        if self._view:
            i = self._nearest_selectable(len(self._view) - 1, -1)
            if i >= 0:
                self.cursor = i

    def action_select(self) -> None:
        if self.current is not None:
            self.post_message(self.Selected(self, self.cursor, self.current))

    def header_clicked(self, x: int) -> None:
        """A click on the header line at column ``x`` (a subclass may sort by that column)."""

    async def _on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and offset.y < self._header_lines:
            self.header_clicked(offset.x)
            return
        if offset is None or not self._view:
            return
        line = int(self.scroll_offset.y) + offset.y - self._header_lines
        if line >= self._total_lines:
            return
        index, _ = self._line_to_row(line)
        if self._selectable(index):
            if index == self.cursor and event.chain >= 2:
                self.action_select()
            self.cursor = index
