"""Textual's Footer, recomposed only when what it shows changed.

The stock Footer recomposes (a dozen ``FooterKey`` widgets through the CSS engine) every time the
screen publishes a bindings update — on every focus change, screen resume and ``refresh_bindings``
— even when the keys it shows are the same. On the session screen that cost ~0.3 s of main-thread
time while a big session opens. This one compares the shown keys first.
"""

from __future__ import annotations

from textual.widgets import Footer

__all__ = ["KeyFooter"]


class KeyFooter(Footer):
    _shown: tuple | None = None

    def bindings_changed(self, screen) -> None:
        try:
            shown = tuple(
                (key, a.binding.description, a.binding.action, a.enabled, a.tooltip, id(a.binding.group))
                for key, a in screen.active_bindings.items() if a.binding.show
            )
        except Exception:  # noqa: BLE001 - never let the optimisation hide the keys
            shown = None
        if shown is not None and shown == self._shown:
            return
        self._shown = shown
        super().bindings_changed(screen)
