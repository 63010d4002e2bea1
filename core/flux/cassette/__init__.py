"""Cassettes: the redactor, the recording op host and the replay tape."""

from __future__ import annotations

from .record import DEFAULT_CAP, RecordingHost, build_cell, cap_from_env, cassette_enabled, input_view, truncate_utf8
from .redactor import DEFAULT_MARKER, Redactor, secret_name
from .replay import ReplayHost, ReplayTape, ServeRecord, miss_message, truncated_message, unconsumed_message

__all__ = [
    "DEFAULT_CAP", "DEFAULT_MARKER", "RecordingHost", "Redactor", "ReplayHost", "ReplayTape", "ServeRecord",
    "build_cell", "cap_from_env", "cassette_enabled", "input_view", "miss_message", "secret_name", "truncate_utf8",
    "truncated_message", "unconsumed_message",
]
