"""Time-machine verbs: ``flux replay`` and ``flux diff``.

``--json`` prints one compact line with sorted keys, byte for byte what flux's ``serde_json``
prints. Both JSON shapes carry additions beyond flux, documented on the command.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import click

from ..canonical import canonical_json
from ..cassette.replay import unconsumed_message
from ..errors import FluxError
from ..lang.catalog import OpCatalog, OpSpec
from ..model.provenance import refuse_redrive
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
              help="JSON op signatures; without it the built-in ops' signatures, and any other op name with one object argument as its input.")
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
    if catalog_path is not None:
        catalog = _load_catalog(catalog_path)
    else:  # the signatures `flux run` / `flux flow run` recorded with, so positional args map alike
        from ..timemachine.engine import catalog_for

        catalog = catalog_for(_toolbox_catalog(Path(tempfile.gettempdir())))
    # stderr notes (the header, sub-agent progress) are held back until the replay is known not
    # to fail: a failure's stderr is exactly one `error:` line.
    notes: list[str] = []
    with common.open_reader(store) as reader:
        row = reader.resolve_session(session)
        notes.append(f"replay · session {row.id} · offline (no model call, no live IO)")
        tree = replay_tree(reader, row.id, turn, sub_agents=sub_agents, catalog=catalog, detail=False,
                           on_child=lambda c: notes.append(f"replay · {_child_kind(reader, c)[0]} {c}"))
        report = tree.report
        left = report.cells_total - report.cells_consumed
        bad = tree.diverged_child
        failing = report.diverged is not None or bad is not None or (left and strict)
        if not failing:
            for note in notes:
                click.echo(_dim(note), err=True)
        if as_json:
            click.echo(tree.json_text())
        else:
            for line in report.summary_lines():
                click.echo(line)
            for child in tree.children:
                click.echo(_child_line(reader, child))
            if report.missing_sources > 0 and not failing:
                click.echo(_dim(f"note: {report.missing_sources} recorded execution(s) have no stored plan_source "
                                f"(pre-L-38 or oversized) and were skipped"), err=True)
    if report.diverged is not None:
        common.fail(f"replay diverged from the recording: {report.diverged}")
    if bad is not None:
        common.fail(f"sub-agent {bad.session} replay diverged from the recording: {bad.report.diverged}")
    if left:
        msg = unconsumed_message(left, report.cells_total)
        if strict:
            common.fail(msg)
        click.echo(f"warning: {msg}", err=True)


def _child_kind(reader: StoreReader, sid: str) -> tuple[str, str]:
    """(kind, label) of a correlated child, told apart by its ``agent_id``: ``fork``, ``what-if``,
    ``sub-agent``, … and a label like ``⋔ fork s_6 @2`` or ``↳ sub-agent s_4 (reviewer)``."""
    from ..model.lineage import lineage_of

    try:
        lin = lineage_of(reader.get_session(sid))
    except FluxError:
        lin = None
    if lin is None:
        return "child", f"↳ child {sid}"
    detail = f" {lin.detail}" if lin.detail.startswith("@") else (f" ({lin.detail})" if lin.detail else "")
    return lin.kind, f"{lin.mark} {sid}{detail}"


def _child_line(reader: StoreReader, child) -> str:
    """One child's own report line under the parent's: what it is, then how its replay went."""
    _, label = _child_kind(reader, child.session)
    if child.report is None:
        return f"  {label} — {child.error}"
    r = child.report
    head = f"  {label} · replayed {len(r.plans)} plan(s) · {r.cells_consumed}/{r.cells_total} recorded cell(s) served"
    if r.diverged is not None:
        return f"{head} · ✗ diverged: {r.diverged}"
    if r.tape_end is not None:
        return f"{head} · ⏸ {r.tape_end.message()}"
    if r.cells_consumed != r.cells_total:
        return f"{head} · ⚠ {unconsumed_message(r.cells_total - r.cells_consumed, r.cells_total)}"
    return f"{head} · ✓ faithful"


@main.command()
@click.argument("a")
@click.argument("b")
@common.store_option
@click.option("--store-b", "store_b", type=common.StoreLocation(), default=None,
              help="Store directory of B when it lives in another store (default: the --store of A).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object (keys sorted) instead of text.")
@click.option("--explain", is_flag=True, help="Under each differing row, show what changed (JSON structure or lines).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the diff as a self-contained HTML page (side by side, first divergence linked).")
@common.handle_errors
def diff(a: str, b: str, store: Path | None, store_b: Path | None, as_json: bool, explain: bool,
         output: Path | None) -> None:
    """Align two recorded runs statement by statement (A, B: s_<n> or last).

    `=` same statement and outputs · `~` the plan diverges (the agent did something else) ·
    `≠` same statement, different world (a recorded output differs). Exit 1 when the runs
    differ, 0 when identical.

    JSON: flux's {a, b, identical, rows} plus two additions, `summary` (row counts by kind) and
    `first_divergence` (index of the first non-same row, or null); with --store-b, `a_store` and
    `b_store` (the directory each side was read from). When positions drift (a fork
    whose injected value dispatched nothing has one cell fewer), rows are aligned as a sequence and
    each row also gets `a_index` / `b_index` (its position on each side, null on a gap).
    """
    stores = None  # (A's store, B's store) when B comes from another one
    with common.open_reader(store) as reader_a:
        if store_b is None:
            d = run_diff(reader_a, a, reader_a, b)
            where = (reader_a.label, reader_a.label)
        else:
            with StoreReader(common.resolve_store_dir(store_b), option="--store-b") as reader_b:
                d = run_diff(reader_a, a, reader_b, b)
                stores = (reader_a.label, reader_b.label)
                where = (reader_a.label, reader_b.label)
    if output is not None:
        from .pages import write_diff_page

        write_diff_page(d, output, a_label=f"{d.a} in {where[0]}", b_label=f"{d.b} in {where[1]}")
        click.echo(f"wrote {output}", err=True)
    if as_json:
        if stores is None:
            click.echo(d.json_text())
        else:
            click.echo(canonical_json({**d.to_json(), "a_store": stores[0], "b_store": stores[1]}))
    else:
        if stores is not None:  # each side names its store
            click.echo(f"diff {d.a} ({stores[0]}) ↔ {d.b} ({stores[1]})")
        for row_lines in _grouped(d, header=stores is None):
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


def _grouped(d, header: bool = True):
    """The rendered lines grouped by the row they belong to (header and footer have no row)."""
    lines = d.render()
    out = [([lines[0]], None)] if header else []
    i = 1
    for r in d.rows:
        n = {"same": 1, "plan": 3, "output": 4}[r.kind]
        out.append((lines[i:i + n], r))
        i += n
    if i < len(lines):
        out.append((lines[i:], None))
    return out


# ------------------------------------------------------------------------------------------------
# The write side: fork, resurrect, what-if, sweep
#
# Exit status: 0 done; 1 a bad argument, a refused gate, a halted tail / resurrect, a diverged
# prefix (nothing written in the first two cases); 130 cancelled with Ctrl-C.


def _live_options(fn):
    for deco in reversed([
        click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="Directory live ops are confined to (default: the current directory)."),
        click.option("--yes", "-y", "yes", is_flag=True, help="Approve every live op (the side-effect gate)."),
        click.option("--policy", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="Policy file (TOML/JSON) deciding each live op; also passes the gate."),
        click.option("--json", "as_json", is_flag=True, help="One JSON object instead of text."),
        common.store_option,
    ]):
        fn = deco(fn)
    return fn


def _workspace(workspace: Path | None, store_dir: Path | None = None) -> Path:
    """--workspace, else the workspace the store's toolbox.json names (the demo's project), else
    the current directory."""
    ws = workspace
    if ws is None and store_dir is not None:
        ws = _store_toolbox(store_dir).workspace
    ws = (ws or Path.cwd()).expanduser().resolve()
    if not ws.is_dir():
        common.fail(f"workspace {ws} is not a directory — pass --workspace DIR")
    return ws


def _store_toolbox(store_dir: Path | None):
    from ..agent.toolboxes import StoreToolbox, store_toolbox

    return store_toolbox(store_dir) if store_dir is not None else StoreToolbox()


def _ops(ws: Path, store_dir: Path | None = None) -> list:
    """The live ops a write runs with: the toolbox the store was recorded with (default: coding)."""
    return _store_toolbox(store_dir).ops(ws)


def _toolbox_catalog(ws: Path, store_dir: Path | None = None):
    from ..agent.ops import Toolbox

    return Toolbox.of(_ops(ws, store_dir)).catalog()


def _approval_kw(yes: bool, policy: Path | None) -> dict:
    from .agent import approval_options

    return approval_options(yes, policy, sys.stdin.isatty())


_REFUSAL_OPS = 6  # live ops a gate refusal names before "… N more" (the table above lists them all)


def _gate(preview, yes: bool, policy: Path | None, as_json: bool, what: str, catalog=None) -> None:
    """The side-effect gate on the CLI: offline passes; live needs --yes / --policy or a TTY confirm.
    An op the live part may dispatch that the toolbox cannot run is refused up front (even with --yes)."""
    refusal = preview.refusal(catalog) if catalog is not None else None
    if refusal is not None:
        common.fail(refusal)
    if policy is not None:
        from ..agent.approver import load_policy

        preview = preview.with_policy(load_policy(policy))
    if not as_json:
        for line in preview.lines():
            click.echo(_dim(line), err=True)
    if preview.offline or yes or policy is not None:
        return
    if sys.stdin.isatty() and not as_json:
        if click.confirm(f"{what} runs live — go ahead?", default=False, err=True):
            return
        common.fail(f"{what} cancelled at the side-effect gate — nothing was written")
    listed = list(dict.fromkeys(f"{o.op} ({o.effect})" for o in preview.ops))
    if len(listed) > _REFUSAL_OPS:
        listed = [*listed[:_REFUSAL_OPS], f"… {len(listed) - _REFUSAL_OPS} more"]
    if preview.model:
        listed.append(f"model {preview.model}")
    eff = ", ".join(listed)
    common.fail(f"{what} would run live ({eff}) — pass --yes or --policy FILE to allow it; nothing was written")


def _writable(factory, store_dir: Path, *, live: bool = False):
    """Open the writing client; a store the filesystem will not let us write is one line. ``live``:
    the verb will run ops for real, so the database is checked whole first (``PRAGMA quick_check``)
    — an op must not act on the world when the store cannot take its result."""
    import os

    from ..errors import StoreError

    if not os.access(store_dir, os.W_OK) or _read_only_fs(store_dir):
        common.fail(f"the store {store_dir} is read-only — this verb writes a session into it; "
                    "copy the store somewhere writable and pass --store")
    try:
        client = factory()
    except StoreError as e:
        common.fail(f"cannot write to the store {store_dir}: {e}")
    if live:
        try:
            client.writer.check_health()
        except StoreError as e:
            client.close()
            common.fail(f"{e} — nothing was run")
    return client


def _read_only_fs(path: Path) -> bool:
    import os

    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _offline_client(store_dir: Path, ws: Path, model: str, **kw):
    from ..agent.client import Client
    from ..agent.providers.null import NullProvider

    return Client(NullProvider(model=model), model=model, store=store_dir, workspace=ws, ops=_ops(ws, store_dir), **kw)


@main.command("fork")
@click.argument("session")
@click.option("--at", "at", type=int, required=True, help="Statement position to fork at (0-based; see docs/cli.md).")
@click.option("--turn", type=int, default=None, help="Count --at inside turn T (1-based) instead of the whole session.")
@click.option("--inject", "inject", default=None, help="Mode A: the JSON value the `bind` at --at takes instead.")
@click.option("--edit", "edit", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Mode C: a Flux-Lang file replacing the plan from --at on (analysed before anything is written).")
@click.option("--replan", is_flag=True, help="Mode B (default): a live agent turn continues from the fork point.")
@click.option("--prompt", default=None, help="The re-plan instruction (default: flux's \"Continue from the current forked state…\").")
@click.option("-m", "--model", default=None, help="Model of the re-plan (default: the session's).")
@_live_options
@common.handle_errors
def fork_cmd(session: str, at: int, turn: int | None, inject: str | None, edit: Path | None, replan: bool,
             prompt: str | None, model: str | None, workspace: Path | None, yes: bool, policy: Path | None,
             as_json: bool, store: Path | None) -> None:
    """Branch SESSION at statement --at into a new linked session: the prefix from tape (no model
    call, no side effect), then the tail diverges — inject a value, run an edited plan, or re-plan."""
    from ..timemachine.serve import gc_paused

    # As fork_session does for the SDK: the session read, the prefix run and the write allocate
    # acyclic rows and values; the cyclic collector, on between them, only re-scans that heap.
    with gc_paused():
        _fork(session, at, turn, inject, edit, replan, prompt, model, workspace, yes, policy, as_json, store)


def _fork(session: str, at: int, turn: int | None, inject: str | None, edit: Path | None, replan: bool,
          prompt: str | None, model: str | None, workspace: Path | None, yes: bool, policy: Path | None,
          as_json: bool, store: Path | None) -> None:
    from ..timemachine.fork import fork_session, prepare_fork, run_fork_prefix

    if sum(x is not None and x is not False for x in (inject, edit, replan or None)) > 1:
        common.fail("pass one of --inject, --edit and --replan")
    if prompt is not None and (inject is not None or edit is not None):
        common.fail("--prompt goes with --replan (the default mode), not with --inject/--edit")
    if turn is not None and turn < 1:
        common.fail(f"--turn is 1-based: got {turn}")
    kw: dict = {}
    if inject is not None:
        try:
            kw["inject"] = json.loads(inject)
        except ValueError as e:
            common.fail(f"--inject is not JSON ({e}) — quote a string as '\"text\"'")
    if edit is not None:
        try:
            kw["edit"] = edit.read_text(encoding="utf-8")
        except OSError as e:
            common.fail(f"cannot read the edit file {edit}: {e.strerror or e}")
        except UnicodeDecodeError:
            common.fail(f"the edit file {edit} is not UTF-8 text")
    if prompt is not None:
        kw["prompt"] = prompt
    reader = common.open_reader(store)
    ws = _workspace(workspace, reader.dir)
    catalog = _toolbox_catalog(ws, reader.dir)
    row = reader.resolve_session(session)
    refuse_redrive(reader, row.id, "a fork")
    plan = prepare_fork(reader, row.id, at, turn=turn, catalog=catalog, model=model,
                        workspace=str(ws), preview=False, **kw)
    reader.close()
    mode = plan.mode
    approval = _approval_kw(yes, policy)
    if mode == "replan":
        from ..agent.client import Client

        from .agent import TurnRenderer

        renderer = TurnRenderer(quiet=as_json)
        finish = renderer.finish
        client_factory = lambda: Client(plan.model, store=reader.dir, workspace=ws, on_event=renderer,  # noqa: E731
                                        ops=_ops(ws, reader.dir),
                                        **approval)
        from ..agent.registry import resolve_model

        resolve_model(plan.model)  # a model without a key fails here, before anything is written
    else:
        finish = lambda: None  # noqa: E731
        client_factory = lambda: _offline_client(reader.dir, ws, plan.detail.model or "mock",  # noqa: E731
                                                 **approval)
    # The prefix runs in memory from tape (nothing written; a divergence is one line) and the gate's
    # preview comes from the tape it left: the same run fork_session writes (prefix=), done once.
    prefix = run_fork_prefix(plan, catalog)
    assert plan.preview is not None
    _gate(plan.preview, yes, policy, as_json, f"fork {row.id} @ {at}", catalog)
    client = _writable(client_factory, reader.dir, live=not plan.preview.offline)
    try:
        if not as_json:
            tail = "tail live" if not plan.preview.offline else "tail from tape (offline)"
            click.echo(_dim(f"fork · {row.id} @ statement {at} → … · prefix from tape, {tail}"), err=True)
        try:
            res = fork_session(client, row.id, at, turn=turn, prefix=prefix, **kw)
            finish()
        except KeyboardInterrupt:
            click.echo("cancelled", err=True)
            sys.exit(130)
    finally:
        client.close()
    if as_json:
        data = res.to_json()
        data["preview"] = plan.preview.to_json()
        click.echo(canonical_json(data))
    else:
        click.echo(_dim(f"fork · {row.id} @ statement {at} → {res.session} · prefix from tape, "
                        f"{'tail live' if res.live_ops or res.turn else 'tail from tape'}"), err=True)
        if mode != "replan" and res.answer and res.halted is None:
            click.echo(res.answer)
    if res.halted is not None:
        if not as_json:
            click.echo(f"forked session: {res.session}", err=True)
        common.fail_with_output("fork tail halted", res.halted)
    if not as_json:
        if res.replayable:
            click.echo(f"forked session: {res.session}  (replay it with `flux replay {res.session}`; "
                       f"compare with `flux diff {row.id} {res.session}`)")
        else:  # nothing was dispatched, so there is no tape: `flux replay` would refuse it
            click.echo(f"forked session: {res.session}  (its tail dispatched no op, so there is nothing to replay; "
                       f"compare with `flux diff {row.id} {res.session}`)")


@main.command("resurrect")
@click.argument("session", required=False, default="last")
@_live_options
@common.handle_errors
def resurrect_cmd(session: str, workspace: Path | None, yes: bool, policy: Path | None, as_json: bool,
                  store: Path | None) -> None:
    """Finish SESSION's interrupted turn from the crash point, with no model call: completed
    statements fast-forward, recorded cells are served from tape, an op that has no cell runs
    again (after the side-effect gate).

    SESSION defaults to `last`: here the most recently updated session with an interrupted turn.
    A session with nothing to resurrect is an error (exit 1).
    """
    from ..timemachine.resurrect import prepare_resurrect, resurrect_lines, resurrect_session

    reader = common.open_reader(store)
    ws = _workspace(workspace, reader.dir)
    catalog = _toolbox_catalog(ws, reader.dir)
    row = _resurrect_target(reader, session)
    plan = prepare_resurrect(reader, row.id, catalog=catalog, workspace=str(ws))
    reader.close()
    if plan is None:
        common.fail(f"session {row.id} has no interrupted turn — nothing to resurrect "
                    "(`flux sessions` flags the sessions that have one ⚠ interrupted)")
    if not as_json:
        click.echo(resurrect_lines(plan), err=True)
    _gate(plan.preview, yes, policy, as_json, f"resurrect {row.id}", catalog)
    client = _writable(lambda: _offline_client(reader.dir, ws, plan.detail.row.model or "mock",
                                               **_approval_kw(yes, policy)), reader.dir,
                       live=not plan.preview.offline)
    try:
        rep = resurrect_session(client, row.id, plan=plan)
    finally:
        client.close()
    assert rep is not None
    if as_json:
        click.echo(canonical_json(rep.to_json()))
    else:
        click.echo(rep.summary_line(), err=True)
        if rep.diverged:
            click.echo(click.style(f"resurrect diverged: {rep.diverged}", fg="red"), err=True)
        click.echo(rep.answer)
    if rep.outcome == "halted":
        common.fail_with_output("the resumed turn halted", rep.halt["error"] if rep.halt else rep.answer)


def _resurrect_target(reader: StoreReader, ref: str):
    """``s_<n>``, or for ``last`` the most recently updated session with an interrupted turn (not
    the highest id: that is usually a fork or what-if with nothing to finish)."""
    if ref != "last":
        return reader.resolve_session(ref)
    from ..model.listing import interrupted_sessions

    flagged = interrupted_sessions(reader)
    newest = next((r for r in reader.list_sessions() if r.id in flagged), None)  # updated_at DESC, n DESC
    if newest is None:
        common.fail(f"no session in {reader.dir} has an interrupted turn — nothing to resurrect")
    return newest


def _whatif_options(fn):
    for deco in reversed([
        click.option("--turn", type=int, default=None, help="Only turn N (1-based); with -m/--instructions, the turn re-driven."),
        click.option("--substitute", "substitute", multiple=True, metavar="OP=JSON",
                     help="Every recorded call to OP returns JSON instead (a JSON string is raw text). Repeatable."),
        click.option("--substitute-at", "substitute_at", multiple=True, metavar="NODE=JSON",
                     help="The first cell of diff row NODE returns JSON instead (wins over --substitute). Repeatable."),
        click.option("-m", "--model", default=None, help="Re-plan with this model (path 2: one live model turn)."),
        click.option("--instructions", default=None, help="Re-plan with these instructions (system prompt)."),
        click.option("--off-tape", "off_tape", type=click.Choice(["halt", "live"]), default="halt", show_default=True,
                     help="A dispatch the recording has no cell for: halt there, or run it live (gated)."),
    ]):
        fn = deco(fn)
    return fn


def _spec(turn, substitute, substitute_at, policy, model, instructions, off_tape):
    from ..timemachine.whatif import WhatIfSpec

    if turn is not None and turn < 1:
        common.fail(f"--turn is 1-based: got {turn}")
    subs: dict = {}
    for item in substitute:
        op, sep, raw = item.partition("=")
        if not sep or not op.strip():
            common.fail(f"--substitute takes OP=JSON, got {item!r}")
        try:
            subs[op.strip()] = json.loads(raw)
        except ValueError as e:
            common.fail(f"--substitute {op}=… is not JSON ({e}) — quote text as '\"…\"'")
    at: dict = {}
    for item in substitute_at:
        node, sep, raw = item.partition("=")
        if not sep or not node.strip().isdigit():
            common.fail(f"--substitute-at takes NODE=JSON with a row number, got {item!r}")
        try:
            at[int(node)] = json.loads(raw)
        except ValueError as e:
            common.fail(f"--substitute-at {node}=… is not JSON ({e}) — quote text as '\"…\"'")
    if policy is not None:
        from ..agent.approver import load_policy

        load_policy(policy)  # a bad policy file is one line, before anything is written
    return WhatIfSpec(turn=turn, substitute=subs, substitute_at=at, policy=str(policy) if policy else None,
                      off_tape=off_tape, model=model, instructions=instructions)


def _whatif_client(store_dir: Path, ws: Path, spec, yes: bool, policy: Path | None, session_model: str | None,
                   on_event=None):
    """The client a what-if runs with: offline unless it re-plans (then the model must resolve)."""
    approval = _approval_kw(yes, policy)
    if spec.replan:
        from ..agent.client import Client
        from ..agent.registry import resolve_model

        name = spec.model or session_model or "mock"
        resolve_model(name)  # no key → one line, before anything is written
        return lambda: Client(name, store=store_dir, workspace=ws, on_event=on_event,
                              ops=_ops(ws, store_dir), **approval)
    return lambda: _offline_client(store_dir, ws, session_model or "mock", **approval)


def _refuse_uncalled_substitutions(detail, spec) -> None:
    """``--substitute OP=…`` for an op the re-run never meets changes nothing: one line naming the
    ops it does call, before anything is written (a typo would otherwise read as "no divergence")."""
    turn = None if spec.replan else spec.turn
    called = sorted({c.op for c in detail.cells if turn is None or c.turn_number == turn})
    unknown = [op for op in spec.substitute if op not in called]
    if unknown:
        where = f"turn {turn} of {detail.id}" if turn is not None else detail.id
        calls = ", ".join(called) if called else "no op"
        common.fail(f"--substitute {unknown[0]}=…: {where} never calls `{unknown[0]}`, so nothing would change — "
                    f"it calls {calls}; nothing was written")


@main.command("what-if")
@click.argument("session")
@_whatif_options
@_live_options
@common.handle_errors
def what_if_cmd(session: str, turn: int | None, substitute: tuple[str, ...], substitute_at: tuple[str, ...],
                model: str | None, instructions: str | None, off_tape: str, workspace: Path | None, yes: bool,
                policy: Path | None, as_json: bool, store: Path | None) -> None:
    """Re-run SESSION with one thing changed, into a new linked session, and diff it against the
    source. Offline by default (substitutions and policies are served from the frozen recording);
    -m/--instructions re-plan the turn with one live model turn."""
    from ..timemachine.whatif import prepare_what_if, run_what_if

    spec = _spec(turn, substitute, substitute_at, policy, model, instructions, off_tape)
    reader = common.open_reader(store)
    ws = _workspace(workspace, reader.dir)
    catalog = _toolbox_catalog(ws, reader.dir)
    row = reader.resolve_session(session)
    refuse_redrive(reader, row.id, "a what-if")
    plan = prepare_what_if(reader, row.id, spec, catalog=catalog, workspace=str(ws), model=model)
    reader.close()
    _refuse_uncalled_substitutions(plan.detail, spec)
    renderer = None
    if spec.replan:
        from .agent import TurnRenderer

        renderer = TurnRenderer(quiet=as_json)
    factory = _whatif_client(reader.dir, ws, spec, yes, policy, plan.detail.row.model, renderer)
    _gate(plan.preview, yes, policy, as_json, f"what-if on {row.id}", catalog)
    client = _writable(factory, reader.dir, live=not plan.preview.offline)
    try:
        if not as_json:
            how = f"re-plan with {plan.preview.model} (model call)" if spec.replan else "offline (no model call)"
            click.echo(_dim(f"what-if · {row.id} · {how}"), err=True)
        cf = run_what_if(client, row.id, spec)
        if renderer is not None:
            renderer.finish()
    finally:
        client.close()
    d = cf.diff()
    if as_json:
        data = cf.to_json()
        data["diff"] = d.to_json()
        click.echo(canonical_json(data))
        return
    for line, style in d.render():
        click.echo(_dim(line) if style == "dim" else line)
    fd = cf.first_divergence()
    badge = cf.badge
    where = f"first divergence at row {fd.node} ({fd.kind})" if fd else "no divergence"
    click.echo(_dim(f"what-if {cf.session} ← {cf.source} · {badge} · {where}"), err=True)
    if cf.latched:
        click.echo(click.style(f"halted off tape: {cf.latched}", fg="yellow"), err=True)
    click.echo(f"counterfactual session: {cf.session}  (compare again with `flux diff {cf.source} {cf.session}`)")


@main.command("sweep")
@click.option("--sessions", "sessions", default=None, help="Comma-separated session ids.")
@click.option("--all", "all_", is_flag=True, help="Every root session of the store (not forks, what-ifs, sub-agents).")
@click.option("--since", default=None, help="With --all: only sessions updated since T (YYYY-MM-DD, RFC 3339, 24h, 7d).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True,
              help="Worker processes (with --executor ray: the CPUs of the cluster started for the sweep).")
@click.option("--executor", default="pool", show_default=True, metavar="pool|ray|ray=ADDRESS",
              help="Where the sessions run: this machine's process pool, a Ray cluster started for the sweep, "
                   "or an existing one (ray=auto, ray=ray://HEAD:10001; the ray extra).")
@_whatif_options
@_live_options
@common.handle_errors
def sweep_cmd(sessions: str | None, all_: bool, since: str | None, jobs: int, executor: str, turn: int | None,
              substitute: tuple[str, ...], substitute_at: tuple[str, ...], model: str | None, instructions: str | None,
              off_tape: str, workspace: Path | None, yes: bool, policy: Path | None, as_json: bool,
              store: Path | None) -> None:
    """Run one what-if over many sessions, concurrently; one row per session (a session that
    fails is an error row, the sweep goes on). Exit 1 if any session failed."""
    from ..timefmt import parse_time_arg
    from ..timemachine.whatif import what_if_over

    from ..timemachine.executors import parse_executor

    ex = parse_executor(executor)
    if (sessions is None) == (not all_):
        common.fail("pass --sessions S1,S2,… or --all")
    if since is not None and not all_:
        common.fail("--since goes with --all")
    spec = _spec(turn, substitute, substitute_at, policy, model, instructions, off_tape)
    reader = common.open_reader(store)
    ws = _workspace(workspace, reader.dir)
    if all_:
        since_ms = parse_time_arg(since) if since else None
        ids = [r.id for r in sorted(reader.list_sessions(), key=lambda r: r.n)
               if not r.correlation_id and (since_ms is None or r.updated_at >= since_ms)]
    else:
        ids = [s.strip() for s in sessions.split(",") if s.strip()]  # type: ignore[union-attr]
        ids = [reader.resolve_session(s).id if s == "last" else s for s in ids]
    if not ids:
        common.fail("no sessions to sweep" + (" (none match --since)" if since else ""))
    if spec.replan or spec.off_tape == "live":
        if not (yes or policy is not None):
            common.fail(f"a sweep with {'a re-plan' if spec.replan else '--off-tape live'} runs live on {len(ids)} "
                        "session(s) — pass --yes or --policy FILE to allow it; nothing was written")
    if not os.access(reader.dir, os.W_OK) or _read_only_fs(reader.dir):
        common.fail(f"the store {reader.dir} is read-only — a sweep writes one session per what-if; copy it and pass --store")
    reader.close()
    client_args: dict = {"workspace": str(ws)}
    if spec.replan:
        client_args["model"] = spec.model or "mock"
    if yes:
        client_args["auto_approve"] = True
    elif policy is not None:
        client_args["policy"] = str(policy)
    with common.progress_bar("sweep", len(ids), quiet=as_json) as progress:
        report = what_if_over(reader.dir, ids, spec, jobs=jobs, client_args=client_args, on_progress=progress,
                              executor=ex)
    if as_json:
        click.echo(canonical_json(report.to_json()))
    else:
        for o in report.outcomes:
            if o.error is not None:
                click.echo(f"{o.session:<8} error    {o.error}")
                continue
            cf = o.result
            fd = cf.first
            state = "same" if cf.identical else "changed"
            where = f"first divergence at row {fd.node} ({fd.kind})" if fd else ""
            click.echo(f"{o.session:<8} {state:<8} → {cf.session:<8} {cf.badge}  {where}".rstrip())
        click.echo(report.summary_line())
    if report.errors:
        sys.exit(1)
