"""The price table: flux's pinned rates and cost cases (ported as data from flux's pricing tests),
flux's real 9-turn gpt-5.5 capture, pyrula's ``*_per_mtok`` names and long-context tier, and a
prices file that is wrong in any way refused in one line — never a model priced at $0 by a typo."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.cli import main
from flux.errors import FluxError
from flux.model.pricing import BUILTIN_PRICES, PriceTable, load_price_table, session_spend
from flux.model.session import load_session
from flux.store.events import CallUsage, TurnEnded
from flux.store.store import StoreReader, StoreWriter
from flux.store.usage import Usage

DATA = Path(__file__).parent / "data"
CASES = json.loads((DATA / "flux_pricing_cases.json").read_text())
CAPTURE = json.loads((DATA / "flux_s1477_usage.json").read_text())


@pytest.mark.parametrize("spec,inp,out,cw,cr", CASES["pinned_rates"], ids=[p[0] for p in CASES["pinned_rates"]])
def test_flux_pinned_rates(spec, inp, out, cw, cr):
    p = PriceTable(BUILTIN_PRICES).lookup(spec)
    assert p is not None, f"{spec} must be in the built-in table"
    assert (p.input, p.output, p.cache_write, p.cache_read) == (inp, out, cw, cr)
    assert (p.reasoning, p.audio_input, p.audio_output) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("spec,usage,usd", CASES["costs"], ids=[c[0] for c in CASES["costs"]])
def test_flux_cost_cases(spec, usage, usd):
    assert PriceTable(BUILTIN_PRICES).cost(spec, Usage(**usage)) == pytest.approx(usd, abs=1e-9)


@pytest.mark.parametrize("a,b", CASES["same_rates"])
def test_routing_prefixes_price_like_the_direct_model(a, b):
    t = PriceTable(BUILTIN_PRICES)
    assert t.lookup(a) is not None and t.lookup(a) == t.lookup(b)


def test_unknown_models_have_no_price_and_a_variant_is_not_its_base():
    t = PriceTable(BUILTIN_PRICES)
    for spec in CASES["unknown"]:
        assert t.cost(spec, Usage(input_tokens=1)) is None
    # gpt-5.5-pro sells at 30/180: pricing it as gpt-5.5 would under-bill a budget six-fold.
    assert t.lookup("gpt-5.5-pro") is None
    assert t.lookup("claude-sonnet-4-5-20250929") == t.lookup("claude-sonnet-4-5")  # a dated id is its row
    assert t.lookup("openai:gpt-4o-2024-08-06") == t.lookup("gpt-4o")
    assert t.cost("ollama:qwen2.5:1.5b", Usage(input_tokens=10**6)) == 0
    assert t.cost("scripted:/tmp/s.json", Usage(input_tokens=10**6)) == 0


def test_per_tier_multiplication_with_every_tier(tmp_path):
    """flux's cost_applies_per_tier_rates: a distinct rate on every tier, 9.0 exactly."""
    f = tmp_path / "prices.json"
    f.write_text(json.dumps({"test-model": {"input": 2.0, "output": 4.0, "cache_write": 6.0, "cache_read": 1.0,
                                            "reasoning": 8.0, "audio_input": 10.0, "audio_output": 20.0}}))
    u = Usage(input_tokens=1_000_000, output_tokens=500_000, cache_creation_input_tokens=200_000,
              cache_read_input_tokens=2_000_000, reasoning_tokens=100_000, audio_input_tokens=50_000,
              audio_output_tokens=25_000)
    assert load_price_table(f).cost("test-model", u) == pytest.approx(9.0)


def _capture_store(root: Path) -> tuple[Path, str]:
    store = root / "store"
    w = StoreWriter(store)
    try:
        sid = w.create_session(CAPTURE["model"])
        for n, calls in enumerate(CAPTURE["turns"]):
            tid = w.begin_turn(sid, f"turn {n + 1}", CAPTURE["model"])
            for i, o, cr in calls:
                w.append(sid, CallUsage(model=CAPTURE["model"], usage=Usage(input_tokens=i, output_tokens=o,
                                                                               cache_read_input_tokens=cr)), turn_id=tid)
            w.append(sid, TurnEnded(outcome="ok", answer="done"), turn_id=tid)
    finally:
        w.close()
    return store, sid


