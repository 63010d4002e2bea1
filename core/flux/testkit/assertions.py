"""Assertions over a replay :class:`~flux.testkit.scenario.Outcome` or a check
:class:`~flux.testkit.scenario.Report`, with messages a person can act on.

Each failure says what was expected, what happened and how to re-baseline; a check failure carries the
side-by-side trajectory. Every assertion is counted on its scenario (:mod:`flux.testkit.vacuous`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Optional

from .errors import AssertionFailed, kit_failure
from .golden import Rebaseline, update_mode
from .inputs import SNAPSHOT_FILE, load_snapshot
from .linediff import first_line_change, line_diff
from .vacuous import count

__all__ = [
    "assert_faithful", "assert_plan_snapshot", "assert_calls", "assert_never_calls", "assert_text_contains",
    "assert_cost_below", "assert_clean", "assert_diverges_at", "assert_compensated_with",
]

SNAPSHOT_HINT = "if the change is intended, re-baseline: flux test --update (pytest --flux-update)"
REHINT = "re-record if the recording is meant to change: flux record NAME \"PROMPT\" --dir DIR -m MODEL --update"


def _count(obj: Any) -> None:
    count(getattr(obj, "scenario_ref", None) or getattr(obj, "scenario", None))


def _name(obj: Any) -> str:
    sc = getattr(obj, "scenario", None)
    return getattr(sc, "name", None) or str(sc or "scenario")


def _replay_trace(outcome: Any) -> str:
    lines = list(outcome.report.summary_lines())
    for r in outcome.report.statement_results:
        mark = "✗" if r.status == "halted" else "✓"
        extra = f" — {r.error}" if r.error else ""
        lines.append(f"    {mark} statement {r.node} of {r.plan}: {r.status}{extra}")
    st = outcome.report.cell_status
    if st:
        lines.append("  cells: " + " ".join(f"{i}:{s}" for i, s in enumerate(st)))
    return "\n".join(lines)


def assert_faithful(outcome: Any) -> None:
    """Zero divergence from the recording and every recorded cell consumed."""
    __tracebackhide__ = kit_failure
    _count(outcome)
    rep = outcome.report
    if rep.faithful:
        return
    raise AssertionFailed(f"{_name(outcome)}: the replay is not faithful — {rep.unfaithful_reason}",
                          detail=_replay_trace(outcome) + "\n\n" + REHINT)


def assert_plan_snapshot(outcome: Any, *, update: Optional[bool] = None) -> None:
    """The recorded accepted plans equal ``plan.flux.snap`` byte for byte. Under
    ``FLUX_GOLDEN=update`` (or ``update=True``) the file is rewritten instead, and the change is
    reported."""
    __tracebackhide__ = kit_failure
    _count(outcome)
    path = Path(outcome.scenario.path) / SNAPSHOT_FILE
    snapshot = load_snapshot(path)
    expected, existed = (snapshot, True) if snapshot is not None else ("", False)
    actual = outcome.plan_source
    if expected == actual:
        return
    if update_mode() and not outcome.faithful:  # a golden is never re-baselined from a damaged recording
        raise AssertionFailed(f"{_name(outcome)}: plan snapshot mismatch, and {path} was not re-baselined: the recording does not replay "
                              f"faithfully ({outcome.report.unfaithful_reason}) — re-record the scenario",
                              detail=line_diff(expected, actual))
    if update_mode() if update is None else update:
        path.write_text(actual, encoding="utf-8")
        diff = line_diff(expected, actual)
        rb = Rebaseline(str(path), "plan snapshot", diff, created=not existed)
        outcome.rebaselined.append(rb)
        outcome.scenario.rebaselined.append(rb)
        return
    raise AssertionFailed(f"{_name(outcome)}: plan snapshot mismatch — {first_line_change(expected, actual, path.name)}; "
                          f"{SNAPSHOT_HINT}", detail=f"{path}\n" + line_diff(expected, actual))


def assert_calls(outcome: Any, ops: Iterable[str], *, exact: bool = False) -> None:
    """The recorded run called these ops in this order (a subsequence of its calls; the whole
    sequence with ``exact=True``)."""
    __tracebackhide__ = kit_failure
    _count(outcome)
    want = list(ops)
    got = list(outcome.calls)
    if exact:
        if got == want:
            return
        raise AssertionFailed(f"{_name(outcome)}: expected exactly the calls {want}, the recording made {got}")
    it = iter(got)
    missing = [op for op in want if not any(op == g for g in it)]
    if not missing:
        return
    raise AssertionFailed(f"{_name(outcome)}: expected the calls {want} in this order; the recording made {got} "
                          f"(not found in order: {missing})")


def assert_never_calls(outcome: Any, *ops: str) -> None:
    """None of these ops was called by the recorded run."""
    __tracebackhide__ = kit_failure
    _count(outcome)
    got = list(outcome.calls)
    hit = [(i, op) for i, op in enumerate(got) if op in ops]
    if not hit:
        return
    where = ", ".join(f"`{op}` (call {i + 1})" for i, op in hit)
    raise AssertionFailed(f"{_name(outcome)}: expected no call to {', '.join(map(repr, ops))}; the recording made "
                          f"{where} — all calls: {got}")


def assert_text_contains(outcome: Any, needle: str) -> None:
    """The final answer contains ``needle``."""
    __tracebackhide__ = kit_failure
    _count(outcome)
    text = outcome.text
    if needle in text:
        return
    shown = text if len(text) <= 400 else text[:399] + "…"
    raise AssertionFailed(f"{_name(outcome)}: the answer does not contain {needle!r}", detail=f"answer:\n{shown}")


def assert_cost_below(outcome: Any, usd: float, prices: Any = None) -> None:
    """What the recorded run spent (its stored usage, priced by :mod:`flux.model.pricing`) is
    below ``usd``. A model without a price fails: an unknown cost cannot be under a budget."""
    __tracebackhide__ = kit_failure
    _count(outcome)
    cost, unknown = outcome.cost(prices)
    if cost is None:
        raise AssertionFailed(f"{_name(outcome)}: the cost is unknown — no price for {', '.join(unknown)}; add it to "
                              f"a prices file (FLUX_PRICES=FILE, {{\"model\": {{\"input\": 3.0, \"output\": 15.0}}}})")
    if cost < usd:
        return
    raise AssertionFailed(f"{_name(outcome)}: the recorded run cost ${cost:.6f}, not below the budget ${usd:.6f}")


def assert_clean(report: Any) -> None:
    """A check report is clean (see ``Report.is_clean``); the failure shows the trajectory diff."""
    __tracebackhide__ = kit_failure
    report.assert_clean()  # counts itself


def assert_diverges_at(report: Any, node: int) -> None:
    """The run diff's first divergence is at statement ``node`` (and nothing before it changed)."""
    __tracebackhide__ = kit_failure
    _count(report)
    diff = report.diff
    if diff is None:
        raise AssertionFailed(f"{_name(report)}: there is no run diff to inspect ({report.status()})")
    first = next((r for r in diff.rows if r.kind != "same"), None)
    if first is not None and first.node == node:
        return
    what = "the runs are identical" if first is None else f"it diverges first at statement {first.node} ({first.kind})"
    raise AssertionFailed(f"{_name(report)}: expected the first divergence at statement {node}; {what}",
                          detail=diff.render_text().rstrip())


def assert_compensated_with(report: Any, op: str) -> None:
    """``op`` was dispatched by the re-run (it appears among its recorded cells)."""
    __tracebackhide__ = kit_failure
    _count(report)
    ops = list(getattr(report, "actual_ops", []) or [])
    if op in ops:
        return
    raise AssertionFailed(f"{_name(report)}: expected the run to compensate with `{op}`; it called {ops or 'nothing'}",
                          detail=report.trajectory_diff() if hasattr(report, "trajectory_diff") else "")
