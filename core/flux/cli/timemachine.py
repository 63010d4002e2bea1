"""Time-machine verbs: ``flux replay`` and ``flux diff`` (spec §6, §4.4, §4.6).

``--json`` prints one compact line with sorted keys, byte for byte what flux's ``serde_json``
prints. Both JSON shapes carry additions beyond flux, documented on the command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..cassette.replay import unconsumed_message
from ..lang.catalog import OpCatalog, OpSpec
from ..store.store import StoreReader
from ..timemachine.diff import payload_diff, run_diff
from ..timemachine.replay import replay_tree
from . import common, main


def _dim(text: str) -> str:
    return click.style(text, dim=True)


def _load_catalog(path: Path) -> OpCatalog:
    """``[{"name", "required"?, "optional"?}, …]`` or ``{name: {"required"?, "optional"?}, …}``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        common.fail(f"cannot read the catalog {path}: {e.strerror or e}")
    except ValueError as e:
        common.fail(f"the catalog {path} is not JSON ({e}) — give a list of {{\"name\", \"required\", \"optional\"}} objects")
    if isinstance(data, dict):
        data = [{"name": k, **(v if isinstance(v, dict) else {})} for k, v in data.items()]
    specs = []
    if not isinstance(data, list):
        common.fail(f"the catalog {path} must be a JSON list of op signatures or an object keyed by op name")
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            common.fail(f"the catalog {path} has an entry without a string \"name\": {json.dumps(item)[:80]}")
        specs.append(OpSpec(item["name"], tuple(item.get("required") or ()), tuple(item.get("optional") or ())))
    return OpCatalog(specs)


@main.command()
@click.argument("session", required=False, default="last")
@click.option("--turn", type=int, default=None, help="Replay only the plans accepted in turn N (1-based).")
@click.option("--sub-agents", "sub_agents", is_flag=True, help="Then replay every correlated child stream (sub-agents, forks, what-ifs).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (keys sorted) instead of text.")
@click.option("--strict", is_flag=True, help="Also exit 1 when recorded cells were left unconsumed (the run diverged silently).")
@click.option("--catalog", "catalog_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSON op signatures; without it every op name is accepted and one object argument is the input.")
@common.store_option
@common.handle_errors
def replay(session: str, turn: int | None, sub_agents: bool, as_json: bool, strict: bool, catalog_path: Path | None,
           store: Path | None) -> None:
    """Re-execute a recorded session offline (SESSION: s_<n> or last).

    Accepted plans re-parse from the store, every op is served from the recorded cassette: no
    model call, no live IO, nothing written to the store. Exit 1 when the replay diverges from
    the recording.
    """
    if turn is not None and turn < 1:
        common.fail(f"--turn is 1-based: got {turn}; pass N ≥ 1 (turn 1 is the session's first turn)")
    catalog = _load_catalog(catalog_path) if catalog_path is not None else None
    reader = common.open_reader(store)
    row = reader.resolve_session(session)
    click.echo(_dim(f"replay · session {row.id} · offline (no model call, no live IO)"), err=True)
    tree = replay_tree(reader, row.id, turn, sub_agents=sub_agents, catalog=catalog,
                       on_child=lambda c: click.echo(_dim(f"replay · sub-agent {c}"), err=True))
    for child in tree.children:
        if child.error is not None:
            click.echo(_dim(f"  {child.session}: {child.error}"), err=True)
    report = tree.report
    if as_json:
        click.echo(tree.json_text())
    else:
        for line in report.summary_lines():
            click.echo(line)
        if report.missing_sources > 0:
            click.echo(_dim(f"note: {report.missing_sources} recorded execution(s) have no stored plan_source "
                            f"(pre-L-38 or oversized) and were skipped"), err=True)
    if report.diverged is not None:
        common.fail(f"replay diverged from the recording: {report.diverged}")
    bad = tree.diverged_child
    if bad is not None:
        common.fail(f"sub-agent {bad.session} replay diverged from the recording: {bad.report.diverged}")
    left = report.cells_total - report.cells_consumed
    if left:
        msg = unconsumed_message(left, report.cells_total)
        if strict:
            common.fail(msg)
        click.echo(f"warning: {msg}", err=True)


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
