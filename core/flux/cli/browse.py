"""Browsing verbs: ``flux sessions``, ``flux show``, ``flux demo``."""

from __future__ import annotations

from pathlib import Path

import click

from ..model.lineage import lineage_of
from ..model.listing import list_sessions
from ..model.pricing import load_price_table, session_spend, turn_spend
from ..model.wording import cost_text, outcome_text, usage_text
from ..store.usage import Usage
from ..timefmt import age, now_ms, parse_time_arg
from . import main
from .common import fail, handle_errors, json_out, open_reader, resolve_store_dir, store_option

INTERRUPTED_HINT = (
    "{n} interrupted session(s) — the next turn entered on one (`flux run --session s_<n>`) "
    "finishes its killed turn from the crash point (no model call); `flux resurrect s_<n>` does it now. "
    "`FLUX_AUTO_RESURRECT=0` disables the automatic one."
)

prices_option = click.option("--prices", "prices_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                             help="JSON prices file extending the built-in table (USD per Mtok).")


def _fmt_cost(c: float | None) -> str:
    return cost_text(c, unknown="unknown")  # the app's wording (one function)


@main.command()
@store_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--query", "-q", default=None, help="Case-insensitive substring of the conversation text.")
@click.option("--since", default=None,
              help="Only sessions last updated at or after T (YYYY-MM-DD, RFC 3339, 24h, 7d, 2w) — flux's rule.")
@click.option("--until", default=None,
              help="Only sessions created at or before T (same forms) — flux's rule: --since reads the last "
                   "update, --until the creation time.")
@click.option("--file", "touched", default=None,
              help="Only sessions whose tool calls touched PATH (matched at a path boundary: main.rs matches "
                   "/repo/src/main.rs, rc/main.rs does not) — flux's rule.")
@click.option("--limit", "-n", type=click.IntRange(min=1), default=None, help="At most N sessions.  [default: 30]")
@click.option("--prune", is_flag=True,
              help="Delete every session that recorded nothing (flux's rule) — never a live one, one created in the "
                   "last minute, or one another session names as its source. Takes no filter.")
@click.option("--dry-run", is_flag=True, help="With --prune: name what would be deleted, and delete nothing.")
@prices_option
@handle_errors
def sessions(store, as_json, query, since, until, touched, limit, prune, dry_run, prices_file):
    """List sessions, newest first, with interrupted turns flagged.

    --prune deletes the sessions that recorded nothing (--dry-run: name them only)."""
    if dry_run and not prune:
        fail("--dry-run only goes with --prune (see `flux sessions --help`)")
    if prune:
        given = [name for name, v in (("--query", query), ("--since", since), ("--until", until),
                                      ("--file", touched), ("--limit", limit)) if v is not None]
        if given:
            fail(f"--prune takes no filter ({', '.join(given)}): it deletes every empty session — drop "
                 f"{' and '.join(given)}, or list first with `flux sessions {given[0]} …`")
        _prune(store, dry_run, as_json)
        return
    if touched is not None and not touched.strip():
        fail("--file needs a path (a file a tool call touched, e.g. --file src/main.rs)")
    now = now_ms()
    since_ms = parse_time_arg(since, now) if since else None
    until_ms = parse_time_arg(until, now) if until else None
    with open_reader(store) as reader:
        prices = load_price_table(prices_file, reader.dir)
        rows = list_sessions(reader, limit=30 if limit is None else limit, query=query, since_ms=since_ms,
                             until_ms=until_ms, prices=prices, touched=touched)
        filtered = bool(query or since or until or touched)
        if as_json:
            json_out({"store": reader.label, "sessions": [s.to_json() for s in rows],
                      "skipped_rows": reader.skipped_rows})
            return
        if not rows:
            click.echo("no sessions match the given filter(s)" if filtered else
                       "no sessions yet — start one with `flux` or `flux run`", err=True)
            return
        flagged = 0
        # flux's line, `{id}  {msgs:>3} msg  {model:<22} {when}`, with the id and model columns
        # widened to the longest in the listing so the columns line up (flux's, byte for byte, when
        # every id has one width and no model is longer than 22)
        id_w = max(len(s.row.id) for s in rows)
        model_w = max(22, *(len(s.row.model) for s in rows))
        for s in rows:
            r = s.row
            when = f"active {age(r.updated_at, now)}" if r.updated_at > r.created_at else age(r.created_at, now)
            line = f"{r.id:<{id_w}}  {r.msg_count:>3} msg  {r.model:<{model_w}} {when}"
            click.echo(line, nl=False)
            if s.interrupted:
                flagged += 1
                click.secho("  ⚠ interrupted", fg="red", nl=False)
            elif s.interrupt.recording_pid is not None:
                pid = s.interrupt.recording_pid
                click.secho(f"  ● recording (pid {pid})" if pid > 0 else "  ● recording", fg="green", nl=False)
            click.echo()
        if flagged:
            click.secho(INTERRUPTED_HINT.format(n=flagged), err=True, dim=True)


def _prune(store, dry_run: bool, as_json: bool) -> None:
    """``--prune``: flux's lines on stderr (``pruned N empty sessions`` / ``no empty sessions to
    prune``) with the ids, then one ``kept S: why`` line per empty session that stays."""
    from ..model.prune import plan_prune, prune_sessions

    with open_reader(store) as reader:
        plan = plan_prune(reader, now_ms())
        store_dir = reader.dir
    deleted = {} if dry_run else prune_sessions(store_dir, plan)
    if as_json:
        json_out({"store": str(store_dir), "dry_run": dry_run, **plan.to_json(),
                  "events_deleted": sum(deleted.values())})
        return
    n = len(plan.pruned)
    noun = "session" if n == 1 else "sessions"
    if not n:
        click.echo("no empty sessions to prune", err=True)
    elif dry_run:
        click.echo(f"would prune {n} empty {noun}: {', '.join(plan.ids)} (dry run: nothing was deleted)", err=True)
    else:
        click.echo(f"pruned {n} empty {noun}: {', '.join(plan.ids)}", err=True)
    for row, why in plan.kept:
        click.echo(f"kept {row.id}: {why}", err=True)


def _cell_json(c) -> dict:
    d = c.rec.to_body()
    d.pop("event", None)
    d.update({"index": c.index, "turn": c.turn_number, "global_seq": c.global_seq, "ts": c.ts})
    return d


def _show_json(detail, reader, prices, turn_filter: int | None) -> dict:
    from ..model.interrupted import check_session_interrupted
    from ..store.events import Run

    check = check_session_interrupted(reader.dir, detail)
    turns = []
    session_model = detail.row.model
    for t in detail.turns:
        if turn_filter is not None and t.number != turn_filter:
            continue
        spend = turn_spend(prices, t, session_model)
        turns.append({
            "number": t.number, "turn_id": t.turn_id, "user_input": t.user_input, "model": t.model,
            "outcome": t.outcome, "iterations": t.iterations, "answer": t.answer,
            "started_at_ms": t.started_at_ms, "ended_at_ms": t.ended_at_ms,
            "usage": t.effective_usage.to_body(), "calls": t.calls, "cost_usd": spend.usd,
            "unpriced_models": list(spend.unpriced_models),
            "loop_binding": t.loop_binding,
            "agent_loop": _agent_loop_json(reader, t.loop_binding),
            "plans": [{"step": p.step, "outcome": p.outcome, "phase": p.phase, "fingerprint": p.fingerprint,
                       "error": p.error, "plan_source": p.plan_source, "accepted": p.accepted, "global_seq": p.global_seq}
                      for p in t.plan_attempts],
            "cells": [_cell_json(c) for c in detail.turn_cells(t)],
        })
    whole = session_spend(prices, detail.turns, session_model)
    lin = lineage_of(detail.row)
    it = check.interrupted
    return {
        "session": {"id": detail.id, "model": detail.row.model, "messages": detail.row.msg_count,
                    "created_at_ms": detail.row.created_at, "updated_at_ms": detail.row.updated_at,
                    "context": detail.row.context},
        "turns": turns,
        "interrupted": None if it is None else {"turn": it.turn_number, "turn_id": it.turn_id, "user_input": it.user_input,
                                                "flow_key": it.flow_key, "completed": it.completed,
                                                "position": it.position},
        "open_turn_not_flagged": check.reason,
        "recording_pid": check.recording_pid,
        "lineage": {
            "source": None if lin is None else {"kind": lin.kind, "session": lin.source, "detail": lin.detail},
            "children": [{"id": c.id, "kind": (lineage_of(c).kind if lineage_of(c) else None), "agent_id": c.agent_id}
                         for c in reader.children_of(detail.id)],
        },
        "usage": whole.usage.to_body(),
        "cost_usd": whole.usd,
        "unpriced_models": list(whole.unpriced_models),
        "unknown_events": [{"stream_seq": e.stream_seq, "kind": e.kind,
                            "event": e.body.event.event if isinstance(e.body, Run) else None}
                           for e in detail.unknown_events],
        "skipped_rows": detail.skipped_rows,
    }


def _agent_loop_json(reader, binding) -> dict | None:
    """The agent-loop program a turn ran (``agent-loops/<sha>.flux``), named and parsed."""
    from ..lang.agent_loops import load_agent_loop

    loop = load_agent_loop(reader.dir, binding)
    return None if loop is None else {**loop.to_json(), "summary": loop.summary()}


def _excerpt(text: str, n: int = 96) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= n else text[:n] + "…"


def _show_human(data: dict) -> None:
    s = data["session"]
    lin = data["lineage"]
    head = f"{s['id']}  model {s['model']}  {s['messages']} msg  {len(data['turns'])} turn(s) shown  cost {_fmt_cost(data['cost_usd'])}"
    click.secho(head, bold=True)
    if lin["source"]:
        click.echo(f"  {lin['source']['kind']} of {lin['source']['session']} {lin['source']['detail']}".rstrip())
    for c in lin["children"]:
        click.echo(f"  child {c['id']} ({c['kind'] or c['agent_id']})")
    if data["interrupted"]:
        it = data["interrupted"]
        click.secho(f"  ⚠ interrupted: turn {it['turn']} after {it['position']} statement(s) — plan {it['flow_key']}", fg="red")
    elif data["recording_pid"] is not None:
        click.secho(f"  ● recording: {data['open_turn_not_flagged']}", fg="green")
    elif data["open_turn_not_flagged"]:
        click.secho(f"  open turn not resumable: {data['open_turn_not_flagged']}", fg="yellow")
    for t in data["turns"]:
        click.echo()
        click.secho(f"turn {t['number']} · {outcome_text(t['outcome'])} · {t['user_input']!r}", bold=True)
        click.echo(f"  usage {usage_text(Usage.from_body(t['usage']))} · {t['calls']} call(s) · cost {_fmt_cost(t['cost_usd'])}")
        if t["agent_loop"]:
            click.echo(f"  agent loop {t['agent_loop']['summary']}")
        for p in t["plans"]:
            tag = p["outcome"] + (f" · {p['phase']}" if p["phase"] else "")
            click.echo(f"  plan step {p['step']} ({tag})")
            if p["plan_source"]:
                for line in p["plan_source"].rstrip("\n").split("\n"):
                    click.secho(f"    │ {line}", fg="cyan")
            if p["error"]:
                click.secho(f"    error: {p['error']}", fg="red")
        for c in t["cells"]:
            mark = "✗" if (c["is_error"] or c["denied"]) else "✓"
            color = "red" if mark == "✗" else None
            click.secho(f"  {mark} cell {c['index']} {c['op']}{_flags_dict(c)}: {_excerpt(c['content'])}", fg=color)
        if t["answer"]:
            click.echo(f"  answer: {_excerpt(t['answer'], 200)}")
    if data["unknown_events"]:
        click.echo()
        click.secho(f"{len(data['unknown_events'])} event(s) of kinds this reader does not know:", fg="yellow")
        for e in data["unknown_events"]:
            click.echo(f"  seq {e['stream_seq']}: {e['kind']}{'/' + e['event'] if e['event'] else ''}")
    if data["skipped_rows"]:
        click.secho(f"{data['skipped_rows']} corrupt event row(s) skipped", fg="yellow", err=True)


def _flags_dict(c: dict) -> str:
    out = [name for name in ("is_error", "denied", "redacted", "truncated") if c.get(name)]
    return " [" + ", ".join(out) + "]" if out else ""


@main.command()
@click.argument("session", required=False, default="last")
@store_option
@click.option("--turn", type=click.IntRange(min=1), default=None, help="Only turn N (1-based).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@prices_option
@handle_errors
def show(session, store, turn, as_json, prices_file):
    """Show a session: turns, accepted plans, cassette cells, usage, cost, lineage."""
    from ..model.session import load_session

    with open_reader(store) as reader:
        prices = load_price_table(prices_file, reader.dir)
        detail = load_session(reader, session)
        if turn is not None and turn > len(detail.turns):
            fail(f"{detail.id} has {len(detail.turns)} turn(s); there is no turn {turn}")
        data = _show_json(detail, reader, prices, turn)
        if as_json:
            json_out(data)
        else:
            _show_human(data)


@main.command()
@store_option
@click.option("--force", is_flag=True, help="Rebuild even if the directory already holds a store.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: the store and its sessions.")
@handle_errors
def demo(store, force, as_json):
    """Create a realistic demo store in --store DIR (several sessions, errors, an interrupted turn, a fork)."""
    from ..demo import build_demo_store

    target = resolve_store_dir(store)
    if (target / "events.db").exists() and not force:
        fail(f"{target} already holds a store — pick an empty directory or pass --force to rebuild it")
    build_demo_store(target, overwrite=force)
    if as_json:
        from ..model.listing import interrupted_sessions

        with open_reader(target) as reader:
            json_out({"store": reader.label, "sessions": [r.id for r in reader.list_sessions()],
                      "interrupted": sorted(interrupted_sessions(reader), key=lambda sid: int(sid[2:]))})
        return
    click.echo(f"demo store written to {target}")
    click.echo(f"  browse it with `flux-tui --store {target}` or `flux sessions --store {target}`")
