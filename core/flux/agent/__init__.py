"""The recording agent runtime: client and sessions, ops, approver, adaptive loop, providers.
A user's import is the SDK's client (:mod:`flux.sdk`), this client with the time machine on it."""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Client": ".client", "Session": ".session", "TurnOutput": ".loop", "op": ".ops", "Op": ".ops",
    "OpError": ".ops", "Toolbox": ".ops", "DenyAll": ".approver", "AutoApprove": ".approver",
    "PolicyApprover": ".approver", "CallbackApprover": ".approver", "load_policy": ".approver",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(mod, __name__), name)
