"""A session's durable symbol bindings in a store's ``flow.db``, rows written as flux writes them
(the row format: docs/store-format.md, "Session bindings"; which bindings the interpreter keeps:
:mod:`flux.lang.session`). Each read or bind opens its own short connection."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable, Optional

from ..errors import StoreError

__all__ = ["FlowDbBindings", "to_flux_value", "from_flux_value"]


def to_flux_value(v: Any) -> Any:
    """A natural JSON value as flux's externally tagged ``Value``."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return {"bool": v}
    if isinstance(v, (int, float)):
        return {"number": float(v)}
    if isinstance(v, str):
        return {"string": v}
    if isinstance(v, (list, tuple)):
        return {"list": [to_flux_value(x) for x in v]}
    if isinstance(v, dict):
        return {"struct": {str(k): to_flux_value(x) for k, x in sorted(v.items())}}
    return {"string": str(v)}


def from_flux_value(d: Any) -> Any:
    """flux's ``Value`` JSON back to a natural value (a ``ref`` or unknown tag: None)."""
    if d == "null" or d is None:
        return None
    if isinstance(d, dict) and len(d) == 1:
        (tag, x), = d.items()
        if tag == "string" and isinstance(x, str):
            return x
        if tag == "bool" and isinstance(x, bool):
            return x
        if tag == "number" and isinstance(x, (int, float)) and not isinstance(x, bool):
            return int(x) if float(x).is_integer() and abs(x) < 2 ** 53 else float(x)
        if tag == "list" and isinstance(x, list):
            return [from_flux_value(i) for i in x]
        if tag == "struct" and isinstance(x, dict):
            return {k: from_flux_value(i) for k, i in x.items()}
        if tag == "thing" and isinstance(x, dict):
            return x
    return None


class FlowDbBindings:
    """:class:`flux.lang.session.SessionBindings` over ``<store>/flow.db`` for one session."""

    def __init__(self, store_dir: str | os.PathLike[str], session_id: str,
                 now: Optional[Callable[[], int]] = None):
        self.path = Path(store_dir).expanduser() / "flow.db"
        self.session_id = session_id
        self._now = now or (lambda: int(time.time() * 1000))

    def _db(self) -> sqlite3.Connection:
        """A connection for one operation (bindings are rare: a `parallel`, a throttle or debounce
        statement — not worth a connection held open for the object's lifetime)."""
        if not self.path.is_file():
            raise StoreError(f"{self.path} is missing — the session's bindings need the store's flow.db")
        try:
            conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=5.0)
            conn.execute("PRAGMA busy_timeout = 5000")
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: {e}") from None
        return conn

    def get(self, name: str) -> Optional[Any]:
        db = self._db()
        try:
            row = db.execute(
                "SELECT v.data FROM symbols s JOIN values_store v ON v.n = CAST(substr(s.value_id, 3) AS INTEGER) "
                "WHERE s.session_id = ? AND s.name = ? AND s.value_id LIKE 'v\\_%' ESCAPE '\\'",
                (self.session_id, name)).fetchone()
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: {e}") from None
        finally:
            db.close()
        if row is None:
            return None
        try:
            return from_flux_value(json.loads(row[0]))
        except (TypeError, ValueError):
            return None

    def bind(self, name: str, value: Any, *, hidden: bool = False, summary: str = "") -> None:
        data = json.dumps(to_flux_value(value), ensure_ascii=False, separators=(",", ":"))
        now = self._now()
        db = self._db()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                cur = db.execute("INSERT INTO values_store (session_id, data, bytes, created_at) VALUES (?, ?, ?, ?)",
                                 (self.session_id, data, len(data.encode("utf-8")), now))
                db.execute(
                    "INSERT INTO symbols (session_id, name, value_id, ty, summary, visibility, updated_at) "
                    "VALUES (?, ?, ?, NULL, ?, ?, ?) ON CONFLICT (session_id, name) DO UPDATE SET "
                    "value_id = excluded.value_id, ty = NULL, summary = excluded.summary, "
                    "visibility = excluded.visibility, updated_at = excluded.updated_at",
                    (self.session_id, name, f"v_{cur.lastrowid}", summary, "hidden" if hidden else "visible", now))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: {e}") from None
        finally:
            db.close()
