"""Dialog buttons that stand for a key: one handler maps a pressed button's id to the action the
key runs, so a click and the key always do the same thing."""

from __future__ import annotations

from typing import ClassVar

__all__ = ["ButtonActions"]


class ButtonActions:
    """Mixed into a dialog: ``BUTTON_ACTIONS`` maps a button id to an action name
    (``{"fork-run": "run"}`` → pressing ``#fork-run`` calls ``action_run()``)."""

    BUTTON_ACTIONS: ClassVar[dict[str, str]] = {}

    def on_button_pressed(self, event) -> None:
        action = self.BUTTON_ACTIONS.get(event.button.id or "")
        if action is not None:
            event.stop()
            getattr(self, f"action_{action}")()
