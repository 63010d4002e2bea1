"""The session list: registry rows plus the per-session facts the list shows (turns, last
outcome, interrupted flag, lineage, cost), computed without reading every event of every session.

Only these rows are read, through the ``(stream, kind)`` and ``(stream, turn_id)`` indexes:
``turn_started``/``turn_ended``/``call_usage`` rows of the listed sessions, and — only for a
session whose newest turn has no ``turn_ended`` — that one turn's plan attempts and run window.
"""

from __future__ import annotations

import json
from typing import Iterable, Sequence

from ..errors import FluxError, StoreError
from ..records import Record
from ..store.store import SessionRow, StoreReader
from ..store.usage import Usage
from ..store.lease import lease_holder
from .interrupted import InterruptCheck, recording_check  # cheap: the interrupted-turn check loads the language only when it runs
from .lineage import Lineage, lineage_of
from .pricing import PriceTable, Spend

_NOT_INTERRUPTED = InterruptCheck()

__all__ = ["MAX_QUERY_CHARS", "SessionSummary", "check_query", "summarize_sessions", "list_sessions",
           "session_matches_query", "path_matches", "sessions_touching"]

_CHUNK = 400


class SessionSummary(Record):
    __slots__ = ("row", "turns", "last_outcome", "interrupt", "lineage", "spend")
    row: SessionRow
    turns: int
    last_outcome: str | None  # None when the session has no turn
    interrupt: InterruptCheck
    lineage: Lineage | None
    spend: Spend  # priced by flux.model.pricing's rules

    def __init__(self, row: SessionRow, turns: int = 0, last_outcome: str | None = None,
                 interrupt: InterruptCheck = _NOT_INTERRUPTED, lineage: Lineage | None = None,
                 spend: Spend | None = None) -> None:
        self.row = row
        self.turns = turns
        self.last_outcome = last_outcome
        self.interrupt = interrupt
        self.lineage = lineage
        self.spend = Spend(None) if spend is None else spend

    @property
    def usage(self) -> Usage:
        return self.spend.usage

    @property
    def cost(self) -> float | None:
        """USD; ``None``: some model's price is unknown."""
        return self.spend.usd

    @property
    def unpriced_models(self) -> tuple[str, ...]:
        return self.spend.unpriced_models

    @property
    def id(self) -> str:
        return self.row.id

    @property
    def interrupted(self) -> bool:
        return self.interrupt.interrupted is not None

    def to_json(self) -> dict:
        r = self.row
        it = self.interrupt.interrupted
        return {
            "id": r.id,
            "model": r.model,
            "messages": r.msg_count,
            "created_at_ms": r.created_at,
            "updated_at_ms": r.updated_at,
            "context": r.context,
            "turns": self.turns,
            "last_outcome": self.last_outcome,
            "interrupted": None if it is None else {
                "turn": it.turn_number, "turn_id": it.turn_id, "started_at_ms": it.started_at_ms,
                "user_input": it.user_input, "flow_key": it.flow_key, "completed": it.completed,
                "position": it.position,
            },
            "open_turn_not_flagged": self.interrupt.reason,
            "recording_pid": self.interrupt.recording_pid,
            "lineage": None if self.lineage is None else {"kind": self.lineage.kind, "source": self.lineage.source, "detail": self.lineage.detail},
            "usage": self.usage.to_body(),
            "cost_usd": self.cost,
        }


def _chunks(seq: Sequence, n: int = _CHUNK) -> Iterable[Sequence]:
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens",
                 "cache_creation_1h_input_tokens", "reasoning_tokens", "audio_input_tokens", "audio_output_tokens")
# A reported cost counts only when it is a number (Usage.from_body's rule).
_REPORTED = ("CASE WHEN json_type(payload, '$.data.usage.reported_cost_usd') IN ('integer', 'real')"
             " THEN json_extract(payload, '$.data.usage.reported_cost_usd') END")
_SUMS = ", ".join(f"SUM(json_extract(payload, '$.data.usage.{f}'))" for f in _USAGE_FIELDS)


def _usage(sums: Sequence, reported: float | None) -> Usage:
    vals = [v if type(v) is int else int(v) if isinstance(v, (int, float)) else 0 for v in sums]
    one_h = vals[4] or None
    return Usage(vals[0], vals[1], vals[2], vals[3], one_h, vals[5], vals[6], vals[7], reported)