def test_flux_nine_turn_gpt55_capture_costs_what_flux_says(tmp_path):
    """flux's real capture s_1477 (9 turns, 75 calls of gpt-5.5) costs $9.589576 under flux's table;
    the old built-in table priced gpt-5.5 as gpt-5 and said $2.48."""
    assert sum(map(len, CAPTURE["turns"])) == 75 and len(CAPTURE["turns"]) == 9
    store, sid = _capture_store(tmp_path)
    with StoreReader(store) as r:
        detail = load_session(r, sid)
    spend = session_spend(load_price_table(), detail.turns, detail.row.model)
    assert spend.usd == pytest.approx(9.589576, abs=1e-6)
    assert spend.unpriced_models == ()
    # and the CLI says the same
    out = CliRunner().invoke(main, ["show", sid, "--store", str(store), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["cost_usd"] == pytest.approx(9.589576, abs=1e-6)


# --- a user's prices file -----------------------------------------------------------------------


def _table(tmp_path, obj) -> PriceTable:
    f = tmp_path / "prices.json"
    f.write_text(json.dumps(obj))
    return load_price_table(f)


def test_pyrula_per_mtok_names_are_accepted(tmp_path):
    t = _table(tmp_path, {"model-id": {"input_per_mtok": 2.5, "output_per_mtok": 10, "cache_write_per_mtok": 2.5,
                                       "cache_read_per_mtok": 0.5}})
    u = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cache_read_input_tokens=1_000_000,
              cache_creation_input_tokens=1_000_000)
    assert t.cost("model-id", u) == pytest.approx(2.5 + 10 + 0.5 + 2.5)


def test_unknown_keys_no_longer_price_a_model_at_zero(tmp_path):
    """The reproduction: an entry whose keys the table did not know priced the model at $0, so
    ``assert_cost_under(1e-7)`` passed. Now the file is refused, naming the key."""
    with pytest.raises(FluxError, match=r"unknown key 'input_per_token'"):
        _table(tmp_path, {"m": {"input_per_token": 3.0, "output_per_token": 15.0}})
    with pytest.raises(FluxError, match="has no input rate"):
        _table(tmp_path, {"m": {"output": 15.0}})
    with pytest.raises(FluxError, match="has no output rate"):
        _table(tmp_path, {"m": {"input_per_mtok": 3.0}})
    with pytest.raises(FluxError, match="given twice"):
        _table(tmp_path, {"m": {"input": 3.0, "input_per_mtok": 3.0, "output": 1}})


def test_missing_cache_rates_default_to_input_or_keep_the_builtin_row(tmp_path):
    t = _table(tmp_path, {"new-model": {"input": 2.0, "output": 8.0},
                          "claude-sonnet-4-6": {"input": 4.0, "output": 16.0}})
    p = t.lookup("new-model")
    assert (p.cache_read, p.cache_write) == (2.0, 2.0)  # cached tokens never under-bill
    q = t.lookup("claude-sonnet-4-6")
    assert (q.input, q.output, q.cache_read, q.cache_write) == (4.0, 16.0, 0.30, 3.75)


def test_long_context_tier_prices_the_whole_call(tmp_path):
    """pyrula: a call whose prompt (input + cache creation + cache read) is above N is priced
    entirely at the tier's rates; cache rates default to the tier's input rate."""
    t = _table(tmp_path, {"big": {"input": 2.5, "output": 15, "cache_read": 0.25,
                                  "long_context": {"above_input_tokens": 272_000, "input_per_mtok": 5.0,
                                                   "output_per_mtok": 22.5}}})
    small = Usage(input_tokens=200_000, cache_read_input_tokens=72_000, output_tokens=1_000)
    assert t.cost("big", small) == pytest.approx((200_000 * 2.5 + 72_000 * 0.25 + 1_000 * 15) / 1e6)
    large = Usage(input_tokens=200_000, cache_read_input_tokens=72_001, output_tokens=1_000)
    assert t.cost("big", large) == pytest.approx((200_000 * 5.0 + 72_001 * 5.0 + 1_000 * 22.5) / 1e6)
    with pytest.raises(FluxError, match="above_input_tokens"):
        _table(tmp_path, {"big": {"input": 1, "output": 1, "long_context": {"input": 2, "output": 2}}})
    with pytest.raises(FluxError, match="unknown key 'above'"):
        _table(tmp_path, {"big": {"input": 1, "output": 1, "long_context": {"above": 5, "input": 2, "output": 2}}})


def test_a_bad_prices_file_is_one_cli_error_line(tmp_path):
    store, sid = _capture_store(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"gpt-5.5": {"input_per_token": 1}}))
    out = CliRunner().invoke(main, ["show", sid, "--store", str(store), "--prices", str(bad)])
    assert out.exit_code == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "input_per_token" in lines[0]


_values = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**9), st.floats(allow_nan=True, allow_infinity=True),
                    st.text(max_size=8), st.lists(st.integers(), max_size=2))
_entry = st.dictionaries(st.sampled_from(["input", "output", "cache_read", "cache_write", "input_per_mtok",
                                           "output_per_mtok", "reasoning", "bogus", "long_context"]),
                         _values, max_size=5)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=st.one_of(st.dictionaries(st.text(max_size=6), _entry, max_size=3), _values))
def test_hostile_prices_files_are_refused_or_price_every_token(tmp_path, doc):
    """Any document either loads — and then every entry prices a token at its stated, non-negative
    rate, never a silent 0 for a missing input rate — or is refused with a FluxError."""
    f = tmp_path / "p.json"
    f.write_text(json.dumps(doc))
    try:
        t = load_price_table(f)
    except FluxError as e:
        assert "\n" not in str(e)
        return
    assert isinstance(doc, dict)
    for model, entry in doc.items():
        stated = entry.get("input", entry.get("input_per_mtok"))
        assert t.prices[model].input == float(stated) and t.prices[model].input >= 0
