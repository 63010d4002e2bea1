"""Write verbs on hostile input fail before they write: one ``error:`` line (or flux test's
failing row), exit 1, no traceback, no byte of the source changed, no golden re-baselined from a
recording that does not replay. Each test comes from a reproduction; the hypothesis tests at the
end run small budgets of the battery (the long run is ``benchmarks/fuzz_writes.py``)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.cli import main
from flux.documents import nesting_depth
from tests.hostile.corrupt import tree_state
from tests.hostile.corrupt_writes import (
    MAX_ERROR_LINE, WriteTally, build_scenario_base, build_store_base, scenario_battery, store_battery,
)


@pytest.fixture(scope="module")
def scenario_base(tmp_path_factory) -> Path:
    return build_scenario_base(tmp_path_factory.mktemp("scenario-base") / "sc")


@pytest.fixture(scope="module")
def store_base(tmp_path_factory) -> Path:
    return build_store_base(tmp_path_factory.mktemp("store-base") / "store")


@pytest.fixture
def sc(scenario_base, tmp_path) -> Path:
    return Path(shutil.copytree(scenario_base, tmp_path / "sc"))


@pytest.fixture(autouse=True)
def _no_golden_env(monkeypatch):
    monkeypatch.delenv("FLUX_GOLDEN", raising=False)  # `flux test --update` sets it for its process
    monkeypatch.setenv("FLUX_AUTO_RESURRECT", "0")


def _flux(*args: str):
    res = CliRunner().invoke(main, list(args), catch_exceptions=True)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def _one_failure(res, needle: str) -> str:
    """The failure a verb reported — its one error line, or flux test's row — containing ``needle``."""
    assert res.exit_code == 1, res.output
    text = res.stderr + res.stdout
    assert "Traceback" not in text
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) <= 1
    assert needle in text, text
    assert max(len(ln) for ln in text.splitlines()) <= MAX_ERROR_LINE
    return text


def _test_failure(sc: Path, needle: str, *extra: str) -> None:
    before = tree_state(sc)
    res = _flux("test", *extra, str(sc), "--json")
    assert res.exit_code == 1, res.output
    data = json.loads(res.stdout)
    (row,) = data["scenarios"]
    assert row["ok"] is False and needle in (row["error"] or ""), row
    assert tree_state(sc) == before


def test_model_cassette_with_invalid_utf8(sc):
    with open(sc / "model.jsonl", "ab") as fh:
        fh.write(b"\xff\xfe\x80garbage\n")
    _test_failure(sc, "the model cassette is not UTF-8 text")
    _test_failure(sc, "the model cassette is not UTF-8 text", "--update")


def test_scenario_toml_nested_3000_deep(sc):
    text = (sc / "scenario.toml").read_text()
    (sc / "scenario.toml").write_text("a = " + "[" * 3000 + "]" * 3000 + "\n" + text)
    _test_failure(sc, "TOML nested deeper than")
    _one_failure(_flux("export", str(sc), "--format", "atif"), "TOML nested deeper than")


def test_override_of_5000_open_brackets(sc):
    (sc / "replay.override.json").write_text("[" * 5000)
    _test_failure(sc, "JSON nested deeper than")


def test_golden_whose_steps_is_a_number(sc):
    (sc / "trajectory.golden.json").write_text('{"schema_version": "ATIF-v1.8", "steps": 5}')
    _test_failure(sc, "`steps` must be a list")
    res = _flux("golden", "check", str(sc), str(sc / "trajectory.golden.json"))
    _one_failure(res, "`steps` must be a list")


def test_a_value_100kb_long_is_not_echoed_whole(sc):
    text = (sc / "scenario.toml").read_text()
    (sc / "scenario.toml").write_text(text.replace('session = "s_1"', "session = [" + "9," * 50_000 + "]"))
    _one_failure(_flux("export", str(sc), "--format", "atif"), "`session` must be a string")
    (sc / "scenario.toml").write_text(text.replace('session = "s_1"', 'session = "' + "s" * 100_000 + '"'))
    _one_failure(_flux("export", str(sc), "--format", "atif"), "sssss")
    _test_failure(sc, "sssss")


