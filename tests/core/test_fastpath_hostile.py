"""Hostile rows against this session's read fast paths (qa4): every row of a recorded session
rewritten with lone surrogates spelled as JSON escapes — in values, in keys, as keys that collide
once the one rule (flux.canonical.scrub_value) turns both into U+FFFD, next to escaped backslashes
that only look like an escape — and the streamed replay read (replay_input.scan_rows: step rows
checked before the surrogate scan, op_recorded / plan_attempted rows read straight through when no
backslash is present) must read exactly what the full decode (load_session) reads, and replay the
same."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.model.session import TRACE_KINDS, load_session
from flux.store import StoreReader
from flux.timemachine.replay import replay_detail, replay_session
from flux.timemachine.replay_input import ReplayInput, read_replay_input
from tests.core.test_replay_fastpath import _outcome, _same_input, replay_base  # noqa: F401 (a fixture)

# What is spliced into a JSON string (the text between its quotes), as JSON source.
_SPLICES = st.sampled_from([
    "\\ud800", "\\udfff", "\\uDC00", "\\ud83d\\ude00",  # lone (any case), and a valid pair
    "\\\\ud800",  # an escaped backslash, then the letters: no surrogate at all
    "\\\\\\ud800",  # an escaped backslash, then a lone surrogate
    "\\u0000", "\\\"", "\\\\", "\\n", "é", "\\u00e9",
])


def _strings(obj, path=()):
    """The paths of every string (value or key) inside ``obj``."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield (*path, ("key", k))
            yield from _strings(v, (*path, ("at", k)))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _strings(v, (*path, ("at", i)))
    elif isinstance(obj, str):
        yield path


def _encode(obj, target, splice, where) -> str:
    """``obj`` as JSON text, the string at ``target`` written with ``splice`` inserted at ``where``."""
    def enc(o, path):
        if isinstance(o, dict):
            parts = []
            for k, v in o.items():
                ks = json.dumps(k)
                if path + (("key", k),) == target:
                    ks = _spliced(ks, splice, where)
                parts.append(ks + ":" + enc(v, path + (("at", k),)))
            return "{" + ",".join(parts) + "}"
        if isinstance(o, list):
            return "[" + ",".join(enc(v, path + (("at", i),)) for i, v in enumerate(o)) + "]"
        s = json.dumps(o)
        if isinstance(o, str) and path == target:
            s = _spliced(s, splice, where)
        return s
    return enc(obj, ())


def _spliced(quoted: str, splice: str, where: int) -> str:
    inner = quoted[1:-1]
    # never inside an escape of the original text: insert at a position between whole characters
    cuts = [0] + [i for i in range(1, len(inner) + 1) if not _inside_escape(inner, i)]
    at = cuts[where % len(cuts)]
    return '"' + inner[:at] + splice + inner[at:] + '"'


def _inside_escape(s: str, i: int) -> bool:
    j = 0
    while j < len(s):
        if s[j] == "\\":
            n = 6 if s[j + 1] == "u" else 2
            if j < i < j + n:
                return True
            j += n
        else:
            j += 1
    return False


def _rewrite(store: Path, data) -> None:
    con = sqlite3.connect(store / "events.db", isolation_level=None)
    try:
        rows = con.execute("SELECT global_seq, payload FROM events WHERE stream = 's_1' ORDER BY global_seq").fetchall()
        for _ in range(data.draw(st.integers(1, 4), label="rows")):
            gs, payload = data.draw(st.sampled_from(rows), label="row")
            obj = json.loads(payload)
            how = data.draw(st.sampled_from(["splice", "colliding keys", "surrogate key"]), label="how")
            if how == "splice":
                targets = list(_strings(obj))
                if not targets:
                    continue
                target = data.draw(st.sampled_from(targets), label="string")
                text = _encode(obj, target, data.draw(_SPLICES, label="splice"), data.draw(st.integers(0, 40)))
            else:
                d = obj.get("data")
                if not isinstance(d, dict):
                    continue
                # two keys U+FFFD after the rule (the second's value wins), or a field's key with a
                # lone surrogate in it (then it is another, unknown key)
                field = data.draw(st.sampled_from(sorted(d) or ["x"]), label="field")
                body = json.dumps(d)[1:-1]
                extra = ('"\\ud800":1,"\\udc00":"x"' if how == "colliding keys"
                         else json.dumps(field)[:-1] + '\\udbff":' + json.dumps(d.get(field)))
                text = json.dumps({k: v for k, v in obj.items() if k != "data"})[:-1]
                text = (text + "," if len(text) > 1 else text) + '"data":{' + (body + "," if body else "") + extra + "}}"
            json.loads(text)  # still JSON
            con.execute("UPDATE events SET payload = ? WHERE global_seq = ?", (text, gs))
    finally:
        con.close()


