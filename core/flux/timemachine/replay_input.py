"""What hermetic replay reads of a session — the turns with their plan attempts, the tape's cells,
the ledger rows that order the executions, whether it has a trace — folded straight from its rows
in one validated pass (:func:`scan_rows`: a corrupt row is skipped and counted as every reader
skips it), or taken from a loaded session (:meth:`ReplayInput.of_detail`)."""

from __future__ import annotations

import json
import sqlite3
from collections import deque
from itertools import chain
from dataclasses import dataclass
from typing import Any

from ..cassette.replay import TapeCell
from ..errors import FluxError
from ..model.session import TRACE_KINDS, SessionDetail, Turn, TurnFold
from ..store.events import RUN_VARIANTS, OpRecorded, PlanAttempted, PlanHalted, StatementCompleted, decode_run
from ..store.body_codec import field_reader
from ..store.payload_decode import SURROGATE_ESCAPE, DECODE_ERRORS, PayloadError, decode_object, load_payload
from ..store.store import NotUTF8, StoreReader, as_int, stored_event
from .engine import executions_from_rows, executions_in_trace

__all__ = ["ReplayInput", "read_replay_input", "scan_rows"]

_SQL = ("SELECT global_seq, stream, stream_seq, id, kind, ts, turn_id, payload FROM events"
        " WHERE stream = ? AND kind IN (" + ",".join("?" * len(TRACE_KINDS)) + ") ORDER BY stream_seq")


@dataclass
class ReplayInput:
    """One session as replay reads it."""

    id: str
    turns: list[Turn]
    cells: list[Any]  # the tape: TapeCells (or model Cells), in stream order
    executions: list[tuple[str, int]]  # (flow_key, global_seq) per execution
    has_trace: bool  # any run row decoded
    model: str | None = None  # the session row's model
    # read_replay_input(full_cells=True): each cell's body as recorded, aligned with ``cells`` (fork
    # re-records the prefix's cells from them); None otherwise
    cell_bodies: list[dict] | None = None

    @classmethod
    def of_detail(cls, detail: SessionDetail) -> "ReplayInput":
        trace = detail.run_events
        return cls(detail.id, detail.turns, detail.cells, executions_in_trace(trace), bool(trace), detail.row.model)


def read_replay_input(reader: StoreReader, ref: str | None, *, full_cells: bool = False) -> ReplayInput:
    """Resolve ``s_<n>``/``last`` and read what replay needs of it (see the module doc; a TEXT cell
    that is not UTF-8 is read again tolerantly, and that row skipped).
    ``full_cells``: also keep each cell's body, every field as recorded (``cell_bodies``: fork
    re-records the prefix's cells on the child) — the row's own JSON object when its fields already
    have their types (decoding would build ``OpRecorded(**fields)`` from it, and encoding that
    writes the same text), else the decoded event's ``to_body()``."""
    row = reader.resolve_session(ref)
    try:
        out = _read(reader, row.id, tolerant=False, full_cells=full_cells)
    except NotUTF8:  # a TEXT cell is not UTF-8: read again, that row comes back as bytes and is skipped
        out = _read(reader, row.id, tolerant=True, full_cells=full_cells)
    out.model = row.model
    return out


# The fields the fused read takes from a row's body (JSON keys, in the order their records take them).
_CELL_KEYS = TapeCell._fields  # op_recorded's JSON keys of the same names
_PLAN_KEYS = ("step", "outcome", "error", "fingerprint", "phase", "plan_source", "plan_text")
# The run rows whose values replay keeps (a cell, the ledger's rows); any other it only counts.
_KEPT_RUN_ROWS = frozenset({"op_recorded", "statement_completed", "plan_halted"})

