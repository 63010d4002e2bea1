"""The ``payload`` column's text to a typed event body: the JSON object loaded (with the one
surrogate rule), its kind chosen, its fields decoded — and the one error readers skip and count."""

from __future__ import annotations

import json
import re

from ..canonical import scrub_value
from .events import EventBody, decode_body

__all__ = ["PayloadError", "SURROGATE_ESCAPE", "DECODE_ERRORS", "load_payload", "payload_kind", "decode_object",
           "decode_payload"]


class PayloadError(ValueError):
    """A payload row that is not a JSON object at all (corrupt); readers skip and count it."""


# A JSON escape of a surrogate (``\\ud800``–``\\udfff``): only a payload with one needs the scrub.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def load_payload(payload: str) -> dict:
    """The JSON object of one ``payload`` column, with the surrogate rule applied; :class:`PayloadError`
    for a payload that is not a JSON object (the first half of :func:`decode_payload`)."""
    try:
        obj = json.loads(payload)
    except (ValueError, TypeError) as e:  # not JSON, not UTF-8, an integer over Python's digit limit
        raise PayloadError(f"payload is not JSON: {e}") from None
    except RecursionError:
        raise PayloadError("payload is nested too deeply to decode") from None
    if not isinstance(obj, dict):
        raise PayloadError("payload is not a JSON object")
    if "\\u" in payload and SURROGATE_ESCAPE.search(payload):
        # JSON text can spell a lone surrogate ("\ud83d"); the one rule (flux.canonical) applies on
        # read as on write, so nothing downstream meets a string it cannot encode.
        obj = scrub_value(obj)
    return obj


def payload_kind(kind_column: str, obj: dict) -> str:
    """The kind a loaded payload decodes as: its own ``kind`` when that is text, else the column's."""
    kind = obj.get("kind", kind_column)
    return kind if isinstance(kind, str) else kind_column


# What decoding a loaded payload's fields can raise on a hostile shape (the row is then skipped).
DECODE_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, OverflowError, RecursionError)


def decode_object(kind_column: str, obj: dict) -> EventBody:
    """The second half of :func:`decode_payload`: a loaded payload object to its typed body."""
    kind = payload_kind(kind_column, obj)
    try:
        return decode_body(kind, obj.get("data"))
    except DECODE_ERRORS as e:
        # A hostile payload whose fields have types no flux version writes: skipped and counted.
        raise PayloadError(f"payload fields have the wrong shape for {kind!r}: {type(e).__name__}") from None


def decode_payload(kind_column: str, payload: str) -> EventBody:
    """Decode one ``payload`` column. Raises :class:`PayloadError` only for non-JSON payloads."""
    return decode_object(kind_column, load_payload(payload))
