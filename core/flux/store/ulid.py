"""ULIDs (26-char Crockford base32: 48-bit ms timestamp + 80 random bits), as flux mints event ids."""

from __future__ import annotations

import os
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last_ms = -1
_last_rand = 0
_RAND_MASK = (1 << 80) - 1

# The text of an id is three runs of digits, each a function of one part of the value: the first 10
# digits of the millisecond (2 zero bits + 48 bits), the next 14 of the random part's top 70 bits,
# the last 2 of its low 10 bits. Ids minted in one millisecond share the first run and, 1,023 times
# in 1,024, the second: both are kept from the previous id (a recording mints thousands a second).
_ms_text_of = -1
_ms_text = ""
_high_of = -1
_high_text = ""


def new_ulid(ms: int | None = None) -> str:
    """A new ULID. Ids minted in the same millisecond increase monotonically, so they sort by creation.

    The text is ``_encode((ms << 80) | random)`` (a property test checks it), built from the runs
    kept from the previous id where they are the same."""
    global _last_ms, _last_rand, _ms_text_of, _ms_text, _high_of, _high_text
    if ms is None:
        ms = int(time.time() * 1000)
    with _lock:
        if ms == _last_ms:
            rand = _last_rand = (_last_rand + 1) & _RAND_MASK
        else:
            _last_ms = ms
            rand = _last_rand = int.from_bytes(os.urandom(10), "big") >> 1  # room to increment
        if ms != _ms_text_of:
            _ms_text = _ms_digits(ms)
            _ms_text_of = ms
        high = rand >> 10
        if high != _high_of:
            _high_text = _high_digits(rand)
            _high_of = high
        return _ms_text + _high_text + _PAIRS[rand & 1023]


_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]  # 10 bits → two Crockford digits


def _ms_digits(ms: int) -> str:
    """``_encode(ms << 80)[:10]``: the millisecond's 10 digits (5 table lookups, not 13)."""
    p = _PAIRS
    return p[(ms >> 40) & 1023] + p[(ms >> 30) & 1023] + p[(ms >> 20) & 1023] + p[(ms >> 10) & 1023] + p[ms & 1023]


def _high_digits(rand: int) -> str:
    """``_encode(rand)[10:24]``: the 14 digits of the random part's top 70 bits (7 lookups)."""
    p = _PAIRS
    return (p[(rand >> 70) & 1023] + p[(rand >> 60) & 1023] + p[(rand >> 50) & 1023] + p[(rand >> 40) & 1023]
            + p[(rand >> 30) & 1023] + p[(rand >> 20) & 1023] + p[(rand >> 10) & 1023])


def _encode(value: int) -> str:
    """The 26-digit Crockford text of a 128-bit value: 26 digits = 130 bits (two leading zero bits,
    then the value, 5 bits a digit), two digits per 10-bit table lookup."""
    p = _PAIRS
    return "".join([p[(value >> s) & 1023] for s in range(120, -1, -10)])


def new_ulids(ms: int, n: int) -> list[str]:
    """``[new_ulid(ms) for _ in range(n)]``, minted in one go for a bulk append: the same ids (one
    random draw, then +1 per id within the millisecond) and the same state left for the next call.
    Each id is built from the same three runs as :func:`new_ulid`'s (kept from the previous id
    while unchanged): the millisecond's digits, the random part's top digits, which change once in
    1,024 ids, and the last two digits, one table lookup per id."""
    global _last_ms, _last_rand, _ms_text_of, _ms_text, _high_of, _high_text
    if n <= 0:
        return []
    mask = _RAND_MASK
    with _lock:
        if ms == _last_ms:
            first = (_last_rand + 1) & mask
        else:
            first = int.from_bytes(os.urandom(10), "big") >> 1
        _last_ms = ms
        _last_rand = (first + n - 1) & mask
        if first + n - 1 > mask:  # wraps within the millisecond (never in practice): the plain path
            high = ms << 80
            return [_encode(high | ((first + i) & mask)) for i in range(n)]
        if ms != _ms_text_of:
            _ms_text = _ms_digits(ms)
            _ms_text_of = ms
        p = _PAIRS
        high = first >> 10
        if high == (first + n - 1) >> 10:  # no carry into the top digits (1,023 times in 1,024)
            if high != _high_of:
                _high_text = _high_digits(first)
                _high_of = high
            head = _ms_text + _high_text
            return [head + p[v & 1023] for v in range(first, first + n)]
        out: list[str] = []
        value, end = first, first + n
        while value < end:
            high = value >> 10
            if high != _high_of:
                _high_text = _high_digits(value)
                _high_of = high
            stop = min(end, (high + 1) << 10)  # the next carry into the top digits
            head = _ms_text + _high_text
            out += [head + p[v & 1023] for v in range(value, stop)]
            value = stop
        return out