# json.loads(payload) is ``JSONDecoder().decode``: the C scanner's ``scan_once(payload, 0)`` after
# skipping leading whitespace, then "Extra data" unless only whitespace follows — two Python frames
# and two regex matches around one C call, per row. scan_rows calls the same C scanner (a decoder with
# json.loads's defaults) itself and hands every payload that does not end where the value ends, or
# has no value at 0, to json.loads — so the verdict (decoded or skipped) and the value are
# json.loads's. One difference is left, the stack: the scanner's nesting counts against the
# recursion limit from where it is called, which is json.loads's depth less its frames; a payload
# with fewer than _SHALLOW brackets (so nested less deeply) decodes the same at any depth short of
# the limit less _SHALLOW + 3 frames, and every other payload goes through json.loads itself.
_SCANNER = json.JSONDecoder().scan_once
_SHALLOW = 512
# Rows fetched at a time: few enough that a batch's rows (payload texts of a few hundred bytes, and
# their tuples) are still in the core's cache when the loop decodes them, as they are for a loop
# over the cursor itself — a batch of 4,096 (1.5 MB at flux's row sizes) was not.
_BATCH = 256


def _read(reader: StoreReader, sid: str, *, tolerant: bool, full_cells: bool = False) -> ReplayInput:
    cells: list[Any] = []
    bodies: list[dict] | None = [] if full_cells else None
    ledger: list[tuple[str, int, bool, bool, int]] = []
    fold = TurnFold()
    seen: dict[str, Any] = {}
    deque(scan_rows(reader, sid, tolerant, fold, cells, bodies, ledger, seen), maxlen=0)  # run it through
    if seen["skipped"]:
        reader.skipped_rows += seen["skipped"]
    return ReplayInput(sid, fold.turns_in_order(), cells, executions_from_rows(ledger), seen["trace"],
                       cell_bodies=bodies)


def _global_seq_is_rowid(reader: StoreReader) -> bool:
    """Whether ``events.global_seq`` is the table's rowid, as flux declares it (``INTEGER PRIMARY
    KEY``): then every row's is an integer. Not so in a hand-made or hostile store — no type, or an
    INTEGER PRIMARY KEY that is no rowid alias (``DESC``, or a ``WITHOUT ROWID`` table: SQLite then
    keeps an index for the key) — where a row's may be text, a real or NULL."""
    try:
        cols = reader.query("PRAGMA table_info(events)")
        pk = [(name, str(decl).upper()) for _cid, name, decl, _nn, _dflt, k in cols if k]
        if pk != [("global_seq", "INTEGER")]:
            return False
        return not any(origin == "pk" for _seq, _name, _unique, origin, *_ in reader.query("PRAGMA index_list(events)"))
    except (FluxError, sqlite3.Error, ValueError, TypeError):
        return False


