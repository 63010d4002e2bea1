"""Canonical JSON as serde_json prints it, and the sha256 helper every hash in the store uses.

:func:`canonical_json` sorts keys by byte order (op inputs, model requests); :func:`compact_json` keeps
the dict's order (AST and event structs, built in declared field order). Both are compact, write
non-ASCII raw and print floats as Rust's ``ryu`` does.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = [
    "canonical_json",
    "compact_json",
    "sha256_hex",
    "format_float",
    "json_string",
    "scrub_text",
    "scrub_value",
]

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\]')


def _escape(m: "re.Match[str]") -> str:
    ch = m.group(0)
    return _ESCAPES.get(ch) or "\\u%04x" % ord(ch)


def json_string(s: str) -> str:
    """A JSON string literal as serde_json writes it: only ``"``, ``\\`` and C0 controls escaped."""
    return '"' + _NEEDS_ESCAPE.sub(_escape, s) + '"'


def format_float(x: float) -> str:
    """Shortest round-trip float text, laid out as ``ryu`` (and so serde_json) lays it out."""
    if math.isnan(x) or math.isinf(x):
        # serde_json writes non-finite floats as null.
        return "null"
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    digits_repr = repr(abs(x))
    # Extract the shortest decimal digits and exponent from Python's repr (also shortest round-trip).
    if "e" in digits_repr:
        mant, exp_s = digits_repr.split("e")
        exp = int(exp_s)
    else:
        mant, exp = digits_repr, 0
    if "." in mant:
        int_part, frac_part = mant.split(".")
    else:
        int_part, frac_part = mant, ""
    if frac_part == "0":
        frac_part = ""
    digits = (int_part + frac_part).lstrip("0")
    # value = 0.digits... ; compute k such that value = digits * 10^k
    k = exp - len(frac_part)
    stripped = digits.rstrip("0")
    k += len(digits) - len(stripped)
    digits = stripped or "0"
    length = len(digits)
    kk = length + k  # 10^(kk-1) <= v < 10^kk
    if 0 <= k and kk <= 16:
        body = digits + "0" * k + ".0"
    elif 0 < kk <= 16:
        body = digits[:kk] + "." + digits[kk:]
    elif -5 < kk <= 0:
        body = "0." + "0" * (-kk) + digits
    elif length == 1:
        body = digits + "e" + str(kk - 1)
    else:
        body = digits[0] + "." + digits[1:] + "e" + str(kk - 1)
    return sign + body


def _dump(v: Any, out: list[str], sort: bool) -> None:
    if v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif isinstance(v, str):
        out.append(json_string(v))
    elif isinstance(v, int):
        out.append(str(v))
    elif isinstance(v, float):
        out.append(format_float(v))
    elif isinstance(v, dict):
        out.append("{")
        items = v.items()
        if sort:
            items = sorted(items, key=lambda kv: kv[0].encode("utf-8", "surrogatepass"))  # a lone surrogate key sorts by code point, as the C encoder sorts it
        first = True
        for key, val in items:
            if not first:
                out.append(",")
            first = False
            out.append(json_string(str(key)))
            out.append(":")
            _dump(val, out, sort)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(",")
            _dump(item, out, sort)
        out.append("]")
    else:
        raise TypeError(f"not JSON-serializable: {type(v).__name__}")


# Python's C encoder writes exactly serde's bytes (same escapes, raw UTF-8, code-point == UTF-8 byte
# key order) except for floats whose repr uses an exponent, where Python writes ``1e+16`` / ``1e-05``
# and ryu ``1e16`` / ``0.00001``. Those outputs (and NaN/inf, and anything else odd) take the exact
# slow path; a false alarm inside a string only costs speed.
_PY_EXPONENT = re.compile(r"[0-9]e[-+][0-9]")


def _not_json(o: Any) -> Any:
    raise TypeError(f"not JSON-serializable: {type(o).__name__}")


def _c_encoders() -> tuple[Any, Any] | None:
    """``json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=…, allow_nan=False)``
    as two encoders built once (``dumps`` builds one per call, a third of its cost on small
    values). No cycle check: a cycle fails as RecursionError, caught like the errors dumps raises."""
    try:
        from json.encoder import c_make_encoder, encode_basestring
    except ImportError:  # pragma: no cover - not CPython
        return None
    if c_make_encoder is None:  # pragma: no cover
        return None
    return tuple(c_make_encoder(None, _not_json, encode_basestring, None, ":", ",", sort, False, False)
                 for sort in (False, True))  # type: ignore[return-value]


_ENCODERS = _c_encoders()


