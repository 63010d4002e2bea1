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


def _damage_events_index(store: Path) -> None:
    """Reads still work, the next insert fails half-way: ``idx_events_kind``'s root page is garbage."""
    con = sqlite3.connect(store / "events.db")
    (root,) = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 'idx_events_kind'").fetchone()
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
