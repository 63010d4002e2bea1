"""The one-widget KeyFooter draws the cells Textual's Footer draws with a widget per key, and its keys
answer the mouse as FooterKey widgets did."""

from __future__ import annotations

import pytest
from textual.app import App
from textual.binding import Binding
from textual.widgets import Footer, Static

from flux_tui.widgets.footer import KeyFooter

pytestmark = pytest.mark.anyio

_GROUP = Binding.Group("Turn", compact=True)


class _Keys(App):
    BINDINGS = [
        Binding("escape", "back", "Back", tooltip="go back"),
        Binding("left_square_bracket", "prev", "Prev", group=_GROUP),
        Binding("right_square_bracket", "next", "Next", group=_GROUP),  # disabled below
        Binding("x", "later", "Later"),  # disabled below
        Binding("y", "press", "Press"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, footer: type, theme: str) -> None:
        super().__init__()
        self._footer, self._theme, self.pressed = footer, theme, 0

    def compose(self):
        yield Static("keys")
        yield self._footer()

    def on_mount(self) -> None:
        self.theme = self._theme

    def check_action(self, action: str, parameters) -> bool | None:
        return None if action in ("later", "next") else True

    def action_press(self) -> None:
        self.pressed += 1


async def _footer_line(footer: type, theme: str, hover: int | None) -> list[tuple[str, str]]:
    app = _Keys(footer, theme)
    async with app.run_test(size=(80, 5)) as pilot:
        await pilot.pause()
        if hover is not None:
            await pilot.hover(offset=(hover, 4))
        await pilot.pause()
        return [(s.text, str(s.style)) for s in app.screen._compositor.render_strips()[-1].simplify()]


@pytest.mark.parametrize(("theme", "hover"), [("nord", None), ("nord", 2), ("nord", 11), ("nord", 78),
                                              ("textual-light", 20)])
async def test_the_footer_draws_what_textuals_footer_draws(theme, hover):
    """Same text, colours and attributes cell for cell: enabled and disabled (dim) keys, a compact key
    group and its label, the palette key docked right, a hovered key (here: esc, a grouped key, the
    palette key, a disabled key)."""
    assert await _footer_line(KeyFooter, theme, hover) == await _footer_line(Footer, theme, hover)


async def test_a_press_on_a_key_presses_it_and_hovering_shows_its_tooltip():
    app = _Keys(KeyFooter, "nord")
    async with app.run_test(size=(80, 5)) as pilot:
        await pilot.pause()
        footer = app.query_one(KeyFooter)
        line = "".join(s.text for s in app.screen._compositor.render_strips()[-1])
        x = line.index(" y Press")
        await pilot.click(offset=(x + 1, 4))
        await pilot.pause()
        assert app.pressed == 1
        await pilot.click(offset=(line.index(" x Later") + 1, 4))  # disabled: a bell, no action
        await pilot.pause()
        assert app.pressed == 1
        await pilot.hover(offset=(1, 4))
        await pilot.pause()
        assert footer.tooltip == "go back"
