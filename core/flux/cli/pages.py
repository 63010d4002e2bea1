"""Writing review pages from the CLI: `flux export S -o run.html` (and `--family` for a folder of
pages whose links resolve) and `flux diff A B -o diff.html`."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

from ..errors import FluxError
from ..model.pricing import load_price_table
from ..pages.diff_page import render_diff_page
from ..pages.html import Scrub
from ..pages.run_page import family_ids, page_name, render_run_page
from ..store.store import StoreReader

__all__ = ["export_format", "run_page_text", "write_family_pages", "write_diff_page", "write_atomically"]


def export_format(fmt: Optional[str], output: Optional[Path], family: bool = False,
                  endpoint: Optional[str] = None) -> str:
    """The format asked for, else the one the output's suffix names (a family is pages, an
    endpoint takes spans)."""
    if fmt:
        if family and fmt != "html":
            raise FluxError("--family writes HTML pages: drop --format or say --format html")
        if endpoint is not None and fmt != "otel":
            raise FluxError("--endpoint sends OpenTelemetry spans: drop --format or say --format otel")
        return fmt
    if family:
        return "html"
    if endpoint is not None:
        return "otel"
    suffix = output.suffix.lower() if output is not None else ""
    if suffix in (".html", ".htm"):
        return "html"
    if suffix == ".json":
        return "atif"
    raise FluxError("say which format: --format html|atif|otel, or -o FILE.html / FILE.json")


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a temp file beside it, then a rename)."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    except OSError as e:
        raise FluxError(f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        os.unlink(tmp)
        raise FluxError(f"cannot write {path}: {e.strerror or e}") from None
    except BaseException:
        os.unlink(tmp)
        raise


def run_page_text(reader: StoreReader, session: str, store_dir: Optional[Path] = None) -> str:
    """The page of ``session``, priced with the table ``flux sessions`` uses for this store."""
    return render_run_page(reader, session, load_price_table(store_dir=store_dir), Scrub())


def write_family_pages(reader: StoreReader, session: str, folder: Optional[Path],
                       store_dir: Optional[Path] = None) -> list[Path]:
    """One page per session of ``session``'s family into ``folder``, so the family tree's links
    resolve. Returns the files written."""
    if folder is None:
        raise FluxError("--family writes one page per session: give the folder with -o DIR")
    if folder.exists() and not folder.is_dir():
        raise FluxError(f"--family writes a folder of pages, and {folder} is a file: give -o DIR")
    folder.mkdir(parents=True, exist_ok=True)
    prices = load_price_table(store_dir=store_dir)
    scrub = Scrub()
    written = []
    for row in family_ids(reader, session):
        path = folder / page_name(row.id)
        write_atomically(path, render_run_page(reader, row.id, prices, scrub))
        written.append(path)
    return written


def write_diff_page(d, output: Path, *, a_label: str, b_label: str) -> None:
    write_atomically(output, render_diff_page(d, Scrub(), a_label=a_label, b_label=b_label))
