"""Textual's Footer, recomposed only when what it shows changed, and fitted to the terminal width.

The stock Footer recomposes (a dozen ``FooterKey`` widgets through the CSS engine) every time the
screen publishes a bindings update — on every focus change, screen resume and ``refresh_bindings``
— even when the keys it shows are the same. On the session screen that cost ~0.3 s of main-thread
time while a big session opens. This one compares the shown keys first.

At 80 columns the stock Footer simply cuts the keys that do not fit — Help and Quit first, as they
come last. This one drops the least essential keys instead: Back, Help and Quit always stay, then a
screen's ``FOOTER_ESSENTIAL`` actions; the others go from the end until the rest fits (all of them
stay in the command palette and in F1 help).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import groupby

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel, KeyGroup

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


class KeyFooter(Footer):
    _shown: tuple | None = None
    _fitted_width: int = -1

    def bindings_changed(self, screen) -> None:
        try:
            hidden = getattr(screen, "footer_hidden", lambda action: False)
            shown = tuple(
                (key, a.binding.description, a.binding.action, a.enabled, a.tooltip, id(a.binding.group))
                for key, a in screen.active_bindings.items() if a.binding.show and not hidden(a.binding.action)
            )
        except Exception:  # noqa: BLE001 - never let the optimisation hide the keys
            shown = None
        if shown is not None and shown == self._shown:
            return
        if self._only_enabled_changed(shown):
            self._shown = shown
            return
        self._shown = shown
        self._bindings_ready = True  # Footer.bindings_changed, with one recompose however many arrive
        if not screen.app.app_focus:
            return
        if self.is_attached and screen is self.screen:
            self._schedule_recompose()

    _recompose_pending = False

    def _schedule_recompose(self) -> None:
        """One recompose after the next refresh, however many updates (bindings, a resize) ask for it
        meanwhile — opening a screen asks three times."""
        if self._recompose_pending:
            return
        self._recompose_pending = True

        async def run() -> None:
            self._recompose_pending = False
            await self.recompose()

        if self.screen is self.app.screen:
            self.call_after_refresh(run)
        else:  # a screen under a modal gets no refresh of its own to wait for: its keys would go stale
            self.call_later(run)

    def _only_enabled_changed(self, shown: tuple | None) -> bool:
        """Same keys, only some enabled or disabled (a session finished loading): flip them in place
        instead of recomposing the footer (a recompose is ~20 widgets through the CSS engine)."""
        old = self._shown
        if shown is None or old is None or len(shown) != len(old) or not self._bindings_ready or not self.is_attached:
            return False
        if any(a[:3] + a[4:] != b[:3] + b[4:] for a, b in zip(shown, old)):
            return False
        enabled = {key: en for key, _desc, _action, en, _tip, _group in shown}
        keys = [k for k in self.query(FooterKey) if k.key in enabled]
        if len(keys) != len({k.key for k in keys}) or not keys:
            return False
        for k in keys:
            off = not enabled[k.key]
            if k._disabled != off:
                k._disabled = off
                k.set_class(off, "-disabled")
        return True

    def _key(self, key: FooterKey) -> FooterKey:
        """``key`` bound to the footer's ``compact``, already in that state: a FooterKey starts
        compact and the bound value arrives after it is mounted, so each key was styled three times
        (mounted, ``-compact`` added, then removed) — a third of the footer's cost."""
        key.set_reactive(FooterKey.compact, self.compact)
        key.set_class(self.compact, "-compact", update=False)
        return key.data_bind(compact=Footer.compact)

    def on_resize(self) -> None:
        if self.size.width != self._fitted_width and self._bindings_ready:
            self._schedule_recompose()

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        active_bindings = self.screen.active_bindings
        by_action: defaultdict[str, list] = defaultdict(list)
        hidden = getattr(self.screen, "footer_hidden", lambda action: False)
        for _, binding, enabled, tooltip in active_bindings.values():
            if binding.show and not hidden(binding.action):
                by_action[binding.action].append((binding, enabled, tooltip))
        width = self.size.width or self.app.size.width
        self._fitted_width = width  # the width the keys were fitted to (not 0 before the first layout)
        # (action, cost) in footer order, a compact group costing its share per key
        groups = [(group, list(entries)) for group, entries in
                  groupby(by_action.values(), lambda entries: entries[0][0].group)]
        costs: list[tuple[str, int]] = []
        for group, entries in groups:
            grouped = group is not None and len(entries) > 1
            labelled = [(b.action, self.app.get_key_display(b), b) for b, _, _ in (e[0] for e in entries)]
            if grouped:
                share = _cost(labelled, True)
                costs.append((entries[0][0][0].action, share))
                costs.extend((e[0][0].action, 0) for e in entries[1:])
            else:
                costs.extend((a, _cost([(a, lbl, b)], False)) for a, lbl, b in labelled)
        essential = set(getattr(self.screen, "FOOTER_ESSENTIAL", ()))
        keep = fit_keys(costs, width - PALETTE_WIDTH, essential)
        shown = 0
        for group, entries in groups:
            entries = [e for e in entries if e[0][0].action in keep or
                       (group is not None and len(entries) > 1 and entries[0][0][0].action in keep)]
            if not entries:
                continue
            if group is not None and len(entries) > 1:
                with KeyGroup(classes="-compact" if group.compact else ""):
                    for multi in entries:
                        binding, enabled, tooltip = multi[0]
                        yield self._key(FooterKey(binding.key, self.app.get_key_display(binding), "", binding.action,
                                                  disabled=not enabled, tooltip=tooltip or binding.description,
                                                  classes="-grouped"))
                yield FooterLabel(group.description)
                shown += 2
            else:
                for multi in entries:
                    binding, enabled, tooltip = multi[0]
                    yield self._key(FooterKey(binding.key, self.app.get_key_display(binding), binding.description,
                                              binding.action, disabled=not enabled, tooltip=tooltip))
                    shown += 1
        self.styles.grid_size_columns = max(shown, 1)
        if self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE:
            try:
                _node, binding, enabled, tooltip = active_bindings[self.app.COMMAND_PALETTE_BINDING]
            except KeyError:
                pass
            else:
                # not bound to the footer's compact: stays compact (FooterKey's default), as in the stock Footer
                yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                                classes="-command-palette -compact", disabled=not enabled,
                                tooltip=binding.tooltip or binding.description)
