"""The reason codes of saved cases, and the one exception that carries them.

A :class:`CaseRefusal` is a refusal with a stable machine code (``bundle_corrupt``,
``write_not_allowed``, …) and a one-line message saying what is wrong and what to do. The CLI
prints a refusal before a run starts as ``{"code", "message"}`` on stdout (exit 2); a refusal
raised while reading a bundle or a store is the same object wherever it is caught.
"""

from __future__ import annotations

from ..errors import FluxError

__all__ = ["CaseRefusal", "REASON_CODES", "REPLAY_REASONS"]

#: Every reason code a case verb or a case run can give, with what it means.
REASON_CODES = {
    "capture_incomplete": "the recording lacks what a replay needs (the message lists it)",
    "no_fixture_store": "no fixture store is configured",
    "bundle_missing": "the hash names no bundle in the fixture store",
    "bundle_corrupt": "the bytes fail decompression, hashing or validation",
    "bundle_too_large": "the bundle is over the size limit",
    "format_unsupported": "the bundle's format or kind is not readable by this version",
    "kind_mismatch": "--kind names a kind the recorded run is not",
    "invalid_fixture_hash": "not a 64-character lowercase hex hash",
    "invalid_keep_hash": "a hash to keep is not a 64-character lowercase hex hash",
    "invalid_overrides": "a run setting names nothing in the case or is invalid",
    "prefix_diverged": "the run no longer makes the recorded prefix's calls with their recorded inputs",
    "missing_context": "a call has no live rung, or a supplied answer has the wrong shape",
    "live_budget_exceeded": "the live-call or cost ceiling is reached, or spend is unknown under a cost limit",
    "write_not_allowed": "a write has no --allow-write token",
    "replay_diverged": "a --replay-only call the recording cannot answer",
    "runtime_error": "the runtime failed",
    "cancelled": "the run was cancelled",
}

#: Why a replay-only call could not be answered (``reason`` next to ``replay_diverged``).
REPLAY_REASONS = ("input_changed", "unexpected_call", "recorded_error")


class CaseRefusal(FluxError):
    """A refusal with a reason code (one of :data:`REASON_CODES`)."""

    def __init__(self, code: str, message: str):
        if code not in REASON_CODES:
            raise ValueError(f"unknown reason code {code!r}")
        super().__init__(message)
        self.code = code
        self.message = message

    def to_json(self) -> dict:
        return {"code": self.code, "message": self.message}
