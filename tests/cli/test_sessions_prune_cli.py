"""`flux sessions --prune` deletes what flux deletes — every session that recorded nothing — with a
dry run first if you like; never a live session, one too young to have started its turn, or one a
kept session names as its source. And `flux sessions --file PATH`, flux's touched-file filter."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.cli import main
from flux.model.prune import GRACE_MS, plan_prune
from flux.store import Message, Observation, StoreWriter
from flux.store.lease import SessionLease
from flux.store.store import StoreReader
from tests.helpers import tree_digest, write_turn

OLD = 1_700_000_000_000


def flux(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _registry(store: Path) -> dict[str, int]:
    con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True)
    try:
        rows = con.execute("SELECT n FROM streams ORDER BY n").fetchall()
        return {f"s_{n}": con.execute("SELECT COUNT(*) FROM events WHERE stream = ?", (f"s_{n}",)).fetchone()[0]
                for (n,) in rows}
    finally:
        con.close()


def _store(path: Path) -> Path:
    """s_1 a recording; s_2 empty; s_3 empty, the source of s_4 (a fork that recorded a turn);
    s_5 an empty fork of s_1; s_6 empty, the source of s_7, empty too; s_8 empty and created just now."""
    clock = {"t": OLD}
    with StoreWriter(path, clock=lambda: clock["t"]) as w:
        s1 = w.create_session("mock")
        write_turn(w, s1, "go", ts=OLD)
        w.create_session("mock")
        s3 = w.create_session("mock")
        s4 = w.create_session("mock", context={"agent_id": f"fork:{s3}@0", "correlation_id": s3})
        write_turn(w, s4, "forked", ts=OLD)
        w.create_session("mock", context={"agent_id": f"fork:{s1}@0", "correlation_id": s1})
        s6 = w.create_session("mock")
        w.create_session("mock", context={"agent_id": f"what_if:{s6}@0", "correlation_id": s6})
        import time

        clock["t"] = int(time.time() * 1000)
        w.create_session("mock")
    return path


def test_dry_run_names_what_would_go_and_why_the_rest_stays_and_writes_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    digest = tree_digest(store)
    res = flux("sessions", "--prune", "--dry-run", "--store", store)
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert lines[0] == "would prune 4 empty sessions: s_2, s_5, s_6, s_7 (dry run: nothing was deleted)"
    assert lines[1] == "kept s_3: the source of s_4 — pruning it would leave that child pointing at nothing"
    assert lines[2].startswith("kept s_8: created ") and "it may be a run that has not started its turn yet" in lines[2]
    assert res.stdout == ""
    assert tree_digest(store) == digest
    j = flux("sessions", "--prune", "--dry-run", "--json", "--store", store)
    data = json.loads(j.stdout)
    assert data["dry_run"] is True and data["pruned"] == ["s_2", "s_5", "s_6", "s_7"]
    assert [k["id"] for k in data["kept"]] == ["s_3", "s_8"]


def test_prune_deletes_the_empty_sessions_in_one_go_and_leaves_every_other_byte_of_history(tmp_path: Path) -> None:
    store = _store(tmp_path / "s")
    before = _registry(store)
    res = flux("sessions", "--prune", "--store", store)
    assert res.exit_code == 0, res.output
    assert res.stderr.splitlines()[0] == "pruned 4 empty sessions: s_2, s_5, s_6, s_7"
    after = _registry(store)
    assert set(before) - set(after) == {"s_2", "s_5", "s_6", "s_7"}
    assert all(after[k] == before[k] for k in after)
    with StoreReader(store) as r:  # the lineage left is whole: every source still exists
        ids = {row.id for row in r.list_sessions()}
        assert all(row.correlation_id in ids for row in r.list_sessions() if row.correlation_id)
    again = flux("sessions", "--prune", "--store", store)
    assert again.exit_code == 0 and again.stderr.splitlines()[0] == "no empty sessions to prune"
    with StoreWriter(store) as w:  # a pruned number is never handed out again
        assert w.create_session("mock") == "s_9"


def test_a_live_empty_session_refuses_the_prune_whole(tmp_path: Path) -> None:
    """Broken input: an empty session a live process is recording into — one `error:` line, nothing
    deleted, not even the sessions that could go."""
    store = _store(tmp_path / "s")
    digest = tree_digest(store)
    import threading

    held, done = threading.Event(), threading.Event()

    def recorder() -> None:  # another thread records into s_5 (a lease held elsewhere, as a live run's)
        with SessionLease.acquire(store, "s_5"):
            held.set()
            done.wait(30)

    t = threading.Thread(target=recorder)
    t.start()
    try:
        assert held.wait(10)
        res = flux("sessions", "--prune", "--store", store)
    finally:
        done.set()
        t.join()
    assert res.exit_code == 1
    assert res.stderr.splitlines() == [
        f"error: s_5 is being recorded by pid {__import__('os').getpid()} right now — nothing was pruned; "
        "run `flux sessions --prune` again when its turn is done"]
    assert {k: v for k, v in tree_digest(store).items() if not k.startswith("leases")} == digest
    ok = flux("sessions", "--prune", "--store", store)  # the lease released: the same prune goes
    assert ok.exit_code == 0 and "s_5" not in _registry(store)


def test_nothing_to_prune_writes_nothing(fixture_store: Path) -> None:
    """flux's real store has no empty session: flux's line, and the store opened to read only."""
    digest = tree_digest(fixture_store)
    res = flux("sessions", "--prune", "--store", fixture_store)
    assert res.exit_code == 0 and res.stderr == "no empty sessions to prune\n"
    assert tree_digest(fixture_store) == digest


@pytest.mark.parametrize("args, says", [
    (["--prune", "--query", "x"], "--prune takes no filter (--query)"),
    (["--prune", "--file", "a.py"], "--prune takes no filter (--file)"),
    (["--prune", "--since", "7d"], "--prune takes no filter (--since)"),
    (["--prune", "--limit", "3"], "--prune takes no filter (--limit)"),
    (["--dry-run"], "--dry-run only goes with --prune"),
])
def test_prune_with_a_filter_is_one_line_and_nothing_written(tmp_path: Path, args, says) -> None:
    store = _store(tmp_path / "s")
    digest = tree_digest(store)
    res = flux("sessions", *args, "--store", store)
    assert res.exit_code == 1
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], res.stderr
    assert tree_digest(store) == digest


def test_prune_of_a_missing_store_is_one_line(tmp_path: Path) -> None:
    res = flux("sessions", "--prune", "--store", tmp_path / "nowhere")
    assert res.exit_code == 1 and res.stderr.startswith("error: ") and len(res.stderr.splitlines()) == 1
    assert not (tmp_path / "nowhere").exists()


# -- any registry: the invariants ------------------------------------------------------------------

_session = st.fixed_dictionaries({
    "empty": st.booleans(),
    "young": st.booleans(),
    "source": st.one_of(st.none(), st.integers(min_value=1, max_value=8)),  # dangling, self and cycles included
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_session, min_size=1, max_size=8))
def test_plan_prune_invariants(tmp_path_factory, sessions) -> None:
    store = tmp_path_factory.mktemp("p") / "s"
    now = OLD + 10 * GRACE_MS
    with StoreWriter(store) as w:
        for s in sessions:
            ctx = {"correlation_id": f"s_{s['source']}", "agent_id": "fork:x@0"} if s["source"] else None
            sid = w.create_session("mock", context=ctx, ts=now - 1000 if s["young"] else OLD)
            if not s["empty"]:
                w.append(sid, Message.text("user", "x"), ts=OLD)
    with StoreReader(store) as r:
        plan = plan_prune(r, now)
        rows = {row.id: row for row in r.list_sessions()}
    pruned = set(plan.ids)
    kept = {row.id: why for row, why in plan.kept}
    for i, s in enumerate(sessions, 1):
        sid = f"s_{i}"
        if not s["empty"]:
            assert sid not in pruned and sid not in kept
        elif s["young"]:
            assert sid in kept and "created" in kept[sid]
        else:
            assert (sid in pruned) != (sid in kept)
    survivors = set(rows) - pruned
    assert not any(rows[s].correlation_id in pruned for s in survivors if rows[s].correlation_id != s)


# -- --file: flux's touched-file filter --------------------------------------------------------------


def _touching(path: Path) -> Path:
    with StoreWriter(path) as w:
        for subjects in (["/repo/src/main.rs"], ["src/lib.rs", "README.md"], []):
            sid = w.create_session("mock")
            tid = write_turn(w, sid, f"touch {subjects}", end=None, ts=OLD)
            w.append(sid, Observation("tool_call", "turn", {"caller": "local", "subjects": subjects, "tool": "read"}),
                     turn_id=tid)
        sid = w.create_session("mock")  # a session that names the file only in its text
        write_turn(w, sid, "please read main.rs", ts=OLD)
    return path


# flux's path-boundary rule, as data: (the --file value, the sessions it lists)
FILE_CASES = [
    ("main.rs", ["s_1"]),  # a relative filter matches a recorded absolute subject at a boundary
    ("src/main.rs", ["s_1"]),
    ("/repo/src/main.rs", ["s_1"]),
    ("rc/main.rs", []),  # never a raw substring
    ("/elsewhere/src/lib.rs", ["s_2"]),  # and the other way round: the subject is a suffix of the filter
    ("README.md", ["s_2"]),
    ("lib", []),
]


@pytest.mark.parametrize("value, expected", FILE_CASES)
def test_sessions_file_matches_a_touched_path_at_a_boundary(tmp_path: Path, value, expected) -> None:
    store = _touching(tmp_path / "t")
    res = flux("sessions", "--file", value, "--json", "--store", store)
    assert res.exit_code == 0, res.output
    assert sorted(s["id"] for s in json.loads(res.stdout)["sessions"]) == expected
    if not expected:
        plain = flux("sessions", "--file", value, "--store", store)
        assert plain.stderr == "no sessions match the given filter(s)\n"


def test_sessions_file_combines_with_the_other_filters(tmp_path: Path) -> None:
    store = _touching(tmp_path / "t")
    res = flux("sessions", "--file", "main.rs", "--query", "nothing like this", "--json", "--store", store)
    assert json.loads(res.stdout)["sessions"] == []
    res = flux("sessions", "--file", "main.rs", "--query", "touch", "--json", "--store", store)
    assert [s["id"] for s in json.loads(res.stdout)["sessions"]] == ["s_1"]


def test_sessions_file_empty_is_one_line(tmp_path: Path) -> None:
    store = _touching(tmp_path / "t")
    res = flux("sessions", "--file", "", "--store", store)
    assert res.exit_code == 1 and res.stderr.startswith("error: --file needs a path")
