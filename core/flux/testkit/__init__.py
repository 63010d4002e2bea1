"""The test kit: recorded runs become offline regression tests.

``Scenario`` (record / load / replay / check), the assertions, the strict model cassette, golden
mode (``FLUX_GOLDEN=update``), the judge and golden trajectories. See docs/testing.md.
"""

from __future__ import annotations

from ..lazy import lazy_exports

_EXPORTS = {
    "Scenario": ".scenario", "Outcome": ".scenario", "Report": ".scenario", "Counterfactual": ".scenario", "is_scenario_dir": ".scenario",
    "StrictCassette": ".cassette", "CassetteError": ".cassette", "CassetteMismatch": ".cassette",
    "CassetteExhausted": ".cassette", "Manifest": ".manifest", "ScenarioError": ".errors",
    "MissingFixture": ".errors", "AssertionFailed": ".errors", "JudgeMiss": ".errors", "update_mode": ".golden",
    "assert_faithful": ".assertions", "assert_plan_snapshot": ".assertions", "assert_calls": ".assertions",
    "assert_never_calls": ".assertions", "assert_text_contains": ".assertions", "assert_cost_below": ".assertions",
    "assert_diverges_at": ".assertions", "assert_compensated_with": ".assertions", "assert_clean": ".assertions",
    "Rubric": ".judge", "Verdict": ".judge",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
