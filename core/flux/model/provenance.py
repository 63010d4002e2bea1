"""Where a session came from, when ``flux import`` made it: the ``import_source`` event it carries
(format, producer version, file hash, the kept source — see ``docs/import.md``), read here for the
verbs that must treat such a session differently."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from ..errors import FluxError
from ..store.store import StoreReader

__all__ = ["SOURCE_EVENT", "PROXY_EVENT", "import_sources", "find_import", "source_of", "proxy_calls", "refuse_redrive"]

SOURCE_EVENT = "import_source"  # the name of the custom event that records where a session came from
PROXY_EVENT = "proxy_call"  # the custom event that keeps one model call ``flux proxy`` forwarded


def import_sources(reader: StoreReader, file_hash: Optional[str] = None) -> list[tuple[str, dict]]:
    """``(session, payload)`` of every ``import_source`` event in the store (of one file, by hash)."""
    like = f'%"{file_hash}"%' if file_hash else "%"
    rows = reader.query("SELECT stream, payload FROM events WHERE kind = 'custom' AND payload LIKE ? "
                        "ORDER BY global_seq", (like,))
    out = []
    for stream, payload in rows:
        try:
            body = json.loads(payload)
        except (TypeError, ValueError):
            continue
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict) or data.get("name") != SOURCE_EVENT or not isinstance(data.get("payload"), dict):
            continue
        if file_hash is not None and data["payload"].get("file_hash") != file_hash:
            continue
        out.append((stream, data["payload"]))
    return out


def find_import(store_dir: Path, file_hash: str) -> Optional[str]:
    """The root session an earlier import of the file with this hash created, if the store has one."""
    if not (Path(store_dir) / "events.db").exists():
        return None
    with StoreReader(store_dir) as reader:
        for stream, payload in import_sources(reader, file_hash):
            if payload.get("root"):
                return stream
    return None


def source_of(reader: StoreReader, session_id: str) -> Optional[dict]:
    """The ``import_source`` payload of a session, or ``None`` for a session this runtime recorded."""
    rows = reader.query("SELECT payload FROM events WHERE stream = ? AND kind = 'custom' ORDER BY stream_seq DESC",
                        (session_id,))
    for (payload,) in rows:
        try:
            data = json.loads(payload).get("data")
        except (TypeError, ValueError, AttributeError):
            continue
        if isinstance(data, dict) and data.get("name") == SOURCE_EVENT and isinstance(data.get("payload"), dict):
            return data["payload"]
    return None


def refuse_redrive(reader: StoreReader, session_id: str, what: str) -> None:
    """Refuse, in one :class:`FluxError` line, ``what`` (a verb that would run this runtime's agent
    loop on the session) when the session was imported: its turns were made by another agent's
    loop, and ours driving them on would only pretend to be it."""
    payload = source_of(reader, session_id)
    if payload is None:
        return
    fmt = payload.get("format", "foreign")
    raise FluxError(f"{session_id} was imported from a {fmt} log: {what} would re-drive another agent's loop with this "
                    f"runtime's, so it is not done — browse, diff, replay or export it, or test it: "
                    f"flux record NAME --from-import {session_id}")


def proxy_calls(reader: StoreReader, session_id: str) -> list[dict]:
    """The ``proxy_call`` payloads of a session, in the order they were recorded."""
    out = []
    for (payload,) in reader.query("SELECT payload FROM events WHERE stream = ? AND kind = 'custom' ORDER BY stream_seq",
                                   (session_id,)):
        try:
            data = json.loads(payload).get("data")
        except (TypeError, ValueError, AttributeError):
            continue
        if isinstance(data, dict) and data.get("name") == PROXY_EVENT and isinstance(data.get("payload"), dict):
            out.append(data["payload"])
    return out
