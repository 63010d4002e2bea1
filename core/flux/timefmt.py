"""Time as flux shows and accepts it: ages (``3d ago``) and ``--since``/``--until`` values."""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone

from .errors import FluxError

__all__ = ["now_ms", "age", "parse_time_arg", "iso_ms"]

_REL = re.compile(r"^(\d+)([smhdw])$")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def now_ms() -> int:
    return int(time.time() * 1000)


def age(ms: int, now: int | None = None) -> str:
    """``Ns ago`` / ``Nm ago`` / ``Nh ago`` / ``Nd ago``, as ``flux sessions`` prints ages."""
    now = now_ms() if now is None else now
    secs = max(0, (now - ms) // 1000)
    if secs < 60:
        return f"{secs}s ago"
    if secs < 3600:
        return f"{secs // 60}m ago"
    if secs < 86400:
        return f"{secs // 3600}h ago"
    return f"{secs // 86400}d ago"


_MIN_MS = -62_135_596_800_000  # 0001-01-01T00:00:00.000Z, the first instant a datetime holds
_MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z, the last


def iso_ms(ms: int) -> str:
    """RFC 3339 UTC with milliseconds. A stamp beyond what a calendar date can say (a corrupt row:
    year 10000, 2**63) is clamped to the first or last representable millisecond."""
    ms = min(max(int(ms), _MIN_MS), _MAX_MS)
    dt = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=ms)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time_arg(value: str, now: int | None = None) -> int:
    """``YYYY-MM-DD``, RFC 3339, or a relative ``24h``/``7d``/``2w`` (meaning that long ago) → ms."""
    now = now_ms() if now is None else now
    v = value.strip()
    m = _REL.match(v)
    if m:
        return now - int(m.group(1)) * _UNIT_MS[m.group(2)]
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", v):
            dt = datetime.strptime(v, "%Y-%m-%d").replace(tzinfo=timezone.utc)
        else:
            dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=timezone.utc)
    except ValueError:
        raise FluxError(f"cannot read time {value!r} — use YYYY-MM-DD, RFC 3339 (2026-11-30T08:00:00Z) or an age like 24h, 7d, 2w") from None
    return int(dt.timestamp() * 1000)
