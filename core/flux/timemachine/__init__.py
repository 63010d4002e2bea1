"""The time machine: hermetic replay (spec §4.4) and run diff (§4.6)."""

from __future__ import annotations

from .diff import DiffRow, PayloadDiff, RunDiff, diff_details, payload_diff, run_diff
from .replay import (
    ChildReplay, ReplayedPlan, ReplayReport, ReplayTree, StatementResult, plans_by_key, replay_detail, replay_session,
    replay_tree,
)

__all__ = [
    "ChildReplay", "DiffRow", "PayloadDiff", "ReplayReport", "ReplayTree", "ReplayedPlan", "RunDiff",
    "StatementResult", "diff_details", "payload_diff", "plans_by_key", "replay_detail", "replay_session",
    "replay_tree", "run_diff",
]
