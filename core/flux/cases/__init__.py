"""Saved cases: a recorded turn frozen at a fork point into one content-hashed bundle, kept in a
fixture store a team shares, and re-run against changed code with every call resolved down a ladder
(reused, simulated, live within a budget, or a clean stop with a reason code). See docs/cases.md.
"""

from __future__ import annotations

from .api import (
    SavedCase, delete_case, export_case, gc_cases, import_case, list_cases, load_case, read_case_file, run_case, save_case,
)
from .bundle import Bundle, bundle_hash, canonical_bytes, decode_bundle, readable_json
from .capture import capture_case
from .errors import REASON_CODES, CaseRefusal
from .locate import open_fixture_store, resolve_store_url
from .run import CallLine, CaseOutcome, RunOptions
from .stores import FileStore, FixtureStore, MemoryStore, StoredCase, keep_hashes
from .supply import Supplied, load_supply

__all__ = [
    "SavedCase", "save_case", "load_case", "run_case", "export_case", "import_case", "list_cases", "delete_case",
    "gc_cases", "read_case_file", "CallLine", "CaseOutcome", "RunOptions",
    "Bundle", "bundle_hash", "canonical_bytes", "decode_bundle", "readable_json", "capture_case", "REASON_CODES",
    "CaseRefusal", "open_fixture_store", "resolve_store_url", "FileStore", "FixtureStore", "MemoryStore",
    "StoredCase", "keep_hashes", "Supplied", "load_supply",
]