def _json_query(reader: StoreReader, sql: str, params: Sequence) -> list[tuple]:
    """A ``json_extract`` aggregate. SQLite fails the whole query when one row's payload is
    malformed JSON; then the query runs again over well-formed rows only (the bad row is one
    corrupt row, never the whole listing). The guard costs nothing on a healthy store."""
    from ..errors import StoreError

    try:
        return reader.query(sql, params)
    except StoreError as e:
        if "malformed JSON" not in str(e):
            raise
        return reader.query(sql.replace(" WHERE ", " WHERE json_valid(payload) AND ", 1), params)


def summarize_sessions(reader: StoreReader, rows: Sequence[SessionRow], prices: PriceTable | None, *,
                       registry_size: int | None = None) -> list[SessionSummary]:
    """Fill turns, last outcome, interrupted flag, lineage and cost for the given registry rows.

    Aggregates run in SQLite (``json_extract``): Python sees one row per turn, not one per event.
    A page of the list searches the ``(stream, kind)`` index per listed session (in chunks); most of
    the registry reads each fact group in one scan of the ``kind`` index instead — one query per
    fact group, never one per session. ``registry_size``: the registry's row count when the caller
    knows it, or any bound past ``2 * len(rows)`` (else it is counted).
    """
    out = {r.id: SessionSummary(row=r, lineage=lineage_of(r), spend=Spend(prices)) for r in rows}
    if registry_size is None and out:
        registry_size = reader.session_count()
    if out and 2 * len(out) >= registry_size:
        _summarize(reader, out, (), "")
    else:
        for chunk in _chunks(list(out)):
            _summarize(reader, out, chunk, f" AND stream IN ({','.join('?' * len(chunk))})")
    return [out[r.id] for r in rows]


def _summarize(reader: StoreReader, out: dict[str, SessionSummary], params: Sequence[str], where: str) -> None:
    """One pass of each fact group over the sessions ``where`` selects (rows of other sessions
    skipped); the three fact queries go to the store together (one round trip to a shared server)."""
    turns_sql = f"SELECT stream, COUNT(*), MAX(global_seq) FROM events WHERE kind = 'turn_started'{where} GROUP BY stream"
    # Spend per (turn, model), split by whether the provider reported its own cost.
    calls_sql = (f"SELECT stream, turn_id, json_extract(payload, '$.data.model') AS m,"
                 f" json_type(payload, '$.data.usage.reported_cost_usd') IN ('integer', 'real') AS r,"
                 f" SUM({_REPORTED}), {_SUMS}"
                 f" FROM events WHERE kind = 'call_usage'{where} GROUP BY stream, turn_id, m, r")
    ended_sql = (f"SELECT stream, turn_id, json_extract(payload, '$.data.outcome'),"
                 f" json_type(payload, '$.data.usage') = 'object', {_REPORTED}, {_SUMS.replace('SUM(', '(')}"
                 f" FROM events WHERE kind = 'turn_ended'{where}")
    try:
        turn_rows, call_rows, ended_rows = reader.query_many([(turn_sql, params) for turn_sql in (turns_sql, calls_sql, ended_sql)])
    except StoreError as e:
        if "malformed JSON" not in str(e):
            raise
        turn_rows = reader.query(turns_sql, params)
        call_rows = _json_query(reader, calls_sql, params)
        ended_rows = _json_query(reader, ended_sql, params)
    newest_turn: dict[str, int] = {}
    for stream, count, tid in turn_rows:
        s = out.get(stream)
        if s is not None:
            s.turns = count
            newest_turn[stream] = tid
    called: set[int | None] = set()
    for stream, tid, model, n_reported, reported, *sums in call_rows:
        s = out.get(stream)
        if s is not None:
            called.add(tid)  # a turn_id is a global_seq: unique across streams
            s.spend.add(model if isinstance(model, str) else "", _usage(sums, float(reported) if n_reported else None))
    ended: dict[str, set[int]] = {}
    call_less: list[tuple[SessionSummary, int | None, Usage]] = []
    for stream, tid, outcome, has_usage, reported, *sums in ended_rows:
        s = out.get(stream)
        if s is None:
            continue
        ended.setdefault(stream, set()).add(tid)
        if newest_turn.get(stream) == tid:
            s.last_outcome = outcome if isinstance(outcome, str) else ""
        if has_usage and tid not in called:  # Turn.effective_usage: ended usage only without calls
            call_less.append((s, tid, _usage(sums, reported)))
    models = _turn_models(reader, [tid for _s, tid, _u in call_less])
    for s, tid, usage in call_less:
        s.spend.add(models.get(tid) or s.row.model, usage)
    for stream, tid in newest_turn.items():
        s = out[stream]
        closed = ended.get(stream, ())
        if tid in closed:
            if len(closed) < s.turns:  # an older turn never ended
                s.interrupt = _older_open_turn(reader, stream, closed)
            continue
        s.last_outcome = "pending"
        s.interrupt = _check_open_newest_turn(reader, stream, tid, s.turns)


