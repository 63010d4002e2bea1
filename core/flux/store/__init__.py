"""The flux store: SQLite event log + flow store in a ``Storage::dir`` (spec §1, §2)."""

from .events import *  # noqa: F401,F403
from .events import __all__ as _events_all
from .store import SessionRow, StoredEvent, StoreReader, StoreWriter, default_store_dir, session_number

__all__ = list(_events_all) + ["SessionRow", "StoredEvent", "StoreReader", "StoreWriter", "default_store_dir", "session_number"]
