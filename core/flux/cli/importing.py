"""``flux import``: other agents' logs (ATIF, Claude Code, Codex, deepseek) as sessions of a store."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import click

from ..errors import FluxError
from ..importers import FORMATS, ImportFormatError, import_file, log_files
from . import main
from .common import fail, handle_errors, json_out, redacted_error, resolve_store_dir, store_option


def _line(path: Path, res) -> str:
    if res.already:
        return f"{path}: already imported as {res.session} (same sha256) — nothing written"
    extra = f" + {len(res.created) - 1} sub-agent session(s)" if len(res.created) > 1 else ""
    return (f"{path}: imported as {res.session}{extra} · {res.turns} turn(s) · {res.model_calls} model call(s) · "
            f"{res.tool_calls} tool call(s)")


@main.command("import")
@click.argument("path", type=click.Path(path_type=Path))
@store_option
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="The log's format (default: detected from its content).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object: each file's session, or its error.")
@handle_errors
def import_cmd(path: Path, store: Optional[Path], fmt: Optional[str], as_json: bool) -> None:
    """Import another agent's log (ATIF, Claude Code, Codex, deepseek) — FILE, or every log under DIR — as sessions."""
    store_dir = resolve_store_dir(store)
    if not path.exists():
        fail(f"{path} does not exist — give a log file or a directory of logs")
    if not path.is_dir():
        res = import_file(path, store_dir, fmt)
        if as_json:
            json_out({"files": [_json(path, res)]})
        else:
            click.echo(_line(path, res))
        return
    files = log_files(path)
    if not files:
        fail(f"{path} holds no *.json or *.jsonl log — nothing to import")
    done: list[dict] = []
    errors: list[str] = []
    shown = sys.stderr.isatty() and not as_json
    with click.progressbar(files, label=f"importing {len(files)} file(s)", file=sys.stderr,
                           show_pos=True) if shown else _plain(files) as bar:
        for f in bar:
            try:
                res = import_file(f, store_dir, fmt)
            except ImportFormatError as e:
                if fmt is None and str(e).endswith("pass --format if it is one"):
                    done.append({"file": str(f), "skipped": "not a log this importer knows"})
                    continue
                errors.append(str(e))
                done.append({"file": str(f), "error": redacted_error(str(e))})
                continue
            except FluxError as e:
                errors.append(str(e))
                done.append({"file": str(f), "error": redacted_error(str(e))})
                continue
            done.append(_json(f, res))
            if not as_json:
                click.echo(_line(f, res))
    if as_json:
        json_out({"files": done})
    else:
        skipped = sum(1 for d in done if "skipped" in d)
        if skipped:
            click.echo(f"skipped {skipped} file(s) that are not logs of a known format")
    if errors:
        for e in errors[:-1]:
            click.echo(f"error: {redacted_error(e)}", err=True)
        fail(errors[-1] + (f" ({len(errors)} file(s) not imported)" if len(errors) > 1 else ""))


class _plain:
    def __init__(self, items):
        self.items = items

    def __enter__(self):
        return self.items

    def __exit__(self, *exc):
        return False


def _json(path: Path, res) -> dict:
    return {"file": str(path), "session": res.session, "sessions": res.created, "already_imported": res.already,
            "turns": res.turns, "model_calls": res.model_calls, "tool_calls": res.tool_calls}


def record_from_import(name: str, session: str, prompt: Optional[str], directory: Path, store: Optional[Path],
                       update: bool, as_json: bool) -> None:
    """``flux record NAME --from-import SESSION``: the scenario NAME (in ``directory``) made from an
    imported run."""
    from ..testkit.imported import scenario_from_import

    if prompt is not None:
        fail("--from-import takes the scenario's input from the imported run — drop PROMPT")
    sid = scenario_from_import(resolve_store_dir(store), session, directory, name=name, update=update)
    if as_json:
        json_out({"directory": str(directory), "session": sid, "from_import": session})
    else:
        click.echo(f"recorded {directory} · {sid} · from the imported {session} · replay only (another agent's loop) — "
                   f"run it with flux test {directory}")