def _turn_models(reader: StoreReader, turn_ids: Sequence[int | None]) -> dict[int, str]:
    """Each turn's model, from its ``turn_started`` row ("" when not a string): a chunk of turns a
    query; a turn id that is not an integer (a hostile row's) is looked up alone, as SQLite
    compares it."""
    wanted = sorted({t for t in turn_ids if type(t) is int})
    out: dict = {}
    for chunk in _chunks(wanted):
        for gs, model in _json_query(reader, "SELECT global_seq, json_extract(payload, '$.data.model') FROM events"
                                             f" WHERE global_seq IN ({','.join('?' * len(chunk))})", chunk):
            out[gs] = model if isinstance(model, str) else ""
    for t in {t for t in turn_ids if t is not None and type(t) is not int}:
        rows = _json_query(reader, "SELECT json_extract(payload, '$.data.model') FROM events WHERE global_seq = ?", (t,))
        out[t] = rows[0][0] if rows and isinstance(rows[0][0], str) else ""
    return out


def _older_open_turn(reader: StoreReader, stream: str, ended_ids: set[int]) -> InterruptCheck:
    """The newest turn closed but an older one never did: flux does not flag it."""
    starts = [gs for (gs,) in reader.query("SELECT global_seq FROM events WHERE stream = ? AND kind = 'turn_started' ORDER BY global_seq", (stream,))]
    open_numbers = [i + 1 for i, gs in enumerate(starts) if gs not in ended_ids]
    if not open_numbers:
        return InterruptCheck()
    x, y = open_numbers[-1], len(starts)
    return InterruptCheck(reason=f"turn {x} is interrupted, but turn {y} ran and closed after it — needs manual recovery", open_turn=x)


def _check_open_newest_turn(reader: StoreReader, stream: str, turn_id: int, number: int) -> InterruptCheck:
    """The interrupted-turn check for a session whose newest turn is open: read only that turn's rows.

    The rows are read as plain JSON; only when one of them is not exactly what a flux writer writes
    (wrong types, a missing field, an escaped surrogate, a payload whose kind disagrees with its
    column) does the event decoder read the turn instead — it alone knows how such rows coerce,
    and loading it costs the session list more than the whole check. A turn a live process is
    recording (its session lease is held) is not interrupted, and is not read at all."""
    from .interrupted import check_open_newest_turn

    pid = lease_holder(reader.dir, stream)
    if pid is not None:
        return recording_check(number, pid)
    facts = _open_turn_facts(reader, stream, turn_id, number)
    if facts is None:
        return _check_open_newest_turn_decoded(reader, stream, turn_id, number)
    turn, bodies = facts
    return check_open_newest_turn(turn, lambda: bodies)


def _check_open_newest_turn_decoded(reader: StoreReader, stream: str, turn_id: int, number: int) -> InterruptCheck:
    from .interrupted import check_interrupted
    from .session import fold_turns

    started = reader.events(stream, kinds=("turn_started",), min_global_seq=turn_id, max_global_seq=turn_id + 1)
    scoped = reader.turn_events(stream, turn_id, kinds=("plan_attempted",))
    turns = fold_turns(list(started) + list(scoped))
    if not turns:
        return InterruptCheck()
    turns[0].number = number
    run_window = reader.events(stream, kinds=("run",), min_global_seq=turn_id)
    return check_interrupted(turns, lambda _t: run_window)


