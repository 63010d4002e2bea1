"""Delete sessions the time machine made (``D`` on the sessions list): forks, what-ifs and checks —
with whatever was derived from them — after a confirmation that names every session and its
events. The store stays read-only until ``y``; then one transaction through the store writer
removes them all (or, on any error, none)."""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from flux.errors import FluxError, StoreError
from flux.model.lineage import lineage_of
from flux.store.store import SessionRow, StoreWriter

from ..fmt import failure_line, lineage_mark
from ..keys import key_table
from ..messages import ReportsWorkerFailures
from ..writes import check_writable
from .buttons import ButtonActions

__all__ = ["DeleteScreen", "DELETABLE", "deletion_set"]

DELETABLE = ("fork", "what-if", "check")  # what the time machine writes; recordings and sub-agents stay


def deletion_set(target: SessionRow, rows: list[SessionRow]) -> list[SessionRow]:
    """``target`` and every session derived from it, transitively (a fork of a fork goes with it):
    a child left behind would name a source that is gone. Cycles in a hostile registry are cut."""
    by_source: dict[str, list[SessionRow]] = {}
    for r in rows:
        if r.correlation_id and r.correlation_id != r.id:
            by_source.setdefault(r.correlation_id, []).append(r)
    out: list[SessionRow] = []
    seen: set[str] = set()
    todo = [target]
    while todo:
        r = todo.pop(0)
        if r.id in seen:
            continue
        seen.add(r.id)
        out.append(r)
        todo.extend(sorted(by_source.get(r.id, ()), key=lambda c: c.n))
    return out


class _Deleted(Message):
    def __init__(self, deleted: dict[str, int] | None = None, error: str | None = None) -> None:
        super().__init__()
        self.deleted, self.error = deleted, error


class DeleteScreen(ButtonActions, ReportsWorkerFailures, ModalScreen[dict | None]):
    """Name what goes, ask, delete in one transaction, dismiss with ``{id: events deleted}``."""

    HELP_TOPIC = "delete"
    CSS_PATH = "dialog.tcss"
    BUTTON_ACTIONS = {"delete-yes": "confirm", "delete-no": "close"}

    BINDINGS = key_table("delete", """
        # keys    id       action    label
        y         confirm  confirm   Delete
            Delete the sessions listed, with all their events (one transaction)
        n,escape  close    close     Cancel
            Close: nothing is deleted
        f1        help     app.help  Help
            Explain this dialog and list its keys
    """)

    def __init__(self, rows: list[SessionRow]) -> None:
        super().__init__()
        self.rows = rows
        self.running = False

    def compose(self) -> ComposeResult:
        with Vertical(id="delete-box", classes="tm-box"):
            yield Static(self._what(), id="delete-body")
            with Horizontal(classes="tm-buttons"):
                yield Button("y  Delete", id="delete-yes", variant="error", compact=True)
                yield Button("n  Cancel", id="delete-no", compact=True)

    def _what(self) -> Text:
        first = self.rows[0]
        t = Text()
        t.append("This deletes, for good, from ", style="")
        t.append(self.app.display_name, style="bold")
        t.append(":\n")
        for r in self.rows:
            lin = lineage_of(r)
            events = max(r.last_seq + 1, 0)
            t.append(f"  {r.id:<8}", style="bold red")
            t.append(f"{lineage_mark(lin) if lin else 'session'}", style="magenta")
            if lin is not None:
                t.append(f" ← {lin.source}{lin.detail if lin.kind in ('fork', 'what-if') else ''}", style="dim")
            t.append(f"   {events} event(s)\n", style="dim")
        if len(self.rows) > 1:
            t.append(f"{first.id}'s derived sessions go with it (their source would be gone).\n", style="dim")
        t.append("Nothing else changes; a deleted session's id is never reused.", style="dim")
        return t

    def on_mount(self) -> None:
        box = self.query_one("#delete-box")
        box.border_title = f"Delete {self.rows[0].id}" + (f" and {len(self.rows) - 1} more" if len(self.rows) > 1 else "")
        box.border_subtitle = "y delete · n/Esc cancel"
        self.query_one("#delete-no", Button).focus()

    def action_confirm(self) -> None:
        if self.running:
            return
        self.running = True
        self.query_one("#delete-yes", Button).disabled = True
        self.query_one("#delete-body", Static).update(Text("deleting…", style="bold red"))
        self._delete([r.id for r in self.rows])

    @work(thread=True, exclusive=True, group="delete", exit_on_error=False, description="Deleting sessions")
    def _delete(self, ids: list[str]) -> None:
        try:
            check_writable(self.app)
            with StoreWriter(self.app.store_dir, create=False) as writer:
                deleted = writer.delete_sessions(ids)
        except (StoreError, FluxError) as e:
            self.post_message(_Deleted(error=self.app.mask_path(str(e))))
            return
        reader = self.app.reader
        if reader is not None:
            try:
                reader.refresh()
            except StoreError:
                pass
        self.post_message(_Deleted(deleted))

    @on(_Deleted)
    def _on_deleted(self, message: _Deleted) -> None:
        self.running = False
        if message.error is not None:
            self.query_one("#delete-body", Static).update(failure_line(message.error, "nothing was deleted"))
            self.query_one("#delete-no", Button).label = "Close"
            return
        for sid in message.deleted or ():
            self.app.summaries.pop(sid, None)
        self.app.check_store_now()
        self.dismiss(message.deleted)

    def action_close(self) -> None:
        if self.running:
            self.notify("the sessions are being deleted — wait for it to finish", severity="warning", timeout=3)
            return
        self.dismiss(None)
