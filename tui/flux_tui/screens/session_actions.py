"""What the session screen's keys do: step turns and errors, switch tabs, open the time machine's
dialogs, search (/ n N), jump (:), copy (y Y), resize and zoom the panels — and which keys the
footer offers. Mixed into :class:`~.session.SessionScreen`, whose state they read and change."""

from __future__ import annotations

from textual.widget import Widget

from ..render import display_statement_text
from ..widgets.inspector import turn_position
from .ask import AskScreen
from .cases import save_case_here
from .diff import ask_and_diff
from .fork import start_fork
from .lineage import LineageScreen, open_source
from .resurrect import ResurrectScreen
from .session_search import Search, find_matches, parse_jump
from .whatif import start_what_if

__all__ = ["SessionActions"]

SPLIT_STEPS = (0, 20, 26, 34, 44, 56)  # widths of the turns column `<` / `>` step through


class SessionActions:
    HELP_TOPIC = "timeline"
    FOOTER_ESSENTIAL = ("replay", "diff", "next_error", "prev_error")

    _search: Search | None = None
    _zoomed: list[Widget] | None = None

    # -- turns, errors, tabs ----------------------------------------------------------------------

    def action_back(self) -> None:
        if self._zoomed is not None:
            self.action_zoom()
        elif self._search is not None:
            self.clear_search()
        elif self.replay is not None:
            self.clear_replay()
        else:
            self.app.pop_screen()

    def _select_turn(self, number: int) -> bool:
        tl = self.turns_list
        idx = next((i for i, t in enumerate(tl.rows) if t.number == number), None)
        if idx is not None:
            tl.move_cursor(idx)
        return idx is not None

    def action_next_turn(self) -> None:
        if self.turns_list.row_count:
            self.turns_list.move_cursor(self.turns_list.cursor + 1)

    def action_prev_turn(self) -> None:
        if self.turns_list.row_count:
            self.turns_list.move_cursor(self.turns_list.cursor - 1)

    def _jump_error(self, forward: bool) -> None:
        if self.timeline is None:
            return
        positions = self.timeline.error_positions()
        tv = self.timeline_view
        if not positions:
            self.notify("no errors in this turn", timeout=2)
            return
        cur = tv.current.stop if tv.current is not None else -1
        ahead = [p for p in positions if p > cur] if forward else [p for p in reversed(positions) if p < cur]
        wrapped = not ahead
        nxt = ahead[0] if ahead else (positions[0] if forward else positions[-1])
        if nxt == cur:
            self.notify("no other error in this turn — this is the only one", timeout=2)
            return
        row = tv.stop_row(nxt)
        if row is not None:
            tv.move_cursor(row)
            tv.focus()
        if wrapped and len(positions) > 1:
            self.notify("wrapped around", timeout=1.5)

    def action_next_error(self) -> None:
        if self._search is not None:
            self._step_search(1)  # while a search is active n/N step its matches (Esc ends it)
        else:
            self._jump_error(True)

    def action_prev_error(self) -> None:
        if self._search is not None:
            self._step_search(-1)
        else:
            self._jump_error(False)

    def action_observations(self) -> None:
        self.tabs.toggle("tab-observations")

    def action_unknown_events(self) -> None:
        self.tabs.toggle("tab-unknown")

    def action_agent_loop(self) -> None:
        if self.turn is None or self._agent_loops.get(self.app.store_dir, self.turn.loop_binding) is None:
            self.notify("this turn records no agent-loop program", severity="information")
            return
        self.tabs.toggle("tab-loop")

    def action_conversation(self) -> None:
        self.tabs.active = "tab-conversation"

    def action_conversation_scope(self) -> None:
        self.tabs.toggle_scope()
        self.tabs.show_conversation(self.detail, self.turn)

    def action_focus_panel(self, which: str) -> None:
        target = {"turns": "#turns", "timeline": "#timeline", "inspector": "#inspector"}.get(which)
        if target is not None:
            self.query_one(target).focus()
        else:
            self.tabs.focus_pane()

    # -- the other screens and the time machine's dialogs -------------------------------------------

    def action_diff(self) -> None:
        if self.detail is not None:
            ask_and_diff(self.app, self.detail.row.id, self.detail.row.correlation_id)

    def action_fork(self) -> None:
        start_fork(self)

    def action_save_case(self) -> None:
        save_case_here(self)

    def action_what_if(self) -> None:
        start_what_if(self)

    def action_resurrect(self) -> None:
        if self.detail is None:
            return
        if self.check.interrupted is None:
            why = f" — {self.check.reason}" if self.check.reason else ""
            self.notify(f"{self.detail.row.id} has no interrupted turn{why}; R resurrects a turn that was killed "
                        "mid-plan (marked ⚠ interrupted)", timeout=4)
            return
        self.app.push_screen(ResurrectScreen(self.detail.row.id, self.turn.number if self.turn else None))

    def action_lineage(self) -> None:
        self.app.push_screen(LineageScreen(self.session_id))

    def action_source(self) -> None:
        d = self.detail
        if d is None:
            return
        if not d.row.correlation_id:
            self.notify(f"{d.row.id} is a root session — it was not forked, branched or spawned from another one",
                        timeout=3)
            return
        open_source(self.app, d.row.correlation_id)

    # -- which keys act, which the footer shows -----------------------------------------------------

    _DYNAMIC_ACTIONS = ("source", "next_error", "prev_error", "replay", "diff", "fork", "what_if", "resurrect")
    _NEEDS_SESSION = frozenset({"prev_turn", "next_turn", "next_error", "prev_error", "observations", "conversation",
                                "conversation_scope", "unknown_events", "lineage", "source", "replay", "diff", "search",
                                "jump", "copy", "copy_hash", "split", "zoom", "focus_panel"})

    def footer_hidden(self, action: str) -> bool:
        """Keys the footer leaves out although they work (they only say why they cannot act)."""
        if action == "resurrect":
            return self.check.interrupted is None
        return action == "source" and (self.detail is None or not self.detail.row.correlation_id)

    def _refresh_bindings(self) -> None:
        """Refresh the footer only when an action's availability changed: every refresh recomposes
        the footer, which a big session's first paint feels."""
        sig = tuple(self.check_action(a, ()) for a in self._DYNAMIC_ACTIONS) + (self.footer_hidden("source"),
                                                                              self.footer_hidden("resurrect"))
        if sig != getattr(self, "_bindings_sig", None):
            self._bindings_sig = sig
            self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.load_error is not None and action in self._NEEDS_SESSION:
            return False  # the session could not be read: offer only Back / Help / Quit
        # While the session or a turn is still being read, the keys that will act once it is are
        # shown disabled (None), not hidden (False): the footer keeps its keys and only lights them
        # up when the rows arrive, and the keys do not jump.
        if action == "source":
            return self.detail is not None
        if action in ("next_error", "prev_error", "fork", "what_if"):
            return True if self.timeline is not None else (None if self._timeline_pending else False)
        if action in ("replay", "diff"):
            return None if self.detail is None else self.replay_running is None
        if action == "resurrect":
            return self.detail is not None  # not interrupted: R says why (the footer hides it)
        return True

    # -- layout: responsive, resizable, zoomable ----------------------------------------------------

    def on_resize(self, event) -> None:
        self._size_classes(self.size.width, self.size.height)

    def _size_classes(self, width: int, height: int, *, update: bool = True) -> None:
        # Narrow (80-col) terminals: a slimmer turns column, and the inspector above the tabs rather
        # than beside them, so neither is squeezed to 20 columns. Short ones: a smaller turn panel.
        self.set_class(width < 110, "-narrow", update=update)
        self.set_class(width < 150, "-stacked", update=update)
        self.set_class(height < 32, "-short", update=update)

    def _apply_split(self) -> None:
        w = getattr(self.app, "session_split", None)
        left = self.query_one("#left")
        if w is None:
            left.styles.clear_rule("width")
            left.display = True
            return
        left.display = w > 0
        if w > 0:
            left.styles.width = w

    def action_split(self, delta: int) -> None:
        cur = getattr(self.app, "session_split", None)
        cur = cur if cur is not None else (26 if self.has_class("-narrow") else 34)
        idx = min(range(len(SPLIT_STEPS)), key=lambda i: abs(SPLIT_STEPS[i] - cur))
        idx = max(0, min(len(SPLIT_STEPS) - 1, idx + delta))
        max_w = max(0, self.size.width - 40)  # the plan keeps at least 40 columns
        self.app.session_split = min(SPLIT_STEPS[idx], max_w) if SPLIT_STEPS[idx] else 0
        self._apply_split()
        if self.app.session_split == 0:
            self.notify("turns hidden — > brings them back; [ / ] still step turns", timeout=3)
            if self.focused is not None and self.query_one("#left") in self.focused.ancestors_with_self:
                self.timeline_view.focus()

    def action_zoom(self) -> None:
        if self._zoomed is not None:
            for w in self._zoomed:
                w.display = True
            self._zoomed = None
            self._apply_split()
            return
        node = self.focused
        main = self.query_one("#session-main")
        if node is None or main not in node.ancestors:
            return
        hidden = []
        while node is not main and node.parent is not None:
            for sib in node.parent.children:
                if sib is not node and sib.display:
                    sib.display = False
                    hidden.append(sib)
            node = node.parent
        self._zoomed = hidden
        self.notify("z restores the layout", timeout=2)

    # -- search (/ n N), jump (:), copy (y Y) -------------------------------------------------------

    def action_search(self) -> None:
        def done(query: str | None) -> None:
            if query is None:
                return
            if not query.strip():
                self.clear_search()
            else:
                self.run_search(query)

        self.app.push_screen(AskScreen("Search", "Search the session (this turn's plan, cells and conversation, "
                                       "then the other turns' cells):",
                                       "Enter searches · n/N next/previous match · Esc clears",
                                       value=self._search.query if self._search else "", placeholder="text"), done)

    def run_search(self, query: str) -> None:
        cells = self.detail.cells if self.detail is not None else ()
        matches = find_matches(query, self.timeline_view.rows, self.tabs.panel_text("conversation"), cells,
                               self.turn.number if self.turn is not None else None)
        if not matches:
            self._search = None
            self._timeline_title()
            where = f"turn {self.turn.number}" if self.turn is not None else "this session"
            self.notify(f"no match for “{query}” in {where} — / searches the turn shown", timeout=3)
            return
        self._search = Search(query, matches)
        self._step_search(1)

    def _step_search(self, delta: int) -> None:
        search = self._search = self._search.step(delta)
        kind, at = search.current
        if kind == "row":
            self.timeline_view.move_cursor(at)
            self.timeline_view.focus()
        elif kind == "cell":
            self.jump_to(f"c{at}")  # another turn's cell: that turn opens on it (its rows are other rows: / again there)
        else:
            self.tabs.active = "tab-conversation"
            conv = self.query_one("#conversation")
            conv.scroll_to(y=max(0, at - 1), animate=False)
            conv.focus()
        self._timeline_title()
        where = {"conv": " (conversation)", "cell": f" (cell #{at}, in another turn — / searches again there)"}.get(kind, "")
        self.notify(f"“{search.query}”: match {search.position + 1} of {len(search.matches)}{where}", timeout=1.5)

    def clear_search(self) -> None:
        self._search = None
        self._timeline_title()

    def action_jump(self) -> None:
        def done(text: str | None) -> None:
            if text:
                self.jump_to(text)

        self.app.push_screen(AskScreen("Jump", "Jump to:", "3 or t3 = turn 3 · s2 = statement 2 of the turn · c7 = cell #7 · "
                                       "g / G first / last", placeholder="t3, s2, c7"), done)

    def jump_to(self, text: str) -> None:
        target = parse_jump(text)
        if target is None:
            self.notify(f"cannot read “{text}” — type 3 (turn), s2 (statement) or c7 (cell)", severity="warning",
                        timeout=3)
            return
        kind, n = target
        tv = self.timeline_view
        if kind == "t":
            if not self._select_turn(n):
                self.notify(f"no turn {n} — this session has {self.turns_list.row_count}", severity="warning", timeout=3)
                return
        elif kind == "s":
            # Statement N of the turn, its plans laid end to end (the number the inspector, replay,
            # resurrect and fork --turn use): the turn's N-th statement, counting from 0.
            stmts = [i for i, r in enumerate(tv.rows) if r.kind == "statement" and r.statement is not None]
            if n >= len(stmts):
                self.notify(f"no statement {n} in this turn", severity="warning", timeout=3)
                return
            tv.move_cursor(stmts[n])
        else:
            d = self.detail
            if d is None or not (0 <= n < len(d.cells)):
                self.notify(f"no cell #{n} — this session has {len(d.cells) if d else 0} cell(s)", severity="warning",
                            timeout=3)
                return
            turn_no = d.cells[n].turn_number
            idx = tv.find_row(("cell", n)) if self.turn is not None and turn_no == self.turn.number else None
            if idx is not None:
                tv.move_cursor(idx)
            else:
                self._pending_focus = (turn_no, ("cell", n))
                if not self._select_turn(turn_no):
                    self._pending_focus = None
                    self.notify(f"cell #{n} belongs to no turn", severity="warning", timeout=3)
                    return
        tv.focus()

    def _copy_target(self, want_hash: bool) -> tuple[str, str] | None:
        """(text, what) for y / Y from the focused panel and the item under the cursor."""
        fid = self.focused.id if self.focused is not None else None
        if fid == "turns":
            t = self.turns_list.current
            return (t.user_input, f"turn {t.number}'s input") if t is not None and not want_hash else None
        if fid in ("conversation", "observations", "unknown", "replay") and not want_hash:
            return self.tabs.panel_text(fid), f"the {fid} panel"
        row = self.timeline_view.current
        if row is None:
            return None
        inspector = self.query_one("#inspector").plain_text
        if row.cell is not None:
            rec, i = row.cell.rec, row.cell.index
            if want_hash:
                return rec.input_hash, f"cell #{i}'s input_hash"
            if fid == "inspector":  # what the inspector shows, as shown
                return inspector, f"the inspector's cell #{i}"
            return rec.content, f"cell #{i}'s content"
        if row.statement is not None:
            at = turn_position(self.timeline, row)
            if want_hash:
                return row.statement.stmt_hash, f"statement {at}'s stmt_hash"
            if fid == "inspector":
                return inspector, f"the inspector's statement {at}"
            return row.display or display_statement_text(row.statement.text), f"statement {at}'s source"
        return None

    def _copy(self, want_hash: bool) -> None:
        target = self._copy_target(want_hash)
        if target is None or not target[0]:
            self.notify("nothing to copy here — move the cursor to a statement or a cell", timeout=2)
            return
        text, what = target
        self.app.copy_to_clipboard(text)
        self.notify(f"copied {what} ({len(text):,} chars)", timeout=2)

    def action_copy(self) -> None:
        self._copy(False)

    def action_copy_hash(self) -> None:
        self._copy(True)