def test_update_never_rebaselines_from_a_recording_that_does_not_replay(sc):
    """A damaged recording (a cell's input hash changed: the plan's dispatch finds no cell) with a
    stale snapshot: --update exits 1 and leaves plan.flux.snap as it was."""
    (sc / "plan.flux.snap").write_text("flow\n  stale = read({\"path\":\"x\"})\n")
    con = sqlite3.connect(sc / "events.db")
    con.execute("UPDATE events SET payload = json_set(payload, '$.data.input_hash', 'tampered') "
                "WHERE kind = 'run' AND json_extract(payload, '$.data.event') = 'op_recorded'")
    con.commit()
    con.close()
    for side in ("events.db-wal", "events.db-shm"):
        (sc / side).unlink(missing_ok=True)
    snap = (sc / "plan.flux.snap").read_bytes()
    res = _flux("test", "--update", str(sc))
    assert res.exit_code == 1, res.output
    assert (sc / "plan.flux.snap").read_bytes() == snap


def test_update_still_rebaselines_a_faithful_recording(sc):
    """The same stale snapshot on an undamaged recording is re-baselined (exit 0)."""
    (sc / "plan.flux.snap").write_text("flow\n  stale = read({\"path\":\"x\"})\n")
    res = _flux("test", "--update", str(sc))
    assert res.exit_code == 0, res.output
    assert "updated plan snapshot" in res.stdout
    assert (sc / "plan.flux.snap").read_text() != "flow\n  stale = read({\"path\":\"x\"})\n"


@pytest.mark.parametrize("ts", [253402300800000, 2 ** 63 - 1, -(2 ** 63)])
def test_atif_export_of_an_event_stamped_beyond_year_9999(store_base, tmp_path, ts):
    store = Path(shutil.copytree(store_base, tmp_path / "s"))
    con = sqlite3.connect(store / "events.db")
    con.execute("UPDATE events SET ts = ?", (ts,))
    con.commit()
    con.close()
    res = _flux("export", "s_7", "--format", "atif", "--store", str(store))
    assert res.exit_code == 0, res.output
    stamps = {s["timestamp"] for s in json.loads(res.stdout)["steps"]}
    assert stamps <= {"9999-12-31T23:59:59.999Z", "0001-01-01T00:00:00.000Z"}


@pytest.mark.parametrize("usage", ["null", "5", "[]", '"x"', '{"input_tokens": "many"}'])
def test_show_with_a_usage_that_is_not_an_object(store_base, tmp_path, usage):
    store = Path(shutil.copytree(store_base, tmp_path / "s"))
    con = sqlite3.connect(store / "events.db")
    con.execute(f"UPDATE events SET payload = json_set(payload, '$.data.usage', json('{usage}')) "
                "WHERE kind IN ('call_usage', 'turn_ended')")
    con.commit()
    con.close()
    for args in (["show", "s_7"], ["show", "s_7", "--json"], ["sessions"]):
        res = _flux(*args, "--store", str(store))
        assert res.exit_code == 0, res.output


def test_nesting_depth_ignores_brackets_in_strings():
    assert nesting_depth('{"a": "[[[[", "b": [[1]]}') == 3
    assert nesting_depth('a = """[[[[""" # [[[[\nb = [[1]]', toml=True) == 2
    assert nesting_depth("a = '[[[['\nb = [1]", toml=True) == 1
    assert nesting_depth('"\\"[[["') == 0


# --------------------------------------------------------------------------------- batteries

def _watch(tmp: Path) -> Path:
    w = tmp / "tmp-watch"
    w.mkdir(exist_ok=True)
    return w


