"""The engine read models the screens call from worker threads, behind one import point.

The read models import the Flux-Lang parser lazily (so ``flux sessions`` stays cheap); the app
imports it once here, on the main thread, before any worker runs. The ``(result, degraded)``
return shape lets a screen show a note when a result is partial; today none is.
"""

from __future__ import annotations

import flux.lang  # noqa: F401  (the parser side of the engine, imported on the main thread)
from flux.lang import formatter as _formatter, hashes as _hashes  # noqa: F401
from flux.model.interrupted import InterruptCheck, check_interrupted
from flux.model.listing import SessionSummary, summarize_sessions
from flux.model.session import SessionDetail, Turn
from flux.model.timeline import TurnTimeline, build_timeline

__all__ = ["safe_build_timeline", "safe_check_interrupted", "safe_summarize"]


def safe_check_interrupted(detail: SessionDetail) -> tuple[InterruptCheck, str | None]:
    return check_interrupted(detail.turns, detail.turn_run_trace), None


def safe_summarize(reader, rows, prices) -> list[SessionSummary]:
    return summarize_sessions(reader, rows, prices)


def safe_build_timeline(detail: SessionDetail, turn: Turn) -> tuple[TurnTimeline, str | None]:
    return build_timeline(detail, turn), None
