"""The flux-tui App and its ``flux-tui`` console script.

The App owns the store reader, the price table, the per-session summary cache and the live-refresh
timer; screens run their own thread workers against ``app.reader`` and post results back as
messages (:mod:`flux_tui.messages`).
"""

from __future__ import annotations

import gc
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import click
from textual import on, work
from textual.app import App
from textual.worker import Worker, WorkerState, get_current_worker

import flux.lang  # noqa: F401  (the read models import the parser lazily: import it here, on the main thread, before any worker)
from flux import __version__
from flux.cli.common import OneLineErrors, StoreLocation
from flux.errors import FluxError, StoreError
from flux.model.listing import SessionSummary
from flux.model.pricing import PriceTable, load_price_table
from flux.store.lease import lease_snapshot
from flux.store.location import postgres_url, redacted_url
from flux.store.store import SessionRow, StoreReader, default_store_dir

from .commands import FluxCommands
from .fmt import display_path
from .keys import key_table
from .messages import OpenSession, StoreChanged

__all__ = ["FluxApp", "main"]


class FluxApp(App):
    """Browse a flux store: sessions → session (turns, plans, cells, conversation) → lineage."""

    CSS_PATH = "app.tcss"
    TITLE = "flux-tui"
    COMMANDS = App.COMMANDS | {FluxCommands}
    ENABLE_COMMAND_PALETTE = True

    BINDINGS = key_table("app", """
        # keys         id        action label
        f1             help      help   Help
            Explain the focused panel and list the keys
        question_mark  help_alt  help   Help  [hidden]
            Explain the focused panel and list the keys
        q              quit      quit   Quit
            Quit flux-tui
        ctrl+t         tests     tests  Tests  [hidden]
            Run the recorded scenarios (--tests DIR, else tests/scenarios) and show golden ↔ run
        ctrl+k         cases     cases  Cases  [hidden]
            The saved cases of the fixture store (--cases URL, else $FLUX_FIXTURE_STORE)
    """)

    def __init__(self, store_dir: str | os.PathLike[str] | None = None, prices_file: str | os.PathLike[str] | None = None,
                 now_ms: int | None = None, *, display_name: str | None = None, poll_interval: float | None = 1.0,
                 session: str | None = None, keymap: dict[str, str] | None = None,
                 tests_dir: str | os.PathLike[str] | None = None, cases_url: str | None = None,
                 read_only: str | None = None) -> None:
        super().__init__()
        # Why this app may not write (``--read-only``, or served in a browser without --allow-write):
        # None when fork, what-if, resurrect, delete and accepting goldens may write.
        self.read_only = read_only
        self.cases_url = cases_url
        self.tests_dir = Path(tests_dir) if tests_dir is not None else None
        if keymap:
            # User remapping by binding id (posting-style): {"session.next_error": "n,f8", ...}
            self.set_keymap(keymap)
        self.store_dir = Path(store_dir).expanduser() if store_dir is not None else default_store_dir()
        self.prices_file = prices_file
        self.frozen_now_ms = now_ms
        url = postgres_url(self.store_dir)  # a Postgres store is named by its URL (no password), not its local dir
        self.display_name = display_name or (redacted_url(url) if url else display_path(self.store_dir))
        self.poll_interval = poll_interval
        self.initial_session = session
        self.reader: StoreReader | None = None
        self.prices: PriceTable | None = None
        self.prices_error: str | None = None
        self.open_error: str | None = None
        self._open_lock = threading.Lock()
        self._token: object = None
        self._leases: frozenset = frozenset()  # the leases held at the last poll (lease_snapshot)
        # id -> summary; valid while the registry row (updated_at, last_seq) is unchanged.
        self.summaries: dict[str, SessionSummary] = {}
        self.last_diffed: str | None = None  # the diff prompt's fallback default
        self.sessions_grouped = False  # the sessions list groups children under their source (t)
        self.session_split: int | None = None  # turns column width set with < / > (None: responsive default)
        self.theme = "nord"

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = True) -> None:
        """Every toast is literal text: messages carry store paths, session ids and recorded errors,
        which must never be read as markup (``[n]`` vanished, ``[/]`` raised). Screens' ``notify``
        lands here too."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    # -- time -----------------------------------------------------------------------------------

    def now_ms(self) -> int:
        return self.frozen_now_ms if self.frozen_now_ms is not None else int(time.time() * 1000)

    # -- store ----------------------------------------------------------------------------------

    def ensure_reader(self) -> StoreReader:
        """Open the store once (call from a thread worker). Raises :class:`StoreError`."""
        with self._open_lock:
            if self.reader is not None:
                return self.reader
            try:
                reader = StoreReader(self.store_dir)
            except StoreError as e:
                self.open_error = str(e)
                raise
            try:
                self.prices = load_price_table(self.prices_file, self.store_dir)
            except FluxError as e:
                # The CLI refuses this file with the same words; the app says so and carries on with
                # the built-in prices (costs of models only the file would price read "?").
                self.prices_error = str(e)
                self.prices = load_price_table(None, None)
                self._say(f"error: {self.mask_path(self.prices_error)} — using the built-in prices",
                          title="Bad prices file", severity="error", timeout=12)
            self._token = reader.change_token()
            self._leases = lease_snapshot(self.store_dir)
            self.open_error = None
            self.reader = reader
            return reader

    def _say(self, message: str, **kw) -> None:
        """A toast from any thread (ensure_reader runs in workers and, in tests, on the main thread)."""
        if threading.get_ident() == self._thread_id:
            self.notify(message, **kw)
        else:
            self.call_from_thread(self.notify, message, **kw)

    def mask_path(self, text: str) -> str:
        """A message with the store path shown as the display name (``~/…``, or the name a test set).

        Only whole paths are replaced: an absolute form of the store directory where a path ends
        (``/`` or a non-path character follows), a relative one only where a file inside it follows
        — never a word that happens to spell the directory's name (a store named ``locked`` in
        "… is locked by a writer")."""
        import re

        forms = {str(self.store_dir.absolute()), str(self.store_dir.resolve())}
        relative = str(self.store_dir)
        if not self.store_dir.is_absolute() and relative not in (".", ""):
            forms.add(relative)
        for p in sorted(forms, key=len, reverse=True):
            tail = r"(?=/|$|[^\w.~/-])" if p.startswith("/") else r"(?=/)"
            text = re.sub(r"(?<![\w.~/-])" + re.escape(p) + tail, lambda _m: self.display_name, text)
        return text

    def cached_summary(self, row: SessionRow) -> SessionSummary | None:
        s = self.summaries.get(row.id)
        if s is not None and s.row.updated_at == row.updated_at and s.row.last_seq == row.last_seq:
            return s
        return None

    def store_summaries(self, summaries: list[SessionSummary]) -> None:
        for s in summaries:
            self.summaries[s.row.id] = s

    # -- lifecycle ------------------------------------------------------------------------------

    def on_mount(self) -> None:
        from .screens.sessions import SessionsScreen

        if self.tests_dir is not None:  # --tests DIR: the scenarios are the app
            self.action_tests()
            return
        if self.cases_url is not None:  # --cases URL: the saved cases are the app
            self.action_cases()
            return
        self.push_screen(SessionsScreen())
        if self.read_only:
            self.notify(f"read-only: {self.read_only}", title="Browsing only", timeout=8)
        if self.poll_interval:
            self.set_interval(self.poll_interval, self._poll, name="store-poll")

    def on_unmount(self) -> None:
        if self.reader is not None:
            self.reader.close()

    def _poll(self) -> None:
        if self.reader is not None:
            self._check_changes()

    @work(thread=True, exclusive=True, group="poll", exit_on_error=False, description="Watching the store")
    def _check_changes(self) -> None:
        reader = self.reader
        if reader is None:
            return
        try:
            token, leases = reader.change_token(), lease_snapshot(self.store_dir)
            if token == self._token and leases == self._leases:
                return
            reader.refresh()
            self._token = reader.change_token()
        except StoreError:
            return
        if leases != self._leases:  # a writer started, ended or died: no event says so, its open turn reads anew
            self._leases = leases
            self.call_from_thread(self._forget_open_turns)
        if not get_current_worker().is_cancelled:
            self.post_message(StoreChanged())

    def _forget_open_turns(self) -> None:
        for sid in [sid for sid, s in self.summaries.items() if s.interrupt.open_turn is not None]:
            del self.summaries[sid]

    @on(Worker.StateChanged)
    def _worker_failed(self, event: Worker.StateChanged) -> None:
        self.report_worker_failure(event)

    def report_worker_failure(self, event: Worker.StateChanged) -> None:
        """A worker that raised is reported, never silently lost (harlequin's pattern): the App's own
        workers, and every screen's (see :class:`~flux_tui.messages.ReportsWorkerFailures`)."""
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        what = event.worker.description or event.worker.name
        self.log.error(f"{what} failed", error)
        self.notify(f"{what} failed: {type(error).__name__}: {error}", severity="error", timeout=10)
        node = event.worker.node
        handler = getattr(node, "worker_failed", None)
        if callable(handler):
            handler(event.worker, error)

    @on(StoreChanged)
    def _store_changed(self, message: StoreChanged) -> None:
        for screen in self.screen_stack:
            screen.post_message(StoreChanged())

    def check_store_now(self) -> None:
        """Poll once right away (tests, and the reload key)."""
        if self.reader is not None:
            self._check_changes()

    # -- navigation -----------------------------------------------------------------------------

    @on(OpenSession)
    def _open_session(self, message: OpenSession) -> None:
        self.open_session(message.session_id)

    def open_session(self, session_id: str, turn: int | None = None) -> None:
        from .screens.session import SessionScreen

        self.push_screen(SessionScreen(session_id, turn))

    def open_child(self, child: str, source: str, toast: str, *, warning: bool = False) -> None:
        """Open a session the time machine just wrote from ``source``, ``d`` one key from their diff."""
        from .screens.child_session import ChildSessionScreen

        self.push_screen(ChildSessionScreen(child, source))
        self.notify(toast, severity="warning" if warning else "information", timeout=8)

    def action_tests(self) -> None:
        from .screens.tests import TestsScreen

        default = Path("tests/scenarios")
        self.push_screen(TestsScreen(self.tests_dir or (default if default.is_dir() else Path("."))))

    def action_cases(self) -> None:
        from .screens.cases import CasesScreen

        self.push_screen(CasesScreen(self.cases_url))

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss()
            return
        self.push_screen(HelpScreen.for_screen(self.screen))


def _demo_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "flux-tui" / "demo"


def open_demo_store(fresh: bool) -> Path:
    """The demo store for ``--demo``: the one of the last visit (its forks, what-ifs and
    resurrects kept) unless ``fresh`` or there is none yet, else recorded now — saying which on
    stderr, with the build's progress, so the terminal is never blank while it records. A cache
    directory that cannot hold it is one ``error:`` line and exit 1."""
    try:
        from flux.demo import build_demo_store
    except ImportError:
        click.echo("error: this build has no demo store (flux.demo) — open a real store with --store DIR", err=True)
        sys.exit(1)
    store = _demo_dir()
    shown = display_path(store)
    if not fresh and (store / "events.db").is_file():
        click.echo(f"flux-tui: opening the demo store of your last visit ({shown}), with what you forked, asked "
                   "and resurrected there — `flux-tui --demo --fresh` rebuilds it", err=True)
        return store
    click.echo(f"flux-tui: {'rebuilding' if store.exists() else 'building'} the demo store in {shown} "
               "(recording its sessions, a few seconds)…", err=True)
    t0 = time.monotonic()
    try:
        if store.exists():
            shutil.rmtree(store)
        store.parent.mkdir(parents=True, exist_ok=True)
        build_demo_store(store)
    except FluxError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    except OSError as e:
        where = "XDG_CACHE_HOME" if os.environ.get("XDG_CACHE_HOME") else "~/.cache"
        click.echo(f"error: cannot create the demo store in {shown}: {e.strerror or e} — point {where} at a "
                   "directory you can write to", err=True)
        sys.exit(1)
    click.echo(f"flux-tui: demo store ready ({time.monotonic() - t0:.1f} s)", err=True)
    return store


class _Command(OneLineErrors, click.Command):
    """``flux-tui``'s usage errors follow the ``flux`` contract: one ``error: …`` line, exit 1."""


@click.command(cls=_Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="flux-tui")
@click.option("--store", "store", type=StoreLocation(), default=None,
              help="Store directory (holds events.db) or postgres:// URL. Default: $FLUX_STORE_DIR, $FLUX_STORE_URL or ~/.flux.")
@click.option("--demo", is_flag=True,
              help="Open the demo store (~/.cache/flux-tui/demo), built on first use and kept — with your forks, "
                   "what-ifs and resurrects — between visits.")
@click.option("--fresh", is_flag=True, help="With --demo: rebuild the demo store from scratch first.")
@click.option("--prices", "prices", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="JSON price table (USD per Mtok) extending the built-in one.")
@click.option("--session", "session", default=None, help="Open this session (s_<n> or 'last') directly.")
@click.option("--keymap", "keymap_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              envvar="FLUX_TUI_KEYMAP", show_envvar=True,
              help='JSON object remapping keys by binding id, e.g. {"session.next_error": "n,f8"} (ids: press F1).')
@click.option("--tests", "tests", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Run the recorded scenarios under DIR (flux test, offline) and browse golden ↔ run.")
@click.option("--cases", "cases", default=None, metavar="URL",
              help="Browse the saved cases of a fixture store (a directory, postgres://…, s3://…) and run them.")
@click.option("--read-only", "read_only", is_flag=True,
              help="Browse only: fork, what-if, resurrect, delete and accepting goldens are refused.")
@click.option("--serve", is_flag=True,
              help="Serve the app to a web browser (textual-serve; the `serve` extra) instead of this terminal. "
                   "It only browses unless --allow-write.")
@click.option("--host", default="127.0.0.1", show_default=True, help="With --serve: the address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535),
              help="With --serve: the port to listen on.")
@click.option("--allow-write", "allow_write", is_flag=True,
              help="With --serve: let the browser fork, what-if, resurrect and delete (written as this user).")
def main(store: Path | None, demo: bool, fresh: bool, prices: Path | None, session: str | None,
         keymap_file: Path | None, tests: Path | None, cases: str | None, read_only: bool, serve: bool,
         host: str, port: int, allow_write: bool) -> None:
    """Browse a flux store: sessions, turns, accepted plans and cassette cells.

    Browsing writes nothing; fork, what-if and resurrect write new sessions into the store (or
    finish an interrupted turn) after the side-effect gate.
    """
    keymap = load_keymap(keymap_file) if keymap_file else None
    if fresh and not demo:
        raise click.UsageError("--fresh rebuilds the demo store; use it with --demo")
    if demo:
        if store is not None:
            raise click.UsageError("--demo builds its own store; drop --store (or drop --demo)")
        store = open_demo_store(fresh)
    given = click.get_current_context().get_parameter_source
    serve_only = [f"--{n.replace('_', '-')}" for n in ("host", "port", "allow_write")
                  if given(n) != click.core.ParameterSource.DEFAULT]
    if serve_only and not serve:
        raise click.UsageError(f"{', '.join(serve_only)} go(es) with --serve")
    if serve:
        from .serve import serve_app

        try:
            serve_app(app_args(store, prices, session, keymap_file, tests, cases,
                               read_only=read_only or not allow_write),
                      store=store, host=host, port=port, writes=allow_write and not read_only)
        except FluxError as e:
            raise click.ClickException(str(e)) from None
        return
    tune_gc()
    served = os.environ.get("FLUX_TUI_SERVED")  # set by --serve for each browser's app process
    app = FluxApp(store, prices, session=session, keymap=keymap, tests_dir=tests, cases_url=cases,
                  read_only=(READ_ONLY_SERVED if served else READ_ONLY_FLAG) if read_only else None)
    app.run()
    sys.exit(exit_code(app))


READ_ONLY_FLAG = "started with --read-only; restart without it to fork, what-if, resurrect or delete"
READ_ONLY_SERVED = "served without --allow-write; whoever runs flux-tui --serve can allow writes"


def app_args(store: Path | None, prices: Path | None, session: str | None, keymap_file: Path | None,
             tests: Path | None, cases: str | None, *, read_only: bool) -> list[str]:
    """The ``flux-tui`` arguments that open the same view again (for the served app's per-browser
    process): every path made absolute, since that process may start in another directory."""
    args: list[str] = []
    for flag, value in (("--store", store), ("--prices", prices), ("--keymap", keymap_file), ("--tests", tests)):
        if value is not None:
            args += [flag, str(Path(value).expanduser().absolute())]
    if session is not None:
        args += ["--session", session]
    if cases is not None:
        args += ["--cases", cases]
    if read_only:
        args.append("--read-only")
    return args


GC_YOUNG_THRESHOLD = 20_000


def tune_gc() -> None:
    """The ``flux-tui`` process collects its youngest generation every 20,000 allocations instead of
    Python's 700. Opening a session allocates widgets, styles and rows by the hundred thousand, and
    almost all of them stay alive (the screen holds them): at 700 the collector ran ~100 times per
    open and once walked the whole heap — the sessions list of a 10,000-session store included —
    about a third of the CPU of opening the 99,981-event session (454 → 310 ms, load ~9). Cycles
    are still collected, just in larger batches; the older generations' thresholds are Python's."""
    _young, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)


def exit_code(app: FluxApp) -> int:
    """The process exit code once the app has quit: Textual's own code when it crashed (never 0 for
    a traceback), else 1 with the reason on stderr when the store could never be opened (the notice
    said so in the app; scripts see it too), else 0."""
    code = app.return_code
    if code:
        return code
    if app.reader is None and app.open_error is not None:
        click.echo(f"error: {app.mask_path(app.open_error)}", err=True)
        return 1
    return 0


def load_keymap(path: Path) -> dict[str, str]:
    """``{"binding.id": "key[,key…]"}`` from a JSON file; a bad file is a usage error, not a traceback."""
    import json

    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise click.BadParameter(f"{path} does not exist", param_hint="--keymap") from None
    except (OSError, ValueError) as e:
        raise click.BadParameter(f"{path} is not valid JSON ({e})", param_hint="--keymap") from None
    if not isinstance(data, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in data.items()):
        raise click.BadParameter(f'{path} must be a JSON object of binding id → keys, e.g. {{"sessions.filter": "slash,f"}}',
                                 param_hint="--keymap")
    valid = binding_ids()
    unknown = sorted(k for k in data if k not in valid)
    if unknown:
        raise click.BadParameter(f"{path} names unknown binding id(s) {', '.join(unknown)} — valid ids: "
                                 f"{', '.join(sorted(valid))}", param_hint="--keymap")
    return data


def binding_ids() -> set[str]:
    """Every binding id the app's screens and widgets declare (what --keymap may remap)."""
    import importlib
    import pkgutil

    from textual.dom import DOMNode

    from . import screens, widgets

    for pkg in (screens, widgets):
        for mod in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{pkg.__name__}.{mod.name}")
    ids: set[str] = set()
    todo = [DOMNode]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls.__module__.startswith("flux_tui"):
            for b in cls.__dict__.get("BINDINGS", ()):
                if getattr(b, "id", None):
                    ids.add(b.id)
    return ids
