"""One cost, three surfaces: ``flux show --json``, the session list (``flux sessions --json`` and
``list_sessions``) and the app's turn panel agree on every turn and session — on the demo store and on a
store with unknown models, missing usage and provider-reported costs (issue 13 item 1)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from flux.cli import main
from flux.demo import build_demo_store
from flux.model.interrupted import check_interrupted
from flux.model.listing import list_sessions
from flux.model.pricing import load_price_table
from flux.model.session import load_session
from flux.store import CallUsage, StoreReader, StoreWriter, TurnEnded, Usage
from flux_tui.fmt import fmt_cost
from flux_tui.render import render_turn_info

NOW = 1_785_193_560_000


def _odd_store(d: Path) -> dict[str, float | None]:
    """Sessions whose expected session cost is known by hand (USD; None = unknown)."""
    want = {}
    with StoreWriter(d) as w:
        # priced calls, then an unknown model that spent tokens: the session's cost is unknown
        s = w.create_session("claude-sonnet-4-5")
        t = w.begin_turn(s, "priced", "claude-sonnet-4-5")
        w.append(s, CallUsage(model="claude-sonnet-4-5", usage=Usage(input_tokens=1_000_000, output_tokens=100_000)), turn_id=t)
        w.append(s, TurnEnded(outcome="ok", usage=Usage(input_tokens=1_000_000, output_tokens=100_000)), turn_id=t)
        t = w.begin_turn(s, "unpriced", "acme:frontier-9")
        w.append(s, CallUsage(model="acme:frontier-9", usage=Usage(input_tokens=10)), turn_id=t)
        w.append(s, TurnEnded(outcome="ok", usage=Usage(input_tokens=10)), turn_id=t)
        want[s] = None
        # provider-reported costs win, for an unknown model on a call and on a turn_ended-only turn
        s = w.create_session("acme:frontier-9")
        t = w.begin_turn(s, "reported call", "acme:frontier-9")
        w.append(s, CallUsage(model="acme:frontier-9", usage=Usage(input_tokens=5, reported_cost_usd=0.25)), turn_id=t)
        w.append(s, TurnEnded(outcome="ok", usage=Usage(input_tokens=5)), turn_id=t)
        t = w.begin_turn(s, "reported end", "acme:frontier-9")
        w.append(s, TurnEnded(outcome="ok", usage=Usage(input_tokens=7, reported_cost_usd=0.125)), turn_id=t)
        want[s] = 0.375
        # no usage anywhere, and an unknown model that spent nothing: $0, not unknown
        s = w.create_session("acme:frontier-9")
        t = w.begin_turn(s, "silent", "acme:frontier-9")
        w.append(s, TurnEnded(outcome="ok"), turn_id=t)
        t = w.begin_turn(s, "zero", "acme:frontier-9")
        w.append(s, CallUsage(model="acme:frontier-9", usage=Usage()), turn_id=t)
        w.append(s, TurnEnded(outcome="ok"), turn_id=t)
        want[s] = 0.0
        # a turn that names no model is priced by the session's model; an open turn spends nothing yet
        s = w.create_session("gpt-4.1")
        t = w.begin_turn(s, "modelless", "")
        w.append(s, TurnEnded(outcome="ok", usage=Usage(input_tokens=500_000, output_tokens=125_000)), turn_id=t)
        w.begin_turn(s, "still running", "gpt-4.1")
        want[s] = 0.5 * 2.0 + 0.125 * 8.0
    return want


def _app_costs(detail, prices) -> tuple[list[str], str]:
    """The turn panel's "cost" line per turn and its "session" line, as the app prints them."""
    check = check_interrupted(detail.turns, detail.turn_run_trace)
    console = Console(width=200, record=True, color_system=None)
    turns, session = [], None
    for t in detail.turns:
        console.print(render_turn_info(detail, t, check, prices, None))
        text = console.export_text()
        turns.append(re.search(r"^\s*cost\s+(\S+)", text, re.M).group(1))
        session = re.search(r"^\s*session\s+(\S+)", text, re.M).group(1)
    return turns, session


def _agree(store: Path) -> dict[str, float | None]:
    prices = load_price_table(None, store)
    runner = CliRunner()
    listed = json.loads(runner.invoke(main, ["sessions", "--store", str(store), "--json", "--limit", "1000"]).stdout)["sessions"]
    by_cli_list = {s["id"]: s["cost_usd"] for s in listed}
    out = {}
    with StoreReader(store) as r:
        by_list = {s.id: s.cost for s in list_sessions(r, limit=None, prices=prices)}
        assert by_list.keys() == by_cli_list.keys() and by_list
        for sid, listed_cost in by_list.items():
            res = runner.invoke(main, ["show", sid, "--store", str(store), "--json"])
            assert res.exit_code == 0, res.output
            shown = json.loads(res.stdout)
            app_turns, app_session = _app_costs(load_session(r, sid), prices)
            # the session's cost: list, `flux sessions`, `flux show` and the app
            for other in (by_cli_list[sid], shown["cost_usd"]):
                assert (other is None) == (listed_cost is None), sid
                if other is not None:
                    assert other == pytest.approx(listed_cost, rel=1e-9, abs=1e-12), sid
            assert app_session == fmt_cost(shown["cost_usd"], unknown="unknown"), sid
            # every turn: `flux show` and the app
            assert app_turns == [fmt_cost(t["cost_usd"], unknown="unknown") for t in shown["turns"]], sid
            out[sid] = listed_cost
    return out


def test_all_surfaces_agree_on_unknown_models_missing_usage_and_reported_cost(tmp_path):
    store = tmp_path / "odd"
    want = _odd_store(store)
    got = _agree(store)
    assert got.keys() == want.keys()
    for sid, cost in want.items():
        assert got[sid] == (None if cost is None else pytest.approx(cost)), sid


def test_all_surfaces_agree_on_the_demo_store(tmp_path):
    got = _agree(build_demo_store(tmp_path / "demo", now_ms=NOW))
    assert len(got) == 11 and any(c for c in got.values())
