"""The time machine: hermetic replay (spec §4.4) and run diff (§4.6)."""

from __future__ import annotations

from .diff import DiffRow, PayloadDiff, RunDiff, diff_details, payload_diff, run_diff

__all__ = ["DiffRow", "PayloadDiff", "RunDiff", "diff_details", "payload_diff", "run_diff"]
