"""Issue 7 items 3 (caller side), 6-10: regression tests from each minimal reproducer, plus a small
hypothesis fuzz of corrupted stores × every read verb (the long run is ``benchmarks/fuzz.py stores``)."""

from __future__ import annotations

import json
import os
import random
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.cli import main
from flux.errors import StoreError
from flux.model.listing import list_sessions
from flux.model.stored_plan import StoredPlanError, parse_stored_plan
from flux.store.store import StoreReader
from tests.hostile.corrupt import (
    MUTATIONS, READ_VERBS, Tally, battery, build_base, check_invocation, hostile_plans, isolated_tmpdir, make_variant,
    run_verb, tree_state,
)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return build_base(tmp_path_factory.mktemp("hostile-base") / "store")


@pytest.fixture
def watch(tmp_path, monkeypatch):
    """TMPDIR (and Python's cached temp dir) pointed at an empty directory the test can watch."""
    t = tmp_path / "tmp-watch"
    t.mkdir()
    monkeypatch.setenv("TMPDIR", str(t))
    monkeypatch.setattr(tempfile, "tempdir", str(t))
    return t


def _copy(base: Path, dst: Path) -> Path:
    shutil.copytree(base, dst, symlinks=True)
    return dst


def _sql(store: Path, *stmts: tuple) -> None:
    con = sqlite3.connect(store / "events.db", isolation_level=None)
    try:
        con.execute("PRAGMA journal_mode = DELETE")
        for stmt in stmts:
            con.execute(*stmt)
        con.execute("PRAGMA journal_mode = WAL")
    finally:
        con.close()
    for side in ("events.db-wal", "events.db-shm"):
        (store / side).unlink(missing_ok=True)


def _ok(store: Path, verb: list[str]):
    inv = run_verb(main, store, verb, timeout_s=20)
    assert check_invocation(inv) == [], (verb, inv.stderr, inv.exception)
    return inv


# ------------------------------------------------------------------------- item 6: registry cells

@pytest.mark.parametrize("value", [None, b"\x00\xff", "garbage", 1.5, 2 ** 63 - 1, -(2 ** 63)])
@pytest.mark.parametrize("column", ["model", "created_at", "updated_at", "last_seq", "msg_count", "agent_id",
                                   "correlation_id"])
def test_null_blob_or_wrong_type_in_the_registry_lists_the_session(base, tmp_path, column, value):
    store = _copy(base, tmp_path / "s")
    try:
        _sql(store, (f"UPDATE streams SET {column} = ? WHERE n = 1", (value,)))
    except sqlite3.IntegrityError:
        # Our schema declares the column NOT NULL; a foreign writer's need not. Plant the value in
        # a registry rebuilt without constraints, as such a store would hold it.
        _sql(store, ("CREATE TABLE streams_loose AS SELECT * FROM streams",), ("DROP TABLE streams",),
             ("ALTER TABLE streams_loose RENAME TO streams",),
             (f"UPDATE streams SET {column} = ? WHERE n = 1", (value,)))
    for verb in (["sessions"], ["sessions", "--json"], ["show", "s_1"], ["show", "s_1", "--json"]):
        inv = _ok(store, verb)
        assert inv.exit_code == 0, (verb, inv.stderr)
    listed = json.loads(_ok(store, ["sessions", "--json"]).stdout)["sessions"]
    assert "s_1" in [s["id"] for s in listed]


# ------------------------------------------------------------------------- item 6: payloads

def test_invalid_utf8_payload_is_skipped_and_counted_not_fatal(base, tmp_path):
    store = _copy(base, tmp_path / "s")
    _sql(store, ("UPDATE events SET payload = CAST(? AS TEXT) WHERE stream = 's_1' AND kind = 'message' AND stream_seq = 1",
                 (b'{"kind":"message","data":{"role":"user","content":"\xc3\x28"}}',)))
    inv = _ok(store, ["show", "s_1", "--json"])
    assert inv.exit_code == 0
    data = json.loads(inv.stdout)
    assert data["skipped_rows"] == 1 and len(data["turns"]) == 1
    human = _ok(store, ["show", "s_1"])
    assert "1 corrupt event row(s) skipped" in human.stderr
    with StoreReader(store) as r:
        assert len(r.events("s_1")) == 9 and r.skipped_rows == 1


