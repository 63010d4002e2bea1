"""``flux case …`` (saved cases) and ``flux db migrate`` (the PostgreSQL fixture store's tables).

Every verb takes ``--fixture-store URL`` (else ``FLUX_FIXTURE_STORE``, else ``FLUX_POSTGRES_DSN``). A
refusal with a reason code is ``{"code", "message"}`` on stdout, exit 2; bad input one ``error:`` line,
exit 1; ``case run`` exits 3 for a run that stopped (docs/cases.md).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any, Callable, Optional

import click

from ..cases import api
from ..cases.bundle import check_hash
from ..cases.errors import CaseRefusal
from ..cases.locate import open_fixture_store, resolve_store_url
from ..cases.postgres import migrate
from ..cases.supply import Supplied, load_supply
from ..errors import FluxError
from ..model.pricing import load_price_table
from . import main
from .common import fail, handle_errors, resolve_store_dir, store_option

_VALUES_WARNING = ("warning: bundle {h} holds the recorded values (inputs, outputs, model answers), redacted only of "
                   "the secrets the recorder knew — treat it like the data the run touched")

fixture_store_option = click.option(
    "--fixture-store", "fixture_store", default=None, metavar="URL",
    help="Fixture store: a directory, file:///abs, memory:, postgres://…, s3://bucket/prefix?region=…&endpoint_url=… "
         "(default: $FLUX_FIXTURE_STORE, else $FLUX_POSTGRES_DSN).")


def refusals(fn: Callable) -> Callable:
    """A :class:`CaseRefusal` is ``{"code", "message"}`` on stdout, exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except CaseRefusal as e:
            click.echo(json.dumps(e.to_json(), ensure_ascii=False, sort_keys=True))
            sys.exit(2)

    return wrapper


def _line(obj: dict) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, sort_keys=True))


@main.group("case")
def case_group() -> None:
    """Saved cases: a recorded turn frozen at a fork point, kept in a fixture store, re-run with a ladder."""


@case_group.command("save")
@click.argument("session")
@store_option
@fixture_store_option
@click.option("--at", "at", type=click.IntRange(min=0), default=None,
              help="Fork after the first N op calls of the turn (statement N, as flux fork --at counts).")
@click.option("--fork-after-seq", "fork_after_seq", type=click.IntRange(min=0), default=None,
              help="Fork after this global_seq row of the turn.")
@click.option("--kind", type=click.Choice(["agent", "flow"]), default=None,
              help="Expected kind (detected from the turn's model calls; a mismatch refuses with kind_mismatch).")
@click.option("--turn", "turn", type=click.IntRange(min=1), default=None, help="The turn to save (default: the last).")
@click.option("--target", "target", default=None, help="The case's target name (default: the session id).")
@handle_errors
@refusals
def case_save(session: str, store: Optional[Path], fixture_store: Optional[str], at: Optional[int],
              fork_after_seq: Optional[int], kind: Optional[str], turn: Optional[int], target: Optional[str]) -> None:
    """Freeze SESSION's turn at a fork point into a bundle in the fixture store (omit --at and
    --fork-after-seq to keep only the inputs). Prints the hash and the manifest summary."""
    with open_fixture_store(fixture_store) as st:
        saved = api.save_case(resolve_store_dir(store), session, at=at, fork_after_seq=fork_after_seq, kind=kind,
                              turn=turn, target_name=target, fixture_store=st)
    _line(saved.to_json())


@case_group.command("export")
@click.argument("hash_")
@fixture_store_option
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="File to write.")
@click.option("--json", "as_json", is_flag=True, help="Readable, diffable JSON instead of the compressed blob.")
@handle_errors
@refusals
def case_export(hash_: str, fixture_store: Optional[str], out: Path, as_json: bool) -> None:
    """Write bundle HASH to --out (compressed; --json: indented JSON). import reads either."""
    check_hash(hash_)
    b = api.export_case(hash_, out, as_json=as_json, fixture_store=fixture_store)
    click.echo(_VALUES_WARNING.format(h=b.hash[:16] + "…"), err=True)
    _line({"fixture_hash": b.hash, "out": str(out), "format": "json" if as_json else "gzip"})


