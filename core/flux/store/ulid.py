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


# Fresh random parts come from os.urandom read 640 bytes at a time (10 bytes a draw): one system
# call per 64 milliseconds that mint, not one per millisecond. A forked child starts a pool (and a
# millisecond) of its own, so parent and child never mint from the same bytes.
_POOL_BYTES = 640
_pool = b""
_pool_at = 0


def _draw() -> int:
    """A fresh millisecond's random part: 79 random bits (room to increment). Under ``_lock``."""
    global _pool, _pool_at
    at = _pool_at
    if at >= len(_pool):
        _pool, at = os.urandom(_POOL_BYTES), 0
    _pool_at = at + 10
    return int.from_bytes(_pool[at:at + 10], "big") >> 1


def _forget_in_child() -> None:
    global _lock, _pool, _pool_at, _last_ms
    _lock = threading.Lock()  # (another thread may have held it at the fork)
    _pool, _pool_at = b"", 0
    _last_ms = -1  # the next id draws afresh: the parent's next ids continue its own sequence


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


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
            rand = _last_rand = _draw()
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
    with _lock:
        first = (_last_rand + 1) & _RAND_MASK if ms == _last_ms else _draw()
        last = first + n - 1
        _last_ms = ms
        if last > _RAND_MASK:  # wraps within the millisecond (never in practice): the plain path
            _last_rand = last & _RAND_MASK
            return _wrapped_ids(ms, first, n)
        _last_rand = last
        if ms != _ms_text_of:
            _ms_text = _ms_digits(ms)
            _ms_text_of = ms
        # Within one run of the top digits the last two digits are consecutive table entries: the
        # ids are the run's head joined to a slice of the table (C loops, no per-id bytecode).
        high = first >> 10
        if high == last >> 10:  # no carry into the top digits (1,023 times in 1,024)
            if high != _high_of:
                _high_text = _high_digits(first)
                _high_of = high
            lo = first & 1023
            return list(map((_ms_text + _high_text).__add__, _PAIRS[lo:lo + n]))
        out: list[str] = []
        value, end = first, last + 1
        while value < end:
            high = value >> 10
            if high != _high_of:
                _high_text = _high_digits(value)
                _high_of = high
            stop = min(end, (high + 1) << 10)  # the next carry into the top digits
            lo = value & 1023
            out += map((_ms_text + _high_text).__add__, _PAIRS[lo:lo + stop - value])
            value = stop
        return out


def _wrapped_ids(ms: int, first: int, n: int) -> list[str]:
    """The ids of a bulk that wraps the random part past 2**80 - 1, one :func:`_encode` each."""
    high = ms << 80
    return [_encode(high | ((first + i) & _RAND_MASK)) for i in range(n)]
