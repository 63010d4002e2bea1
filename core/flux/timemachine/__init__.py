"""The time machine: hermetic replay, run diff, and the write side — fork, resurrect, what-if and
sweeps — over recorded sessions. Every write has a *plan* step that only reads and returns the
gate's :class:`~flux.timemachine.gate.LivePreview`, then a *run* step that takes a client and writes;
docs/agent.md ("The time machine as functions") lists the API."""

from __future__ import annotations

from .diff import DiffRow, PayloadDiff, RunDiff, diff_details, payload_diff, run_diff
from .engine import NotForkable, Position
from .fork import (
    ForkCancelled, ForkPlan, ForkPrefix, ForkResult, analyze_plan, default_prompt, edit_template, fork_points,
    fork_session, plan_fork, prepare_fork, run_fork_prefix,
)
from .gate import LiveOp, LivePreview
from .replay import (
    ChildReplay, ReplayedPlan, ReplayReport, ReplayTree, StatementResult, plans_by_key, replay_detail, replay_session,
    replay_tree,
)
from .resurrect import ResurrectCancelled, ResurrectReport, plan_resurrect, prepare_resurrect, resurrect_session
from .whatif import (
    Counterfactual, FirstDivergence, SweepOutcome, SweepReport, WhatIf, WhatIfCancelled, WhatIfRefused, WhatIfSpec, plan_what_if,
    prepare_what_if, run_what_if, what_if_over,
)

__all__ = [
    "ChildReplay", "DiffRow", "PayloadDiff", "ReplayReport", "ReplayTree", "ReplayedPlan", "RunDiff",
    "StatementResult", "diff_details", "payload_diff", "plans_by_key", "replay_detail", "replay_session",
    "replay_tree", "run_diff",
    "LiveOp", "LivePreview", "NotForkable", "Position",
    "ForkCancelled", "ForkPlan", "ForkResult", "analyze_plan", "default_prompt", "edit_template", "fork_points",
    "fork_session", "plan_fork", "prepare_fork", "ForkPrefix", "run_fork_prefix",
    "ResurrectCancelled", "ResurrectReport", "plan_resurrect", "prepare_resurrect", "resurrect_session",
    "Counterfactual", "FirstDivergence", "SweepOutcome", "SweepReport", "WhatIf", "WhatIfCancelled", "WhatIfRefused", "WhatIfSpec",
    "plan_what_if", "prepare_what_if", "run_what_if", "what_if_over",
]
