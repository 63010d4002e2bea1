"""The store's public face: ``StoreReader(location)`` / ``StoreWriter(location)`` open whichever
backend holds a store — a flux ``Storage::dir`` (SQLite: :mod:`flux.store.sqlite_reader`,
:mod:`flux.store.sqlite_writer`) or a Postgres database (:mod:`flux.store.postgres`) — and the
row records every backend returns (:mod:`flux.store.rows`). Importing this module registers both
backends; psycopg is imported only when a Postgres store is opened.
"""

from __future__ import annotations

from . import postgres as _postgres_backend  # noqa: F401  (registers the Postgres backend first)
from . import sqlite_reader as _sqlite_reader  # noqa: F401  (registers the SQLite reader)
from . import sqlite_writer as _sqlite_writer  # noqa: F401  (registers the SQLite writer)
from .reader import StoreReader, guard_json_extract
from .location import default_store_dir, is_store_url, store_location
from .rows import NotUTF8, SessionRow, StoredEvent, as_int, as_text, session_number, stored_event, valid_event_row
from .sqlite_files import EVENTS_DB, FLOW_DB, store_error
from .sqlite_writer import remove_stale_creating, set_lock_wait_notice
from .writer import StoreWriter

__all__ = [
    "StoredEvent", "SessionRow", "StoreReader", "StoreWriter", "default_store_dir", "session_number", "store_error",
    "stored_event", "valid_event_row", "NotUTF8", "set_lock_wait_notice", "guard_json_extract", "as_int", "as_text",
    "EVENTS_DB", "FLOW_DB", "is_store_url", "store_location", "remove_stale_creating",
]