@pytest.mark.parametrize("payload", [
    b"\x01\x02", 42, '{"kind":"message","data":' + "[" * 50_000 + "]" * 50_000 + "}",
    '{"kind":"turn_ended","data":{"outcome":"ok","iterations":' + "9" * 5_000 + "}}",
    '{"kind":"turn_ended","data":{"outcome":["x"],"usage":"lots"}}',
])
def test_hostile_payloads_are_skipped_or_tolerated(base, tmp_path, payload):
    store = _copy(base, tmp_path / "s")
    _sql(store, ("UPDATE events SET payload = ? WHERE stream = 's_1' AND kind = 'turn_ended'", (payload,)))
    for verb in READ_VERBS:
        _ok(store, verb)


def test_a_lone_surrogate_escape_in_a_payload_reads_as_replacement_character(base, tmp_path):
    store = _copy(base, tmp_path / "s")
    _sql(store, ("UPDATE events SET payload = ? WHERE stream = 's_1' AND kind = 'turn_ended'",
                 ('{"kind":"turn_ended","data":{"outcome":"ok","answer":"bad \\ud83d end"}}',)))
    inv = _ok(store, ["show", "s_1", "--json"])
    assert json.loads(inv.stdout)["turns"][0]["answer"] == "bad \ufffd end"


def test_deeply_nested_prices_json_is_one_line(base, tmp_path):
    store = _copy(base, tmp_path / "s")
    (store / "prices.json").write_text('{"m":' * 100_000 + "1" + "}" * 100_000)
    for verb in (["sessions"], ["sessions", "--json"], ["show"], ["show", "--json"]):
        inv = _ok(store, verb)
        assert inv.exit_code == 1 and inv.stderr.startswith("error: prices file") and "nested too deeply" in inv.stderr


# ------------------------------------------------------------------------- item 3: hostile plans

@pytest.mark.parametrize("seed", range(10))
def test_a_hostile_accepted_plan_never_fails_the_whole_store(base, tmp_path, seed):
    """The open turn of s_3 holds the hostile plan: `flux sessions` must still list every session."""
    store = _copy(base, tmp_path / "s")
    plan = hostile_plans(random.Random(seed))
    payload = json.dumps({"kind": "plan_attempted", "data": {"step": 1, "outcome": "accepted", "plan_source": plan}})
    _sql(store, ("UPDATE events SET payload = ? WHERE kind = 'plan_attempted'", (payload,)))
    out = json.loads(_ok(store, ["sessions", "--json"]).stdout)
    assert [s["id"] for s in out["sessions"]] == ["s_3", "s_2", "s_1"]
    for verb in READ_VERBS:
        _ok(store, verb)


@pytest.mark.parametrize("text", [
    "flow\n  x = " + "f(" * 3_000 + "1" + ")" * 3_000 + "\n",
    "flow\n  x = " + "9" * 20_000 + "\n",
    "flow\n  x = \"\ud83d\"\n",
    "flow\n  x = " + "[" * 2_000 + "]" * 2_000 + "\n",
])
def test_parse_stored_plan_turns_any_failure_into_one_line(text):
    try:
        parse_stored_plan(text)
    except StoredPlanError as e:
        assert "\n" not in str(e)


# ------------------------------------------------------------------------- items 7-9: files

@pytest.mark.parametrize("kind", ["fifo", "dir", "socket", "dev", "loop"])
def test_non_regular_events_db_is_refused_with_one_line(base, tmp_path, kind, watch):
    store = _copy(base, tmp_path / "s")
    db = store / "events.db"
    db.unlink()
    if kind == "fifo":
        os.mkfifo(db)
    elif kind == "dir":
        db.mkdir()
    elif kind == "dev":
        os.symlink("/dev/zero", db)
    elif kind == "loop":
        os.symlink(db, db)
    else:
        import socket

        s = socket.socket(socket.AF_UNIX)
        s.bind(str(db))
        s.close()
    for verb in READ_VERBS:
        inv = _ok(store, verb)
        assert inv.exit_code == 1 and inv.stderr.startswith("error: "), inv.stderr
    assert os.listdir(watch) == []


def test_fifo_sidecars_are_refused_not_waited_on(base, tmp_path):
    store = _copy(base, tmp_path / "s")
    os.mkfifo(store / "events.db-wal")
    inv = _ok(store, ["sessions"])
    assert inv.exit_code == 1 and "FIFO" in inv.stderr


