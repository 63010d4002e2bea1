"""A one-line header: app name and location on the left, counts / state on the right."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

__all__ = ["TopBar"]


class TopBar(Static):
    DEFAULT_CSS = """
    TopBar {
        dock: top;
        height: 1;
        background: $panel;
        color: $text;
        padding: 0 1;
    }
    """

    def __init__(self, left: Text | str = "", right: Text | str = "", **kw) -> None:
        super().__init__("", **kw)
        self._left: Text | str = left
        self._right: Text | str = right
        self._squeeze: str | None = None
        self._keep_tail = False
        self._paint()

    def set(self, left: Text | str | None = None, right: Text | str | None = None, *, squeeze: str | None = None,
            keep_tail: bool = False) -> None:
        """``squeeze``: the store's name inside ``left``, shortened to its last path component
        (``…/demo``) when the bar is too narrow; ``keep_tail``: the right side's end matters most
        (a verdict, a replay badge), so a cut takes its start."""
        if left is not None:
            self._left = left
        if right is not None:
            self._right = right
        self._squeeze = squeeze
        self._keep_tail = keep_tail
        self._paint()

    @property
    def text(self) -> str:
        """What the bar says, left then right, as plain text."""
        plain = [t.plain if isinstance(t, Text) else str(t) for t in (self._left, self._right)]
        return "  ".join(p for p in plain if p)

    def _paint(self) -> None:
        # The location (left) is what you read first: when both do not fit, the store's path is
        # shortened first, then the left keeps its width up to 60% of the bar and the state (right)
        # is cut with … (`diff s_6 ↔ s_1` stays whole at 80).
        width = self.size.width - 2 if self.is_mounted else 0
        left = self._left if isinstance(self._left, Text) else Text(self._left)
        right = self._right if isinstance(self._right, Text) else Text(self._right)
        if width and left.cell_len + right.cell_len + 1 > width and self._squeeze:
            left = _squeezed(left, self._squeeze)
        grid = Table.grid(expand=True, padding=(0, 1) if width else 0)
        if width and left.cell_len + right.cell_len + 1 > width:
            keep = min(left.cell_len, int(width * 0.6))
            if left.cell_len > keep:
                # Cut the start, not the end: "…/demo  ›  s_1" keeps where you are (the session id).
                left = Text("…", style="dim") + left[len(left.plain) - (keep - 1):]
            room = width - keep - 1
            if self._keep_tail and right.cell_len > room > 1:
                right = Text("…", style="dim") + right[len(right.plain) - (room - 1):]
            grid.add_column(no_wrap=True, overflow="ellipsis", min_width=keep, max_width=keep)
            grid.add_column(justify="right", no_wrap=True, overflow="ellipsis", ratio=1)
        else:
            grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
            grid.add_column(justify="right", no_wrap=True)
        grid.add_row(left, right)
        self.update(grid, layout=False)

    def on_resize(self) -> None:
        self._paint()


def _squeezed(left: Text, store: str) -> Text:
    """``left`` with the store's name cut to its last path component (``~/.cache/flux-tui/demo`` →
    ``…/demo``), styles kept."""
    at = left.plain.find(store)
    last = store.rstrip("/").rsplit("/", 1)[-1]
    if at < 0 or last == store:
        return left
    return left[:at] + Text("…/" + last, style="bold") + left[at + len(store):]