_LEDGER_EVENTS = {  # the run events the interrupted-turn check's ledger reads, and the fields it reads (with their types)
    "statement_completed": (("plan", str), ("node", int), ("stmt", str)),
    "plan_resumed": (("prior", str),),
    "checkpoint_reached": (("flow_key", str), ("node", int)),
}


def _plain_data(kind: str, payload: object) -> dict | None:
    """``payload``'s ``data`` object when the row is plain (see :func:`_check_open_newest_turn`), else None."""
    if not isinstance(payload, str) or "\\u" in payload:
        return None
    try:
        obj = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or obj.get("kind") != kind or not isinstance(obj.get("data"), dict):
        return None
    return obj["data"]


# The open turn's rows the interrupted-turn check reads, in one query (one round trip to a shared
# server): 0 its turn_started row, 1 its plan attempts, 2 the ledger's run rows from it on.
_OPEN_TURN_ROWS = (
    "SELECT 0, stream_seq, ts, payload FROM events WHERE global_seq = ? AND stream = ? AND kind = 'turn_started'"
    " UNION ALL SELECT 1, stream_seq, ts, payload FROM events WHERE stream = ? AND turn_id = ? AND kind = 'plan_attempted'"
    " UNION ALL SELECT 2, stream_seq, ts, payload FROM events WHERE stream = ? AND kind = 'run' AND global_seq >= ?"
    " AND json_extract(payload, '$.data.event') IN ('statement_completed', 'plan_resumed', 'checkpoint_reached')"
    " ORDER BY 1, 2")


def _open_turn_facts(reader: StoreReader, stream: str, turn_id: int, number: int):
    """``(OpenTurn, run bodies)`` from plain rows, or None when a row needs the decoder."""
    from .interrupted import OpenTurn

    try:
        rows = reader.query(_OPEN_TURN_ROWS, (turn_id, stream, stream, turn_id, stream, turn_id))
    except StoreError:  # a malformed payload in the run window: the decoder skips and counts it
        return None
    started = [(ts, payload) for part, _seq, ts, payload in rows if part == 0]
    if len(started) != 1 or type(started[0][0]) is not int:
        return None
    data = _plain_data("turn_started", started[0][1])
    if data is None or type(data.get("user_input")) is not str:
        return None
    plans = []
    bodies = []
    for part, _seq, _ts, payload in rows:
        if part == 1:
            p = _plain_data("plan_attempted", payload)
            if p is None or type(p.get("outcome")) is not str or not (p.get("plan_source") is None or type(p["plan_source"]) is str):
                return None
            plans.append((p["outcome"], p.get("plan_source")))
        elif part == 2:
            b = _plain_data("run", payload)
            if b is None:
                return None
            want = _LEDGER_EVENTS.get(b.get("event"))  # duplicate keys: SQLite and Python may read different ones
            if want is None or any(type(b.get(k)) is not t for k, t in want) or not (b.get("value") is None or type(b["value"]) is str):
                return None
            bodies.append(b)
    return OpenTurn(number, turn_id, started[0][0], data["user_input"], tuple(plans)), bodies


def session_matches_query(reader: StoreReader, session_id: str, query: str) -> bool:
    """Case-insensitive substring over the session's conversation text (``--query``)."""
    from ..store.events import Message

    q = query.casefold()
    for ev in reader.events(session_id, kinds=("message", "compacted")):
        b = ev.body
        msgs = [b] if isinstance(b, Message) else getattr(b, "message_list", lambda: [])()
        for m in msgs:
            for block in m.content:
                if not isinstance(block, dict):
                    continue
                text = block.get("text") or block.get("thinking") or ""
                if block.get("type") in ("tool_use", "tool_result"):
                    text = json.dumps(block, ensure_ascii=False)
                if q in str(text).casefold():
                    return True
    return False


def path_matches(subject: str, wanted: str) -> bool:
    """flux's touched-file rule: equal, or one is a ``/``-bounded suffix of the other — never a raw
    substring (``rc/main.rs`` is not ``src/main.rs``)."""
    if subject == wanted:
        return True

    def bounded(long: str, short: str) -> bool:
        return len(long) > len(short) and long.endswith(short) and long[-len(short) - 1] == "/"
    return bounded(subject, wanted) or bounded(wanted, subject)


