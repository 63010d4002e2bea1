"""One conformance suite for the store's two backends: every test runs against a SQLite store
directory and against a Postgres store on a real PostgreSQL server the tests start (the Postgres
half never skips: a server that cannot start fails it with the reason).

The cases follow flux's own event-store conformance cases (session numbering, contiguous
``stream_seq``, the registry that follows every append, turn ids, idempotent appends, windows and
kinds, deletes that never reuse a number), plus what this product adds: byte-identical payloads,
the read models' SQL answering the same on both backends, and a Postgres reader that cannot write.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux.cli import main as flux_main
from flux.errors import SessionNotFound, StoreError
from flux.store import Compacted, Message, ModelChanged, StoreReader, StoreWriter, TurnEnded, encode_payload
from flux.store.location import url_schema
from flux.store.postgres import SCHEMA_DDL, connect
from flux.store.store import store_location

BACKENDS = ("sqlite", "postgres")


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path: Path) -> str:
    return request.param


@pytest.fixture
def location(backend: str, request, tmp_path: Path) -> Path:
    """A fresh, empty store of the backend under test (the local directory every verb opens)."""
    if backend == "sqlite":
        return tmp_path / "store"
    return store_location(request.getfixturevalue("pg_url"))


class Clock:
    def __init__(self, start: int = 1_700_000_000_000):
        self.t = start

    def __call__(self) -> int:
        self.t += 7
        return self.t


def test_session_numbers_ascend_and_session_started_is_stream_seq_zero(location):
    with StoreWriter(location, clock=Clock()) as w:
        a, b = w.create_session("m1"), w.create_session("m2", context={"account": "acme", "correlation_id": "s_1"})
    assert (a, b) == ("s_1", "s_2")
    with StoreReader(location) as r:
        [first] = r.events("s_1")
        assert (first.kind, first.stream_seq, first.turn_id, first.body.model) == ("session_started", 0, None, "m1")
        row = r.get_session("s_2")
        assert (row.model, row.last_seq, row.msg_count, row.account, row.correlation_id) == ("m2", 0, 0, "acme", "s_1")
        assert [c.id for c in r.children_of("s_1")] == ["s_2"]
        assert r.latest_session().id == "s_2" == r.resolve_session("last").id
        assert r.session_count() == 2


def test_stream_seq_is_contiguous_per_stream_and_global_seq_ascends(location):
    with StoreWriter(location, clock=Clock()) as w:
        s1, s2 = w.create_session("m"), w.create_session("m")
        for i in range(5):
            w.append(s1 if i % 2 else s2, Message.text("user", f"m{i}"))
        w.append("adhoc-stream", Message.text("user", "not a session"))  # ad-hoc streams take appends too
    with StoreReader(location) as r:
        for sid in (s1, s2, "adhoc-stream"):
            evs = r.events(sid)
            assert [e.stream_seq for e in evs] == list(range(len(evs)))
        every = [e.global_seq for sid in (s1, s2) for e in r.events(sid)]
        assert len(set(every)) == len(every)
        assert r.count_events() == 8
        assert [s.id for s in r.list_sessions()] == ["s_2", "s_1"]  # updated_at DESC
        assert [s.id for s in r.list_sessions(limit=1)] == ["s_2"]


def test_registry_follows_messages_models_and_compaction(location):
    with StoreWriter(location, clock=Clock()) as w:
        sid = w.create_session("m1")
        w.append(sid, Message.text("user", "a"))
        w.append(sid, Message.text("assistant", "b"))
        w.append(sid, ModelChanged(model="m2"))
        w.append(sid, Compacted(messages=[Message.text("user", "summary").to_body()]))
        w.append(sid, Message.text("user", "c"))
    with StoreReader(location) as r:
        row = r.get_session(sid)
        assert (row.model, row.msg_count, row.last_seq) == ("m2", 2, 5)


def test_turn_id_is_the_turn_started_global_seq(location):
    with StoreWriter(location, clock=Clock()) as w:
        sid = w.create_session("m")
        tid = w.begin_turn(sid, "do it", "m")
        w.append(sid, TurnEnded(outcome="answered"), turn_id=tid)
        with pytest.raises(ValueError):
            w.append(sid, Message.text("user", "x"), turn_id=tid)  # an unscoped kind never carries one
    with StoreReader(location) as r:
        [started] = r.events(sid, kinds=("turn_started",))
        assert started.global_seq == tid
        assert [e.kind for e in r.turn_events(sid, tid)] == ["turn_ended"]


def test_append_with_an_event_id_is_idempotent(location):
    with StoreWriter(location, clock=Clock()) as w:
        sid = w.create_session("m")
        one = w.append(sid, Message.text("user", "once"), event_id="01HZZZZZZZZZZZZZZZZZZZZZZZ")
        again = w.append(sid, Message.text("user", "once"), event_id="01HZZZZZZZZZZZZZZZZZZZZZZZ")
    assert (again.global_seq, again.stream_seq) == (one.global_seq, one.stream_seq)
    with StoreReader(location) as r:
        assert r.count_events(sid) == 2
        assert r.get_session(sid).msg_count == 1


def test_a_failed_transaction_leaves_nothing(location):
    with StoreWriter(location, clock=Clock()) as w:
        sid = w.create_session("m")
        with pytest.raises(RuntimeError):
            with w.transaction():
                w.append(sid, Message.text("user", "lost"))
                raise RuntimeError("boom")
        w.append(sid, Message.text("user", "kept"))
    with StoreReader(location) as r:
        evs = r.events(sid)
        assert [e.stream_seq for e in evs] == [0, 1]
        assert evs[1].body.content[0]["text"] == "kept"
        assert r.get_session(sid).msg_count == 1


def test_grouped_appends_reach_the_store_at_the_flush(location):
    with StoreWriter(location, clock=Clock()) as w:
        sid = w.create_session("m")
        with w.grouped(max_rows=1000, max_ms=1e9):
            for i in range(10):
                w.append_text(sid, "run", json.dumps({"kind": "run", "data": {"event": "step_started", "i": i}}))
            with StoreReader(location) as r:
                assert r.count_events(sid) == 1  # still buffered
        w.append_run_texts(sid, [json.dumps({"kind": "run", "data": {"event": "op_recorded", "i": i}}) for i in range(300)])
    with StoreReader(location) as r:
        evs = r.events(sid)
        assert [e.stream_seq for e in evs] == list(range(311))
        assert len(r.events(sid, lean=True)) == 301  # step_started rows left out
        assert len(r.events(sid, kinds=("run",), min_stream_seq=5, max_stream_seq=15)) == 10
        gs = [e.global_seq for e in evs]
        assert len(r.events(sid, min_global_seq=gs[3], max_global_seq=gs[8])) == 5
        assert len(r.events(sid, kinds=("session_started", "run"), sparse=True)) == 311
        assert [row[1] for row in r.raw_events(sid)] == list(range(311))


def test_deleted_session_numbers_are_never_handed_out_again(location):
    with StoreWriter(location, clock=Clock()) as w:
        w.create_session("m")
        sid = w.create_session("m")
        assert w.delete_sessions([sid]) == {sid: 1}
        with pytest.raises(SessionNotFound):
            w.delete_sessions(["s_9"])
        assert w.create_session("m") == "s_3"
    with StoreReader(location) as r:
        assert [s.id for s in r.list_sessions()] == ["s_3", "s_1"]
        with pytest.raises(SessionNotFound):
            r.get_session(sid)


_TRICKY = [
    '{"kind":"run","data":{"event":"op_recorded","content":"ünïcødé — 💥 \\u0000 \\ud83d\\udca5"}}',
    '{"kind":"run","data":{"b":1,"a":2,"a":3}}',  # key order and a duplicate key, kept as written
    '{"kind":"run","data":{"n":12345678901234567890123,"f":1.0e-7,"s":"100% \\\\ back\\"slash"}}',
    '{"kind":"run",   "data" : { "spaced" : [ 1 , 2 ] } }',
]


def test_payload_texts_round_trip_byte_for_byte(location):
    with StoreWriter(location, clock=Clock()) as w:
        sid = w.create_session("m")
        w.append_texts(sid, "run", _TRICKY)
    with StoreReader(location) as r:
        raw = [p for (p,) in r.query("SELECT payload FROM events WHERE stream = ? AND kind = 'run' ORDER BY stream_seq", (sid,))]
    assert raw == _TRICKY


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.dictionaries(st.text(max_size=12), st.one_of(st.text(max_size=40), st.integers(), st.floats(allow_nan=False),
                                                            st.booleans(), st.none()), max_size=6))
def test_any_json_payload_round_trips_byte_for_byte(location, data):
    payload = json.dumps({"kind": "run", "data": data}, ensure_ascii=False)
    if any(0xD800 <= ord(ch) <= 0xDFFF for ch in payload):
        return  # lone surrogates are scrubbed by the one rule (scrub_text), on both backends alike
    with StoreWriter(location, clock=Clock()) as w:
        sid = w.create_session("m")
        w.append_text(sid, "run", payload)
    with StoreReader(location) as r:
        [(got,)] = r.query("SELECT payload FROM events WHERE stream = ? AND kind = 'run'", (sid,))
    assert got == payload


def test_json_queries_of_the_read_models_answer_alike(location):
    """The SQLite-dialect constructs callers send (json_extract, json_type, SUM, IS NOT, instr,
    LIKE, unary +) mean the same on both backends."""
    with StoreWriter(location, clock=Clock()) as w:
        sid = w.create_session("m")
        w.append_texts(sid, "call_usage", [
            '{"kind":"call_usage","data":{"model":"a","usage":{"input_tokens":10,"reported_cost_usd":0.5}}}',
            '{"kind":"call_usage","data":{"model":"a","usage":{"input_tokens":5,"reported_cost_usd":"n/a"}}}',
        ])
        w.append_texts(sid, "run", ['{"kind":"run","data":{"event":"op_recorded","op":"Read"}}',
                                    '{"kind":"run","data":{"event":"step_started"}}'])
    with StoreReader(location) as r:
        rows = r.query("SELECT json_extract(payload, '$.data.model'), SUM(json_extract(payload, '$.data.usage.input_tokens')),"
                       " json_type(payload, '$.data.usage.reported_cost_usd') IN ('integer', 'real') AS k"
                       " FROM events WHERE kind = 'call_usage' GROUP BY 1, k ORDER BY k")
        assert [(m, int(n), bool(k)) for m, n, k in rows] == [("a", 5, False), ("a", 10, True)]
        assert r.query("SELECT json_type(payload, '$.data.usage'), json_type(payload, '$.data.model') FROM events"
                       " WHERE kind = 'call_usage' LIMIT 1") == [("object", "text")]
        assert r.query("SELECT COUNT(*) FROM events WHERE stream = ? AND +kind = 'run'"
                       " AND json_extract(payload, '$.data.event') IS NOT 'step_started'", (sid,)) == [(1,)]
        assert r.query("SELECT DISTINCT stream FROM events WHERE kind = 'run' AND instr(lower(payload), ?) > 0", ("read",)) == [(sid,)]
        assert r.query("SELECT COUNT(*) FROM events WHERE payload LIKE ? ESCAPE '\\'", ("%OP\\_RECORDED%",)) == [(1,)]
        assert r.query("SELECT 100 % 7 FROM events LIMIT 1") == [(2,)]


def _cli(*args: str) -> tuple[int, object]:
    """A verb's exit code and its JSON (a verb that reports a divergence exits 1 with its JSON)."""
    res = CliRunner().invoke(flux_main, list(args), catch_exceptions=False)
    assert res.stdout.strip(), res.output
    return res.exit_code, json.loads(res.stdout)


