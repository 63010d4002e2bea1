"""User-facing errors. Every message is one line: the reason, then what to do.

:class:`AssertionFailed` is the test kit's failed check (what-if results assert too): its text is the
whole actionable message, a summary line and the detail under it."""

from __future__ import annotations

import sys
from types import ModuleType


class FluxError(Exception):
    """An error meant for a person: ``str(err)`` is a one-line reason and what to do next."""


class StoreError(FluxError):
    """The store directory or one of its databases cannot be used."""


class StoreLockedError(StoreError):
    """A writer holds the database lock longer than the busy timeout."""


class SessionNotFound(FluxError):
    """A session id names no session in this store."""


class NotReplayable(FluxError):
    """A session has nothing that replay, diff or fork could work from."""


class AssertionFailed(AssertionError):
    """A test-kit assertion failed; ``str()`` is the full, actionable message."""

    def __init__(self, message: str, *, detail: str = ""):
        super().__init__(message + (("\n\n" + detail) if detail else ""))
        self.summary = message
        self.detail = detail


def import_extra(module: str, missing: str, error: type[FluxError] = FluxError) -> ModuleType:
    """``module`` imported, or ``error(missing)`` when it is not installed: an optional extra's package,
    whose absence is one line naming the extra to install."""
    try:
        __import__(module)  # the import statement's own hook, so a test can hide a package as Python would
    except ImportError:
        raise error(missing) from None
    return sys.modules[module]
