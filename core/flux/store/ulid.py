"""ULIDs (26-char Crockford base32: 48-bit ms timestamp + 80 random bits), as flux mints event ids."""

from __future__ import annotations

import base64
import os
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
# RFC 4648 base32 digit → Crockford digit, so the C encoder does the 5-bit split.
_TO_CROCKFORD = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", _ALPHABET.encode())
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
    # 26 digits = 130 bits (two leading zero bits + the 128-bit value), left-aligned in 17 bytes.
    return base64.b32encode((value << 6).to_bytes(17, "big"))[:26].translate(_TO_CROCKFORD).decode()