@case_group.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@fixture_store_option
@handle_errors
@refusals
def case_import(file: Path, fixture_store: Optional[str]) -> None:
    """Add the bundle in FILE (compressed or JSON) to the fixture store; prints its hash."""
    saved = api.import_case(file, fixture_store=fixture_store)
    _line(saved.to_json())


@case_group.command("list")
@fixture_store_option
@click.option("--json", "as_json", is_flag=True, help="One JSON object per bundle.")
@handle_errors
@refusals
def case_list(fixture_store: Optional[str], as_json: bool) -> None:
    """List the bundles in the fixture store: hash, kind, target, fork point, size, capture."""
    rows = api.list_cases(fixture_store=fixture_store)
    for r in rows:
        if as_json:
            _line(r.to_json())
            continue
        s = r.summary
        cap = s.get("capture") or {}
        complete = "complete" if cap.get("complete") else ("incomplete" if cap else "?")
        click.echo(f"{r.hash}  {s.get('kind', '?'):5}  {str(s.get('target_name', '?')):12}  "
                   f"fork@{s.get('fork_at', '?')} (seq {s.get('fork_after_seq', '?')})  "
                   f"{s.get('result_count', '?')} calls  {r.stored_bytes} B  {complete}")
    if not rows and not as_json:
        click.echo("no bundles", err=True)


@case_group.command("show")
@click.argument("hash_")
@fixture_store_option
@click.option("--values", is_flag=True, help="Include the history rows and every call's recorded value.")
@handle_errors
@refusals
def case_show(hash_: str, fixture_store: Optional[str], values: bool) -> None:
    """Show bundle HASH (or a bundle file): its manifest and calls."""
    b = api.load_case(hash_, fixture_store=fixture_store)
    calls = []
    for r in b.results:
        c = {"key": f"{r['kind']}:{r['key']}", "name": r.get("op") or r.get("model"), "fingerprint": r["fingerprint"],
             "error": "error" in r}
        if values:
            c["value"] = r.get("result", r.get("error"))
        calls.append(c)
    out: dict[str, Any] = {"fixture_hash": b.hash, "manifest": b.manifest, "calls": calls,
                           "history_count": len(b.history)}
    if values:
        click.echo(_VALUES_WARNING.format(h=b.hash[:16] + "…"), err=True)
        out["history"] = b.history
    click.echo(json.dumps(out, ensure_ascii=False, sort_keys=True, indent=2))


@case_group.command("delete")
@click.argument("hash_")
@fixture_store_option
@handle_errors
@refusals
def case_delete(hash_: str, fixture_store: Optional[str]) -> None:
    """Delete bundle HASH from the fixture store."""
    api.delete_case(check_hash(hash_), fixture_store=fixture_store)
    _line({"deleted": hash_})


@case_group.command("gc")
@fixture_store_option
@click.option("--keep", "keep", multiple=True, metavar="HASH", help="A bundle to keep (repeat).")
@click.option("--keep-file", "keep_files", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="A file of hashes to keep, one a line (# comments).")
@click.option("--yes", is_flag=True, help="Delete the candidates (without it gc only lists them).")
@handle_errors
@refusals
def case_gc(fixture_store: Optional[str], keep: tuple[str, ...], keep_files: tuple[Path, ...], yes: bool) -> None:
    """Every bundle not kept is a candidate; list them, or delete them with --yes."""
    candidates, deleted = api.gc_cases(keep, keep_files, yes=yes, fixture_store=fixture_store)
    for h in candidates:
        _line({"fixture_hash": h, "action": "deleted" if h in deleted else "candidate"})
    if not yes and candidates:
        click.echo(f"{len(candidates)} candidate(s) — rerun with --yes to delete them", err=True)


