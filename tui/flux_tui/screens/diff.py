"""Run diff in the app: ``d`` asks for the other session (:class:`DiffPrompt`, default: the fork
source, else the last session diffed), then shows A | B side by side (:class:`DiffScreen`, the
first divergence focused); Enter opens one row's payloads (:mod:`.diff_detail`)."""

from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Label
from textual.worker import get_current_worker

from flux.errors import FluxError, StoreError

from ..keys import key_table
from ..messages import DiffReady, ReportsWorkerFailures
from ..widgets.diff_view import MARKERS, DiffList, row_marker, row_meaning, side_refs
from ..widgets.footer import KeyFooter
from ..widgets.rendered_view import RenderedView as Panel
from ..widgets.topbar import TopBar
from ..widgets.virtual_list import VirtualList
from .diff_detail import DiffDetailScreen

__all__ = ["DiffPrompt", "DiffScreen", "ask_and_diff", "diff_default"]


def diff_default(app, session_id: str, source: str | None) -> str:
    """The prompt's default: the fork source, else the last session diffed (not this one), else none."""
    if source and source != session_id:
        return source
    last = getattr(app, "last_diffed", None)
    if last and last != session_id:
        return last
    return ""


def ask_and_diff(app, session_id: str, source: str | None) -> None:
    def done(other: str | None) -> None:
        if other:
            app.last_diffed = other
            app.push_screen(DiffScreen(session_id, other))

    app.push_screen(DiffPrompt(session_id, diff_default(app, session_id, source)), done)


def resolve_ref(app, ref: str) -> tuple[str | None, str | None]:
    """(session id, error) for what the user typed: ``s_<n>``, ``<n>`` or ``last``."""
    ref = ref.strip()
    if not ref:
        return None, "type a session id (s_<n>) or last"
    if ref.isdigit():
        ref = f"s_{ref}"
    try:
        reader = app.reader or app.ensure_reader()
        return reader.resolve_session(ref).id, None
    except FluxError:
        if ref == "last":
            return None, "this store has no sessions"
        return None, f"no session “{ref}” in this store — type s_<n> or last"
    except StoreError as e:  # pragma: no cover - the store went away
        return None, app.mask_path(str(e))


class DiffPrompt(ModalScreen[str | None]):
    """Which session to diff against."""

    CSS_PATH = "diff.tcss"

    HELP_TOPIC = "diff-prompt"

    BINDINGS = key_table("diff_prompt", """
        # keys  id      action  label
        escape  cancel  cancel  Cancel
            Close without diffing
    """)

    def __init__(self, session_id: str, default: str = "") -> None:
        super().__init__()
        self.session_id = session_id
        self.default = default
        self.error: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="diff-prompt-box"):
            yield Label(Text.assemble("Diff ", (self.session_id, "bold cyan"), " against which session?"))
            yield Input(value=self.default, placeholder="s_<n> or last", id="diff-other")
            yield Label("", id="diff-error")
            yield Label(Text("Enter diffs · Esc cancels · s_<n>, a number, or last", style="dim"), id="diff-hint")

    def on_mount(self) -> None:
        box = self.query_one("#diff-prompt-box")
        box.border_title = "Diff"
        self.query_one("#diff-error").display = False
        self.query_one("#diff-other", Input).focus()

    @on(Input.Submitted, "#diff-other")
    def _submit(self, event: Input.Submitted) -> None:
        sid, error = resolve_ref(self.app, event.value)
        if error is not None:
            err = self.query_one("#diff-error", Label)
            err.update(Text(error, style="bold red"))
            err.display = True
            self.error = error
            return
        self.dismiss(sid)

    @on(Input.Changed, "#diff-other")
    def _changed(self, event: Input.Changed) -> None:
        self.query_one("#diff-error").display = False
        self.error = None

    def action_cancel(self) -> None:
        self.dismiss(None)


