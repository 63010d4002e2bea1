"""Saved cases in the app: the bundles of a fixture store (``flux-tui --cases URL``, or "Cases" in
the command palette), a bundle's manifest and history (Enter), a replay-only run with the ladder's
result per call (``r``), and ``C`` on a statement of a session, which saves a case forked there.

Every store and run call goes through :mod:`flux.cases` in a thread worker; a refusal shows its
reason code and message, never a traceback.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from flux.cases import CaseRefusal, list_cases, load_case, open_fixture_store, resolve_store_url, run_case, save_case
from flux.errors import FluxError

from ..fmt import table_cell
from ..keys import key_table

__all__ = ["CasesScreen", "CaseDetailScreen", "CaseRunScreen", "save_case_here", "fixture_store_url"]

_PROVENANCE_STYLE = {"reused": "green", "simulated": "cyan", "live": "yellow", "changed": "yellow", "stopped": "red"}


def fixture_store_url(app: Any) -> str:
    """The app's ``--cases`` URL, else the environment's (``no_fixture_store`` when neither)."""
    return resolve_store_url(getattr(app, "cases_url", None), os.environ)


def _problem(e: Exception) -> str:
    return f"{e.code}: {e.message}" if isinstance(e, CaseRefusal) else str(e)


def _size(n: Any) -> str:
    if not isinstance(n, int):
        return "?"
    return f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} B"


class CasesScreen(Screen):
    """One row per bundle: hash, kind, target, fork point, size, capture completeness."""

    CSS_PATH = "cases.tcss"
    BINDINGS = key_table("cases", """
        # keys  id      action  label
        enter   open    open    Manifest
            Show the bundle's manifest and history
        r       run     run     Run replay-only
            Run the case replay-only: the ladder's result per call
        g       reload  reload  Reload
            List the fixture store again
        escape  back    back    Back
            Leave the cases view
    """)

    def __init__(self, url: Optional[str] = None) -> None:
        super().__init__()
        self.url = url
        self.hashes: list[str] = []

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(Text("cases · …"), id="cases-head")
        table: DataTable = DataTable(id="cases-table", cursor_type="row")
        table.add_columns("hash", "kind", "target", "fork", "calls", "size", "capture")
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.title = "flux-tui · cases"
        self.query_one(DataTable).focus()
        self.action_reload()

    def _head(self, text: str, style: str = "") -> None:
        self.query_one("#cases-head", Static).update(Text(text, style=style))

    def action_reload(self) -> None:
        try:
            url = self.url or fixture_store_url(self.app)
        except CaseRefusal as e:
            self._head(f"{e.code}: {e.message} — or start flux-tui with --cases URL", "red")
            return
        self.url = url
        self._head(f"cases · {url} · listing…")
        self._list(url)

    @work(thread=True, exclusive=True, group="cases", exit_on_error=False, description="Listing the cases")
    def _list(self, url: str) -> None:
        try:
            rows = list_cases(fixture_store=url)
        except (FluxError, OSError) as e:
            self.app.call_from_thread(self._head, f"cases · {url} · {_problem(e)}", "red")
            return
        self.app.call_from_thread(self._show, url, rows)

    def _show(self, url: str, rows: list) -> None:
        table = self.query_one(DataTable)
        table.clear()
        self.hashes = [r.hash for r in rows]
        for r in rows:
            s = r.summary
            cap = s.get("capture") if isinstance(s.get("capture"), dict) else {}
            if cap.get("complete"):
                capture = table_cell("complete", "green") if not cap.get("truncated") else table_cell(
                    f"complete · {len(cap['truncated'])} cut", "yellow")
            else:
                capture = table_cell(s.get("error") or "incomplete", "red")
            table.add_row(table_cell(r.hash[:16]), table_cell(str(s.get("kind", "?"))), table_cell(str(s.get("target_name", "?"))),
                          table_cell(f"@{s.get('fork_at', '?')} · seq {s.get('fork_after_seq', '?')}"),
                          table_cell(str(s.get("result_count", "?"))), table_cell(_size(r.stored_bytes)), capture, key=r.hash)
        self._head(f"cases · {url} · {len(rows)} bundle(s)" if rows else
                   f"cases · {url} · no bundles — save one: C on a statement, or flux case save SESSION")

    def _selected_hash(self) -> Optional[str]:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def action_open(self) -> None:
        h = self._selected_hash()
        if h is not None and self.url is not None:
            self.app.push_screen(CaseDetailScreen(self.url, h))

    def action_run(self) -> None:
        h = self._selected_hash()
        if h is not None and self.url is not None:
            self.app.push_screen(CaseRunScreen(self.url, h))

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
        else:
            self.app.exit()


class CaseDetailScreen(Screen):
    """A bundle's manifest, its calls and its history up to the fork."""

    CSS_PATH = "cases.tcss"
    BINDINGS = key_table("case_detail", """
        # keys  id    action          label
        escape  back  app.pop_screen  Back
            Back to the cases
        r       run   run             Run replay-only
            Run the case replay-only
    """)

    def __init__(self, url: str, h: str) -> None:
        super().__init__()
        self.url, self.hash = url, h

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with VerticalScroll(id="case-body"):
            yield Static(Text("loading…"), id="case-text")
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"flux-tui · case {self.hash[:16]}"
        self._load()

    @work(thread=True, exclusive=True, group="case", exit_on_error=False, description="Reading the bundle")
    def _load(self) -> None:
        try:
            b = load_case(self.hash, fixture_store=self.url)
        except (FluxError, OSError) as e:
            self.app.call_from_thread(self._set, Text(_problem(e), style="red"))
            return
        t = Text()
        t.append(f"case {b.hash}\n", style="bold")
        t.append(f"{b.size} bytes · {len(b.results)} recorded call(s) · {len(b.history)} history row(s)\n\n")
        t.append("manifest\n", style="bold")
        t.append(json.dumps(b.manifest, indent=2, ensure_ascii=False, sort_keys=True) + "\n\n")
        t.append("calls\n", style="bold")
        prefix_ops = b.manifest["fork"]["at"]
        prefix_models = b.manifest["fork"]["prefix_model_calls"]
        for r in b.ops() + b.model_calls():
            before = int(r["key"]) < prefix_ops if r["kind"] == "op" else int(r["key"]) <= prefix_models
            t.append(f"  {r['kind']}:{r['key']:<5} {'prefix' if before else 'after '} "
                     f"{r.get('op') or r.get('model') or ''}  {r['fingerprint'][:16]}…"
                     f"{'  error' if 'error' in r else ''}\n", style="dim" if before else "")
        t.append("\nhistory (up to the fork)\n", style="bold")
        for row in b.history:
            data = json.dumps(row.get("data"), ensure_ascii=False, sort_keys=True)
            t.append(f"  {row['global_seq']:>6}  {row['kind']:<16} {data[:150]}\n")
        self.app.call_from_thread(self._set, t)

    def _set(self, text: Text) -> None:
        self.query_one("#case-text", Static).update(text)

    def action_run(self) -> None:
        self.app.push_screen(CaseRunScreen(self.url, self.hash))


