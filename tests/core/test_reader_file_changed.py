"""A reader that opened a quiet WAL store (no -wal: read as an immutable file) while a writer in
another process later appends and checkpoints into events.db: its next query reads the new file
on a fresh open, never pages of two versions (a stale answer, or "malformed")."""

from __future__ import annotations

import subprocess
import sys

from flux.store import Message, StoreReader, StoreWriter

_APPEND = (
    "import sys\n"
    "from flux.store import Message, StoreWriter\n"
    "with StoreWriter(sys.argv[1]) as w:\n"
    "    s = w.create_session('mock')\n"
    "    w.append(s, Message.text('user', 'y' * 5000))\n"
)


def _store(path):
    with StoreWriter(path) as w:
        w.append(w.create_session("mock"), Message.text("user", "x"))
    return path


def test_a_query_after_another_process_checkpointed_sees_its_session(tmp_path):
    store = _store(tmp_path / "s")
    with StoreReader(store) as r:
        assert [s.id for s in r.list_sessions()] == ["s_1"]
        subprocess.run([sys.executable, "-c", _APPEND, str(store)], check=True, timeout=120)
        assert sorted(s.id for s in r.list_sessions()) == ["s_1", "s_2"]
        assert len(r.events("s_2")) >= 2


def test_a_quiet_store_is_read_on_the_connection_it_opened(tmp_path):
    """The twin: with no writer in between, the reader keeps its one connection (no reopen)."""
    store = _store(tmp_path / "s")
    with StoreReader(store) as r:
        first = [s.id for s in r.list_sessions()]
        conn = r._conn
        assert [s.id for s in r.list_sessions()] == first == ["s_1"]
        assert r._conn is conn