# The batteries draw their corruptions from a seed; CI runs a fixed set of seeds (derandomize) so a
# red run names a reproducible one — `benchmarks/fuzz_writes.py` runs fresh seeds by hand.
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(seed=st.integers(0, 2 ** 32))
def test_battery_scenarios_every_verb(scenario_base, seed):
    try:
        _battery_is_clean(scenario_battery, scenario_base, seed)
    finally:
        os.environ.pop("FLUX_GOLDEN", None)


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(seed=st.integers(0, 2 ** 32))
def test_battery_stores_every_write_verb(store_base, seed):
    _battery_is_clean(store_battery, store_base, seed)


def test_battery_stores_seed_187370(store_base):
    """A truncated events.db whose second corruption failed half-way: that corruption's connection,
    held by its traceback's frames, stayed open through every verb (the battery's own handle, which
    also kept the verbs' close from being the last) until the variant collects it."""
    _battery_is_clean(store_battery, store_base, 187370)


def test_battery_stores_seed_2026006110(store_base):
    """`benchmarks/fuzz_writes.py stores --n 1 --start 32 --seed 2026`: `flux sweep --all` on a
    crashed writer's store with a truncated events.db — every what-if's insert fails on a damaged
    page; each session is one error row and no connection stays open."""
    _battery_is_clean(store_battery, store_base, 2026 * 1_000_003 + 32)


def _battery_is_clean(battery, base, seed):
    """One battery run on ``seed`` with a private TMPDIR (what it leaves there is counted): no failure."""
    with tempfile.TemporaryDirectory() as t:
        work = Path(t)
        watch = _watch(work)
        old = os.environ.get("TMPDIR"), tempfile.tempdir
        os.environ["TMPDIR"], tempfile.tempdir = str(watch), str(watch)
        try:
            tally = WriteTally()
            battery(main, base, work, watch, seed, tally)
        finally:
            if old[0] is None:
                os.environ.pop("TMPDIR", None)
            else:
                os.environ["TMPDIR"] = old[0]
            tempfile.tempdir = old[1]
        assert tally.total == 0, tally.examples


def _damage_an_index_page(store: Path) -> None:
    """A store whose reads work but whose next insert fails half-way: the root page of
    ``idx_events_kind`` overwritten with garbage (SQLite: "database disk image is malformed")."""
    con = sqlite3.connect(store / "events.db")
    (root,) = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'idx_events_kind'").fetchone()
    (size,) = con.execute("PRAGMA page_size").fetchone()
    con.close()
    data = bytearray((store / "events.db").read_bytes())
    data[(root - 1) * size: root * size] = bytes((i * 151 + 7) % 256 for i in range(size))
    (store / "events.db").write_bytes(bytes(data))


def test_fork_on_a_store_that_fails_on_insert_writes_nothing(store_base, tmp_path):
    store = Path(shutil.copytree(store_base, tmp_path / "s"))
    _damage_an_index_page(store)
    before = tree_state(store)
    res = _flux("fork", "s_7", "--at", "1", "--inject", '"x"', "--store", str(store))
    _one_failure(res, "is corrupt")
    assert {k: v for k, v in tree_state(store).items() if not k.endswith("-shm")} == \
        {k: v for k, v in before.items() if not k.endswith("-shm")}


@pytest.mark.parametrize("verb", [["resurrect", "s_9", "--yes"], ["fork", "s_7", "--at", "0", "-y", "-m", "mock"]])
def test_a_live_verb_on_a_damaged_store_runs_no_op(store_base, tmp_path, verb):
    """resurrect would run `publish` (and append to CHANGELOG.md) live, a re-planning fork its
    model's ops: on a store that cannot take the result, nothing runs and nothing is written."""
    store = Path(shutil.copytree(store_base, tmp_path / "s"))
    _damage_an_index_page(store)
    before = tree_state(store)
    res = _flux(*verb, "--store", str(store))
    _one_failure(res, "nothing was run")
    assert tree_state(store) == before  # the workspace inside the store too: no op acted
