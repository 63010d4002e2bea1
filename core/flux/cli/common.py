"""What every ``flux`` verb shares: the store option, opening it, errors and JSON output."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn

import click

from ..errors import FluxError
from ..store.store import StoreReader, default_store_dir, is_store_url, set_lock_wait_notice, store_error, store_location

__all__ = [
    "STORE_ENV", "store_option", "open_reader", "fail", "fail_with_output", "json_out", "handle_errors",
    "resolve_store_dir", "OneLineErrors", "StoreLocation",
    "redacted_error", "redacted_message", "usage_error_line",
]

STORE_ENV = "FLUX_STORE_DIR"



class StoreLocation(click.ParamType):
    """A ``--store`` value: a store directory, or a ``postgres://`` URL (kept whole — a path would
    fold its ``//``), either way the local directory every verb opens (:mod:`flux.store.location`)."""

    name = "DIR|URL"

    def convert(self, value: Any, param: Any, ctx: Any) -> Path:
        if isinstance(value, Path):
            return value
        if is_store_url(value):
            try:
                return store_location(value)
            except FluxError as e:
                self.fail(str(e), param, ctx)
        return Path(value)


store_option = click.option(
    "--store", "store", type=StoreLocation(), envvar=[STORE_ENV, "FLUX_STORE_URL"],
    default=None, help="Store directory or postgres:// URL (default: $FLUX_STORE_DIR, else $FLUX_STORE_URL, else ~/.flux).",
)


def resolve_store_dir(store: Path | str | None) -> Path:
    return store_location(store) if store else default_store_dir()


# The readers a verb opened (while it runs under handle_errors): closed when it returns or fails, so
# no error path leaves a connection or a snapshot for the garbage collector (the app runs verbs
# in-process).
_VERB_READERS: contextvars.ContextVar[list[StoreReader] | None] = contextvars.ContextVar("flux_verb_readers", default=None)


def open_reader(store: Path | None) -> StoreReader:
    reader = StoreReader(resolve_store_dir(store))
    opened = _VERB_READERS.get()
    if opened is not None:
        opened.append(reader)
    return reader


# C0, DEL, C1 and the Unicode line/paragraph separators: anything a terminal or splitlines()
# would take as a line break or a control sequence
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def _env_redactor():
    from ..agent.client import env_secret_values  # (the agent layer, loaded only on an error)
    from ..cassette.redactor import Redactor

    return Redactor(env_secret_values())


def redacted_message(msg: str) -> str:
    """A text a message echoes (a prompt, a value read from a file), redacted whole: the secrets
    the environment declares and every pattern the redactor knows."""
    return _env_redactor().redact(msg)


def redacted_error(msg: str) -> str:
    """An error line as it may leave the process: the environment's secrets, private keys, URL
    passwords and credential tokens in it redacted (a message may echo an argument). The
    ``NAME: VALUE`` pattern is not applied to the message's own prose ("missing key: set …")."""
    return _env_redactor().redact_credentials(msg)


MAX_ERROR_CHARS = 1_500


def fail(msg: str) -> NoReturn:
    """``error: <msg>`` on one line (control characters from a hostile store — a newline inside a
    SQLite error's quoted token — are replaced by a space), redacted (:func:`redacted_error`); a
    message longer than :data:`MAX_ERROR_CHARS`, a hostile value echoed whole, loses its middle;
    exit 1."""
    text = _CONTROL.sub(" ", redacted_error(str(msg))).strip()
    if len(text) > MAX_ERROR_CHARS:
        text = text[: MAX_ERROR_CHARS - 400] + " … " + text[-400:]
    click.echo(f"error: {text}", err=True)
    sys.exit(1)


