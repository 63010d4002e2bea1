"""Fixture stores: where bundles are kept. One interface, four places: ``memory:``, a directory
(a path or ``file://``), PostgreSQL (:mod:`.postgres`) and S3 (:mod:`.s3`); :mod:`.locate` says which.

A bundle is kept as its compressed canonical bytes under its hash plus a small summary (what ``list``
shows). ``put`` of a kept hash writes nothing; ``get`` re-hashes what it reads (``bundle_corrupt``,
``bundle_missing``).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from ..errors import FluxError
from .bundle import Bundle, check_hash, compress, decode_bundle, is_hash
from .errors import CaseRefusal

__all__ = ["StoredCase", "FixtureStore", "MemoryStore", "FileStore", "keep_hashes", "missing"]

BLOB_SUFFIX = ".case"
SUMMARY_SUFFIX = ".summary.json"


@dataclass(frozen=True)
class StoredCase:
    """One row of ``list``: the hash, the stored (compressed) size and the bundle's summary."""

    hash: str
    stored_bytes: int
    summary: dict

    def to_json(self) -> dict:
        return {"fixture_hash": self.hash, "stored_bytes": self.stored_bytes, **self.summary}


def missing(h: str, url: str) -> CaseRefusal:
    return CaseRefusal("bundle_missing", f"no bundle {h} in {url} — list what it holds with `flux case list`")


class FixtureStore:
    """The interface every fixture store implements (the blob and summary primitives; the rest is
    shared)."""

    url: str = ""

    # -- the primitives --------------------------------------------------------------------------
    def has(self, h: str) -> bool:
        raise NotImplementedError

    def _write(self, h: str, blob: bytes, summary: dict) -> None:
        raise NotImplementedError

    def read_blob(self, h: str) -> bytes:
        """The stored bytes of ``h`` (``bundle_missing`` if absent)."""
        raise NotImplementedError

    def entries(self) -> list[StoredCase]:
        raise NotImplementedError

    def _remove(self, h: str) -> bool:
        raise NotImplementedError

    def close(self) -> None:
        pass

    # -- shared ----------------------------------------------------------------------------------
    def put(self, bundle: Bundle) -> bool:
        """Keep ``bundle``; False (and nothing written) when its hash is already kept."""
        if self.has(bundle.hash):
            return False
        self._write(bundle.hash, compress(bundle.data), bundle.summary())
        return True

    def put_blob(self, blob: bytes) -> tuple[Bundle, bool]:
        """Import bytes (compressed or JSON): validated and re-hashed first."""
        b = decode_bundle(blob)
        return b, self.put(b)

    def get(self, h: str) -> Bundle:
        check_hash(h)
        return decode_bundle(self.read_blob(h), expect_hash=h)

    def list(self) -> list[StoredCase]:
        return sorted(self.entries(), key=lambda e: e.hash)

    def delete(self, h: str) -> bool:
        check_hash(h)
        return self._remove(h)

    def __enter__(self) -> "FixtureStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MemoryStore(FixtureStore):
    """``memory:`` — nothing outlives the object."""

    def __init__(self) -> None:
        self.url = "memory:"
        self._blobs: dict[str, tuple[bytes, dict]] = {}

    def has(self, h: str) -> bool:
        return h in self._blobs

    def _write(self, h: str, blob: bytes, summary: dict) -> None:
        self._blobs[h] = (blob, json.loads(json.dumps(summary)))

    def read_blob(self, h: str) -> bytes:
        try:
            return self._blobs[h][0]
        except KeyError:
            raise missing(h, self.url) from None

    def entries(self) -> list[StoredCase]:
        return [StoredCase(h, len(b), dict(s)) for h, (b, s) in self._blobs.items()]

    def _remove(self, h: str) -> bool:
        return self._blobs.pop(h, None) is not None


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class FileStore(FixtureStore):
    """A directory: ``<hash>.case`` (gzip of the canonical bytes) and ``<hash>.summary.json``, each
    written to a temp file and renamed, so a reader never sees half a bundle. A directory in git
    is a team's shared store."""

    def __init__(self, path: str | os.PathLike[str]):
        p = Path(path).expanduser()
        if not p.is_absolute():
            p = Path.cwd() / p
        if p.exists() and not p.is_dir():
            raise FluxError(f"fixture store {p} is a file — give a directory (it is created if missing)")
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise FluxError(f"cannot create the fixture store {p}: {e.strerror or e}") from None
        self.dir = p
        self.url = p.as_uri()

    def _blob(self, h: str) -> Path:
        return self.dir / (h + BLOB_SUFFIX)

    def _summary(self, h: str) -> Path:
        return self.dir / (h + SUMMARY_SUFFIX)

    def has(self, h: str) -> bool:
        return self._blob(h).is_file()

    def _write(self, h: str, blob: bytes, summary: dict) -> None:
        try:
            _atomic_write(self._summary(h), json.dumps(summary, sort_keys=True).encode("utf-8"))
            _atomic_write(self._blob(h), blob)
        except OSError as e:
            raise FluxError(f"cannot write to the fixture store {self.dir}: {e.strerror or e}") from None

    def read_blob(self, h: str) -> bytes:
        try:
            return self._blob(h).read_bytes()
        except FileNotFoundError:
            raise missing(h, self.url) from None
        except OSError as e:
            raise FluxError(f"cannot read {self._blob(h)}: {e.strerror or e}") from None

    def entries(self) -> list[StoredCase]:
        out = []
        for entry in os.scandir(self.dir):
            name = entry.name
            if not name.endswith(BLOB_SUFFIX) or not is_hash(name[: -len(BLOB_SUFFIX)]):
                continue
            h = name[: -len(BLOB_SUFFIX)]
            size = entry.stat().st_size
            try:
                summary = json.loads(self._summary(h).read_bytes())
                if not isinstance(summary, dict):
                    raise ValueError
            except (OSError, ValueError):
                try:  # no or a damaged summary: read it off the bundle itself
                    summary = decode_bundle(self.read_blob(h), expect_hash=h).summary()
                except CaseRefusal as e:
                    summary = {"error": f"{e.code}: {e.message}"}
            out.append(StoredCase(h, size, summary))
        return out

    def _remove(self, h: str) -> bool:
        found = self._blob(h).exists()
        self._blob(h).unlink(missing_ok=True)
        self._summary(h).unlink(missing_ok=True)
        return found


def keep_hashes(keep: Iterable[str], files: Iterable[str | os.PathLike[str]]) -> set[str]:
    """The hashes ``gc`` keeps: each ``--keep`` and every non-blank, non-``#`` line of each keep
    file (``invalid_keep_hash`` for anything that is not a hash)."""
    out: set[str] = set()
    for h in keep:
        out.add(check_hash(h, "invalid_keep_hash"))
    for f in files:
        try:
            text = Path(f).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise FluxError(f"cannot read the keep file {f}: {getattr(e, 'strerror', None) or e}") from None
        for line in text.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                out.add(check_hash(line, "invalid_keep_hash"))
    return out