def test_the_demo_store_reads_the_same_through_every_browse_verb(request, tmp_path: Path):
    """The demo recorded into a directory and into Postgres (same clock): sessions, show, replay,
    check and diff print the same JSON — the read models' SQL means the same on both."""
    from flux.demo import build_demo_store
    from tests.conftest import DEMO_NOW

    sqlite_dir = build_demo_store(tmp_path / "sq", now_ms=DEMO_NOW)
    url = request.getfixturevalue("pg_url")
    build_demo_store(store_location(url), now_ms=DEMO_NOW)
    outs = {}
    for name, store in (("sqlite", str(sqlite_dir)), ("postgres", url)):
        listing = _cli("sessions", "--json", "--limit", "1000", "--store", store)
        assert listing[1].pop("store") == (store if name == "sqlite" else url.replace("postgres://", "postgresql://", 1))
        sessions = sorted(s["id"] for s in listing[1]["sessions"])
        outs[name] = [listing] + [_cli(*verb, sid, "--json", "--store", store)
                                  for sid in sessions for verb in (("show",), ("replay",), ("export", "--format", "atif"))]
        outs[name].append(_cli("diff", sessions[0], sessions[1], "--json", "--store", store))
    assert len(outs["sqlite"]) > 10
    assert outs["sqlite"] == outs["postgres"]


