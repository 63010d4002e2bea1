"""ULIDs (26-char Crockford base32: 48-bit ms timestamp + 80 random bits), as flux mints event ids."""

from __future__ import annotations

import os
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last_ms = -1
_last_rand = 0


def new_ulid(ms: int | None = None) -> str:
    """A new ULID. Ids minted in the same millisecond increase monotonically, so they sort by creation."""
    global _last_ms, _last_rand
    if ms is None:
        ms = int(time.time() * 1000)
    with _lock:
        if ms == _last_ms:
            _last_rand = (_last_rand + 1) & ((1 << 80) - 1)
        else:
            _last_ms = ms
            _last_rand = int.from_bytes(os.urandom(10), "big") >> 1  # room to increment
        value = (ms << 80) | _last_rand
    return _encode(value)


_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]  # 10 bits → two Crockford digits


def _encode(value: int) -> str:
    """The 26-digit Crockford text of a 128-bit value: 26 digits = 130 bits (two leading zero bits,
    then the value, 5 bits a digit), two digits per 10-bit table lookup."""
    p = _PAIRS
    return "".join([p[(value >> s) & 1023] for s in range(120, -1, -10)])
