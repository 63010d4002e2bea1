"""Reading a document a user or another program wrote (a scenario's files, a cassette, a sidecar)
as hostile input: decoded as UTF-8, size- and depth-bounded, parsed — every failure one
:class:`~flux.errors.FluxError` line that names the file and says what to do, never a
``UnicodeDecodeError`` or a ``RecursionError`` from deep in a parser.

:func:`short` and :func:`clip` bound a value echoed into an error message.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from .errors import FluxError

__all__ = ["read_text", "json_document", "toml_document", "nesting_depth", "short", "clip", "MAX_DEPTH", "MAX_TOML_DEPTH", "MAX_BYTES"]

MAX_DEPTH = 500  # JSON arrays/objects nested deeper than this are refused before parsing
MAX_TOML_DEPTH = 100  # tomllib recurses in Python, several frames a level
MAX_BYTES = 256 * 1024 * 1024


def clip(text: str, width: int = 120) -> str:
    """``text`` cut to ``width`` characters with an ellipsis (an error line stays short)."""
    return text if len(text) <= width else text[: width - 1] + "…"


def short(value: Any, width: int = 80) -> str:
    """``repr(value)``, clipped to ``width`` characters."""
    return clip(repr(value), width)


def read_text(path: str | Path, what: str, fix: str, *, max_bytes: int = MAX_BYTES) -> str:
    """The UTF-8 text of ``path`` (``what`` names it in errors, ``fix`` says what to do)."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if not p.is_file():
            raise FluxError(f"{p}: {what} is not a regular file — {fix}")
        if size > max_bytes:
            raise FluxError(f"{p}: {what} is {size} bytes, more than {max_bytes} — {fix}")
        data = p.read_bytes()
    except FluxError:
        raise
    except OSError as e:
        raise FluxError(f"{p}: cannot read {what} ({e.strerror or e}) — {fix}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FluxError(f"{p}: {what} is not UTF-8 text (byte {e.start}: 0x{data[e.start]:02x}) — {fix}") from None


def nesting_depth(text: str, *, toml: bool = False) -> int:
    """The deepest ``[``/``{`` nesting of ``text`` outside strings (JSON, or TOML with ``toml``:
    literal strings and comments too), counted in one linear pass."""
    depth = best = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c in "[{":
            depth += 1
            if depth > best:
                best = depth
        elif c in "]}":
            depth -= 1
        elif c == '"' or (toml and c == "'"):
            triple = toml and text.startswith(c * 3, i)
            end = c * 3 if triple else c
            i += len(end)
            while i < n and not text.startswith(end, i):
                i += 2 if text[i] == "\\" and c == '"' else 1
            i += len(end)
            continue
        elif toml and c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        i += 1
    return best


def json_document(text: str, where: str, fix: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads(text)``, refusing nesting deeper than ``max_depth`` and any parse failure in one line."""
    if nesting_depth(text) > max_depth:
        raise FluxError(f"{where}: JSON nested deeper than {max_depth} levels — {fix}")
    try:
        return json.loads(text)
    except RecursionError:
        raise FluxError(f"{where}: JSON nested too deeply — {fix}") from None
    except ValueError as e:
        raise FluxError(f"{where}: not JSON ({clip(str(e))}) — {fix}") from None


def toml_document(text: str, where: str, fix: str, *, max_depth: int = MAX_TOML_DEPTH) -> dict[str, Any]:
    """``tomllib.loads(text)``, refusing nesting deeper than ``max_depth`` and any parse failure in one line."""
    if nesting_depth(text, toml=True) > max_depth:
        raise FluxError(f"{where}: TOML nested deeper than {max_depth} levels — {fix}")
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise FluxError(f"{where}: TOML nested too deeply — {fix}") from None
    except (tomllib.TOMLDecodeError, ValueError) as e:
        raise FluxError(f"{where}: not valid TOML ({clip(str(e))}) — {fix}") from None
