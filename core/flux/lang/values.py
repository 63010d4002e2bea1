"""How a Flux-Lang run reads values: op results are text, decoded as JSON where structure is needed;
truthiness, field paths and numbers as flux reads them; and a value quoted the way a Rust error
message quotes it."""

from __future__ import annotations

import json
import re
from typing import Any

from flux.canonical import compact_json

from .outcomes import Halt

__all__ = ["rust_debug_str", "structured", "truthy", "walk_path", "number_of"]


def rust_debug_str(s: str) -> str:
    """``format!("{:?}", s)`` of a Rust ``String``: how flux quotes a value inside an error."""
    out = ['"']
    for ch in s:
        code = ord(ch)
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\0":
            out.append("\\0")
        elif code < 0x20 or 0x7F <= code < 0xA0 or ch in "\u00ad\u200b\u200c\u200d\u2028\u2029\ufeff":
            out.append(f"\\u{{{code:x}}}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def structured(v: Any) -> Any:
    """Op results are text; decode JSON text when structure is needed."""
    if isinstance(v, str):
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


def truthy(v: Any) -> bool:
    if isinstance(v, str):
        s = v.strip()
        if s in ("false", "null", "0", ""):
            return False
        return True
    return bool(v) if v is not None else False


# flux's jq paths: `.a` fields, `.0` indexes (and the older `[0]`), `["k"]` keys (`.["k"]` first)
_PATH_TOKEN = re.compile(
    r'\.([A-Za-z_][A-Za-z0-9_]*)|\.?\[([0-9]+)\]|\.?\[("(?:[^"\\]|\\.)*")\]|\.([0-9]+)')


def walk_path(value: Any, path: str, optional: bool) -> Any:
    cur = structured(value)
    pos = 0
    while pos < len(path):
        m = _PATH_TOKEN.match(path, pos)
        if not m:
            raise Halt(f"bad field path `{path}`")
        pos = m.end()
        if m.group(2) is not None or m.group(4) is not None:
            idx = int(m.group(2) or m.group(4))
            if isinstance(cur, list) and idx < len(cur):
                cur = structured(cur[idx])
                continue
        else:
            key = m.group(1) if m.group(1) is not None else json.loads(m.group(3))
            if isinstance(cur, dict) and key in cur:
                cur = structured(cur[key])
                continue
        if optional:
            return None
        raise Halt(f"no value at `{path[:pos]}`")
    return cur


def number_of(v: Any, what: str) -> Any:
    v = structured(v)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise Halt(f"`{what}` needs numbers, got {compact_json(v)}")
    return v
