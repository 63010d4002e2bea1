"""Where a store is: a directory, or a Postgres URL and the local directory that stands for it (its
``postgres.url`` and the files flux keeps beside ``events.db``: docs/store-format.md, "What is not in
Postgres")."""

from __future__ import annotations

import binascii
import os
import re
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from ..errors import StoreError

__all__ = ["URL_FILE", "is_store_url", "store_location", "postgres_url", "redacted_url", "url_schema",
           "local_dir_for", "default_store_dir", "STORE_URL_ENV"]

URL_FILE = "postgres.url"
STORE_URL_ENV = "FLUX_STORE_URL"
LOCAL_DIR_ENV = "FLUX_PG_LOCAL_DIR"
_SCHEMES = ("postgres://", "postgresql://")
_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}")


def is_store_url(value: object) -> bool:
    """Whether ``value`` (a string, not a path: a ``Path`` folds the ``//``) is a Postgres URL."""
    return isinstance(value, str) and value.lower().startswith(_SCHEMES)


def redacted_url(url: str) -> str:
    """The URL without its password (what messages and file names show)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{parts.username or ''}:***@{host}", parts.path, parts.query, parts.fragment))


def url_schema(url: str) -> str | None:
    """The ``?schema=NAME`` of a store URL (None: the server's search_path, ``public``)."""
    for key, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        if key == "schema":
            if not _SCHEMA_NAME.fullmatch(value):
                raise StoreError(f"?schema={value!r} is not a schema name — use letters, digits and _ "
                                 "(starting with a letter or _, at most 63)")
            return value
    return None


def check_url(url: str) -> str:
    """``url`` if it names a database (host or socket, and a database name); else a one-line error."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError on a port that is not a number)
    except ValueError as e:
        raise StoreError(f"{redacted_url(url)} is not a valid postgres:// URL ({e})") from None
    if not parts.path.strip("/"):
        raise StoreError(f"{redacted_url(url)} names no database — use postgres://user@host:port/DBNAME")
    url_schema(url)
    return url


def local_dir_for(url: str) -> Path:
    """The local directory that stands for the store at ``url``:
    ``$FLUX_PG_LOCAL_DIR/<user>@<host>_<port>_<db>_<schema>-<hash>``."""
    parts = urlsplit(url)
    base = os.environ.get(LOCAL_DIR_ENV) or str(Path.home() / ".cache" / "flux-tui" / "postgres")
    schema = url_schema(url) or "public"
    name = f"{unquote(parts.username or '')}@{parts.hostname or 'local'}_{parts.port or 5432}_" \
           f"{unquote(parts.path.strip('/'))}_{schema}"
    name = re.sub(r"[^A-Za-z0-9@._-]", "_", name)[:80]
    digest = f"{binascii.crc32(redacted_url(url).encode()):08x}"  # (no hashlib: listing sessions hashes nothing)
    return Path(base).expanduser() / f"{name}-{digest}"


def store_location(value: "str | os.PathLike[str]") -> Path:
    """The local directory for a ``--store`` value: the directory itself, or a Postgres URL's local
    directory (made, with its ``postgres.url``, on first use)."""
    if not is_store_url(value):
        return Path(value).expanduser()
    url = check_url(str(value))
    d = local_dir_for(url)
    marker = d / URL_FILE
    try:
        if not marker.is_file() or marker.read_text(encoding="utf-8").strip() != url:
            d.mkdir(parents=True, exist_ok=True)
            tmp = d / f".{URL_FILE}.{os.getpid()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(url + "\n")
            os.replace(tmp, marker)
    except OSError as e:
        raise StoreError(f"cannot make the local directory {d} of {redacted_url(url)} ({e.strerror or e}) — "
                         f"set ${LOCAL_DIR_ENV} to a writable directory") from None
    return d


def postgres_url(path: "str | os.PathLike[str]") -> str | None:
    """The URL a store's local directory stands for; None for a store directory."""
    marker = Path(path) / URL_FILE
    try:
        if not marker.is_file():
            return None
        text = marker.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if is_store_url(text) else None


def default_store_dir() -> Path:
    """``$FLUX_STORE_DIR`` if set and non-empty (a directory or a URL), else ``$FLUX_STORE_URL``,
    else ``~/.flux`` — where flux looks."""
    env = os.environ.get("FLUX_STORE_DIR", "") or os.environ.get(STORE_URL_ENV, "")
    return store_location(env) if env else Path.home() / ".flux"
