"""The Python API of saved cases (what the CLI verbs and the pytest fixture call): :func:`save_case`
and :func:`run_case`.

A case is named by its hash (looked up in the fixture store) or by a bundle file (a ``.case`` blob or
an exported ``.json``), which needs no store. Usage: docs/cases.md ("Python").
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional

from ..errors import FluxError
from .bundle import Bundle, check_hash, compress, decode_bundle, is_hash, max_bundle_bytes, readable_json
from .capture import capture_case
from .errors import CaseRefusal
from .locate import open_fixture_store
from .run import CaseOutcome, RunOptions, run_bundle
from .stores import FixtureStore, StoredCase, keep_hashes

__all__ = ["SavedCase", "save_case", "load_case", "run_case", "export_case", "import_case", "list_cases",
           "delete_case", "gc_cases", "read_case_file"]


@dataclass(frozen=True)
class SavedCase:
    bundle: Bundle
    stored: bool  # False: the store already held this hash (one copy)
    store_url: str

    @property
    def hash(self) -> str:
        return self.bundle.hash

    def to_json(self) -> dict:
        s = self.bundle.summary()
        return {"fixture_hash": self.hash, "fixture_store": self.store_url, "stored": self.stored,
                "manifest_summary": s}


def _store(fixture_store: Any) -> tuple[FixtureStore, bool]:
    """(store, opened here) — a store object is used as it is, a URL (or None: the environment)
    is opened."""
    if isinstance(fixture_store, FixtureStore):
        return fixture_store, False
    return open_fixture_store(fixture_store), True


def save_case(store_dir: str | os.PathLike[str], session: str, *, at: Optional[int] = None,
              fork_after_seq: Optional[int] = None, kind: Optional[str] = None, turn: Optional[int] = None,
              target_name: Optional[str] = None, fixture_store: Any = None) -> SavedCase:
    st, own = _store(fixture_store)
    try:
        bundle = capture_case(store_dir, session, at=at, fork_after_seq=fork_after_seq, kind=kind, turn=turn,
                              target_name=target_name)
        limit = max_bundle_bytes()
        if bundle.size > limit:
            raise CaseRefusal("bundle_too_large", f"the bundle is {bundle.size} bytes, over the {limit}-byte limit — "
                                                  f"save a shorter turn or raise FLUX_CASE_MAX_BYTES")
        return SavedCase(bundle, st.put(bundle), st.url)
    finally:
        if own:
            st.close()


def read_case_file(path: str | os.PathLike[str]) -> Bundle:
    p = Path(path).expanduser()
    try:
        size = p.stat().st_size
        if size > max_bundle_bytes():
            raise CaseRefusal("bundle_corrupt", f"{p} is over the bundle size limit — not a bundle")
        return decode_bundle(p.read_bytes())
    except OSError as e:
        raise FluxError(f"cannot read {p}: {e.strerror or e}") from None


def load_case(ref: str | os.PathLike[str], *, fixture_store: Any = None) -> Bundle:
    """A bundle by hash (from the store) or by file."""
    text = os.fspath(ref)
    if not is_hash(text) and (Path(text).expanduser().is_file() or text.endswith((".case", ".json"))):
        return read_case_file(text)
    check_hash(text)
    st, own = _store(fixture_store)
    try:
        return st.get(text)
    finally:
        if own:
            st.close()


def run_case(ref: str | os.PathLike[str] | Bundle, *, replay_only: bool = False, fixture_store: Any = None,
             **options: Any) -> CaseOutcome:
    """Run a case (:mod:`.run`); ``options`` are :class:`~flux.cases.run.RunOptions` fields."""
    bundle = ref if isinstance(ref, Bundle) else load_case(ref, fixture_store=fixture_store)
    return run_bundle(bundle, RunOptions(replay_only=replay_only, **options))


def export_case(h: str, out: str | os.PathLike[str], *, as_json: bool = False, fixture_store: Any = None) -> Bundle:
    bundle = load_case(check_hash(h), fixture_store=fixture_store)
    data = readable_json(bundle) if as_json else compress(bundle.data)
    p = Path(out).expanduser()
    tmp = p.with_name(f".{p.name}.tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, p)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise FluxError(f"cannot write {p}: {e.strerror or e}") from None
    return bundle


def import_case(path: str | os.PathLike[str], *, fixture_store: Any = None) -> SavedCase:
    bundle = read_case_file(path)
    st, own = _store(fixture_store)
    try:
        return SavedCase(bundle, st.put(bundle), st.url)
    finally:
        if own:
            st.close()


def list_cases(*, fixture_store: Any = None) -> list[StoredCase]:
    st, own = _store(fixture_store)
    try:
        return st.list()
    finally:
        if own:
            st.close()


def delete_case(h: str, *, fixture_store: Any = None) -> bool:
    st, own = _store(fixture_store)
    try:
        if not st.delete(check_hash(h)):
            raise CaseRefusal("bundle_missing", f"no bundle {h} in {st.url} — nothing deleted")
        return True
    finally:
        if own:
            st.close()


def gc_cases(keep: Iterable[str] = (), keep_files: Iterable[str | os.PathLike[str]] = (), *, yes: bool = False,
             fixture_store: Any = None) -> tuple[list[str], list[str]]:
    """``(candidates, deleted)``: every bundle not kept is a candidate; only ``yes`` deletes them."""
    kept = keep_hashes(keep, keep_files)
    st, own = _store(fixture_store)
    try:
        candidates = [e.hash for e in st.list() if e.hash not in kept]
        deleted = [h for h in candidates if yes and st.delete(h)]
        return candidates, deleted
    finally:
        if own:
            st.close()
