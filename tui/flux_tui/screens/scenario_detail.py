"""Golden ↔ this run for one scenario (Enter on the tests screen): the trajectories aligned row by
row, then every other failure ``flux test -v`` prints, the cursor on the first divergence."""

from __future__ import annotations

from typing import Any, Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import DataTable, Static

from ..fmt import table_cell
from ..keys import key_table
from ..widgets.footer import KeyFooter
from ..widgets.topbar import TopBar

__all__ = ["TestDetailScreen", "detail_rows"]

_MARK_STYLE = {"=": "dim", "≠": "yellow", "-": "red", "+": "green", " ": "dim", "#": "bold"}
_CHANGE_MARKS = frozenset("≠-+")  # the rows `n` stops at


def _diff_rows(text: str) -> list[tuple[str, str, str]]:
    """A failure text as rows: ``- x`` / ``-x`` on the golden side, ``+ y`` / ``+y`` on this run's,
    ``  z`` on both, anything else a note; unified-diff headers stay notes."""
    rows: list[tuple[str, str, str]] = []
    for line in text.splitlines():
        if line.startswith(("--- ", "+++ ", "@@")):
            rows.append((" ", line, ""))
        elif line.startswith("-"):
            rows.append(("-", line[1:].removeprefix(" "), ""))
        elif line.startswith("+"):
            rows.append(("+", "", line[1:].removeprefix(" ")))
        elif line.startswith("  "):
            rows.append(("=", line[2:], line[2:]))
        else:
            rows.append((" ", line, ""))
    return rows


def detail_rows(res: Any) -> tuple[list[tuple[str, str, str]], Optional[int]]:
    """Everything ``flux test -v`` says about a result, as ``(mark, golden, this run)`` rows: the
    trajectory (golden ↔ the re-drive, or the recording alone when nothing was re-driven), then
    each other failure under a ``#`` heading (the plan snapshot's per-line diff, a trajectory golden
    diff, an error). Returns the rows and the first changed one."""
    from flux.model.surfaces import aligned_rows

    rep = res.report
    rows: list[tuple[str, str, str]] = []
    if rep is not None and rep.replay_only:
        rows = [(" ", line, "") for line in rep.golden_transcript]
    elif rep is not None:
        rows = aligned_rows(rep.golden_transcript, rep.actual_transcript)
    for what, text in res.sections:
        if what == "check":  # the trajectory above is the check's
            continue
        rows.append(("#", f"── {what} ──", ""))
        rows += _diff_rows(text)
    if not res.sections and not res.ok and res.detail:
        rows.append(("#", "── failure ──", ""))
        rows += _diff_rows(res.detail)
    first = next((i for i, r in enumerate(rows) if r[0] in _CHANGE_MARKS), None)
    return rows, first


class TestDetailScreen(Screen):
    """Golden ↔ this run, aligned, then the other failures; the cursor on the first divergence."""

    HELP_TOPIC = "test-detail"

    CSS_PATH = "tests.tcss"
    BINDINGS = key_table("test_detail", """
        # keys  id    action          label
        escape  back  app.pop_screen  Back
            Back to the scenarios
        n       next  next_change     Next change
            Jump to the next differing row
    """)

    def __init__(self, result: Any) -> None:
        super().__init__()
        self.result = result
        self.rows: list[tuple[str, str, str]] = []
        self.first: int | None = None

    def compose(self) -> ComposeResult:
        res = self.result
        rep = res.report
        head = Text()
        head.append(f"replay {res.replay or '-'} · check {res.check or '-'}")
        if res.first_divergence:
            head.append(f"\nfirst divergence: {res.first_divergence}", style="red")
        if rep is not None and rep.replay_only:
            head.append(f"\n{rep.note}", style="dim")
        yield TopBar(id="topbar")
        yield Static(head, id="detail-head")
        table: DataTable = DataTable(id="detail-table", cursor_type="row")
        col = max(20, (self.app.size.width - 10) // 2)  # both sides visible at any width
        table.add_column(" ", width=2)
        table.add_column("golden", width=col)
        table.add_column("this run", width=col)
        self.rows, self.first = detail_rows(res)
        for i, (mark, a, b) in enumerate(self.rows):
            shown = ("▶" if i == self.first else " ") + (mark if mark != "#" else " ")
            style = _MARK_STYLE[mark]
            table.add_row(table_cell(shown, style), table_cell(a, None if mark == "=" else style),
                          table_cell(b, None if mark == "=" else style))
        yield table
        yield KeyFooter()

    def on_mount(self) -> None:
        res = self.result
        self.title = f"flux-tui · {res.name}"
        verdict = Text("✓ clean", style="green") if res.ok else Text("✗ failed", style="bold red")
        self.query_one(TopBar).set(Text.assemble(("flux-tui", "bold"), "  ", ("test ", "dim"), (res.name, "bold")),
                                   verdict)
        table = self.query_one(DataTable)
        table.focus()
        if self.first is not None:
            table.move_cursor(row=self.first)

    def action_next_change(self) -> None:
        table = self.query_one(DataTable)
        for i in range(table.cursor_row + 1, len(self.rows)):
            if self.rows[i][0] in _CHANGE_MARKS:
                table.move_cursor(row=i)
                return
        self.notify("no further change", severity="information")
