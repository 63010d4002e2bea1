"""Which fixture store a URL names, and which URL is in force.

The store is the one given (``--fixture-store``), else ``FLUX_FIXTURE_STORE``, else
``FLUX_POSTGRES_DSN``; with none, every verb refuses with ``no_fixture_store``.
"""

from __future__ import annotations

import os
from typing import Mapping, Optional
from urllib.parse import unquote, urlsplit

from ..errors import FluxError
from .errors import CaseRefusal
from .postgres import PostgresStore
from .s3 import S3Store
from .stores import FileStore, FixtureStore, MemoryStore

__all__ = ["ENV_STORE", "ENV_DSN", "resolve_store_url", "open_fixture_store"]

ENV_STORE = "FLUX_FIXTURE_STORE"
ENV_DSN = "FLUX_POSTGRES_DSN"


def resolve_store_url(given: Optional[str], env: Mapping[str, str] | None = None) -> str:
    """``--fixture-store``, else ``FLUX_FIXTURE_STORE``, else ``FLUX_POSTGRES_DSN``."""
    env = os.environ if env is None else env
    for v in (given, env.get(ENV_STORE), env.get(ENV_DSN)):
        if v is not None and v.strip():
            return v.strip()
    raise CaseRefusal("no_fixture_store", f"no fixture store — pass --fixture-store URL (a directory, memory:, "
                                          f"postgres://…, s3://…) or set {ENV_STORE} or {ENV_DSN}")


def open_fixture_store(given: Optional[str] = None, env: Mapping[str, str] | None = None) -> FixtureStore:
    """The fixture store a URL (or the environment) names."""
    url = resolve_store_url(given, env)
    if url == "memory:":
        return MemoryStore()
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    if scheme in ("postgres", "postgresql"):
        return PostgresStore(url)
    if scheme == "s3":
        return S3Store(url)
    if scheme == "file":
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise FluxError(f"{url}: a file:// fixture store is a local directory (file:///abs/path)")
        return FileStore(unquote(parts.path))
    if scheme:
        raise FluxError(f"fixture store {url!r}: unknown scheme {scheme}:// — use a directory, file:///abs, "
                        f"memory:, postgres://… or s3://bucket/prefix")
    return FileStore(url)