def test_a_postgres_reader_cannot_write_and_takes_no_lock(pg_url):
    loc = store_location(pg_url)
    with StoreWriter(loc) as w:
        w.create_session("m")
    with StoreReader(loc) as r:
        with pytest.raises(StoreError, match="read-only transaction"):
            r.query("INSERT INTO streams (model, created_at, updated_at) VALUES ('x', 1, 1)")
        r.list_sessions()
        r.events("s_1")
        locks = r.query("SELECT locktype, mode FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'")
        status = r.query("SELECT current_setting('transaction_read_only')")
    assert locks == []
    assert status == [("on",)]
    with StoreReader(loc) as r:
        assert r.session_count() == 1


def test_a_postgres_store_flux_wrote_opens_here(pg_url):
    """A Postgres store made by flux's own DDL (no context-column migration, as flux creates it)
    with rows as flux writes them opens and reads here."""
    loc = store_location(pg_url)
    conn = connect(pg_url, read_only=False)
    conn.execute(f'CREATE SCHEMA "{url_schema(pg_url)}"')
    for stmt in SCHEMA_DDL:
        conn.execute(stmt)
    conn.execute("INSERT INTO streams (model, created_at, updated_at, last_seq, msg_count) VALUES ('mock', 1, 2, 1, 1)")
    payload = encode_payload(Message.text("user", "from flux"))
    conn.execute("INSERT INTO events (stream, stream_seq, id, kind, ts, payload) VALUES"
                 " ('s_1', 0, '01J0000000000000000000000A', 'session_started', 1, %s),"
                 " ('s_1', 1, '01J0000000000000000000000B', 'message', 2, %s)",
                 ('{"kind":"session_started","data":{"model":"mock"}}', payload))
    conn.close()
    with StoreReader(loc) as r:
        [row] = r.list_sessions()
        assert (row.id, row.msg_count) == ("s_1", 1)
        assert r.events("s_1")[1].body.content[0]["text"] == "from flux"