class CaseRunScreen(Screen):
    """A replay-only run of one case: each call after the fork with its rung, then the outcome."""

    CSS_PATH = "cases.tcss"
    BINDINGS = key_table("case_run", """
        # keys  id     action          label
        escape  back   app.pop_screen  Back
            Back
        r       rerun  rerun           Run again
            Run the case replay-only again
    """)

    def __init__(self, url: str, h: str) -> None:
        super().__init__()
        self.url, self.hash = url, h
        self.outcome: Any = None

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(Text(f"running case {self.hash[:16]}… replay-only"), id="run-head")
        table: DataTable = DataTable(id="run-table", cursor_type="row")
        table.add_columns("call", "name", "rung", "fingerprint", "recorded")
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"flux-tui · run {self.hash[:16]}"
        self.query_one(DataTable).focus()
        self.action_rerun()

    def action_rerun(self) -> None:
        self.query_one(DataTable).clear()
        self.outcome = None
        self._run()

    @work(thread=True, exclusive=True, group="case-run", exit_on_error=False, description="Running the case")
    def _run(self) -> None:
        try:
            out = run_case(self.hash, replay_only=True, fixture_store=self.url)
        except (FluxError, OSError) as e:
            self.app.call_from_thread(self._head, Text(_problem(e), style="red"))
            return
        self.app.call_from_thread(self._show, out)

    def _head(self, text: Text) -> None:
        self.query_one("#run-head", Static).update(text)

    def _show(self, out: Any) -> None:
        self.outcome = out
        table = self.query_one(DataTable)
        for c in out.calls:
            table.add_row(table_cell(c.key), table_cell(c.name), table_cell(c.provenance, _PROVENANCE_STYLE.get(c.provenance)),
                          table_cell(c.fingerprint[:16]), table_cell((c.recorded_fingerprint or "-")[:16]))
        head = Text()
        head.append(f"case {out.fixture_hash[:16]}… · ", style="bold")
        head.append(out.status, style="green" if out.complete else "red")
        p = out.provenance
        head.append(f" · {out.prefix_calls} prefix call(s) verified · reused {p['reused']} · simulated "
                    f"{p['simulated']} · live {p['live'] + p['changed']}")
        if out.code:
            head.append(f"\n{out.code}{' (' + out.reason + ')' if out.reason else ''} at {out.stop_key}: "
                        f"{out.message}", style="red")
        elif out.unconsumed_keys:
            head.append(f"\nnever made: {', '.join(out.unconsumed_keys)}", style="red")
        self._head(head)


