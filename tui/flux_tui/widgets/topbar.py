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
        self._paint()

    def set(self, left: Text | str | None = None, right: Text | str | None = None) -> None:
        if left is not None:
            self._left = left
        if right is not None:
            self._right = right
        self._paint()

    def _paint(self) -> None:
        grid = Table.grid(expand=True)
        grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
        grid.add_column(justify="right", no_wrap=True)
        grid.add_row(self._left, self._right)
        self.update(grid, layout=False)
