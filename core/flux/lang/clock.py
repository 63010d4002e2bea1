"""Time for the interpreter: one seam for every construct that reads the clock or sleeps.

``loop for … every …``, ``race``/``timeout`` deadlines, ``throttle`` windows, ``debounce`` waits
and ``retry`` delays all go through a :class:`Clock`, so tests drive time by hand and replay never
waits for real.

- :class:`RealClock` — the recording runtime: ``time.monotonic`` and a real (injectable) sleep.
- :class:`ManualClock` — tests: time moves only when something sleeps, plus an optional fixed
  cost per op dispatch (to model slow ops).
- :class:`ReplayClock` — hermetic replay: virtual time (sleeps only advance a counter) and a
  *tape oracle*. Which way a time-bounded construct went live (how many ``loop`` iterations ran,
  whether a ``timeout``/``race`` deadline struck before an op, whether a ``throttle`` window was
  full) is not a function of virtual time; it is written in the tape: an op the live run
  dispatched has a cell, an op it never reached has none. :meth:`ReplayClock.recorded` answers
  that question without consuming anything.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from flux.canonical import sha256_hex

__all__ = ["Clock", "RealClock", "ManualClock", "ReplayClock"]


class Clock:
    """The interface (and the behaviour every clock shares): milliseconds and sleeping."""

    #: True when decisions that depended on time live must be read back from the tape.
    replaying = False

    def now_ms(self) -> float:
        raise NotImplementedError  # pragma: no cover - abstract

    def sleep_ms(self, ms: float) -> None:
        raise NotImplementedError  # pragma: no cover - abstract

    def dispatched(self) -> None:
        """Called after every op dispatch (a manual clock may charge time for it)."""

    def wall_ms(self) -> float:
        """Epoch milliseconds for state kept across processes (throttle buckets, debounce tokens);
        a virtual clock answers its virtual time."""
        return self.now_ms()

    def recorded(self, op: str, input_json: str) -> Optional[bool]:
        """Whether the recording holds an unconsumed cell for this dispatch (None: not replaying)."""
        return None


class RealClock(Clock):
    """Wall time: monotonic milliseconds; ``sleep`` is injectable (seconds, like ``time.sleep``)."""

    def __init__(self, sleep: Callable[[float], None] = time.sleep):
        self._sleep = sleep

    def now_ms(self) -> float:
        return time.monotonic() * 1000.0

    def wall_ms(self) -> float:
        return time.time() * 1000.0

    def sleep_ms(self, ms: float) -> None:
        if ms > 0:
            self._sleep(ms / 1000.0)


class ManualClock(Clock):
    """Virtual time for tests: starts at ``start_ms``; sleeping advances it; each op dispatch
    costs ``per_dispatch_ms``. ``sleeps`` lists every requested sleep, in order."""

    def __init__(self, start_ms: float = 0.0, per_dispatch_ms: float = 0.0):
        self.t = float(start_ms)
        self.per_dispatch_ms = float(per_dispatch_ms)
        self.sleeps: list[float] = []

    def now_ms(self) -> float:
        return self.t

    def sleep_ms(self, ms: float) -> None:
        self.sleeps.append(ms)
        if ms > 0:
            self.t += ms

    def advance(self, ms: float) -> None:
        self.t += ms

    def dispatched(self) -> None:
        self.t += self.per_dispatch_ms


class ReplayClock(ManualClock):
    """Virtual time plus the tape oracle (see the module doc). Never sleeps for real."""

    replaying = True

    def __init__(self, tape: Any):
        super().__init__()
        self.tape = tape

    def recorded(self, op: str, input_json: str) -> Optional[bool]:
        return self.tape.find(op, sha256_hex(input_json)) is not None
