"""``flux store``: verbs on a store as a whole — ``copy`` moves sessions between a directory and a
shared Postgres store (either way)."""

from __future__ import annotations

import sys

import click

from ..canonical import canonical_json
from ..store.copy import copy_store
from ..store.store import StoreReader, StoreWriter
from . import common, main

__all__ = ["store_group"]


@main.group("store")
def store_group() -> None:
    """Verbs on a store as a whole: copy sessions between a directory and a shared postgres:// store."""


@store_group.command("copy")
@click.argument("src", type=common.StoreLocation())
@click.argument("dst", type=common.StoreLocation())
@click.option("--session", "sessions", multiple=True, metavar="s_<n>", help="Copy only this session (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: each session's number in DST and the rows added.")
@common.handle_errors
def store_copy(src, dst, sessions: tuple[str, ...], as_json: bool) -> None:
    """Copy every session of SRC into DST (directory ↔ postgres://, either way): payloads byte for
    byte, event ids kept, each session under the next free number in DST. Run it again to resume
    an interrupted copy or to bring over what SRC recorded since: only missing rows are added."""
    if src == dst:
        common.fail("SRC and DST are the same store — name two stores")
    with StoreReader(src, option="SRC") as reader:
        for sid in sessions:
            reader.get_session(sid)  # an unknown session is one line before anything is written
        with StoreWriter(dst) as writer:
            bar = None
            progress = None
            if sys.stderr.isatty() and not as_json:
                from rich.progress import Progress  # (a terminal only)

                bar = Progress(transient=True)
                task = bar.add_task("copy", total=None)
                bar.start()
                progress = lambda done, total: bar.update(task, completed=done, total=total)  # noqa: E731
            try:
                report = copy_store(reader, writer, sessions=sessions or None, on_progress=progress)
            finally:
                if bar is not None:
                    bar.stop()
        label = writer.label
    if as_json:
        click.echo(canonical_json(report.to_json()))
        return
    for s, d in report.sessions.items():
        click.echo(f"{s:<8} → {d:<8} {report.rows_added.get(s, 0)} row(s) added")
    note = f", {report.skipped_rows} damaged row(s) left behind" if report.skipped_rows else ""
    click.echo(f"copied {len(report.sessions)} session(s), {report.total_rows} row(s) into {label}{note}", err=True)
