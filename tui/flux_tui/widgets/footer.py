"""The key footer: the line Textual's ``Footer`` draws, as one widget, that keeps Back, Help, Quit and
the screen's essential keys when the terminal is too narrow for all of them."""

from __future__ import annotations

from collections import defaultdict
from itertools import groupby
from typing import NamedTuple

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.color import Color
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

__all__ = ["KeyFooter", "fit_keys"]

ALWAYS = ("back", "help", "quit")
PALETTE_WIDTH = 13  # "▏^p palette" docked on the right


def _cost(entries: list, grouped: bool) -> int:
    """Cells one footer item takes: ` key desc ` per key, or ` k1k2 Label ` for a compact group."""
    if grouped:
        keys = sum(len(label) for _, label, _ in entries)
        return keys + 2 + len(entries[0][2].group.description) + 1
    _, label, binding = entries[0]
    return len(label) + 2 + len(binding.description) + 1


def fit_keys(items: list[tuple[str, int]], width: int, essential: set[str]) -> set[str]:
    """Of ``(action, cost)`` in footer order, the actions to show within ``width``: drop the
    non-essential ones from the end first, then (only if still too wide) essential ones from the end,
    never Back / Help / Quit."""
    keep = [a for a, _ in items]
    cost = dict(items)
    total = sum(cost.values())
    for pass_essential in (False, True):
        for action in reversed([a for a, _ in items]):
            if total <= width:
                return set(keep)
            if action in ALWAYS or (action in essential) != pass_essential:
                continue
            keep.remove(action)
            total -= cost[action]
    return set(keep)


class _Key(NamedTuple):
    """One key's cells: ``key`` (what a mouse press simulates), the text drawn in the key style and
    in the description style, and where it sits (``x0``..``x1``, set when laid out)."""

    key: str
    key_text: str
    description: str
    enabled: bool
    tooltip: str


