"""Helpers for pilot tests: the screen as plain text, and waiting for workers."""

from __future__ import annotations

from textual.worker import WorkerCancelled, WorkerFailed


def screen_text(app) -> str:
    """Everything on screen (all layers composited) as plain text lines."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip).rstrip() for strip in strips)


async def settle(pilot, rounds: int = 3) -> None:
    """Let workers finish and their messages be handled (cancelled exclusive workers are fine)."""
    app = pilot.app
    for _ in range(rounds):
        await pilot.pause()
        try:
            await app.workers.wait_for_complete()
        except (WorkerCancelled, WorkerFailed):
            pass
        await pilot.pause()