@settings(max_examples=int(os.environ.get("FLUX_READ_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_rows_with_escaped_surrogates_read_and_replay_as_the_full_decode(replay_base, tmp_path_factory, data):  # noqa: F811
    store = tmp_path_factory.mktemp("s") / "store"
    shutil.copytree(replay_base, store)
    _rewrite(store, data)
    full, fast = StoreReader(store), StoreReader(store)
    try:
        detail = load_session(full, "s_1", kinds=TRACE_KINDS)
        _same_input(read_replay_input(fast, "s_1"), ReplayInput.of_detail(detail))
        assert fast.skipped_rows == full.skipped_rows
        assert _outcome(lambda: replay_session(fast, "s_1")) == \
            _outcome(lambda: replay_detail(load_session(full, "s_1", kinds=TRACE_KINDS)))
    finally:
        full.close()
        fast.close()


# ------------------------------------------------------------------------------------------------
# A store whose `events.global_seq` is not the table's rowid: the streamed read cannot take the
# column's integer type for granted (flux's schema makes it the rowid, INTEGER PRIMARY KEY; a
# hostile or hand-made store need not), so a row with a text, real or NULL global_seq is skipped and
# counted as valid_event_row has every reader skip it.

import re  # noqa: E402

import pytest  # noqa: E402

# How the rebuilt table declares global_seq: no type at all, an INTEGER PRIMARY KEY that is no
# rowid alias (DESC, SQLite's documented quirk), and flux's own declaration (the control).
_GS_DECLS = {"untyped": "global_seq ANY", "desc": "global_seq INTEGER PRIMARY KEY DESC",
             "rowid": "global_seq INTEGER PRIMARY KEY AUTOINCREMENT"}


def _redeclare_global_seq(store: Path, decl: str) -> list[int]:
    con = sqlite3.connect(store / "events.db", isolation_level=None)
    try:
        ddl = con.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'events'").fetchone()[0]
        indexes = [r[0] for r in con.execute("SELECT sql FROM sqlite_master WHERE type = 'index'"
                                             " AND tbl_name = 'events' AND sql IS NOT NULL")]
        new_ddl, n = re.subn(r"global_seq\s+INTEGER PRIMARY KEY AUTOINCREMENT", decl, ddl)
        assert n == 1
        con.execute("ALTER TABLE events RENAME TO events_before")
        con.execute(new_ddl)
        con.execute("INSERT INTO events SELECT * FROM events_before")
        con.execute("DROP TABLE events_before")
        for sql in indexes:
            con.execute(sql)
        return [r[0] for r in con.execute("SELECT global_seq FROM events WHERE stream = 's_1' AND kind IN (%s)"
                                          " ORDER BY stream_seq" % ",".join("?" * len(TRACE_KINDS)), TRACE_KINDS)]
    finally:
        con.close()


@pytest.mark.parametrize("decl", sorted(_GS_DECLS))
def test_a_row_whose_global_seq_is_no_integer_is_skipped_as_every_reader_skips_it(replay_base, tmp_path, decl):  # noqa: F811
    base = tmp_path / "base"
    shutil.copytree(replay_base, base)
    seqs = _redeclare_global_seq(base, _GS_DECLS[decl])
    for i, gs in enumerate(seqs):
        store = tmp_path / f"v{i}"
        shutil.copytree(base, store)
        if decl != "rowid":  # (a rowid alias refuses a value that is no integer: the control reads as it is)
            con = sqlite3.connect(store / "events.db", isolation_level=None)
            con.execute("UPDATE events SET global_seq = ? WHERE global_seq = ?", ([f"g{gs}", gs + 0.5, None][i % 3], gs))
            con.close()
        full, fast = StoreReader(store), StoreReader(store)
        try:
            detail = load_session(full, "s_1", kinds=TRACE_KINDS)
            _same_input(read_replay_input(fast, "s_1"), ReplayInput.of_detail(detail))
            assert fast.skipped_rows == full.skipped_rows == (0 if decl == "rowid" else 1)
            assert _outcome(lambda: replay_session(fast, "s_1")) == \
                _outcome(lambda: replay_detail(load_session(full, "s_1", kinds=TRACE_KINDS)))
        finally:
            full.close()
            fast.close()
