"""A process that holds a writer on a store and opens a reader on it keeps its SQLite locks.

POSIX locks belong to the process: the reader's header check and snapshot copy used to open and
close events.db itself, which dropped the writer connection's shared lock. Another process that
then closed its last connection took the file as its own — checkpointed and deleted the WAL under
the live writer — and the writer's later commits were lost (a what-if sweep on Ray or a pool of
fresh clients lost counterfactual sessions: "no session 's_12'"; one writer read a malformed
page). Reproduced with real processes on a real store."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from flux.store import Message, StoreReader, StoreWriter
from flux.store import rawfile

OTHER_WRITER = textwrap.dedent("""
    import sys
    from flux.store import Message, StoreWriter
    w = StoreWriter(sys.argv[1])
    sid = w.create_session("mock")
    w.append(sid, Message.text("user", "from the other process"))
    w.close()  # its last connection: it checkpoints, and deletes the WAL if nobody else uses it
""")


def _other_process_writes_and_closes(store: Path) -> None:
    subprocess.run([sys.executable, "-c", OTHER_WRITER, str(store)], check=True, timeout=120)


def _messages_seen_from_outside(store: Path, sid: str) -> int:
    con = sqlite3.connect(store / "events.db")
    try:
        return con.execute("SELECT count(*) FROM events WHERE stream = ? AND kind = 'message'", (sid,)).fetchone()[0]
    finally:
        con.close()


def test_a_reader_opened_beside_a_live_writer_keeps_the_writers_commits(tmp_path: Path):
    store = tmp_path / "st"
    w = StoreWriter(store)
    try:
        sid = w.create_session("mock")
        w.append(sid, Message.text("user", "before the reader"))
        for _ in range(3):  # the header check and, with a live WAL, the snapshot copy
            with StoreReader(store) as r:
                assert r.get_session(sid).id == sid
            _other_process_writes_and_closes(store)
            w.append(sid, Message.text("user", "after the reader"))
    finally:
        w.close()
    assert _messages_seen_from_outside(store, sid) == 4
    con = sqlite3.connect(store / "events.db")
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()


def test_raw_reads_of_a_held_file_go_through_one_kept_descriptor(tmp_path: Path):
    f = tmp_path / "db"
    f.write_bytes(b"SQLite format 3\x00" + b"x" * 100)
    key = rawfile.hold(f)
    try:
        assert rawfile.read_head(f, 16) == b"SQLite format 3\x00"
        rawfile.copy_file(f, tmp_path / "copy")
        assert (tmp_path / "copy").read_bytes() == f.read_bytes()
        assert rawfile.hold(f) == key  # a second connection on the same file
        rawfile.release(key)
        assert rawfile.holds(f) and rawfile.read_head(f, 6) == b"SQLite"
    finally:
        rawfile.release(key)
    assert not rawfile.holds(f)
    assert rawfile.read_head(f, 6) == b"SQLite"  # unheld: an ordinary open and close


def test_the_store_registers_its_connections_and_releases_them(tmp_path: Path):
    store = tmp_path / "st"
    w = StoreWriter(store)
    assert rawfile.holds(store / "events.db")
    w.close()
    assert not rawfile.holds(store / "events.db")
    with StoreWriter(store) as w2:
        w2.create_session("mock")
        with StoreReader(store):
            assert rawfile.holds(store / "events.db")
        assert rawfile.holds(store / "events.db")  # the reader's release left the writer's
    assert not rawfile.holds(store / "events.db")
