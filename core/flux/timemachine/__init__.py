"""The time machine: hermetic replay, run diff, and the write side — fork,
resurrect, what-if and sweeps — on resumable execution.

The write-side API (names are stable; the app builds on them)
------------------------------------------------------------

Every write action has a *plan* step that reads the store only, validates everything, and returns
the side-effect gate's :class:`~flux.timemachine.gate.LivePreview`; then a *run* step that takes a
:class:`flux.agent.Client` (its store, toolbox, approver, redactor, model) and writes::

    from flux.store.store import StoreReader
    from flux.timemachine import plan_fork, fork_session, plan_resurrect, resurrect_session

    preview = plan_fork(reader, "s_4", 2, inject="2 passed")          # raises FluxError: one line
    preview.offline        # True: no model call, no side effect → no confirm needed
    preview.ops            # (LiveOp(op, effect, detail, workspace, why, denied), …)
    preview.model          # the model a re-plan would call, else None
    preview.prefix_statements, preview.prefix_cells, preview.tail_statements, preview.tail_served
    preview.lines()        # the gate as text; preview.with_policy(approver) marks denied ops
    result = fork_session(client, "s_4", 2, inject="2 passed", confirm=lambda p: ask_user(p))

``LiveOp.effect`` is ``write`` | ``exec`` | ``network`` | ``none`` from the op's declared effect
(pure/read → none; an op the catalog does not declare counts as write).

Fork — :mod:`.fork`
    ``fork_points(detail, turn=None) -> [Position]`` — what ``--at N`` can name (``Position.index``,
    ``.text``, ``.binder`` (None: inject refuses), ``.op``, ``.turn``, ``.execution``, ``.node``).
    ``plan_fork(reader, session, at, *, inject=VALUE | edit=TEXT | prompt=P, turn=None,
    catalog=None, model=None, workspace=None) -> LivePreview``; ``prepare_fork`` (same arguments)
    returns the whole :class:`ForkPlan`. ``edit_template(reader, session, at)`` is the plan text the
    edit mode starts from; ``analyze_plan(draft, catalog, bound, known_ops) -> [problem]`` is the
    static analysis the edit mode runs (live validation in an editor). ``default_prompt(task)``.
    ``fork_session(client, session, at, *, inject= | edit= | prompt=, turn=None, confirm=None,
    on_progress=None, on_event=None, plan=None, prefix=None) -> ForkResult{source, session, at, mode,
    prefix_served, tail_served, live_ops, halted, answer, turn, hermetic}``.
    ``run_fork_prefix(plan, toolbox_catalog) -> ForkPrefix`` runs a ``prepare_fork(preview=False)``
    plan's prefix in memory (nothing written) and sets ``plan.preview`` from the tape it left; show
    that gate, then ``fork_session(client, …, prefix=it)`` writes the fork without running the
    prefix again (what ``flux fork`` does).

Resurrect — :mod:`.resurrect`
    ``plan_resurrect(reader, session, *, catalog=None, workspace=None) -> LivePreview | None``
    (None: nothing interrupted; a turn flux does not flag is a FluxError naming why).
    ``resurrect_session(client, session, *, confirm=None, on_plan=None) -> ResurrectReport | None``
    with flux's fields (``statements_fast_forwarded``, ``ops_served_from_cassette``,
    ``ops_run_live``, ``outcome``, ``answer``, ``halt``, ``diverged``, ``unanchored_cells``) plus
    ``unanchored_served``; ``summary_line()`` is flux's stderr line.

What-if and sweeps — :mod:`.whatif`
    ``WhatIf(client, session)`` (or ``session.what_if()``) ``.turn(n).substitute(op, v)
    .substitute_at(row, v).policy(path).off_tape("halt"|"live").model(m).instructions(s)``;
    ``.plan() -> LivePreview``; ``.run(confirm=None) -> Counterfactual{source, session, diff(),
    first_divergence() -> FirstDivergence{node, kind: Plan|Output, detail} | None, hermetic, badge,
    cost(), went_live, live_ops, denials, latched, substituted, served, model_calls,
    assert_diverges_at(node), assert_compensated_with(op)}``. The same knobs as data:
    ``WhatIfSpec``; ``plan_what_if(reader, session, spec, catalog=, workspace=)``,
    ``run_what_if(client, session, spec, confirm=)``.
    ``what_if_over(store_dir, sessions, spec, jobs=N, client_args={"workspace": …}, on_progress=
    fn(done, total, outcome)) -> SweepReport{outcomes: [SweepOutcome{session, result, error}],
    changed, total, offline_cost, errors}`` — a process pool; a failing session is an error row.
    ``client.what_if_over(sessions, spec, jobs=N)`` is the same on a client's own ops, approver and
    model (forked workers run on siblings of it).

Diff — :mod:`.diff`
    ``run_diff(reader_a, a, reader_b, b) -> RunDiff{rows: [DiffRow], first_divergence, summary,
    identical, cell_rows, sequence_aligned, row_payloads(row)}``. A ``DiffRow`` has ``index`` (its
    position in ``rows``) and ``a_index`` / ``b_index`` (the paired rows' positions on each side —
    cells for a cell-row diff — ``None`` on a gap). They agree under flux's positional alignment;
    when positions drift (``sequence_aligned``) they differ, and anything that fetches a side's
    cell or statement must use ``a_index`` / ``b_index`` (:mod:`.align` is the alignment).

Cancelling at the gate raises :class:`~flux.timemachine.fork.ForkCancelled` /
:class:`~flux.timemachine.resurrect.ResurrectCancelled` with nothing written.
"""

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