class KeyFooter(Widget, can_focus=False):
    """The active screen's keys on one line, the command palette key on the right.

    The stock ``Footer`` composes a widget per key (~15 through the CSS engine on every screen,
    ~30 ms per screen opened) and cuts the keys that do not fit at 80 columns, Help and Quit first.
    This one draws the same cells from the same theme variables, with hover, tooltips and clicks,
    and drops the least essential keys instead: Back, Help, Quit and the screen's
    ``FOOTER_ESSENTIAL`` stay (every key stays in the palette and in F1 help)."""

    ALLOW_SELECT = False
    # The layers of the stock footer's widgets, restated: ``footer-key`` is a FooterKey (its hover and
    # disabled states merged over it), ``--key`` / ``--description`` its two parts, ``footer-label`` a
    # group's label, ``footer-palette-border`` the palette key's left border.
    COMPONENT_CLASSES = {"footer-key", "footer-key--hover", "footer-key--disabled", "footer-key--key",
                         "footer-key--description", "footer-label", "footer-palette-border"}
    DEFAULT_CSS = """
    KeyFooter {
        dock: bottom;
        height: 1;
        width: 1fr;
        color: $footer-foreground;
        background: $footer-background;
        & > .footer-key {
            background: $footer-item-background;
        }
        & > .footer-key--hover {
            color: $footer-key-foreground;
            background: $block-hover-background;
        }
        & > .footer-key--disabled {
            text-style: dim;
        }
        & > .footer-key--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        & > .footer-key--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        & > .footer-label {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
        & > .footer-palette-border {
            color: $foreground 20%;
        }
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        # (x0, x1, _Key | None, text, part) runs of the line, and the palette key's
        self._runs: list[tuple[int, int, _Key | None, str, str]] | None = None
        self._palette: _Key | None = None
        self._fitted_width = -1
        self._hover: _Key | None = None
        self._style_cache: dict[tuple, Style] = {}

    # -- keeping up with the screen's bindings ----------------------------------------------------

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self.bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def bindings_changed(self, screen) -> None:
        self._runs = None
        self.refresh()

    def on_resize(self) -> None:
        if self.size.width != self._fitted_width:
            self._runs = None
            self.refresh()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._style_cache.clear()

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return 1

    # -- what to show ------------------------------------------------------------------------------

    def _layout(self) -> None:
        """The keys of the screen's active bindings, fitted to the width, as runs of cells — what
        the stock Footer's widgets would cover, with its margins and paddings as gaps."""
        screen = self.screen
        app = self.app
        active_bindings = screen.active_bindings
        by_action: defaultdict[str, list] = defaultdict(list)
        hidden = getattr(screen, "footer_hidden", lambda action: False)
        for _, binding, enabled, tooltip in active_bindings.values():
            if binding.show and not hidden(binding.action):
                by_action[binding.action].append((binding, enabled, tooltip))
        width = self.size.width or app.size.width
        self._fitted_width = width
        groups = [(group, list(entries)) for group, entries in
                  groupby(by_action.values(), lambda entries: entries[0][0].group)]
        costs: list[tuple[str, int]] = []
        for group, entries in groups:
            grouped = group is not None and len(entries) > 1
            labelled = [(b.action, app.get_key_display(b), b) for b, _, _ in (e[0] for e in entries)]
            if grouped:
                costs.append((entries[0][0][0].action, _cost(labelled, True)))
                costs.extend((e[0][0].action, 0) for e in entries[1:])
            else:
                costs.extend((a, _cost([(a, lbl, b)], False)) for a, lbl, b in labelled)
        keep = fit_keys(costs, width - PALETTE_WIDTH, set(getattr(screen, "FOOTER_ESSENTIAL", ())))
        runs: list[tuple[int, int, _Key | None, str, str]] = []
        x = 0

        def run(text: str, key: _Key | None, part: str) -> None:
            nonlocal x
            runs.append((x, x + len(text), key, text, part))
            x += len(text)

        for group, entries in groups:
            entries = [e for e in entries if e[0][0].action in keep or
                       (group is not None and len(entries) > 1 and entries[0][0][0].action in keep)]
            if not entries:
                continue
            if group is not None and len(entries) > 1:
                # KeyGroup.-compact: padding-left 1, its keys bare and adjacent, margin-right 1; then
                # the FooterLabel and its margin-right 1
                run(" ", None, "gap")
                for binding, enabled, tooltip in (e[0] for e in entries):
                    key = _Key(binding.key, app.get_key_display(binding), "", enabled, tooltip or binding.description)
                    run(key.key_text, key, "key")
                run(" ", None, "gap")
                run(group.description, None, "label")
                run(" ", None, "gap")
            else:
                for binding, enabled, tooltip in (e[0] for e in entries):
                    key = _Key(binding.key, app.get_key_display(binding), binding.description, enabled, tooltip or "")
                    run(f" {key.key_text} ", key, "key")  # FooterKey: key padding 0 1, description 0 1 0 0
                    run(f"{key.description} ", key, "description")
        self._palette = None
        if app.ENABLE_COMMAND_PALETTE:
            try:
                _node, binding, enabled, tooltip = active_bindings[app.COMMAND_PALETTE_BINDING]
            except KeyError:
                pass
            else:
                self._palette = _Key(binding.key, app.get_key_display(binding), binding.description, enabled,
                                     binding.tooltip or binding.description)
        self._runs = runs

    def _palette_runs(self, width: int) -> list[tuple[int, int, _Key | None, str, str]]:
        """The palette key, docked right: its vkey left border, ``^p`` and `` palette`` (compact),
        and its right padding."""
        p = self._palette
        if p is None:
            return []
        cells = [("▏", p, "border"), (p.key_text, p, "key"), (f" {p.description}", p, "description"),
                 (" ", p, "pad")]
        x = width - sum(len(t) for t, _, _ in cells)
        runs = []
        for text, key, part in cells:
            runs.append((x, x + len(text), key, text, part))
            x += len(text)
        return runs

    # -- drawing -----------------------------------------------------------------------------------

    def _chain(self, *names: str) -> tuple[Color, Color, Style]:
        """(background, colour, text style) of a node under this one whose styles are the given
        component classes in order — ``DOMNode.rich_style``'s walk, continued past this widget."""
        background = Color(0, 0, 0, 0)
        color = Color(255, 255, 255, 0)
        text_style = Style()
        opacity = 1.0
        layers = [node.styles for node in reversed(self.ancestors_with_self)]
        layers += [self.get_component_styles(*group) for group in names]
        for styles in layers:
            has_rule = styles.has_rule
            opacity *= styles.opacity
            if has_rule("background"):
                text_background = background + styles.background.tint(styles.background_tint)
                background += styles.background.tint(styles.background_tint).multiply_alpha(opacity)
            else:
                text_background = background
            if has_rule("color"):
                color = styles.color
            text_style += styles.text_style
            if has_rule("auto_color") and styles.auto_color:
                color = text_background.get_contrast_text(color.a)
        return background, color, text_style

    def _style(self, key: _Key | None, part: str) -> Style:
        hover = key is not None and key is self._hover
        cache_key = (part, hover, key.enabled if key is not None else True)
        style = self._style_cache.get(cache_key)
        if style is not None:
            return style
        if part == "gap":  # the footer's own cells (margins, paddings, the space before the palette)
            background, _, _ = self._chain()
            style = Style.from_color(bgcolor=background.rich_color)
        elif part == "label":
            background, color, text_style = self._chain(("footer-label",))
            style = text_style + Style.from_color((background + color).rich_color, background.rich_color)
        elif part == "border":
            # a border's colour is laid over the background beneath the key, its cell over the key's
            background, _, _ = self._chain(("footer-key", "footer-key--hover") if hover else ("footer-key",))
            beneath, _, _ = self._chain()
            border = self.get_component_styles("footer-palette-border").color
            style = Style.from_color((beneath + border).rich_color, background.rich_color)
        else:
            layer = ["footer-key"]
            if hover:
                layer.append("footer-key--hover")
            if not key.enabled:
                layer.append("footer-key--disabled")
            if part == "pad":
                background, _, _ = self._chain(tuple(layer))
                style = Style.from_color(bgcolor=background.rich_color)
            else:
                background, color, text_style = self._chain(tuple(layer), (f"footer-key--{part}",))
                style = text_style + Style.from_color((background + color).rich_color, background.rich_color)
        self._style_cache[cache_key] = style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        gap = self._style(None, "gap")
        if y != 0 or width <= 0:
            return Strip.blank(width, gap)
        if self._runs is None:
            self._layout()
        palette = self._palette_runs(width)
        limit = palette[0][0] if palette else width
        segments = []
        x = 0
        for x0, x1, key, text, part in self._runs:
            if x0 >= limit:
                break
            text = text[: limit - x0]
            segments.append(Segment(text, self._style(key, part)))
            x = x0 + len(text)
        if x < limit:
            segments.append(Segment(" " * (limit - x), gap))
        segments += [Segment(text, self._style(key, part)) for _x0, _x1, key, text, part in palette]
        return Strip(segments, width).simplify()

    # -- mouse -------------------------------------------------------------------------------------

    def _key_at(self, x: int) -> _Key | None:
        if self._runs is None:
            return None
        width = self.size.width
        for x0, x1, key, _text, _part in self._runs + self._palette_runs(width):
            if x0 <= x < x1:
                return key
        return None

    def on_mouse_move(self, event: events.MouseMove) -> None:
        key = self._key_at(event.x)
        if key is not self._hover:
            self._hover = key
            self.tooltip = key.tooltip if key is not None and key.tooltip else None
            self.refresh()

    def on_leave(self, event: events.Leave) -> None:
        if self._hover is not None:
            self._hover = None
            self.tooltip = None
            self.refresh()

    def on_mouse_down(self, event: events.MouseDown) -> None:
        key = self._key_at(event.x)
        if key is None:
            return
        if not key.enabled:
            self.app.bell()
        else:
            self.app.simulate_key(key.key)
