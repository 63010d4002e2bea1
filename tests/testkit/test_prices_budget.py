"""The cost budget cannot be bypassed by a prices file the table does not understand."""

from __future__ import annotations

import json

import pytest

from flux.errors import FluxError
from flux.testkit import Scenario
from flux.testkit.errors import AssertionFailed


def test_unknown_price_keys_cannot_make_a_budget_pass(openai_dir, tmp_path, monkeypatch):
    """Reproduction: ``{"test-model": {"input_per_token": …}}`` priced the model at $0, so
    ``assert_cost_under(1e-7)`` passed. Now the file is refused by name; pyrula's ``*_per_mtok``
    spelling prices the recorded run and the tiny budget fails."""
    prices = tmp_path / "prices.json"
    monkeypatch.setenv("FLUX_PRICES", str(prices))
    with Scenario.load(openai_dir) as sc:
        out = sc.replay()
        prices.write_text(json.dumps({"test-model": {"input_per_token": 1000.0, "output_per_token": 2000.0}}))
        with pytest.raises(FluxError, match="unknown key 'input_per_token'"):
            out.assert_cost_under(1e-7)
        prices.write_text(json.dumps({"test-model": {"input_per_mtok": 1000.0, "output_per_mtok": 2000.0}}))
        with pytest.raises(AssertionFailed, match=r"cost \$0\.075000, not below the budget \$0\.000000"):
            out.assert_cost_under(1e-7)
        out.assert_cost_under(0.08)
