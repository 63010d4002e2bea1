"""Lineage modal: a session's source and its forks / what-ifs / sub-agents (recursively)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static
from textual.worker import get_current_worker

from flux.errors import FluxError, SessionNotFound, StoreError
from flux.model.lineage import lineage_of
from flux.model.listing import SessionSummary
from flux.store.store import SessionRow

from ..compat import safe_summarize
from ..fmt import lineage_mark, fmt_age, fmt_cost, outcome_style
from ..messages import ChildrenLoaded
from ..widgets.virtual_list import VirtualList

__all__ = ["LineageScreen", "open_source"]

MAX_DEPTH = 6
MAX_NODES = 2000


def open_source(app, source_id: str) -> None:
    """Open the source session, or say that it is not in this store."""
    reader = app.reader
    try:
        if reader is None:
            raise SessionNotFound(source_id)
        reader.get_session(source_id)
    except (SessionNotFound, StoreError):
        app.notify(f"source session {source_id} is not in this store (it may live in another store)", severity="warning")
        return
    app.open_session(source_id)


@dataclass(eq=False)
class LineageRow:
    summary: SessionSummary
    depth: int


class ChildrenList(VirtualList[LineageRow]):
    HELP_TOPIC = "lineage"

    BINDINGS = [
        Binding("enter", "select", "Open", id="lineage.open", tooltip="Open the highlighted session"),
    ]

    def __init__(self, now_ms, **kw) -> None:
        super().__init__(show_header=True, empty_text="loading…", **kw)
        self._now_ms = now_ms

    def row_key(self, row: LineageRow) -> Hashable:
        return row.summary.row.n

    def render_header(self, width: int) -> Text:
        return Text(f" {'session':<12} {'kind':<13} {'detail':<10} {'model':<14} {'turns':>5} {'last':<10} {'status':<13} "
                    f"{'cost':>8} {'updated':>9}")

    def render_row(self, row: LineageRow, index: int, line: int, width: int, selected: bool) -> Text:
        s = row.summary
        lin = s.lineage or lineage_of(s.row)
        ident = ("  " * row.depth) + ("└ " if row.depth else "") + s.id
        t = Text(f" {ident:<12.12} ", style="bold")
        t.append(f"{(lineage_mark(lin) if lin else 'root'):<13.13} ", style="magenta")
        t.append(f"{(lin.detail if lin else ''):<10.10} ", style="dim")
        t.append(f"{(s.row.model or '–'):<14.14} ")
        t.append(f"{s.turns:>5} ")
        t.append(f"{(s.last_outcome or '–'):<10.10} ", style=outcome_style(s.last_outcome))
        if s.interrupted:
            t.append(f"{'⚠ interrupted':<13} ", style="bold yellow")
        else:
            t.append(f"{'':<13} ")
        t.append(f"{fmt_cost(s.cost):>8} ", style="dim")
        t.append(f"{fmt_age(s.row.updated_at, self._now_ms()):>9}", style="dim")
        return t


class LineageScreen(ModalScreen[str | None]):
    HELP_TOPIC = "lineage"

    BINDINGS = [
        Binding("escape,l", "close", "Close", id="lineage.close", tooltip="Close the lineage panel"),
        Binding("u", "source", "Source", id="lineage.source", tooltip="Open the session this one was derived from"),
    ]

    def __init__(self, session_id: str) -> None:
        super().__init__()
        self.session_id = session_id
        self.source: SessionRow | None = None
        self.source_id: str | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="lineage-box"):
            yield Static(id="lineage-head")
            yield ChildrenList(self.app.now_ms, id="children")
            yield Static(id="lineage-keys")

    def on_mount(self) -> None:
        box = self.query_one("#lineage-box")
        box.border_title = f"Lineage · {self.session_id}"
        self.query_one("#lineage-head", Static).update(Text("reading the registry…", style="dim"))
        self.query_one("#lineage-keys", Static).update(
            Text.assemble(("Enter", "bold"), " open  ", ("u", "bold"), " source  ", ("Esc", "bold"), " close", style="dim"))
        self.query_one(ChildrenList).focus()
        self._load()

    @work(thread=True, exclusive=True, group="lineage", exit_on_error=False, description="Reading lineage")
    def _load(self) -> None:
        try:
            reader = self.app.ensure_reader()
            row = reader.get_session(self.session_id)
            source: SessionRow | None = None
            missing = None
            if row.correlation_id:
                try:
                    source = reader.get_session(row.correlation_id)
                except SessionNotFound:
                    missing = row.correlation_id
            rows: list[tuple[SessionRow, int]] = []
            seen = {row.id}

            def walk(sid: str, depth: int) -> None:
                if depth >= MAX_DEPTH or len(rows) >= MAX_NODES:
                    return
                for child in reader.children_of(sid):
                    if child.id in seen:
                        continue
                    seen.add(child.id)
                    rows.append((child, depth))
                    walk(child.id, depth + 1)

            walk(row.id, 0)
            summaries = safe_summarize(reader, [r for r, _ in rows], self.app.prices)
            by_id = {s.id: s for s in summaries}
            out = [(by_id[r.id], d) for r, d in rows if r.id in by_id]
        except (StoreError, SessionNotFound, FluxError) as e:
            self.post_message(ChildrenLoaded(self.session_id, None, None, [], str(e)))
            return
        if not get_current_worker().is_cancelled:
            self.post_message(ChildrenLoaded(self.session_id, source, missing, [s for s, _ in out], None,
                                             [d for _, d in out]))

    @on(ChildrenLoaded)
    def _on_loaded(self, message: ChildrenLoaded) -> None:
        head = self.query_one("#lineage-head", Static)
        children = self.query_one(ChildrenList)
        if message.error:
            head.update(Text(message.error, style="bold red"))
            children.empty_text = "cannot read the lineage"
            children.set_rows([])
            return
        t = Text()
        if message.source is not None:
            lin = None
            try:
                lin = lineage_of(self.app.reader.get_session(self.session_id)) if self.app.reader else None
            except (SessionNotFound, StoreError):
                pass
            self.source_id = message.source.id
            t.append("source  ", style="dim")
            t.append(message.source.id, style="bold cyan")
            if lin is not None:
                t.append(f"  {lineage_mark(lin)} {lin.detail}".rstrip(), style="magenta")
            t.append(f"  · {message.source.model}", style="dim")
            t.append("  — u opens it", style="dim italic")
        elif message.source_missing:
            self.source_id = None
            t.append("source  ", style="dim")
            t.append(message.source_missing, style="bold")
            t.append("  (not in this store)", style="yellow")
        else:
            t.append(f"{self.session_id} is a root session (no source)", style="dim")
        n = len(message.children)
        t.append(f"\n{n} derived session{'s' if n != 1 else ''}" if n else "\nno forks, what-ifs or sub-agents derive from it",
                 style="bold" if n else "dim")
        head.update(t)
        depths = message.depths or [0] * n
        children.empty_text = f"nothing derives from {self.session_id} — make one with `flux fork {self.session_id} --at N`"
        children.set_rows([LineageRow(s, max(d, 0)) for s, d in zip(message.children, depths)])
        self.refresh_bindings()

    @on(VirtualList.Selected, "#children")
    def _on_selected(self, message: VirtualList.Selected) -> None:
        sid = message.row.summary.id
        self.dismiss(sid)
        self.app.open_session(sid)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_source(self) -> None:
        if self.source_id is None:
            return
        sid = self.source_id
        self.dismiss(None)
        open_source(self.app, sid)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "source":
            return self.source_id is not None
        return True
