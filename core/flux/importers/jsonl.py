"""Reading a JSONL log line by line, for the importers of JSONL formats: every non-empty line must be
one JSON object, and an error names the file and the line."""

from __future__ import annotations

import json
from typing import Iterator

from ..canonical import scrub_value
from .model import ImportFormatError, check_json_value, load_json

__all__ = ["json_lines", "first_object"]


def json_lines(text: str, name: str) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-empty line (lone surrogates made U+FFFD)."""
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        obj = load_json(line, f"{name}: line {n}", "a truncated or damaged log", "not a log this importer reads")
        if not isinstance(obj, dict):
            raise ImportFormatError(f"{name}: line {n} must be a JSON object, got {type(obj).__name__}")
        check_json_value(obj, f"{name}: line {n}")
        yield n, scrub_value(obj)


def first_object(text: str, limit: int = 5) -> list[dict]:
    """The first few lines that parse as JSON objects (for detection; nothing is raised)."""
    out: list[dict] = []
    for line in text.split("\n"):
        if len(out) >= limit:
            break
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):
            return out
        if isinstance(obj, dict):
            out.append(obj)
        else:
            return out
    return out
