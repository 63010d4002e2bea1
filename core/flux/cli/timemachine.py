"""Time-machine verbs: ``flux replay`` and ``flux diff`` (spec §6, §4.4, §4.6).

``--json`` prints one compact line with sorted keys, byte for byte what flux's ``serde_json``
prints. Both JSON shapes carry additions beyond flux, documented on the command.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..store.store import StoreReader
from ..timemachine.diff import payload_diff, run_diff
from . import common, main


def _dim(text: str) -> str:
    return click.style(text, dim=True)


@main.command()
@click.argument("a")
@click.argument("b")
@common.store_option
@click.option("--store-b", "store_b", type=click.Path(file_okay=True, dir_okay=True, path_type=Path), default=None,
              help="Store directory of B when it lives in another store (default: the --store of A).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (keys sorted) instead of text.")
@click.option("--explain", is_flag=True, help="Under each differing row, show what changed (JSON structure or lines).")
@common.handle_errors
def diff(a: str, b: str, store: Path | None, store_b: Path | None, as_json: bool, explain: bool) -> None:
    """Align two recorded runs statement by statement (A, B: s_<n> or last).

    `=` same statement and outputs · `~` the plan diverges (the agent did something else) ·
    `≠` same statement, different world (a recorded output differs). Exit 1 when the runs
    differ, 0 when identical.

    JSON: flux's {a, b, identical, rows} plus two additions, `summary` (row counts by kind) and
    `first_divergence` (index of the first non-same row, or null).
    """
    reader_a = common.open_reader(store)
    reader_b = StoreReader(common.resolve_store_dir(store_b)) if store_b is not None else reader_a
    d = run_diff(reader_a, a, reader_b, b)
    if as_json:
        click.echo(d.json_text())
    else:
        for row_lines in _grouped(d):
            for line, style in row_lines[0]:
                click.echo(_dim(line) if style == "dim" else line)
            if explain and row_lines[1] is not None and row_lines[1].kind != "same":
                for pl in payload_diff(d, row_lines[1]).lines:
                    click.echo(_dim(f"      {pl}"))
        if not d.identical:
            click.echo(_dim(d.summary_line()), err=True)
        elif not d.rows:
            click.echo(_dim("note: neither run has statement rows or cassette cells — there was nothing to compare"), err=True)
    if not d.identical:
        sys.exit(1)


def _grouped(d):
    """The rendered lines grouped by the row they belong to (header and footer have no row)."""
    lines = d.render()
    out = [([lines[0]], None)]
    i = 1
    for r in d.rows:
        n = {"same": 1, "plan": 3, "output": 4}[r.kind]
        out.append((lines[i:i + n], r))
        i += n
    if i < len(lines):
        out.append((lines[i:], None))
    return out
