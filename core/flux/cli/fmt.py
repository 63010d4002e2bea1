"""``flux fmt FILE...``: Flux-Lang files in the canonical spelling, comments and the author's order of
named arguments kept (:mod:`flux.lang.source_format`); ``--check`` for CI, ``--write`` in place."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path
from typing import Optional

import click

from ..errors import FluxError
from ..lang.parser import ParseError
from ..lang.source_format import SourceFormatError, format_source
from . import main
from .common import fail, handle_errors, json_out, redacted_error
from .pages import write_atomically

#: how many lines of a would-be rewrite `--check` shows per file
_DIFF_LINES = 40


def _read(name: str) -> str:
    """The text of FILE (``-``: standard input), or a :class:`FluxError` saying why not."""
    if name == "-":
        data = sys.stdin.buffer.read()
    else:
        path = Path(name)
        if path.is_dir():
            raise FluxError("is a directory: give the .flux files in it")
        try:
            data = path.read_bytes()
        except OSError as e:
            raise FluxError(e.strerror or str(e)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FluxError("is not UTF-8 text") from None


def _diff(name: str, before: str, after: str) -> list[str]:
    """The changed lines of a rewrite, ``-`` old and ``+`` new, at most :data:`_DIFF_LINES` of them."""
    lines = [ln.rstrip("\n") for ln in difflib.unified_diff(
        before.splitlines(True), after.splitlines(True), fromfile=name, tofile=name, n=0)]
    lines = [ln for ln in lines[2:] if not ln.startswith("@@")]
    if len(lines) > _DIFF_LINES:
        lines = lines[:_DIFF_LINES] + [f"… {len(lines) - _DIFF_LINES} more changed line(s)"]
    return lines


@main.command("fmt")
@click.argument("files", nargs=-1, required=True)
@click.option("--check", is_flag=True, help="Write nothing; list the files that are not canonical (with what would "
                                             "change) and exit 1 if there are any.")
@click.option("--write", is_flag=True, help="Rewrite the files that are not canonical in place.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: each file, canonical or not, written or not.")
@handle_errors
def fmt_cmd(files: tuple[str, ...], check: bool, write: bool, as_json: bool) -> None:
    """Format Flux-Lang FILEs: canonical spellings, every comment and the order of named arguments kept.

    Without --check or --write the formatted text is printed (FILE `-` reads standard input). Module
    declarations are kept as written; the result always reads back as the same flows. A file that
    does not parse is one error line, and the other files are still formatted (exit 1 at the end).
    """
    if check and write:
        fail("--check writes nothing and --write rewrites: choose one")
    if files.count("-") > 1 or (write and "-" in files):
        fail("standard input (`-`) can be given once, and not with --write")
    report: list[dict] = []
    bad = False
    for name in files:
        entry: dict = {"path": name, "canonical": None, "written": False, "error": None}
        report.append(entry)
        try:
            text = _read(name)
            formatted = format_source(text)
        except (FluxError, ParseError, SourceFormatError) as e:
            entry["error"] = redacted_error(str(e))
            bad = True
            if not as_json:
                click.echo(f"error: {name}: {entry['error']}", err=True)
            continue
        entry["canonical"] = formatted == text
        if check:
            if not entry["canonical"] and not as_json:
                click.echo(f"{name}: not canonical", err=True)
                for line in _diff(name, text, formatted):
                    click.echo(f"  {line}", err=True)
        elif write:
            if not entry["canonical"]:
                try:
                    write_atomically(Path(name), formatted)
                except FluxError as e:
                    entry["error"] = str(e)
                    bad = True
                    if not as_json:
                        click.echo(f"error: {name}: {e}", err=True)
                    continue
                entry["written"] = True
        elif not as_json:
            click.echo(formatted, nl=False)
    if as_json:
        json_out({"files": report})
    failed: Optional[bool] = bad or (check and any(e["canonical"] is False for e in report))
    sys.exit(1 if failed else 0)
