"""Time for the interpreter: every construct that reads the clock or sleeps goes through a :class:`Clock` —
:class:`RealClock` when recording, :class:`ManualClock` in tests (time moves only when something sleeps or
an op charges it), :class:`ReplayClock` under replay (virtual time, and a tape oracle,
:meth:`ReplayClock.recorded`, that says whether the live run reached an op)."""

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
