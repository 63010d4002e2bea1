"""Write verbs on a damaged store, round 3: a write that fails on a damaged page closes every file
it opened at once, whatever still holds the failure's traceback, and a sweep names the damage in
the store's one line."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from flux.cli import main
from flux.store import StoreWriter
from tests.hostile.corrupt_writes import build_store_base


@pytest.fixture(scope="module")
def demo_base(tmp_path_factory) -> Path:
    return build_store_base(tmp_path_factory.mktemp("round3-base") / "store")


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("FLUX_AUTO_RESURRECT", "0")


def _open_under(d: Path) -> list[str]:
    root = str(d.resolve())
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(root + os.sep):
            out.append(os.path.relpath(target, root))
    return out


def _damage_events_index(store: Path, index: str = "idx_events_kind") -> None:
    """Reads still work, inserts fail: ``index``'s root page is garbage — ``idx_events_kind`` fails
    every insert, ``idx_events_turn`` only the first row that carries a turn_id (after the new
    session's registry row and session_started went in)."""
    con = sqlite3.connect(store / "events.db")
    (root,) = con.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (index,)).fetchone()
    (size,) = con.execute("PRAGMA page_size").fetchone()
    con.close()
    data = bytearray((store / "events.db").read_bytes())
    data[(root - 1) * size: root * size] = bytes((i * 151 + 7) % 256 for i in range(size))
    (store / "events.db").write_bytes(bytes(data))


def test_a_writer_whose_insert_failed_closes_its_files_while_the_traceback_lives(demo_base, tmp_path):
    """The failed INSERT's statement stays prepared on the writer's cursor; SQLite keeps a closed
    connection's files open until its last statement is finalized — so close() resets the cursor
    first, or the files stay open as long as anything (a caller's saved exception, a frame cycle
    the collector has not reached) holds the traceback."""
    store = Path(shutil.copytree(demo_base, tmp_path / "s"))
    _damage_events_index(store)
    w = StoreWriter(store)
    kept: list[BaseException] = []
    try:
        with w.transaction():  # as a what-if writes its child: the recorder's text rows, one transaction
            w.append_text("s_7", "run", json.dumps({"event": "turn_note", "n": 1}))
    except sqlite3.DatabaseError as e:
        kept.append(e)  # the traceback (and the cursor in its frames) outlives the failure
    assert kept, "the damaged index did not fail the insert"
    w.close()
    assert _open_under(store) == []
    kept.clear()


def test_sweep_on_a_store_whose_inserts_fail_names_the_damage_per_session(demo_base, tmp_path):
    store = Path(shutil.copytree(demo_base, tmp_path / "s"))
    _damage_events_index(store)
    res = CliRunner().invoke(main, ["sweep", "--all", "--json", "--store", str(store)], catch_exceptions=False)
    assert res.exit_code == 1, res.output
    rows = json.loads(res.stdout)["outcomes"]
    errors = [r["error"] for r in rows if r["error"]]
    assert errors and all("DatabaseError" not in e for e in errors), errors
    assert any("is corrupt or not a SQLite database" in e for e in errors), errors
    assert _open_under(store) == []


def _damage_first_events_leaf(store: Path) -> None:
    """A page only s_1's rows live on: the events table's leftmost leaf (the lowest rowids)."""
    con = sqlite3.connect(store / "events.db")
    (page,) = con.execute("SELECT pageno FROM dbstat WHERE name = 'events' AND pagetype = 'leaf' "
                          "ORDER BY path LIMIT 1").fetchone()
    (size,) = con.execute("PRAGMA page_size").fetchone()
    con.close()
    data = bytearray((store / "events.db").read_bytes())
    data[(page - 1) * size: page * size] = bytes((i * 151 + 7) % 256 for i in range(size))
    (store / "events.db").write_bytes(bytes(data))


def _flux(*args: str):
    res = CliRunner().invoke(main, list(args), catch_exceptions=True)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    return res


def _sessions(store: Path) -> dict[str, list[tuple[int, str]]]:
    """Every stream's (stream_seq, kind) rows, read with SQLite's own reader — the rows a damaged
    page holds are left out, the others are what the store keeps."""
    con = sqlite3.connect(f"file:{store / 'events.db'}?mode=ro", uri=True)
    try:
        out: dict[str, list[tuple[int, str]]] = {}
        for (n,) in con.execute("SELECT n FROM streams ORDER BY n").fetchall():
            try:
                rows = con.execute("SELECT stream_seq, kind FROM events WHERE stream = ? ORDER BY stream_seq",
                                   (f"s_{n}",)).fetchall()
            except sqlite3.DatabaseError:
                rows = None
            out[f"s_{n}"] = rows
        return out
    finally:
        con.close()


