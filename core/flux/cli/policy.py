"""``flux policy simulate PROPOSED.toml``: what a proposed permission policy would have denied,
had it been in force over the store's recorded history (see :mod:`flux.timemachine.policy_sim`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..agent.approver import load_policy
from ..canonical import canonical_json
from ..timefmt import parse_time_arg
from ..timemachine.executors import parse_executor
from ..timemachine.policy_sim import simulate_policy
from . import main
from .common import fail, handle_errors, open_reader, progress_bar, store_option


@main.group("policy")
def policy_group() -> None:
    """Permission policies: simulate a proposed policy over the store's recorded history."""


@policy_group.command("simulate")
@click.argument("proposed", type=click.Path(dir_okay=False, path_type=Path))
@store_option
@click.option("--since", default=None, help="Only sessions updated since T (YYYY-MM-DD, RFC 3339, 24h, 7d).")
@click.option("--sessions", "sessions", default=None, help="Comma-separated session ids (default: every recording).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True, help="Worker processes.")
@click.option("--executor", default="pool", show_default=True, metavar="pool|ray|ray=ADDRESS",
              help="Where the sessions are simulated (as for flux sweep; the ray extra).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@handle_errors
def simulate_cmd(proposed: Path, store: Path | None, since: str | None, sessions: str | None, jobs: int,
                 executor: str, as_json: bool) -> None:
    """Put every op dispatch the store's recordings made to the PROPOSED policy file (TOML or JSON:
    allow / deny / ask / default, as --policy takes) and report, per op and per session, what it
    would have denied or asked about that ran, and what it would allow that was refused. A refused
    call halts its plan: the later calls of its turn are counted as not run. Reads only; exit 1 when
    the proposal would have blocked a recorded call."""
    policy = load_policy(proposed)
    ex = parse_executor(executor)
    reader = open_reader(store)
    try:
        if sessions is not None:
            if since is not None:
                fail("--since goes without --sessions")
            ids = [reader.resolve_session(s.strip()).id for s in sessions.split(",") if s.strip()]
        else:
            since_ms = parse_time_arg(since) if since else None
            ids = [r.id for r in sorted(reader.list_sessions(), key=lambda r: r.n)
                   if not r.correlation_id and (since_ms is None or r.updated_at >= since_ms)]
        store_dir = reader.dir
    finally:
        reader.close()
    if not ids:
        fail("no sessions to simulate" + (" (none match --since)" if since else ""))
    with progress_bar("simulate", len(ids), quiet=as_json) as progress:
        sim = simulate_policy(store_dir, ids, policy, jobs=jobs, executor=ex, on_progress=progress)
    if as_json:
        click.echo(canonical_json(sim.to_json()))
    else:
        _print(sim)
    if any(s.blocked for s in sim.sessions) or sim.errors:
        sys.exit(1)


def _print(sim) -> None:
    changed = {op: t for op, t in sorted(sim.ops.items()) if t.deny or t.ask or t.unblocked}
    if changed:
        width = max(len(op) for op in changed)
        click.echo(f"{'op':<{width}}  calls  ran  would deny  would ask  newly allowed")
        for op, t in changed.items():
            click.echo(f"{op:<{width}}  {t.calls:>5}  {t.ran:>3}  {t.deny:>10}  {t.ask:>9}  {t.unblocked:>13}")
    for s in sim.sessions:
        if s.error is not None:
            click.echo(f"{s.session:<8} error    {s.error}")
        elif s.changes:
            first = s.blocked[0] if s.blocked else s.changes[0]
            where = f"turn {first.turn} cell {first.cell}" if first.turn is not None else f"cell {first.cell}"
            what = (f"{len(s.blocked)} blocked (first: {first.op} at {where}, {first.proposed} by {first.rule})"
                    if s.blocked else "")
            more = f"{len(s.unblocked)} newly allowed" if s.unblocked else ""
            after = f"{s.not_run_after} later call(s) would not have run" if s.not_run_after else ""
            click.echo(f"{s.session:<8} " + " · ".join(p for p in (what, more, after) if p))
    click.echo(sim.summary_line())