def scan_rows(reader: StoreReader, sid: str, tolerant: bool, fold: Any, cells: Any, bodies: list[dict] | None,
          ledger: Any, seen: dict[str, Any], pause: int = 1):
    """One pass over the session's turn, plan and run rows, each validated as every reader
    validates it (:func:`~flux.store.store.valid_event_row`, :func:`~flux.store.payload_decode.load_payload`,
    then decoding) and turned straight into what replay keeps: a well-typed row (every row flux
    writes) is checked by its variant's generated :func:`~flux.store.body_codec.field_reader` — the
    same verdict as :func:`~flux.store.body_codec.fields_exact`, with the values — and builds no event:
    a cell becomes a :class:`TapeCell` (``cells.append``), a ledger row a tuple (``ledger.append``),
    a plan row its values handed to ``fold.plan_attempted`` (a :class:`TurnFold`'s: no event, no
    ``PlanAttempted``), a ``step_*`` row nothing. Any other row is decoded in full, exactly as
    every reader does, and a turn row goes to ``fold.add`` (a row that cannot be decoded is skipped
    and counted). A generator: it yields after every ``pause``-th row it hands to ``fold`` (so a
    caller can pull the session as it goes, ``pause`` turn and plan rows at a time); at the end
    ``seen`` gets whether any run row decoded (``trace``) and how many rows were ``skipped``. (The
    fast path is inline here; every other row goes to :meth:`_FullRead.row`.)"""
    full = _FullRead(fold, cells, bodies, ledger)
    attempt = fold.plan_attempted
    add_cell = cells.append
    add_row = ledger.append
    read_cell, read_plan, read_stmt = full.read_cell, full.read_plan, full.read_stmt
    unread = full.unread
    loads = json.loads
    scan_json = _SCANNER
    shallow = _SHALLOW
    lone_surrogate = SURROGATE_ESCAPE.search
    has_trace = False
    skipped = 0
    left = pause  # rows to hand to the fold before the next yield
    any_gs = not _global_seq_is_rowid(reader)  # (True: a store not in flux's schema, each row's is checked)
    for gs, stream, sseq, eid, kind, ts, turn_id, payload in chain.from_iterable(
            reader.scan_batches(_SQL, (sid, *TRACE_KINDS), tolerant=tolerant, batch=_BATCH)):
        # valid_event_row, less what _SQL proves: a row it selects has `stream` and `kind` equal to
        # text parameters (TEXT never equals a BLOB or a number), and in flux's schema `global_seq`
        # is the rowid (an integer)
        if type(payload) is not str or type(sseq) is not int or (any_gs and type(gs) is not int):
            skipped += 1
            continue
        try:  # load_payload, inline: json.loads's verdict and value, the same errors skip the row (see _SCANNER)
            if (n := len(payload)) < shallow or payload.count("{") + payload.count("[") < shallow:
                try:
                    obj, end = scan_json(payload, 0)
                    if end != n:
                        obj = loads(payload)  # whitespace after the value, or more data: json.loads says which
                except StopIteration:
                    obj = loads(payload)  # no value at 0 (whitespace, a BOM, nothing): json.loads says which
            else:
                obj = loads(payload)
        except (ValueError, TypeError, RecursionError):
            skipped += 1
            continue
        if type(obj) is not dict:
            skipped += 1
            continue
        k = obj.get("kind", kind)  # payload_kind, inline
        if type(k) is not str:
            k = kind
        d = obj.get("data")
        if type(d) is dict:  # the rows flux writes, straight through (anything else: the full path below)
            if k == "run":
                tag = d.get("event")
                check = unread.get(tag) if type(tag) is str else None
                if check is not None:
                    if check(d):  # a step_* row: it decodes, and replay reads none of its values — the
                        has_trace = True  # surrogate rule (below) changes no value's type, so not this verdict
                        continue
                elif tag == "op_recorded" and ("\\u" not in payload or lone_surrogate(payload) is None):
                    c = read_cell(d)
                    if c is not None:
                        has_trace = True
                        add_cell(c)
                        if bodies is not None:
                            bodies.append(d)
                        continue
                elif tag == "statement_completed" and ("\\u" not in payload or lone_surrogate(payload) is None):
                    v = read_stmt(d)
                    if v is not None:  # (the row below, without looking its tag up twice)
                        has_trace = True
                        add_row((v[0], v[1], v[2], False, gs))
                        continue
            elif k == "plan_attempted" and ("\\u" not in payload or lone_surrogate(payload) is None):
                v = read_plan(d)
                if v is not None:  # decoding gives PlanAttempted(**fields): fold its values, build no event
                    attempt(gs, sseq, ts if type(ts) is int else as_int(ts), turn_id if type(turn_id) is int else None,
                            *v)
                    left -= 1
                    if not left:
                        left = pause
                        yield
                    continue
        verdict = full.row(gs, stream, sseq, eid, kind, ts, turn_id, payload, obj, k, d)
        if verdict is _RUN_ROW:
            has_trace = True
        elif verdict is _SKIPPED:
            skipped += 1
        else:  # a turn or plan row, handed to the fold
            left -= 1
            if not left:
                left = pause
                yield
    seen["trace"] = has_trace
    seen["skipped"] = skipped


_RUN_ROW, _SKIPPED, _FOLDED = "run row", "skipped", "folded"  # what _FullRead.row did with a row