def save_case_here(screen: Any) -> None:
    """``C`` on a session screen: save a case of the turn forked before the statement under the plan
    cursor (its first call is the first call after the fork); the hash is shown and copied."""
    if screen.app.read_only:  # saving writes a case bundle into the fixture store
        screen.notify(f"case not saved — read-only: {screen.app.read_only}", severity="warning", timeout=6)
        return
    row = screen.timeline_view.current if getattr(screen, "timeline", None) is not None else None
    stmt = getattr(row, "statement", None)
    if screen.detail is None or screen.turn is None or stmt is None:
        screen.notify("put the plan cursor on a statement to save a case there", severity="warning", timeout=4)
        return
    if not stmt.cells:
        screen.notify("this statement made no call — put the cursor on one that did", severity="warning", timeout=4)
        return
    try:
        url = fixture_store_url(screen.app)
    except CaseRefusal as e:
        screen.notify(f"{e.code}: start flux-tui with --cases URL or set FLUX_FIXTURE_STORE", severity="error",
                      timeout=8)
        return
    turn_cells = screen.detail.turn_cells(screen.turn)
    first = turn_cells[0].index if turn_cells else 0
    at = stmt.cells[0].index - first
    _save_worker(screen, str(screen.app.store_dir), screen.detail.row.id, screen.turn.number, at, url)


def _save_worker(screen: Any, store: str, session: str, turn: int, at: int, url: str) -> None:
    app = screen.app

    def work_() -> None:
        try:
            with open_fixture_store(url) as st:
                saved = save_case(store, session, at=at, turn=turn, fixture_store=st)
        except (FluxError, OSError) as e:
            app.call_from_thread(app.notify, f"case not saved — {_problem(e)}", severity="error", timeout=10)
            return

        def done() -> None:
            app.copy_to_clipboard(saved.hash)
            word = "saved" if saved.stored else "already saved"
            app.notify(f"case {word}: {saved.hash} (copied) · fork at statement {at} · {url}", title="Case",
                       timeout=12)
        app.call_from_thread(done)

    app.run_worker(work_, thread=True, group="case-save", exit_on_error=False, description="Saving the case")