def test_the_writing_verbs_write_the_same_sessions_on_both_backends(request, tmp_path: Path):
    """fork, what-if, resurrect and sweep on the demo in a directory and in Postgres: the same
    reports, and the sessions they wrote read the same (payloads compared without ids/stamps)."""
    from flux.demo import build_demo_store
    from tests.conftest import DEMO_NOW

    url = request.getfixturevalue("pg_url")
    stores = {"sqlite": str(build_demo_store(tmp_path / "sq", now_ms=DEMO_NOW)), "postgres": url}
    build_demo_store(store_location(url), now_ms=DEMO_NOW)
    verbs = (("fork", "s_1", "--at", "1", "--inject", '"x"', "--yes"),
             ("what-if", "s_1", "--substitute", 'run_tests="2 passed"', "--yes"),
             ("resurrect", "s_9", "--yes"),
             ("sweep", "--sessions", "s_1,s_3", "--substitute", 'run_tests="2 passed"', "--jobs", "1", "--yes"))
    outs: dict[str, list] = {}
    for name, store in stores.items():
        outs[name] = [_cli(*verb, "--json", "--store", store) for verb in verbs]
        listing = _cli("sessions", "--json", "--limit", "1000", "--store", store)[1]["sessions"]
        outs[name].append(sorted((s["id"], s["turns"], s["last_outcome"], s["messages"], s["lineage"] and s["lineage"]["source"])
                                 for s in listing))
        loc = Path(store) if name == "sqlite" else store_location(store)
        with StoreReader(loc) as r:
            outs[name].append([(e.kind, encode_payload(e.body)) for sid in ("s_12", "s_13", "s_14") for e in r.events(sid)])
    roots = {"sqlite": stores["sqlite"], "postgres": str(store_location(url))}
    for a, b in zip(outs["sqlite"], outs["postgres"]):
        assert _without_stamps(a, roots["sqlite"]) == _without_stamps(b, roots["postgres"])


_STAMP = re.compile(r'"(?:ts|ts_ms|created_at_ms|updated_at_ms|id|event_id|at_ms|started_at|ended_at)":\s*("[^"]*"|\d+)')


def _without_stamps(value: object, root: str) -> object:
    """A verb's report with the wall-clock stamps and fresh ids a new session gets taken out (the
    two stores' writes happen at different times), and the store's directory (the demo's
    workspace lives in it) named alike."""
    text = json.dumps(value, sort_keys=True).replace(root, "<store>")
    return json.loads(_STAMP.sub(lambda m: m.group(0).split(":")[0] + ": 0", text))