def fail_with_output(what: str, text: str, *, max_lines: int = 40, max_width: int = 240) -> NoReturn:
    """Fail with ``error: <what>: …`` when ``text`` is an op's multi-line output (a failing test
    run): its lines are printed first on stderr, indented, as they were — at most ``max_lines``
    (the first and last halves when longer), each cut at ``max_width`` — and the one ``error:``
    line, last, names its first and last lines. One-line text is plain :func:`fail`, cut alike."""
    lines = [_cut(ln.rstrip(), max_width) for ln in _CONTROL_BUT_NEWLINE.sub(" ", str(text)).strip("\n").split("\n")]
    if len(lines) <= 1:
        fail(f"{what}: {lines[0] if lines else ''}")
    shown = lines
    if len(lines) > max_lines:
        half = max_lines // 2
        shown = [*lines[:half], f"… {len(lines) - 2 * half} line(s) not shown …", *lines[-half:]]
    for ln in shown:
        click.echo(f"  │ {ln}", err=True)
    first, last = (_cut(ln.strip(), max_width // 3) for ln in (lines[0], lines[-1]))
    fail(f"{what}: {first} … {last} ({len(lines)} lines of output, above)")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


_CONTROL_BUT_NEWLINE = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]+")


def json_out(obj: Any) -> None:
    click.echo(json.dumps(obj, ensure_ascii=False, indent=2, sort_keys=True))


_SAID_WAITING: set[str] = set()


def say_waiting_for_lock(path: Path) -> None:
    """A writer waits for another process's lock on ``path``: said on stderr, once per database."""
    if str(path) in _SAID_WAITING:
        return
    _SAID_WAITING.add(str(path))
    click.echo(f"waiting for {path}: another process is writing to it (giving up after 5 s)…", err=True)


def handle_errors(fn: Callable) -> Callable:
    """Turn a :class:`FluxError` (or a broken pipe) into ``error: <reason>`` and exit 1; close every
    reader the verb opened with :func:`open_reader`, whichever way it ends."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        token = _VERB_READERS.set([])
        set_lock_wait_notice(say_waiting_for_lock)
        try:
            return fn(*args, **kwargs)
        except FluxError as e:
            fail(str(e))
        except BrokenPipeError:
            sys.exit(0)
        except sqlite3.Error as e:  # a database page that fails only when written (a damaged index)
            fail(str(store_error(e, resolve_store_dir(kwargs.get("store")) / "events.db")))
        except OSError as e:
            fail(f"{e.strerror or e}: {getattr(e, 'filename', '') or ''}".rstrip(": "))
        finally:
            for reader in _VERB_READERS.get() or ():
                reader.close()
            _VERB_READERS.reset(token)

    return wrapper


def usage_error_line(e: click.ClickException) -> str:
    """A click error as the one contract every verb keeps: ``error: <reason> (see `<cmd> --help`)``."""
    msg = " ".join(e.format_message().split()).rstrip(".")
    msg = msg[:1].lower() + msg[1:]
    ctx = getattr(e, "ctx", None)
    if isinstance(e, click.UsageError) and ctx is not None:
        msg += f" (see `{ctx.command_path} --help`)"
    return f"error: {redacted_error(msg)}"


class OneLineErrors:
    """Mixin for a click command or group: usage errors (missing argument, bad option value, unknown
    command) print the same one line as every other error, ``error: …``, and exit 1 — never click's
    multi-line ``Usage: … Error: …`` with exit 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):  # noqa: D102
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as e:
            click.echo(e.ctx.get_help())  # a bare group (`flux`, `flux flow`): its help, not an error
            sys.exit(0)
        except click.ClickException as e:
            click.echo(usage_error_line(e), err=True)
            sys.exit(1)
        except click.Abort:
            click.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


@contextlib.contextmanager
def progress_bar(label: str, total: int, *, quiet: bool = False):
    """An ``on_progress(done, total, row)`` callback drawing a transient bar on a terminal's stderr
    (None when stderr is not a terminal or ``quiet``), the bar stopped however the block ends."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress

    bar = Progress(transient=True)
    task = bar.add_task(label, total=total)
    bar.start()
    try:
        yield lambda done, _total, _row: bar.update(task, completed=done)
    finally:
        bar.stop()
