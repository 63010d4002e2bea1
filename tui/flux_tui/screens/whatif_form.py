"""The what-if dialog's form: which question (this cell, every call to its op, the policy), off
tape (halt or go live), scope (the session or this turn) and re-plan — radio choices that keys
(F2–F5) and clicks set alike, each change re-planned."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.widgets import Input, RadioButton, RadioSet, Static

from .preview_dialog import PreviewDialog

__all__ = ["WhatIfForm", "Choice", "KINDS"]

KINDS = ("cell", "op", "policy")
# the two-way choices keys flip: attribute → (its radio set, its two values)
TWO_WAY = {"off_tape": ("offtape", ("halt", "live")), "scope": ("scope", ("session", "turn"))}


class Choice(RadioButton):
    """A radio button whose mark is its shape, not only its colour: ``●`` chosen, ``○`` not — under
    NO_COLOR (monochrome) the stock one drew the same ``▐●▌`` for both."""

    @property
    def BUTTON_INNER(self) -> str:  # noqa: N802 (Textual's class attribute name)
        return "●" if self.value else "○"


def highlight_choice(button: RadioButton) -> None:
    """Move its set's highlight onto a button chosen by a key: the highlight (a background) would
    otherwise stay on the button the set last moved to, and read as the choice."""
    group = button.parent
    if isinstance(group, RadioSet):
        buttons = list(group.query(RadioButton))
        if button in buttons:
            group._selected = buttons.index(button)


class WhatIfForm(PreviewDialog):
    """The choices' state (``kind``, ``off_tape``, ``scope``, ``replan``), what changes it, and the
    dialog's head that says what will re-run (the dialog sets ``target`` and ``turns``)."""

    kind = "policy"
    off_tape = "halt"
    scope = "session"  # or "turn": this turn only (--turn N)
    replan = False  # a live model turn re-drives the turn (-m MODEL / --instructions)

    def _describe(self) -> None:
        """The head: what was recorded, and what will re-run into the new session."""
        t = self.target
        where = Text()
        where.append("recorded   ", style="dim")
        rec = (t.recorded if t.recorded is not None else "(no recorded result)").replace("\n", " ⏎ ")
        where.append(rec if len(rec) <= 150 else rec[:149] + "…")
        if self.replan:
            turn = t.turn if self.scope == "turn" else self.turns
            before = f"turns 1–{turn - 1} replay from tape, then " if turn > 2 else \
                ("turn 1 replays from tape, then " if turn == 2 else "")
            how = f"{before}a live model turn re-plans turn {turn} against the frozen world"
        elif self.scope == "turn":
            how = f"turn {t.turn} re-runs from its recording"
        else:
            how = "the whole session re-runs from its recording"
        where.append(f"\n{how} into a new linked session", style="dim")
        self.query_one("#whatif-where", Static).update(where)

    def _mark(self) -> None:
        """The chosen answers also read as underlined text: colour alone (NO_COLOR) does not say which."""
        for btn in self.query(RadioButton):
            plain = getattr(btn, "_plain_label", None)
            if plain is None:
                plain = btn._plain_label = btn.label.plain
            if getattr(btn, "_marked", None) != btn.value:
                btn._marked = btn.value
                btn.label = Text(plain, style="bold underline") if btn.value else Text(plain)

    def _show_kind(self) -> None:
        for k in KINDS:
            btn = self.query_one(f"#kind-{k}", RadioButton)
            if btn.value != (k == self.kind):
                with btn.prevent(RadioButton.Changed):
                    btn.value = k == self.kind
            if k == self.kind:
                highlight_choice(btn)
        self._mark()
        value = self.kind in ("cell", "op")
        self.query_one("#whatif-value-label").display = value
        self.query_one("#whatif-value").display = value
        self.query_one("#whatif-policy-row").display = not value
        self.query_one("#whatif-replan-fields").display = self.replan

    @on(RadioSet.Changed, "#whatif-kind")
    def _on_kind(self, event: RadioSet.Changed) -> None:
        self.kind = (event.pressed.id or "kind-cell").removeprefix("kind-")
        self._show_kind()
        self.changed()

    @on(RadioSet.Changed, "#whatif-offtape")
    def _on_offtape(self, event: RadioSet.Changed) -> None:
        self.off_tape = "live" if event.pressed.id == "offtape-live" else "halt"
        self._mark()
        self.changed()

    def action_next_kind(self) -> None:
        if self.running:
            return
        usable = [k for k in KINDS if not self.query_one(f"#kind-{k}", RadioButton).disabled]
        self.kind = usable[(usable.index(self.kind) + 1) % len(usable)] if self.kind in usable else usable[0]
        self._show_kind()
        self.query_one("#whatif-value" if self.kind != "policy" else "#whatif-policy").focus()
        self.changed()

    @on(RadioSet.Changed, "#whatif-scope")
    def _on_scope(self, event: RadioSet.Changed) -> None:
        self.scope = "turn" if event.pressed.id == "scope-turn" else "session"
        self._mark()
        self._describe()
        self.changed()

    @on(RadioSet.Changed, "#whatif-replan")
    def _on_replan(self, event: RadioSet.Changed) -> None:
        self._set_replan(event.pressed.id == "replan-on")

    def _choose(self, group: str, chosen: str, other: str) -> None:
        """Set a two-way radio choice from a key, without the change event re-entering."""
        for name, value in ((chosen, True), (other, False)):
            btn = self.query_one(f"#{group}-{name}", RadioButton)
            with btn.prevent(RadioButton.Changed):
                btn.value = value
        highlight_choice(self.query_one(f"#{group}-{chosen}", RadioButton))
        self._mark()

    def _flip(self, attr: str) -> None:
        """A key's toggle of a two-way choice (F3 off tape, F4 scope): the other value, re-planned."""
        if self.running:
            return
        group, (first, second) = TWO_WAY[attr]
        now = second if getattr(self, attr) == first else first
        setattr(self, attr, now)
        self._choose(group, now, first if now == second else second)
        self._describe()
        self.changed()

    def action_toggle_off_tape(self) -> None:
        self._flip("off_tape")

    def action_toggle_scope(self) -> None:
        self._flip("scope")

    def action_toggle_replan(self) -> None:
        if self.running:
            return
        on_ = not self.replan
        self._choose("replan", "on" if on_ else "off", "off" if on_ else "on")
        self._set_replan(on_)
        if on_:
            self.query_one("#whatif-model", Input).focus()

    def _set_replan(self, on_: bool) -> None:
        self.replan = on_
        self._mark()
        self.query_one("#whatif-replan-fields").display = on_
        self._describe()
        self.changed()
