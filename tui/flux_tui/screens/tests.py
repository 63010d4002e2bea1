"""Tests: the scenario directories under a folder with their result (``flux-tui --tests DIR``, or
"Tests" in the command palette), and, on Enter, golden ↔ this run side by side.

The list runs ``flux test``'s own verdict (:mod:`flux.testkit.verdict`: replay, plan snapshot,
check, trajectory golden — offline; incomplete scenario directories and orphan goldens as red rows) in a thread worker, one row filled in as each finishes;
``r`` runs them again. The detail screen aligns the golden trajectory with the re-drive's, the
cursor on the first divergence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static
from textual.worker import get_current_worker

from flux.errors import FluxError
from flux.testkit.runner import ClientCache
from flux.testkit.verdict import Incomplete, collect, judge, judge_incomplete, judge_orphan

__all__ = ["TestsScreen", "TestDetailScreen"]

_STATUS_STYLE = {True: "green", False: "red"}


def _cell(text: str, style: str | None = None) -> Text:
    return Text(text, style=style or "", no_wrap=True, overflow="ellipsis")


class TestsScreen(Screen):
    """One row per scenario: name, replay, check, first divergence."""

    DEFAULT_CSS = """
    TestsScreen #tests-head { height: auto; padding: 0 1; color: $text-muted; }
    TestsScreen DataTable { height: 1fr; }
    """
    BINDINGS = [
        Binding("enter", "open", "Golden ↔ run", id="tests.open", tooltip="Show golden ↔ this run side by side"),
        Binding("r", "rerun", "Run again", id="tests.rerun", tooltip="Replay and check every scenario again"),
        Binding("escape", "back", "Back", id="tests.back", tooltip="Leave the tests view"),
    ]

    def __init__(self, directory: str | Path) -> None:
        super().__init__()
        self.directory = Path(directory)
        self.results: dict[str, Any] = {}  # path -> ScenarioResult
        self.order: list[Path] = []
        self.targets: dict[str, Any] = {}  # row key -> a scenario path, an Incomplete or ("orphan", path)

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        yield Static(Text(f"tests · {self.directory}"), id="tests-head")
        table: DataTable = DataTable(id="tests-table", cursor_type="row", zebra_stripes=False)
        table.add_columns("scenario", "replay", "check", "first divergence")
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.title = "flux-tui · tests"
        self.query_one(DataTable).focus()
        self.action_rerun()

    def _head(self, text: str) -> None:
        self.query_one("#tests-head", Static).update(Text(text))

    def action_rerun(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        self.results.clear()
        try:
            found = collect([self.directory])
        except FluxError as e:
            self._head(f"error: {e}")
            return
        self.targets = {str(t.path if isinstance(t, Incomplete) else t): t
                        for t in sorted([*found.scenarios, *found.incomplete],
                                        key=lambda t: str(t.path if isinstance(t, Incomplete) else t))}
        self.targets.update({str(o): ("orphan", o) for o in found.orphans})
        self.order = [Path(k) for k in self.targets]
        if not self.order:
            self._head(f"no scenarios under {self.directory} — record one: flux record NAME \"PROMPT\" --dir DIR -m MODEL")
            return
        for key, t in self.targets.items():
            name = f"orphan {Path(key).name}" if isinstance(t, tuple) else Path(key).name
            table.add_row(_cell(name), _cell("…", "dim"), _cell("running", "dim"), _cell(""), key=key)
        self._head(f"tests · {self.directory} · running {len(self.order)} scenario(s)…")
        self._run(dict(self.targets))

    @work(thread=True, exclusive=True, group="tests", exit_on_error=False, description="Running the scenarios")
    def _run(self, targets: dict[str, Any]) -> None:
        cache = ClientCache()
        try:
            for t in targets.values():
                if get_current_worker().is_cancelled:
                    return
                if isinstance(t, Incomplete):
                    res = judge_incomplete(t)
                elif isinstance(t, tuple):
                    res = judge_orphan(t[1])
                else:
                    res = judge(t, client_factory=cache)
                self.app.call_from_thread(self._show, res)
        finally:
            cache.close()

    def _show(self, res: Any) -> None:
        table = self.query_one(DataTable)
        key = str(res.path)
        self.results[key] = res
        style = _STATUS_STYLE[res.ok]
        fd = res.first_divergence or ""
        try:
            table.update_cell(key, table.ordered_columns[1].key, _cell(res.replay or "-", "green" if res.replay.startswith("✓") else "red"),
                              update_width=True)
            table.update_cell(key, table.ordered_columns[2].key, _cell(res.check or "-", style), update_width=True)
            table.update_cell(key, table.ordered_columns[3].key, _cell(fd, "red" if fd else None), update_width=True)
        except Exception:  # noqa: BLE001 - the table was cleared by a re-run meanwhile
            return
        done = len(self.results)
        if done == len(self.order):
            ok = sum(1 for r in self.results.values() if r.ok)
            self._head(f"tests · {self.directory} · {done} scenario(s): {ok} clean, {done - ok} failed")

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        res = self.results.get(key)
        if res is None:
            self.notify("this scenario is still running", severity="warning")
            return
        self.app.push_screen(TestDetailScreen(res))

    @on(DataTable.RowSelected)
    def _selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
        else:
            self.app.exit()


class TestDetailScreen(Screen):
    """Golden ↔ this run, aligned; the cursor on the first divergence."""

    DEFAULT_CSS = """
    TestDetailScreen #detail-head { height: auto; padding: 0 1; }
    TestDetailScreen DataTable { height: 1fr; }
    """
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back", id="test_detail.back", tooltip="Back to the scenarios"),
        Binding("n", "next_change", "Next change", id="test_detail.next", tooltip="Jump to the next differing row"),
    ]

    def __init__(self, result: Any) -> None:
        super().__init__()
        self.result = result
        self.rows: list[tuple[str, str, str]] = []
        self.first: int | None = None

    def compose(self) -> ComposeResult:
        from flux.testkit.surfaces import aligned_rows, first_change

        res = self.result
        rep = res.report
        head = Text()
        head.append(f"{res.name}", style="bold")
        head.append(f" · replay {res.replay or '-'} · check {res.check or '-'}")
        if res.first_divergence:
            head.append(f"\nfirst divergence: {res.first_divergence}", style="red")
        if rep is not None and rep.replay_only:
            head.append(f"\n{rep.note}", style="dim")
        elif res.error and rep is None:
            head.append(f"\n{res.error}", style="red")
        yield Header(show_clock=False)
        yield Static(head, id="detail-head")
        table: DataTable = DataTable(id="detail-table", cursor_type="row")
        col = max(20, (self.app.size.width - 10) // 2)  # both sides visible at any width
        table.add_column(" ", width=2)
        table.add_column("golden", width=col)
        table.add_column("this run", width=col)
        if rep is not None and rep.replay_only:  # nothing was re-driven: the recording alone
            self.rows = [(" ", line, "") for line in rep.golden_transcript]
        elif rep is not None:
            self.rows = aligned_rows(rep.golden_transcript, rep.actual_transcript)
            self.first = first_change(self.rows)
        style = {"=": "dim", "≠": "yellow", "-": "red", "+": "green", " ": "dim"}
        for i, (mark, a, b) in enumerate(self.rows):
            shown = ("▶" if i == self.first else " ") + mark
            table.add_row(_cell(shown, style[mark]), _cell(a, None if mark == "=" else style[mark]),
                          _cell(b, None if mark == "=" else style[mark]))
        yield table
        yield Footer()

    def on_mount(self) -> None:
        self.title = f"flux-tui · {self.result.name}"
        table = self.query_one(DataTable)
        table.focus()
        if self.first is not None:
            table.move_cursor(row=self.first)

    def action_next_change(self) -> None:
        table = self.query_one(DataTable)
        start = table.cursor_row + 1
        for i in range(start, len(self.rows)):
            if self.rows[i][0] != "=":
                table.move_cursor(row=i)
                return
        self.notify("no further change", severity="information")
