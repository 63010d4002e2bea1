"""What hermetic replay reads of a session, folded straight from its rows (issue 10 item 2).

Replay needs four things: the turns with their plan attempts, the cassette cells (the tape), the
ledger rows that order the executions (``statement_completed`` / ``plan_halted``) and whether the
session has any run row at all. :func:`read_replay_input` streams the session's turn, plan and
run rows through a cursor (one batch in memory, not the session) and keeps only those:

* every row is validated as :meth:`StoreReader.events` validates it — its payload ``json.loads``-ed
  (the surrogate rule applied) and, where decoding could still fail on a field of the wrong type,
  decoded in full — so a corrupt row is skipped and counted in ``reader.skipped_rows`` exactly as
  before;
* a run row whose fields already have their types (:func:`~flux.store.events.run_fields_exact`,
  every row flux writes) is not turned into objects unless replay uses it: a cell becomes a
  :class:`~flux.cassette.replay.TapeCell` (the eight fields the tape reads), a ledger row a
  tuple, a ``step_*`` row nothing.

:meth:`ReplayInput.of_detail` gives the same four things from an already-loaded
:class:`~flux.model.session.SessionDetail` (the app's path); a differential test proves both agree
on stores with corrupt rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..cassette.replay import TapeCell
from ..model.session import TRACE_KINDS, SessionDetail, Turn, fold_turns
from ..store.events import (
    DECODE_ERRORS, RUN_VARIANTS, OpRecorded, PayloadError, PlanHalted, StatementCompleted, decode_object, decode_run,
    load_payload, payload_kind, run_fields_exact,
)
from ..store.store import NotUTF8, StoreReader, stored_event, valid_event_row
from .engine import executions_from_rows, executions_in_trace

__all__ = ["ReplayInput", "read_replay_input"]

_SQL = ("SELECT global_seq, stream, stream_seq, id, kind, ts, turn_id, payload FROM events"
        " WHERE stream = ? AND kind IN (" + ",".join("?" * len(TRACE_KINDS)) + ") ORDER BY stream_seq")


@dataclass
class ReplayInput:
    """One session as replay reads it."""

    id: str
    turns: list[Turn]
    cells: list[Any]  # the tape: TapeCells (or model Cells), in stream order
    executions: list[tuple[str, int]]  # (flow_key, global_seq) per execution (§3.7)
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
    """Resolve ``s_<n>``/``last`` and read what replay needs of it (see the module doc).
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


def _read(reader: StoreReader, sid: str, *, tolerant: bool, full_cells: bool = False) -> ReplayInput:
    cells: list[Any] = []
    bodies: list[dict] | None = [] if full_cells else None
    ledger: list[tuple[str, int, bool, bool, int]] = []
    seen = {"trace": False, "skipped": 0}
    # The rows that are not run rows (turns, plan attempts) are folded as the scan yields them, not
    # gathered first: a long session's decoded plan rows never sit in one list.
    turns = fold_turns(_scan(reader, sid, tolerant, cells, bodies, ledger, seen))
    if seen["skipped"]:
        reader.skipped_rows += seen["skipped"]
    return ReplayInput(sid, turns, cells, executions_from_rows(ledger), seen["trace"], cell_bodies=bodies)


def _scan(reader: StoreReader, sid: str, tolerant: bool, cells: list[Any], bodies: list[dict] | None,
          ledger: list[tuple[str, int, bool, bool, int]], seen: dict[str, Any]):
    """The session's decoded non-run rows, in order; the run rows go to ``cells`` and ``ledger``,
    and ``seen`` gets whether any run row decoded (``trace``) and how many rows were ``skipped``."""
    has_trace = False
    skipped = 0
    for gs, stream, sseq, eid, kind, ts, turn_id, payload in reader.scan(_SQL, (sid, *TRACE_KINDS), tolerant=tolerant):
        if not valid_event_row(gs, stream, sseq, kind, payload):
            skipped += 1
            continue
        try:
            obj = load_payload(payload)
        except PayloadError:
            skipped += 1
            continue
        if payload_kind(kind, obj) != "run":
            try:
                body = decode_object(kind, obj)
            except PayloadError:
                skipped += 1
                continue
            yield stored_event(gs, stream, sseq, eid, kind, ts, turn_id, body)
            continue
        d = obj.get("data")
        tag = d.get("event") if type(d) is dict else None
        cls = RUN_VARIANTS.get(tag) if type(tag) is str else None
        if cls is not None and run_fields_exact(cls, d):
            has_trace = True
            if cls is OpRecorded:  # OpRecorded's defaults where a field is absent
                if bodies is not None:
                    bodies.append(d)
                cells.append(TapeCell(d.get("op", ""), d.get("input_hash", ""), d.get("input_hash_redacted"),
                                      d.get("content", ""), d.get("view"), d.get("is_error", False),
                                      d.get("denied", False), d.get("truncated", False)))
            elif cls is StatementCompleted:
                ledger.append((d.get("plan", ""), d.get("node", 0), d.get("skipped", False), False, gs))
            elif cls is PlanHalted:
                ledger.append((d.get("plan", ""), d.get("node", 0), False, True, gs))
            continue
        try:  # an odd row: decode it in full, exactly as every reader does
            ev = decode_run(d)
        except DECODE_ERRORS:
            skipped += 1
            continue
        has_trace = True
        if isinstance(ev, OpRecorded):
            if bodies is not None:
                bodies.append(ev.to_body())
            cells.append(TapeCell.of(ev))
        elif isinstance(ev, StatementCompleted):
            ledger.append((ev.plan, ev.node, bool(ev.skipped), False, gs))
        elif isinstance(ev, PlanHalted):
            ledger.append((ev.plan, ev.node, False, True, gs))
    seen["trace"] = has_trace
    seen["skipped"] = skipped