def sessions_touching(reader: StoreReader, path: str) -> set[str]:
    """The sessions with a ``tool_call`` observation whose ``subjects`` name ``path`` (flux's
    ``--file``: the subjects the live turn recorded, already redacted)."""
    rows = reader.query_json(
        "SELECT stream, json_extract(payload, '$.data.data.subjects') FROM events WHERE kind = 'observation'"
        " AND json_extract(payload, '$.data.kind') = 'tool_call'")
    hits: set[str] = set()
    for stream, subjects in rows:
        if stream in hits or not isinstance(subjects, str):
            continue
        try:
            names = json.loads(subjects)
        except ValueError:
            continue
        if isinstance(names, list) and any(isinstance(s, str) and path_matches(s, path) for s in names):
            hits.add(stream)
    return hits


# The longest --query a search takes: SQLite's LIKE refuses a pattern over 50,000 bytes ("LIKE or
# GLOB pattern too complex"), and this many characters stay under it however they are spelled
# (4 bytes a character at most, plus the two wildcards).
MAX_QUERY_CHARS = 10_000


def check_query(query: str) -> None:
    """A search text ``list_sessions`` can run, else a one-line :class:`FluxError`."""
    if len(query) > MAX_QUERY_CHARS:
        raise FluxError(f"the search text is {len(query):,} characters long — a query is a substring of the "
                        f"conversation, at most {MAX_QUERY_CHARS:,} characters; search for a shorter part of it")


def list_sessions(reader: StoreReader, *, limit: int | None = 30, query: str | None = None, since_ms: int | None = None,
                  until_ms: int | None = None, prices: PriceTable | None = None,
                  touched: str | None = None) -> list[SessionSummary]:
    """``flux sessions``: newest first, filtered, at most ``limit``, each with its summary
    (``touched``: only sessions whose tool calls touched that path, :func:`sessions_touching`). A
    query longer than :data:`MAX_QUERY_CHARS` is a :class:`FluxError`, raised before the store is read."""
    if query:
        check_query(query)
    filtered = query is not None or since_ms is not None or until_ms is not None or touched is not None
    # A page reads one row past twice its length, so the rows read tell summarize_sessions how to
    # read the facts (the registry's size, or a bound past twice the page) without a COUNT — a
    # round trip to a shared server.
    rows = reader.list_sessions(limit=None if filtered or limit is None else 2 * limit + 1)
    registry_size = len(rows)
    if since_ms is not None:
        rows = [r for r in rows if r.updated_at >= since_ms]
    if until_ms is not None:
        rows = [r for r in rows if r.created_at <= until_ms]
    if touched is not None:
        hit = sessions_touching(reader, touched)
        rows = [r for r in rows if r.id in hit]
    if query:
        # Cheap prefilter in SQL (ASCII case-insensitive LIKE on the raw payload), exact check after.
        like = "%" + query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        hits = {s for (s,) in reader.query(
            "SELECT DISTINCT stream FROM events WHERE kind IN ('message', 'compacted') AND payload LIKE ? ESCAPE '\\'", (like,))}
        rows = [r for r in rows if (r.id in hits or not query.isascii()) and session_matches_query(reader, r.id, query)]
    if limit is not None:
        rows = rows[:limit]
    return summarize_sessions(reader, rows, prices, registry_size=registry_size)


def interrupted_sessions(reader: StoreReader) -> dict[str, InterruptCheck]:
    """Every session ``flux sessions`` would flag, across the whole store, without summarizing
    every session: one indexed pass over ``turn_started`` rows finds sessions whose newest turn has
    no ``turn_ended``; only those get the full interrupted-turn check."""
    rows = reader.query(
        "WITH last AS (SELECT stream, COUNT(*) AS n, MAX(global_seq) AS tid FROM events WHERE kind = 'turn_started' GROUP BY stream)"
        " SELECT stream, n, tid FROM last WHERE NOT EXISTS ("
        "  SELECT 1 FROM events e WHERE e.stream = last.stream AND e.turn_id = last.tid AND e.kind = 'turn_ended')")
    out = {}
    for stream, n, tid in rows:
        check = _check_open_newest_turn(reader, stream, tid, n)
        if check.interrupted is not None:
            out[stream] = check
    return out
