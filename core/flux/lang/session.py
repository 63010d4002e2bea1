"""Session bindings: the symbols flux keeps across plans and turns in its durable session table — the branch
names a ``parallel`` binds, ``throttle`` buckets and ``debounce`` tokens. :class:`MemoryBindings` keeps them
in memory (replay never writes to the store it reads); :class:`flux.store.bindings.FlowDbBindings` keeps
them in a store's ``flow.db`` as flux does (docs/flux-lang.md, "Session bindings")."""

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
