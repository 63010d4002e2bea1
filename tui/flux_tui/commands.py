"""Command palette: every action bound on the current screen (and its focused panel), by name.

Context-sensitive like posting's provider: the hits are built from the calling screen's active
bindings each time the palette opens, so a session screen offers "Next error", "Lineage", … and the
sessions screen offers "Filter", "Sort", …; disabled actions are left out.
"""

from __future__ import annotations

from functools import partial

from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

__all__ = ["FluxCommands", "screen_commands", "literal", "highlighted"]

_SKIP_ACTIONS = {"command_palette"}


def _key_label(app, key: str) -> str:
    try:
        return app.get_key_display(Binding(key, ""))
    except Exception:  # noqa: BLE001 - only cosmetic
        return key


def screen_commands(screen) -> list[tuple[str, str, object, str]]:
    """(title, help, node, action) for every enabled binding of ``screen`` that is ours (has an id),
    deduplicated by action: the screen's own actions first, then the focused panel's, then the app's."""
    keys_by_action: dict[tuple[int, str], list[str]] = {}
    first: dict[tuple[int, str], object] = {}
    hidden = getattr(screen, "footer_hidden", lambda action: False)  # works, but only to say why it cannot
    for key, active in screen.active_bindings.items():
        b = active.binding
        if not active.enabled or b.action in _SKIP_ACTIONS or b.system or not b.id or hidden(b.action):
            continue
        ident = (id(active.node), b.action)
        keys_by_action.setdefault(ident, []).append(key)
        first.setdefault(ident, active)

    def rank(ident) -> int:
        node = first[ident].node
        return 0 if node is screen else (2 if node is screen.app else 1)

    out: list[tuple[str, str, object, str]] = []
    for ident in sorted(first, key=rank):
        active = first[ident]
        b = active.binding
        title = b.description or b.action.replace("_", " ").capitalize()
        keys = ", ".join(_key_label(screen.app, k) for k in keys_by_action[ident])
        help_text = (active.tooltip or b.tooltip or "") + (f"  [{keys}]" if keys else "")
        out.append((title, help_text, active.node, b.action))
    return out


def literal(text: str) -> Content:
    """Text shown exactly as it is: key hints like ``[n]`` or ``[[]`` and any user text are never
    read as markup (the palette parses a plain ``str`` as markup, which ate ``[n]`` and garbled
    ``[[]``/``[]]``)."""
    return Content(text)


def highlighted(matcher, title: str) -> Content:
    """``title`` as literal content with the fuzzy match styled (Matcher.highlight parses markup)."""
    content = literal(title)
    score, offsets = matcher.fuzzy_search.match(matcher.query, title)
    if score:
        for offset in offsets:
            if not title[offset].isspace():
                content = content.stylize(matcher.match_style, offset, offset + 1)
    return content


class FluxCommands(Provider):
    """The current screen's actions."""

    def _commands(self):
        for title, help_text, node, action in screen_commands(self.screen):
            yield title, help_text, partial(node.run_action, action)

    async def discover(self) -> Hits:
        for title, help_text, callback in self._commands():
            yield DiscoveryHit(literal(title), callback, text=title, help=literal(help_text))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self._commands():
            score = matcher.match(title)
            if score > 0:
                yield Hit(score, highlighted(matcher, title), callback, text=title, help=literal(help_text))
