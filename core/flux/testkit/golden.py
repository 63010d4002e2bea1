"""Golden mode: ``FLUX_GOLDEN=update`` re-baselines instead of failing.

``flux test --update`` and ``pytest --flux-update`` set the same variable for their process, so one
switch covers the plan snapshot, ATIF goldens, the judge cassette, re-recording by ``record`` and
``check``. Every rewrite is reported (:class:`Rebaseline`), never silent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["ENV", "update_mode", "Rebaseline"]

ENV = "FLUX_GOLDEN"


def update_mode() -> bool:
    return os.environ.get(ENV, "").strip().lower() == "update"


@dataclass(frozen=True)
class Rebaseline:
    """One golden file rewritten under update mode, and how it changed."""

    path: str
    what: str  # plan snapshot | trajectory golden | judge verdict | scenario
    diff: str  # unified diff of old → new ("" when the file was created)
    created: bool = False

    def line(self) -> str:
        verb = "created" if self.created else "updated"
        return f"{verb} {self.what} {self.path}"
