"""The store's row records and the coercions every backend's reads share: a decoded event, a
registry row, and the rules that turn a hostile cell (NULL, a BLOB, the wrong type) into a value."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..errors import StoreError
from ..records import FrozenRecord

if TYPE_CHECKING:
    from .events import EventBody

__all__ = ["StoredEvent", "SessionRow", "session_number", "stored_event", "valid_event_row",
           "as_int", "as_text", "session_row_from", "NotUTF8", "EVENT_COLUMNS"]

EVENT_COLUMNS = "global_seq, stream, stream_seq, id, kind, ts, turn_id, payload"


def session_number(session_id: str) -> int | None:
    if session_id.startswith("s_") and session_id[2:].isdigit():
        return int(session_id[2:])
    return None


class StoredEvent(FrozenRecord):
    """One ``events`` row, decoded."""

    __slots__ = ("global_seq", "stream", "stream_seq", "id", "kind", "ts", "turn_id", "body")
    global_seq: int
    stream: str
    stream_seq: int
    id: str
    kind: str
    ts: int
    turn_id: int | None
    body: EventBody

    def __init__(self, global_seq: int, stream: str, stream_seq: int, id: str, kind: str, ts: int,  # noqa: A002
                 turn_id: int | None, body: EventBody) -> None:
        _set = object.__setattr__
        _set(self, "global_seq", global_seq)
        _set(self, "stream", stream)
        _set(self, "stream_seq", stream_seq)
        _set(self, "id", id)
        _set(self, "kind", kind)
        _set(self, "ts", ts)
        _set(self, "turn_id", turn_id)
        _set(self, "body", body)


class SessionRow(FrozenRecord):
    """One ``streams`` registry row (the session list's unit)."""

    __slots__ = ("n", "model", "created_at", "updated_at", "last_seq", "msg_count", "account", "agent_id", "agent_version",
                 "correlation_id")
    n: int
    model: str
    created_at: int
    updated_at: int
    last_seq: int
    msg_count: int
    account: str | None
    agent_id: str | None
    agent_version: str | None
    correlation_id: str | None

    def __init__(self, n: int, model: str, created_at: int, updated_at: int, last_seq: int, msg_count: int,
                 account: str | None = None, agent_id: str | None = None, agent_version: str | None = None,
                 correlation_id: str | None = None) -> None:
        _set = object.__setattr__
        _set(self, "n", n)
        _set(self, "model", model)
        _set(self, "created_at", created_at)
        _set(self, "updated_at", updated_at)
        _set(self, "last_seq", last_seq)
        _set(self, "msg_count", msg_count)
        _set(self, "account", account)
        _set(self, "agent_id", agent_id)
        _set(self, "agent_version", agent_version)
        _set(self, "correlation_id", correlation_id)

    @property
    def id(self) -> str:
        return f"s_{self.n}"

    @property
    def context(self) -> dict[str, str | None]:
        return {
            "account": self.account,
            "agent_id": self.agent_id,
            "agent_version": self.agent_version,
            "correlation_id": self.correlation_id,
        }




def stored_event(gs: int, stream: str, sseq: int, eid: object, kind: str, ts: object, turn_id: object,
                 body: "EventBody") -> StoredEvent:
    """A decoded ``events`` row, its loose columns coerced as every read coerces them."""
    return StoredEvent(gs, stream, sseq, as_text(eid) or "", kind, as_int(ts), turn_id if type(turn_id) is int else None, body)


def valid_event_row(gs: object, stream: object, sseq: object, kind: object, payload: object) -> bool:
    """Whether a row has the values decoding needs (else it is skipped and counted): a text
    payload and kind, integer sequence numbers, a text stream."""
    return isinstance(payload, str) and isinstance(kind, str) and type(sseq) is int and type(gs) is int \
        and isinstance(stream, str)


class NotUTF8(StoreError):
    """:meth:`StoreReader.scan` met a TEXT cell that is not UTF-8: scan again with ``tolerant=True``."""



def as_int(v: object, default: int = 0) -> int:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    if isinstance(v, float) and math.isfinite(v):
        return int(v)
    return default


def as_text(v: object, default: str | None = "") -> str | None:
    if isinstance(v, str):
        return v
    if v is None:
        return default
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def session_row_from(r: tuple) -> SessionRow | None:
    """A registry row with every column coerced to its type (NULLs, BLOBs, wrong types); None
    when even the session number is unusable."""
    n = r[0]
    if not isinstance(n, int) or isinstance(n, bool):
        return None
    return SessionRow(n, as_text(r[1]) or "", as_int(r[2]), as_int(r[3]), as_int(r[4]), as_int(r[5]),
                      *(as_text(v, None) for v in r[6:10]))
