"""Cassettes: the redactor, the recording op host (spec §4.3) and the replay tape (§4.4)."""

from __future__ import annotations

from .redactor import DEFAULT_MARKER, Redactor, secret_name

__all__ = ["DEFAULT_MARKER", "Redactor", "secret_name"]
