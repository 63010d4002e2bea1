"""Session bindings: the symbols flux keeps in its session store, across plans and turns.

flux binds symbols in a durable, last-writer-wins session table (``flow.db`` ``symbols`` over
``values_store``). Three things there matter to this interpreter because nothing else
carries them from one plan (or turn, or process) to the next:

- the branch names a ``parallel`` binds — a resume that fast-forwards past the statement rebinds
  them from here (flux records one value per statement, the last branch's, and relies on the
  durable bindings for the rest, on resume);
- ``throttle`` buckets, under ``__throttle_bucket_<name>`` (hidden): the JSON text of the epoch-ms
  timestamps of the dispatches in the window;
- ``debounce`` tokens, under ``__debounce_last_<name>`` (hidden): ``"<epoch ms>:<seq>"`` of the
  newest trigger.

:class:`MemoryBindings` keeps them for as long as the caller keeps the object (an interpreter makes
one by default, so replay — which must never write to the store it reads — stays in memory);
:class:`flux.store.bindings.FlowDbBindings` keeps them in a store's ``flow.db`` the way flux does.
"""

from __future__ import annotations

import itertools
from typing import Any, Optional, Protocol

__all__ = ["SessionBindings", "MemoryBindings", "throttle_key", "debounce_key", "next_debounce_seq"]


def throttle_key(name: str) -> str:
    return f"__throttle_bucket_{name}"


def debounce_key(name: str) -> str:
    return f"__debounce_last_{name}"


_DEBOUNCE_SEQ = itertools.count()


def next_debounce_seq() -> int:
    """Process-wide, like flux's atomic counter: tokens of two interpreters never collide."""
    return next(_DEBOUNCE_SEQ)


class SessionBindings(Protocol):
    def get(self, name: str) -> Optional[Any]:
        """The bound value (natural JSON: op results are text), or None when unbound."""

    def bind(self, name: str, value: Any, *, hidden: bool = False, summary: str = "") -> None:
        """Bind ``name`` to ``value`` (last writer wins)."""


class MemoryBindings:
    """Session bindings in a dict (tests, replay, or a caller that keeps the object)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.hidden: set[str] = set()

    def get(self, name: str) -> Optional[Any]:
        return self.values.get(name)

    def bind(self, name: str, value: Any, *, hidden: bool = False, summary: str = "") -> None:
        self.values[name] = value
        if hidden:
            self.hidden.add(name)
        else:
            self.hidden.discard(name)
