"""Running the kit's coroutines from synchronous test code (``Scenario.check``, the judge's live call)."""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import FluxError
from .errors import kit_failure

__all__ = ["run_blocking"]


def run_blocking(coro: Any) -> Any:
    """Run ``coro`` to its end on a new event loop; inside a running loop it is refused in one line."""
    __tracebackhide__ = kit_failure
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    coro.close()
    raise FluxError("this call cannot run inside an event loop — await the *_async variant instead")
