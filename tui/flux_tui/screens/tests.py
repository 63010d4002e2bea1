"""Tests: the scenarios under a folder with ``flux test``'s verdict for each (``flux-tui --tests DIR``
or "Tests" in the palette) — run all or one again, accept new goldens, filter by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Input, Label, Static
from textual.widgets.data_table import CellDoesNotExist
from textual.worker import get_current_worker

from flux.errors import FluxError
from flux.testkit.runner import ClientCache
from flux.testkit.verdict import Incomplete, collect, judge, judge_incomplete, judge_orphan

from ..fmt import table_cell
from ..keys import key_table
from ..widgets.footer import KeyFooter
from ..widgets.topbar import TopBar
from .ask import AskScreen
from .scenario_detail import TestDetailScreen

__all__ = ["TestsScreen"]

_STATUS_STYLE = {True: "green", False: "red"}


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(0, width - 1)] + "…"


class TestsScreen(Screen):
    """One row per scenario: name, replay, check, first divergence."""

    HELP_TOPIC = "tests"

    CSS_PATH = "tests.tcss"
    BINDINGS = key_table("tests", """
        # keys  id         action     label
        enter   open       open       Golden ↔ run
            Show golden ↔ this run side by side
        r       rerun      rerun      Run all
            Replay and check every scenario again
        t       rerun_one  rerun_one  Run this
            Replay and check the highlighted scenario again
        u       accept     accept     Accept golden
            Rewrite the highlighted scenario's plan snapshot and trajectory golden (as flux test --update)
        slash   filter     filter     Filter
            Show only the scenarios whose name matches
        escape  back       back       Back
            Clear the filter, or leave the tests view
    """)

    def __init__(self, directory: str | Path) -> None:
        super().__init__()
        self.directory = Path(directory)
        self.results: dict[str, Any] = {}  # row key -> ScenarioResult
        self.order: list[Path] = []
        self.targets: dict[str, Any] = {}  # row key -> a scenario path, an Incomplete or ("orphan", path)
        self.filter_text = ""
        self.running: set[str] = set()

    def compose(self) -> ComposeResult:
        yield TopBar(id="topbar")
        with Horizontal(id="tests-filter-bar"):
            yield Label("/", id="tests-filter-label")
            yield Input(placeholder="scenario name", id="tests-filter")
        yield Static(Text(f"tests · {self.directory}"), id="tests-head")
        table: DataTable = DataTable(id="tests-table", cursor_type="row", zebra_stripes=False)
        table.add_columns("scenario", "replay", "check", "first divergence")
        yield table
        yield KeyFooter()

    def on_mount(self) -> None:
        self.title = "flux-tui · tests"
        self.query_one("#tests-filter-bar").display = False
        self.query_one(DataTable).focus()
        self.action_rerun()

    # -- header ----------------------------------------------------------------------------------

    def _counts(self) -> tuple[int, int]:
        ok = sum(1 for r in self.results.values() if r.ok)
        return ok, len(self.results) - ok

    def _paint(self, status: Optional[str] = None) -> None:
        left = Text.assemble(("flux-tui", "bold"), "  ", ("tests ", "dim"), (str(self.directory), "bold"))
        right = Text()
        done, total = len(self.results), len(self.targets)
        if not total:
            right.append("no scenarios", style="dim")
        elif self.running:
            right.append(f"running {done}/{total}", style="dim")
        else:
            ok, failed = self._counts()
            right.append(f"{ok} clean", style="green")
            right.append(" · ")
            right.append(f"{failed} failed", style="bold red" if failed else "dim")
        if self.filter_text:
            right.append(" · ")
            right.append(f"filter “{self.filter_text}”: {self.query_one(DataTable).row_count} shown", style="cyan")
        self.query_one(TopBar).set(left, right)
        if status is not None:
            self._head(status)

    def _head(self, text: str) -> None:
        self.query_one("#tests-head", Static).update(Text(text))

    def _summary(self) -> str:
        ok, failed = self._counts()
        return f"tests · {self.directory} · {len(self.results)} scenario(s): {ok} clean, {failed} failed"

    # -- running ---------------------------------------------------------------------------------

    def action_rerun(self) -> None:
        self.workers.cancel_group(self, "tests")
        self.results.clear()
        try:
            found = collect([self.directory])
        except FluxError as e:
            self.targets = {}
            self._fill()
            self._paint(f"error: {e}")
            return
        self.targets = {str(t.path if isinstance(t, Incomplete) else t): t
                        for t in sorted([*found.scenarios, *found.incomplete],
                                        key=lambda t: str(t.path if isinstance(t, Incomplete) else t))}
        self.targets.update({str(o): ("orphan", o) for o in found.orphans})
        self.order = [Path(k) for k in self.targets]
        self._fill()
        if not self.order:
            self._paint(f"no scenarios under {self.directory} — record one: flux record NAME \"PROMPT\" --dir DIR -m MODEL")
            return
        self.running = set(self.targets)
        self._paint(f"tests · {self.directory} · running {len(self.order)} scenario(s)…")
        self._run(dict(self.targets))

    def _row_name(self, key: str) -> str:
        t = self.targets.get(key)
        return f"orphan {Path(key).name}" if isinstance(t, tuple) else Path(key).name

    def _fill(self) -> None:
        """The rows the filter lets through, with what is known of each."""
        table = self.query_one(DataTable)
        table.clear()
        for key in self.targets:
            if self.filter_text and self.filter_text.lower() not in self._row_name(key).lower():
                continue
            res = self.results.get(key)
            if res is None:
                table.add_row(table_cell(self._row_name(key)), table_cell("…", "dim"), table_cell("running", "dim"), table_cell(""), key=key)
            else:
                table.add_row(*self._cells(res), key=key)

    def _cells(self, res: Any) -> list[Text]:
        fd = res.first_divergence or ""
        return [table_cell(res.name if res.kind != "scenario" else Path(str(res.path)).name),
                table_cell(res.replay or "-", "green" if res.replay.startswith("✓") else "red"),
                table_cell(res.check or "-", _STATUS_STYLE[res.ok]), table_cell(fd, "red" if fd else None)]

    def _fit_divergence(self) -> None:
        """The scenario and replay columns keep their width (a ``✗ plan snapshot`` is never cut);
        the check and the first divergence share what is left, each ending in ``…`` beyond its
        share, so no row runs past the screen's edge (Enter shows the scenario whole)."""
        table = self.query_one(DataTable)
        cols = table.ordered_columns
        if len(cols) < 4 or not self.results:
            return
        used = sum(c.get_render_width(table) for c in cols[:2])
        room = max(24, table.size.width - used - 4 * table.cell_padding - 1)
        natural = max(len(r.check or "-") for r in self.results.values())
        check_w = max(min(natural, room - 24), min(natural, 12))
        fd_w = max(12, room - check_w)
        for key, res in list(self.results.items()):
            fd = res.first_divergence or ""
            try:
                table.update_cell(key, cols[2].key, table_cell(_clip(res.check or "-", check_w), _STATUS_STYLE[res.ok]),
                                  update_width=True)
                table.update_cell(key, cols[3].key, table_cell(_clip(fd, fd_w), "red" if fd else None), update_width=True)
            except CellDoesNotExist:  # the row is filtered out
                pass

    def on_resize(self, event) -> None:
        self.call_after_refresh(self._fit_divergence)

    @work(thread=True, group="tests", exit_on_error=False, description="Running the scenarios")
    def _run(self, targets: dict[str, Any], update: bool = False) -> None:
        cache = ClientCache()
        try:
            for key, t in targets.items():
                if get_current_worker().is_cancelled:
                    return
                if isinstance(t, Incomplete):
                    res = judge_incomplete(t)
                elif isinstance(t, tuple):
                    res = judge_orphan(t[1])
                else:
                    res = judge(t, client_factory=cache, update=update)
                self.app.call_from_thread(self._show, key, res)
        finally:
            cache.close()

    def _show(self, key: str, res: Any) -> None:
        if key not in self.targets:  # a re-run replaced the list meanwhile
            return
        self.results[key] = res
        self.running.discard(key)
        table = self.query_one(DataTable)
        try:
            for col, cell in zip(table.ordered_columns, self._cells(res)):
                table.update_cell(key, col.key, cell, update_width=True)
        except CellDoesNotExist:  # the row is filtered out, or the table was refilled
            pass
        self.call_after_refresh(self._fit_divergence)  # after the table took the new cells' widths
        if res.rebaselined:
            self.notify("\n".join(rb.line() for rb in res.rebaselined), title="accepted", timeout=8)
        if not self.running:
            self._paint(self._summary())
        else:
            self._paint()

    def _selected(self) -> Optional[str]:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value

    def _run_one(self, key: str, *, update: bool) -> None:
        t = self.targets.get(key)
        if t is None:
            return
        self.results.pop(key, None)
        self.running.add(key)
        table = self.query_one(DataTable)
        try:
            table.update_cell(key, table.ordered_columns[1].key, table_cell("…", "dim"))
            table.update_cell(key, table.ordered_columns[2].key, table_cell("running", "dim"))
            table.update_cell(key, table.ordered_columns[3].key, table_cell(""))
        except CellDoesNotExist:  # filtered out
            pass
        self._paint(f"tests · {self.directory} · running {self._row_name(key)}…")
        self._run({key: t}, update=update)

    def action_rerun_one(self) -> None:
        key = self._selected()
        if key is not None and key not in self.running:
            self._run_one(key, update=False)

    def action_accept(self) -> None:
        key = self._selected()
        if key is None or key in self.running:
            return
        if self.app.read_only:  # accepting rewrites the scenario's golden files
            self.notify(f"not accepted — read-only: {self.app.read_only}", severity="warning", timeout=6)
            return
        res = self.results.get(key)
        if res is None or res.kind != "scenario":
            self.notify("nothing to accept here: only a scenario's goldens can be re-baselined", severity="warning")
            return
        fixable = [w for w, _ in res.sections if w in ("plan snapshot", "trajectory golden")]
        if res.ok or not fixable:
            why = ("its goldens already match" if res.ok else
                   "--update rewrites plan snapshots and trajectory goldens; this failure needs a re-record "
                   "(flux record NAME \"PROMPT\" --update)")
            self.notify(f"nothing to accept for {res.name}: {why}", severity="information" if res.ok else "warning")
            return

        def answered(value: Optional[str]) -> None:
            if value is not None and value.strip().lower() in ("y", "yes"):
                self._run_one(key, update=True)

        self.app.push_screen(AskScreen(
            "Accept the new golden", f"Rewrite {', '.join(fixable)} of {res.name} from the recording "
            f"(as flux test --update)? Enter 'y' to accept.", "the diff is in Enter's detail · Esc cancels"), answered)

    # -- filter ----------------------------------------------------------------------------------

    def action_filter(self) -> None:
        bar = self.query_one("#tests-filter-bar")
        bar.display = True
        box = self.query_one("#tests-filter", Input)
        box.value = self.filter_text
        box.focus()

    @on(Input.Changed, "#tests-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self._fill()
        self._paint()

    @on(Input.Submitted, "#tests-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.query_one(DataTable).focus()
        if not self.filter_text:
            self.query_one("#tests-filter-bar").display = False

    # -- navigation ------------------------------------------------------------------------------

    def action_open(self) -> None:
        key = self._selected()
        if key is None:
            return
        res = self.results.get(key)
        if res is None:
            self.notify("this scenario is still running", severity="warning")
            return
        self.app.push_screen(TestDetailScreen(res))

    @on(DataTable.RowSelected)
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_back(self) -> None:
        if self.filter_text or self.query_one("#tests-filter-bar").display:
            self.filter_text = ""
            self.query_one("#tests-filter", Input).value = ""
            self.query_one("#tests-filter-bar").display = False
            self._fill()
            self._paint()
            self.query_one(DataTable).focus()
            return
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
        else:  # started with --tests: this is the app; q quits it
            self.notify("this is the first screen — q quits", severity="information")