@pytest.mark.parametrize("sides", [("-wal",), ("-shm",), ("-wal", "-shm")])
@pytest.mark.parametrize("garbage", [b"\x00" * 32_768, bytes(range(256)) * 160, bytes.fromhex("377f0682002de218") + b"\xaa" * 5000])
def test_garbage_sidecars_are_never_written(base, tmp_path, sides, garbage, watch):
    store = _copy(base, tmp_path / "s")
    for s in sides:
        (store / f"events.db{s}").write_bytes(garbage)
    before = tree_state(store)
    for verb in READ_VERBS:
        _ok(store, verb)
        assert tree_state(store) == before, verb
    assert os.listdir(watch) == []


def test_snapshot_dir_is_removed_when_init_raises(base, tmp_path, watch):
    """A crashed writer's WAL makes the reader snapshot; a schema that is not flux's then raises."""
    store = _copy(base, tmp_path / "s")
    _sql(store, ("ALTER TABLE events RENAME TO not_events",))
    (store / "events.db-wal").write_bytes(b"\x00" * 100)
    with pytest.raises(StoreError):
        StoreReader(store)
    assert os.listdir(watch) == []


def test_snapshot_dir_is_removed_on_close_and_by_gc(base, tmp_path, watch):
    import gc

    store = _copy(base, tmp_path / "s")
    (store / "events.db-wal").write_bytes(b"\x00" * 100)
    with StoreReader(store) as r:
        assert r.mode == "snapshot" and len(os.listdir(watch)) == 1
    assert os.listdir(watch) == []
    r = StoreReader(store)
    assert len(os.listdir(watch)) == 1
    del r
    gc.collect()
    assert os.listdir(watch) == []


# ------------------------------------------------------------------------- item 10: one line

def test_a_failing_replay_prints_only_the_error_line(base, tmp_path):
    store = _copy(base, tmp_path / "s")
    _sql(store, ("UPDATE events SET payload = ? WHERE stream = 's_1' AND kind = 'plan_attempted'",
                 (json.dumps({"kind": "plan_attempted", "data": {"step": 1, "outcome": "accepted",
                                                                "plan_source": "flow\n  x = (((\n"}}),)))
    inv = _ok(store, ["replay", "s_1"])
    assert inv.exit_code == 1
    assert inv.stderr.count("\n") == 1 and inv.stderr.startswith("error: session s_1 is not replayable")


# ------------------------------------------------------------------------- the listing model

def test_list_sessions_survives_malformed_json_in_aggregated_rows(base, tmp_path):
    store = _copy(base, tmp_path / "s")
    _sql(store, ("UPDATE events SET payload = '{not json' WHERE stream = 's_2' AND kind = 'call_usage'",))
    with StoreReader(store) as r:
        rows = list_sessions(r)
    assert [s.id for s in rows] == ["s_3", "s_2", "s_1"]


# ------------------------------------------------------------------------- fuzz (small budget)

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2 ** 32), names=st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1,
                                                                        max_size=3))
def test_fuzzed_stores_keep_every_promise_for_every_read_verb(base, tmp_path, seed, names):
    work = Path(tempfile.mkdtemp(dir=tmp_path))
    old_env, old_tmp = os.environ.get("TMPDIR"), tempfile.tempdir
    try:
        watch = isolated_tmpdir(work)
        store = work / "v"
        done = make_variant(base, store, seed, names)
        tally = battery(main, store, watch, tally=Tally(), label=str(done), timeout_s=20)
    finally:
        if old_env is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = old_env
        tempfile.tempdir = old_tmp
        shutil.rmtree(work, ignore_errors=True)
    assert (tally.tracebacks, tally.hangs, tally.bad_errors, tally.stores_changed, tally.temp_leaks) == (0, 0, 0, 0, 0), \
        tally.examples


@pytest.mark.parametrize("payload", ["{not json", '{"kind":"run","data":{"event":"op_recorded"'])
@pytest.mark.parametrize("turn", [None, -1, 1])
def test_a_malformed_run_row_is_one_skipped_row_in_a_one_turn_load(base, tmp_path, payload, turn):
    """One-turn loads filter run rows by ``json_extract`` in SQLite, which fails the whole query on
    one malformed payload: the row must be skipped and counted, never 'the store is corrupt'."""
    from flux.model.session import load_session

    store = _copy(base, tmp_path / "s")
    _sql(store, ("UPDATE events SET payload = ? WHERE global_seq = (SELECT MIN(global_seq) FROM events"
                 " WHERE stream = 's_1' AND kind = 'run' AND json_extract(payload, '$.data.event') = 'op_recorded')",
                 (payload,)))
    with StoreReader(store) as r:
        detail = load_session(r, "s_1", turn=turn)
        assert r.skipped_rows == 1
    assert detail.turns
