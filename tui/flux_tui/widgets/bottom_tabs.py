"""The session screen's bottom panel: a row of tabs over one panel at a time, drawn as Textual's
``TabbedContent`` draws it with two widgets instead of seventeen; rarely used panels mount when
their tab is first shown."""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.content import ContentText
from textual.message import Message
from textual.widget import Widget

from .tab_strip import TabHandle, TabStrip

__all__ = ["BottomTabs"]


class BottomTabs(Widget):
    """Tabs over panels: what ``TabbedContent`` shows, with one tab-row widget and the panels as
    direct children (the active tab's panel displayed, the others not). Building, styling and
    laying out ``TabbedContent``'s seventeen widgets was ~30 % of the CPU of opening a small session.

    It keeps the face the session screen and the tests use: ``active`` (get / set), ``get_tab(id)``,
    ``hide_tab`` / ``show_tab`` and a ``TabActivated`` message; each tab names the id of the panel it
    shows, which may be mounted later (:meth:`add_panel`)."""

    DEFAULT_CSS = """
    BottomTabs {
        height: auto;
        layout: vertical;
    }
    """

    @dataclass
    class TabActivated(Message):
        """The active tab changed (also once on mount, for the initial tab)."""

        tabs: "BottomTabs"
        tab_id: str

        @property
        def control(self) -> "BottomTabs":
            return self.tabs

        @property
        def panel_id(self) -> str:
            return self.tabs._tab(self.tab_id).panel_id

    def __init__(self, tabs: list[tuple[str, ContentText, str]], *, initial: str, id: str | None = None) -> None:
        """``tabs``: (tab id, label, id of the panel the tab shows)."""
        super().__init__(id=id)
        self._strip = TabStrip(tabs, active=initial)
        self._panels: list[Widget] = []

    def compose_add_child(self, widget: Widget) -> None:
        """Panels composed inside ``with BottomTabs(...)`` go after the tab row."""
        widget.display = widget.id == self._tab(self.active).panel_id
        self._panels.append(widget)

    def compose(self):
        yield self._strip
        yield from self._panels

    def on_mount(self) -> None:
        self.post_message(self.TabActivated(self, self.active))

    # -- the TabbedContent face -------------------------------------------------------------------

    @property
    def active(self) -> str:
        return self._strip.active

    @active.setter
    def active(self, tab_id: str) -> None:
        tab = self._tab(tab_id)
        if tab_id == self._strip.active:
            return
        self._strip.active = tab_id
        self._strip.tabs_changed(animate=True)
        for child in self.children:
            if child is not self._strip:
                child.display = child.id == tab.panel_id
        self.post_message(self.TabActivated(self, tab_id))

    def _tab(self, tab_id: str) -> TabHandle:
        for t in self._strip.tabs:
            if t.id == tab_id:
                return t
        raise ValueError(f"No tab with id {tab_id!r}")

    def get_tab(self, tab_id: str) -> TabHandle:
        return self._tab(tab_id)

    def hide_tab(self, tab_id: str) -> None:
        tab = self._tab(tab_id)
        if not tab._display:
            return
        if tab_id == self.active:
            shown = self._strip._shown()
            i = shown.index(tab)
            rest = shown[:i] + shown[i + 1:]
            nxt = rest[i] if i < len(rest) else (rest[i - 1] if rest else None)
            if nxt is not None:
                self.active = nxt.id
        tab._display = False
        self._strip.tabs_changed(animate=True)

    def show_tab(self, tab_id: str) -> None:
        tab = self._tab(tab_id)
        if tab._display:
            return
        tab._display = True
        self._strip.tabs_changed(animate=True)

    def add_panel(self, panel: Widget) -> None:
        """Mount the panel of a tab whose panel was not built yet (shown if its tab is active)."""
        panel.display = panel.id == self._tab(self.active).panel_id
        self.mount(panel)

    def on_tab_strip_chosen(self, message: TabStrip.Chosen) -> None:
        message.stop()
        self.active = message.tab_id

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """A panel of another tab got the focus (the screen focused it): show its tab, as a
        ``TabPane`` does."""
        widget = event.widget
        for child in self.children:
            if child is not self._strip and (widget is child or child in widget.ancestors):
                for t in self._strip.tabs:
                    if t.panel_id == child.id and t.id != self.active:
                        self.active = t.id
                return