def _parse_input(items: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise FluxError(f"--input {item!r}: give KEY=JSON (--input input='\"a new prompt\"')")
        try:
            out[key] = json.loads(raw)
        except ValueError as e:
            raise FluxError(f"--input {key}: the value is not JSON ({e}) — quote a string: {key}='\"text\"'") from None
    return out


@case_group.command("run")
@click.argument("case")
@fixture_store_option
@click.option("--from-start", is_flag=True, help="Rerun the whole recorded turn, not only what follows the fork.")
@click.option("-m", "--model", "model", default=None, help="Run the model calls after the fork on this model.")
@click.option("--prompt-file", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Run the model calls after the fork with this system prompt.")
@click.option("--input", "inputs", multiple=True, metavar="KEY=JSON", help="Change an input (input: the prompt).")
@click.option("--replay-only", is_flag=True, help="No live rung: every call must be answered by the recording.")
@click.option("--supply", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Supplied answers: {\"calls\": {\"op:N\"|\"model:N\": …}, \"tools\": {NAME: …}}.")
@click.option("--live-budget", type=click.IntRange(min=0), default=None, help="At most N live calls (pure ops are free).")
@click.option("--max-cost-usd", type=click.FloatRange(min=0), default=None, help="Stop before spend passes X USD.")
@click.option("--prices", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A prices file adding or overriding models (not stored in the bundle).")
@click.option("--allow-write", "allow_write", multiple=True, metavar="TOKEN",
              help="Allow a write the recording cannot answer: tool:<op> (repeat).")
@click.option("--values", is_flag=True, help="Include call values in the call lines.")
@click.option("--workspace", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where live ops act (default: a scratch directory, removed after the run).")
@handle_errors
@refusals
def case_run(case: str, fixture_store: Optional[str], from_start: bool, model: Optional[str],
             prompt_file: Optional[Path], inputs: tuple[str, ...], replay_only: bool, supply: Optional[Path],
             live_budget: Optional[int], max_cost_usd: Optional[float], prices: Optional[Path],
             allow_write: tuple[str, ...], values: bool, workspace: Optional[Path]) -> None:
    """Run CASE (a hash in the fixture store, or a bundle file): verify the prefix, then resolve each
    call reused → simulated → live (if permitted) → stop with a reason code."""
    if replay_only and (supply is not None or model is not None):
        raise FluxError("--replay-only has no live or simulated rung — drop --supply / -m, or drop --replay-only")
    for t in allow_write:
        if not t.startswith("tool:") or len(t) == 5:
            raise FluxError(f"--allow-write {t!r}: a token is tool:<op> (the op a refused write names)")
    bundle = api.load_case(case, fixture_store=fixture_store)
    opts = dict(replay_only=replay_only, from_start=from_start, model=model, inputs=_parse_input(inputs),
                supply=load_supply(supply) if supply is not None else Supplied(), live_budget=live_budget,
                max_cost_usd=max_cost_usd, prices=load_price_table(prices) if prices is not None else None,
                allow_write=frozenset(allow_write), values=values, workspace=workspace)
    if prompt_file is not None:
        try:
            opts["prompt"] = prompt_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise FluxError(f"cannot read --prompt-file {prompt_file}: {getattr(e, 'strerror', None) or e}") from None
    printed: list[Any] = []

    def on_call(line: Any) -> None:
        printed.append(line)

    outcome = api.run_case(bundle, on_call=on_call, **opts)
    if outcome.status == "refused":
        click.echo(json.dumps({"code": outcome.code, "message": outcome.message}, ensure_ascii=False, sort_keys=True))
        sys.exit(2)
    for line in printed:
        _line(line.to_json(values))
    _line(outcome.to_json())
    sys.exit(outcome.exit_code)


@main.group("db")
def db_group() -> None:
    """The PostgreSQL fixture store's tables."""


@db_group.command("migrate")
@fixture_store_option
@handle_errors
@refusals
def db_migrate(fixture_store: Optional[str]) -> None:
    """Create the flux_cases schema and its table in the PostgreSQL fixture store (safe to repeat)."""
    url = resolve_store_url(fixture_store)
    if not url.lower().startswith(("postgres://", "postgresql://")):
        fail(f"flux db migrate is for a postgres:// fixture store; {url.split('?')[0]!r} needs no migration")
    migrate(url)
    click.echo("migrated: flux_cases.bundles", err=True)