def _c_encode(v: Any, sort: bool) -> str | None:
    try:
        if _ENCODERS is not None:
            out = "".join(_ENCODERS[sort](v, 0))
        else:  # pragma: no cover
            out = json.dumps(v, ensure_ascii=False, separators=(",", ":"), sort_keys=sort, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None
    # Python writes an exponent as e+NN / e-NN: the substring test spares the regex on most texts.
    return None if ("e+" in out or "e-" in out) and _PY_EXPONENT.search(out) else out


def canonical_json_slow(v: Any, sort: bool = True) -> str:
    """The reference serializer (pure Python, serde's float layout); the fast path must equal it."""
    out: list[str] = []
    _dump(v, out, sort)
    return "".join(out)


def canonical_json(v: Any) -> str:
    """Compact JSON with every object's keys sorted by byte order (serde_json ``Value``)."""
    return _c_encode(v, True) or canonical_json_slow(v, True)


def compact_json(v: Any) -> str:
    """Compact JSON keeping each dict's insertion order (serde structs in declared order)."""
    return _c_encode(v, False) or canonical_json_slow(v, False)


def sha256_hex(text: str | bytes) -> str:
    """sha256 of the UTF-8 bytes; a str is scrubbed first (:func:`scrub_text`), so a lone surrogate
    hashes the same on record and on replay instead of failing to encode."""
    if isinstance(text, str):
        try:
            text = text.encode("utf-8")  # fails exactly when the text holds a surrogate
        except UnicodeEncodeError:
            text = scrub_text(text).encode("utf-8")
    return _sha256(text).hexdigest()


def _sha256(data: bytes):
    """``hashlib.sha256``, imported on the first hash: loading OpenSSL costs every process ~2 ms,
    and ``flux sessions`` (which imports this module for :func:`scrub_text`) never hashes."""
    global _sha256
    from hashlib import sha256

    _sha256 = sha256
    return sha256(data)


# --- Unpaired surrogates -------------------------------------------------------------------------
#
# flux's strings are Rust ``String``s: valid UTF-8, so a lone UTF-16 surrogate (which JSON text such
# as ``"\ud83d"`` or a model's SSE stream can carry) cannot exist there. Python keeps it and then
# fails to encode it. The one rule, applied identically on record and on replay, wherever text is
# hashed or stored: every surrogate code point is replaced by U+FFFD (a pair split across two code
# points is first joined back into the character it encodes).

_SURROGATE = re.compile("[\ud800-\udfff]")


def scrub_text(s: str) -> str:
    """``s`` with unpaired surrogates replaced by U+FFFD; ``s`` itself when it has none (fast path)."""
    if s.isascii() or _SURROGATE.search(s) is None:
        return s
    return s.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def scrub_value(value: Any) -> Any:
    """A JSON value with :func:`scrub_text` applied to every string, keys included; ``value`` itself
    when it holds no surrogate (checked without copying), else a copy with new containers.

    Iterative, so a hostile deeply nested value cannot exhaust the Python stack here.
    """
    if isinstance(value, str):
        return scrub_text(value)
    if not isinstance(value, (dict, list)):
        return value
    if _clean(value):  # the usual case (a model's tool call, a decoded payload): nothing to rebuild
        return value
    return _scrub_copy(value)


def _clean(value: Any) -> bool:
    """Whether no string of ``value`` (keys included) holds a surrogate — one walk, nothing copied."""
    stack = [value]
    pop, push = stack.pop, stack.extend
    while stack:
        node = pop()
        if isinstance(node, str):
            if not node.isascii() and _SURROGATE.search(node) is not None:
                return False
        elif isinstance(node, dict):
            for k in node:
                if isinstance(k, str) and not k.isascii() and _SURROGATE.search(k) is not None:
                    return False
            push(node.values())
        elif isinstance(node, list):
            push(node)
    return True


def _scrub_copy(value: Any) -> Any:
    """:func:`scrub_value` rebuilding every container (the reference the clean check must agree with)."""
    root: list[Any] = [value]
    # (container, key-or-index, child) work items; containers are rebuilt only when they change.
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        parent, key = stack.pop()
        node = parent[key]
        if isinstance(node, str):
            scrubbed = scrub_text(node)
            if scrubbed is not node:
                parent[key] = scrubbed
        elif isinstance(node, list):
            copy = list(node)
            parent[key] = copy
            stack.extend((copy, i) for i in range(len(copy)))
        elif isinstance(node, dict):
            copy = {scrub_text(k) if isinstance(k, str) else k: v for k, v in node.items()}
            parent[key] = copy
            stack.extend((copy, k) for k in copy)
    return root[0]
