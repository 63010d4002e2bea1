"""The session screen's bottom panel: tabs for the conversation (this turn or the whole session),
the turn's observations, unknown event kinds, the last replay report and the agent-loop program.

Every tab but the conversation gets its panel when it is first shown: four scrolling panels fewer
to build, style and lay out while the screen opens. What such a panel is given before that is kept
as a function — rendered only if the tab is ever shown."""

from __future__ import annotations

from typing import Callable

from rich.console import Group, RenderableType
from rich.text import Text
from textual import on
from textual.css.query import NoMatches

from flux.model.session import SessionDetail, Turn

from ..render import render_conversation
from .bottom_tabs import BottomTabs
from .rendered_view import RenderedView

__all__ = ["SessionTabs", "SESSION_TABS"]

# (tab id, label, id of the panel it shows)
SESSION_TABS = [("tab-conversation", "Conversation", "conversation"), ("tab-observations", "Observations", "observations"),
                ("tab-unknown", "Unknown", "unknown"), ("tab-replay", "Replay", "replay"), ("tab-loop", "Loop", "agent-loop")]
_LAZY = {tab: panel for tab, _label, panel in SESSION_TABS if tab != "tab-conversation"}
_FOCUSABLE = {"tab-conversation": "#conversation", "tab-observations": "#observations", "tab-unknown": "#unknown"}


class SessionTabs(BottomTabs):
    def __init__(self, **kw) -> None:
        super().__init__(SESSION_TABS, initial="tab-conversation", **kw)
        self.compose_add_child(RenderedView("conversation", id="conversation"))
        self._held: dict[str, Callable[[], RenderableType]] = {}
        self.scope = "turn"  # the conversation: "turn" or "all"
        self._messages: dict[int, list] = {}  # turn number -> its messages, read once per load

    # -- panels, now or when their tab is first shown ---------------------------------------------

    def show_in(self, panel_id: str, content: Callable[[], RenderableType]) -> None:
        """Show ``content()`` in the panel ``panel_id``: now if it exists, else when its tab is first shown."""
        try:
            panel = self.query_one(f"#{panel_id}", RenderedView)
        except NoMatches:
            self._held[panel_id] = content
            return
        panel.show(content())

    @on(BottomTabs.TabActivated)
    def _build_lazy_panel(self, event: BottomTabs.TabActivated) -> None:
        panel_id = _LAZY.get(event.tab_id)
        if event.tabs is not self or panel_id is None or self.query(f"#{panel_id}"):
            return
        content = self._held.pop(panel_id, None)
        self.add_panel(RenderedView(panel_id, content() if content is not None else "", id=panel_id))

    def toggle(self, tab_id: str) -> None:
        """Show ``tab_id``, or back to the conversation if it is showing."""
        self.active = "tab-conversation" if self.active == tab_id else tab_id

    def focus_pane(self) -> None:
        self.query_one(_FOCUSABLE.get(self.active or "tab-conversation", "#conversation")).focus()

    def set_label(self, tab_id: str, label: str) -> None:
        tab = self.get_tab(tab_id)
        if str(tab.label) != label:
            tab.label = label

    def show_loop(self, content: Callable[[], RenderableType] | None) -> None:
        """The "Loop" tab exists only for turns that record an agent-loop program (``content``)."""
        if content is None:
            if self.active == "tab-loop":
                self.active = "tab-conversation"
            self.hide_tab("tab-loop")
            return
        self.show_tab("tab-loop")
        self.show_in("agent-loop", content)

    # -- the conversation ---------------------------------------------------------------------------

    def forget_messages(self) -> None:
        self._messages = {}

    def toggle_scope(self) -> None:
        self.scope = "all" if self.scope == "turn" else "turn"
        self.active = "tab-conversation"

    def show_conversation(self, detail: SessionDetail | None, turn: Turn | None) -> None:
        """The conversation in the chosen scope; with no turn selected, the whole of it, as is."""
        conv = self.query_one("#conversation", RenderedView)
        if detail is None or turn is None:
            conv.show(render_conversation(detail.conversation if detail else [], scope="all"))
            return
        # The tab keeps one short name (the `c` key's "Conversation"); the scope is the panel's first
        # line, so "(all)" never pushes the Replay tab out of view.
        if self.scope == "all":
            scope = Text.assemble(("the whole conversation", "bold"), (" · a: this turn only", "dim"))
            conv.show(Group(scope, render_conversation(detail.conversation, scope="all")))
            return
        msgs = self._messages.get(turn.number)
        if msgs is None:
            msgs = self._messages[turn.number] = [e.body for e in detail.turn_messages(turn)]
        scope = Text.assemble((f"turn {turn.number}", "bold"), (" · a: the whole conversation", "dim"))
        conv.show(Group(scope, render_conversation(msgs, scope="turn")))

    def panel_text(self, panel_id: str) -> str:
        return self.query_one(f"#{panel_id}", RenderedView).plain_text