class DiffScreen(ReportsWorkerFailures, Screen):
    """Two runs aligned statement by statement."""

    CSS_PATH = "diff.tcss"

    HELP_TOPIC = "diff"

    BINDINGS = key_table("diff", """
        # keys  id    action     label
        escape  back  back       Back
            Back to the previous screen
        n       next  next_diff  Next diff
            Move to the next row that differs
        N       prev  prev_diff  Prev diff
            Move to the previous row that differs
        s       swap  swap       Swap A/B
            Swap the two sides and diff again
    """)

    def __init__(self, a: str, b: str, *, diff=None, focus_row: int | None = None, badge: Text | None = None) -> None:
        """``focus_row``: the row the cursor starts on (default: the first divergence); ``badge``:
        a header mark for a diff the time machine just made (``WHAT-IF ✓ hermetic``)."""
        super().__init__()
        self.a = a
        self.b = b
        self.diff = diff
        self.focus_row = focus_row
        self.badge = badge
        self.error: str | None = None
        self._divs: list[int] = []

    def compose(self) -> ComposeResult:
        yield TopBar(id="topbar")
        yield DiffList(id="diff-rows")
        yield Panel("diff-preview", id="diff-preview")
        yield KeyFooter()

    @property
    def rows_view(self) -> DiffList:
        return self.query_one(DiffList)

    def on_mount(self) -> None:
        self.query_one("#diff-rows").border_title = "Statements"
        self.query_one("#diff-preview").border_title = "Row"
        self._paint_topbar()
        self.rows_view.focus()
        if self.diff is not None:
            self._show(self.diff)
        else:
            self._run(self.a, self.b)

    @work(thread=True, exclusive=True, group="diff", exit_on_error=False, description="Diffing the sessions")
    def _run(self, a: str, b: str) -> None:
        from flux.timemachine.diff import run_diff

        try:
            reader = self.app.ensure_reader()
            diff = run_diff(reader, a, reader, b)
        except (StoreError, FluxError) as e:
            self.post_message(DiffReady(None, self.app.mask_path(str(e))))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(DiffReady(diff))

    @on(DiffReady)
    def _on_ready(self, message: DiffReady) -> None:
        if message.error is not None:
            self.error = message.error
            self.rows_view.empty_text = f"cannot diff: {message.error}"
            self.rows_view.set_rows([])
            self.notify(message.error, title="Cannot diff", severity="error", timeout=8)
            self._paint_topbar()
            return
        self._show(message.diff)

    def _show(self, diff) -> None:
        self.diff = diff
        rv = self.rows_view
        rv.empty_text = "neither session has a statement or a cell to compare"
        rv.set_diff(diff)
        self._divs = rv.divergences()
        fd = diff.first_divergence if self.focus_row is None else self.focus_row
        self.focus_row = None  # a swap or a re-diff focuses its own first divergence
        if fd is not None and 0 <= fd < len(diff.rows):
            rv.move_cursor(fd)
        kind = "cell" if diff.cell_rows else "statement"
        n_rows = f"{len(diff.rows)} row{'s' if len(diff.rows) != 1 else ''}"
        if diff.sequence_aligned:  # positions drift: each side numbers its own rows
            rv.border_title = (f"{kind}s aligned as a sequence · {n_rows} · "
                               f"A {diff.a_rows} {kind}s · B {diff.b_rows} {kind}s")
        else:
            rv.border_title = f"{kind} positions · {n_rows}"
        self._paint_topbar()
        self._preview(rv.current)
        self.refresh_bindings()

    def _paint_topbar(self) -> None:
        left = Text.assemble(("flux-tui", "bold"), "  ", ("store ", "dim"), (self.app.display_name, "bold"), ("  ›  ", "dim"),
                             ("diff ", "bold"), (self.a, "bold cyan"), " ↔ ", (self.b, "bold cyan"))
        right = Text()
        if self.badge is not None:
            right.append_text(self.badge)
            right.append("  ")
        if self.error is not None:
            right.append("cannot diff", style="bold red")
        elif self.diff is None:
            right.append("diffing…", style="dim")
        else:
            s = self.diff.summary
            right.append(f"{s['same']} same", style="dim")
            right.append(" · ")
            right.append(f"{s['plan']} plan", style="bold yellow" if s["plan"] else "dim")
            right.append(" · ")
            right.append(f"{s['output']} world", style="bold magenta" if s["output"] else "dim")
            right.append(" · ")
            right.append("identical" if self.diff.identical else "differ",
                         style="bold green" if self.diff.identical else "bold red")
        self.query_one(TopBar).set(left, right, squeeze=self.app.display_name, keep_tail=True)

    @on(VirtualList.Highlighted, "#diff-rows")
    def _on_row(self, message: VirtualList.Highlighted) -> None:
        self._preview(message.row)

    def _preview(self, row) -> None:
        panel = self.query_one("#diff-preview", Panel)
        if row is None or self.diff is None:
            panel.show(Text("no row under the cursor", style="dim italic"))
            return
        mark, style, _ = MARKERS[row_marker(row)]
        meaning = row_meaning(self.diff, row)
        where = side_refs(self.diff, row) if self.diff.sequence_aligned else f"node {row.node}"
        head = Text.assemble((f"{mark} ", style), (meaning, style if row.kind != "same" else ""),
                             (f" · row {row.index} · {where}", "dim"))
        parts = [head]
        if row.kind == "output":
            parts.append(Text.assemble(("op ", "dim"), (row.op or "", "cyan"), ("  ", ""), (self.a, "bold"), " ",
                                       ((row.a or "").replace("\n", " ⏎ ")[:300], "red")))
            parts.append(Text.assemble(("   " + " " * len(row.op or ""), ""), ("  ", ""), (self.b, "bold"), " ",
                                       ((row.b or "").replace("\n", " ⏎ ")[:300], "green")))
        elif row.kind == "plan":
            rv = self.rows_view
            parts.append(Text.assemble((f"{self.a}  ", "bold"), (rv.statement_text(row.a_stmt)[:300], "red")))
            parts.append(Text.assemble((f"{self.b}  ", "bold"), (rv.statement_text(row.b_stmt)[:300], "green")))
        else:
            parts.append(Text(self.rows_view.statement_text(row.stmt)[:300], style="dim"))
        parts.append(Text("Enter shows the payloads side by side · n/N next/previous difference", style="dim"))
        panel.show(Group(*parts))

    @on(VirtualList.Selected, "#diff-rows")
    def _on_select(self, message: VirtualList.Selected) -> None:
        if self.diff is not None and message.row is not None:
            self.app.push_screen(DiffDetailScreen(self.diff, message.row), self._detail_closed)

    def _detail_closed(self, index: int | None) -> None:
        if index is not None:
            self.rows_view.move_cursor(index)  # back on the row n/N moved to

    def _jump(self, forward: bool) -> None:
        rv = self.rows_view
        if not self._divs:
            self.notify("the runs are identical — no difference to jump to", timeout=2)
            return
        cur = rv.cursor
        from bisect import bisect_left, bisect_right

        if forward:
            i = bisect_right(self._divs, cur)
            target = self._divs[i] if i < len(self._divs) else self._divs[0]
        else:
            i = bisect_left(self._divs, cur) - 1
            target = self._divs[i] if i >= 0 else self._divs[-1]
        rv.move_cursor(target)

    def action_next_diff(self) -> None:
        self._jump(True)

    def action_prev_diff(self) -> None:
        self._jump(False)

    def action_swap(self) -> None:
        self.a, self.b = self.b, self.a
        self.diff = None
        self.error = None
        self.rows_view.empty_text = "diffing…"
        self.rows_view.set_rows([])
        self._paint_topbar()
        self._run(self.a, self.b)

    def action_back(self) -> None:
        self.app.pop_screen()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("next_diff", "prev_diff"):
            return self.diff is not None
        return True
