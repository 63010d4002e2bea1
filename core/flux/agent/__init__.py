"""The recording agent runtime: client and sessions, ops, approver, adaptive loop, providers.
A user's import is the SDK's client (:mod:`flux.sdk`), this client with the time machine on it."""

from __future__ import annotations

from ..lazy import lazy_exports

_EXPORTS = {
    "Client": ".client", "Session": ".session", "TurnOutput": ".loop", "op": ".ops", "Op": ".ops",
    "OpError": ".ops", "Toolbox": ".ops", "DenyAll": ".approver", "AutoApprove": ".approver",
    "PolicyApprover": ".approver", "CallbackApprover": ".approver", "load_policy": ".approver",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