class _FullRead:
    """The readers :func:`scan_rows` turns rows into replay's values with, and its full path: a row
    its fast path does not take (a turn row, a halt, a payload whose values the surrogate rule
    changes, a row of the wrong shape) decoded exactly as every reader decodes it."""

    __slots__ = ("fold", "add_cell", "bodies", "add_row", "read_cell", "read_plan", "read_stmt", "read_halt",
                 "valid", "unread")

    def __init__(self, fold: Any, cells: Any, bodies: list[dict] | None, ledger: Any):
        self.fold = fold
        self.add_cell = cells.append
        self.bodies = bodies
        self.add_row = ledger.append
        self.read_cell = field_reader(OpRecorded, _CELL_KEYS, TapeCell)
        self.read_plan = field_reader(PlanAttempted, _PLAN_KEYS)
        self.read_stmt = field_reader(StatementCompleted, ("plan", "node", "skipped"))
        self.read_halt = field_reader(PlanHalted, ("plan", "node"))
        self.valid = {tag: field_reader(cls, ()) for tag, cls in RUN_VARIANTS.items()}  # a step row: only whether it decodes
        # the run rows replay only counts (every variant but the three it keeps): checked first, as they come most
        self.unread = {tag: check for tag, check in self.valid.items() if tag not in _KEPT_RUN_ROWS}

    def row(self, gs: Any, stream: Any, sseq: int, eid: Any, kind: str, ts: Any, turn_id: Any, payload: str,
            obj: dict, k: str, d: Any) -> str:
        """One row (its payload decoded as ``obj``, of kind ``k`` with data ``d``) the full way:
        :data:`_RUN_ROW` (a run row that decodes: a cell and a ledger row kept), :data:`_SKIPPED`
        (it does not decode) or :data:`_FOLDED` (a turn or plan row handed to the fold)."""
        if "\\u" in payload and SURROGATE_ESCAPE.search(payload) is not None:
            obj = load_payload(payload)  # the one rule: what every reader decodes (the row's values change)
            k = obj.get("kind", kind)
            if type(k) is not str:
                k = kind
            d = obj.get("data")
        if k == "run":
            return self._run_row(d, gs)
        if k == "plan_attempted" and type(d) is dict:
            v = self.read_plan(d)
            if v is not None:  # decoding gives PlanAttempted(**fields): fold its values, build no event
                self.fold.plan_attempted(gs, sseq, ts if type(ts) is int else as_int(ts),
                                         turn_id if type(turn_id) is int else None, *v)
                return _FOLDED
        try:
            body = decode_object(kind, obj)
        except PayloadError:
            return _SKIPPED
        self.fold.add(stored_event(gs, stream, sseq, eid, kind, ts, turn_id, body))
        return _FOLDED

    def _run_row(self, d: Any, gs: Any) -> str:
        tag = d.get("event") if type(d) is dict else None
        if tag == "op_recorded":
            c = self.read_cell(d)
            if c is not None:
                self.add_cell(c)
                if self.bodies is not None:
                    self.bodies.append(d)
                return _RUN_ROW
        elif tag == "statement_completed":
            v = self.read_stmt(d)
            if v is not None:
                self.add_row((v[0], v[1], v[2], False, gs))
                return _RUN_ROW
        elif tag == "plan_halted":
            v = self.read_halt(d)
            if v is not None:
                self.add_row((v[0], v[1], False, True, gs))
                return _RUN_ROW
        elif type(tag) is str:
            check = self.valid.get(tag)
            if check is not None and check(d):
                return _RUN_ROW
        try:  # an odd row: decode it in full, exactly as every reader does
            ev = decode_run(d)
        except DECODE_ERRORS:
            return _SKIPPED
        if isinstance(ev, OpRecorded):
            if self.bodies is not None:
                self.bodies.append(ev.to_body())
            self.add_cell(TapeCell.of(ev))
        elif isinstance(ev, StatementCompleted):
            self.add_row((ev.plan, ev.node, bool(ev.skipped), False, gs))
        elif isinstance(ev, PlanHalted):
            self.add_row((ev.plan, ev.node, False, True, gs))
        return _RUN_ROW