WHAT_IF = ("what-if", "s_7", "--substitute", 'glob="nothing"')


@pytest.mark.parametrize("off_tape", [[], ["--off-tape", "live", "--yes"]], ids=["halt", "live"])
@pytest.mark.parametrize("store_kind", ["intact", "damaged-elsewhere"])
def test_what_if_beside_a_page_it_never_touches_writes_its_child_whole(demo_base, tmp_path, off_tape, store_kind):
    """The what-if reads s_7 and appends a child; a damaged page of s_1 is in neither: exit 0, and
    the child is whole (session_started … turn_ended, contiguous stream_seq), as on an intact store."""
    store = Path(shutil.copytree(demo_base, tmp_path / "s"))
    if store_kind != "intact":
        _damage_first_events_leaf(store)
        assert _flux("show", "s_1", "--store", str(store)).exit_code == 1  # the damage is real …
        assert _flux("show", "s_7", "--store", str(store)).exit_code == 0  # … and s_7 reads past it
    before = _sessions(store)
    res = _flux(*WHAT_IF, *off_tape, "--json", "--store", str(store))
    assert res.exit_code == 0, res.output
    child = json.loads(res.stdout)["session"]
    after = _sessions(store)
    assert set(after) - set(before) == {child}
    rows = after[child]
    assert [s for s, _ in rows] == list(range(len(rows)))
    assert rows[0][1] == "session_started" and rows[-1][1] == "turn_ended", rows
    assert {k: v for k, v in after.items() if k != child} == before


@pytest.mark.parametrize("index", ["idx_events_kind", "idx_events_turn"])
@pytest.mark.parametrize("off_tape", [[], ["--off-tape", "live", "--yes"]], ids=["halt", "live"])
def test_what_if_whose_insert_hits_a_damaged_page_writes_nothing(demo_base, tmp_path, off_tape, index):
    """An index the child's inserts update is damaged: the child fails (at once, or half-way) and
    none of it is kept — off tape `live` included (it wrote row by row: a child without its
    turn_ended stayed, exit 1)."""
    store = Path(shutil.copytree(demo_base, tmp_path / "s"))
    _damage_events_index(store, index)
    before = _sessions(store)
    res = _flux(*WHAT_IF, *off_tape, "--store", str(store))
    assert res.exit_code == 1, res.output
    assert [ln for ln in res.stderr.splitlines() if ln.startswith("error:")] == \
        [ln for ln in res.stderr.splitlines() if "is corrupt" in ln]
    assert _sessions(store) == before
    assert _open_under(store) == []


def _scramble_s7_rows(store: Path) -> None:
    """Two of s_7's event rows become bytes no reader decodes: the reader skips and counts them."""
    con = sqlite3.connect(store / "events.db")
    rows = [r for (r,) in con.execute("SELECT global_seq FROM events WHERE stream = 's_7' AND kind = 'run' "
                                       "ORDER BY global_seq LIMIT 2")]
    for gs in rows:
        con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (b"\\xff\\xfe not json", gs))
    con.commit()
    con.close()
    for side in ("events.db-wal", "events.db-shm"):
        (store / side).unlink(missing_ok=True)


@pytest.mark.parametrize("verb", [list(WHAT_IF), ["fork", "s_7", "--at", "1", "--inject", '"x"']], ids=["what-if", "fork"])
def test_a_source_with_unreadable_rows_is_refused_before_anything_is_written(demo_base, tmp_path, verb):
    """A what-if on a session whose rows the reader had to skip re-ran the fragment it could read and
    exited 0 with a child of a run that never happened: now one line, nothing written."""
    store = Path(shutil.copytree(demo_base, tmp_path / "s"))
    _scramble_s7_rows(store)
    before = _sessions(store)
    res = _flux(*verb, "--store", str(store))
    assert res.exit_code == 1, res.output
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert errors == ["error: session s_7 has 2 corrupt event row(s) that cannot be read — a "
                      f"{verb[0]} would re-run only part of it; restore the store from a copy (nothing was written)"], res.stderr
    assert _sessions(store) == before
    intact = Path(shutil.copytree(demo_base, tmp_path / "intact"))
    assert _flux(*verb, "--store", str(intact)).exit_code == 0
