"""What counts as asserting on a scenario: the counter behind the pytest plugin's "no vacuous pass".

A kit ``assert_*`` call counts, and so does the test's own code reading a verdict off a result
(``report.plan_changed``, ``out.calls``); a read by the kit itself, or printing a result, does not.
"""

from __future__ import annotations

import sys
from typing import Any, ClassVar

__all__ = ["count", "CountsReads"]

_KIT_MODULES = ("flux.", "flux_tui.")


def count(scenario: Any) -> None:
    """One more assertion against ``scenario`` (anything with an ``assertions`` counter)."""
    if scenario is not None and hasattr(scenario, "assertions"):
        scenario.assertions += 1


class CountsReads:
    """Mixin for a result (a replay outcome, a check report): reading one of its ``COUNTED``
    attributes from code outside the kit counts as an assertion on :meth:`counted_scenario`."""

    COUNTED: ClassVar[frozenset[str]] = frozenset()

    def counted_scenario(self) -> Any:  # pragma: no cover - every subclass says which
        return None

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if name in object.__getattribute__(self, "COUNTED"):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if not caller.startswith(_KIT_MODULES):
                count(object.__getattribute__(self, "counted_scenario")())
        return value
