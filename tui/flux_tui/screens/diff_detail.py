"""One aligned row of a run diff (Enter on the diff screen): A's payload | B's payload, JSON-aware,
differing lines coloured, then what changed (the structural or line diff of ``payload_diff``)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen

from ..keys import key_table
from ..widgets.diff_view import MARKERS, gap_text, row_marker, row_meaning, side_by_side, side_refs
from ..widgets.footer import KeyFooter
from ..widgets.rendered_view import RenderedView as Panel
from ..widgets.topbar import TopBar

__all__ = ["DiffDetailScreen", "render_changes"]


class DiffDetailScreen(Screen):
    """One aligned row: A's payload | B's payload, then what changed."""

    CSS_PATH = "diff.tcss"

    HELP_TOPIC = "diff-detail"

    BINDINGS = key_table("diff_detail", """
        # keys  id    action    label
        escape  back  back      Back
            Back to the diff rows
        n       next  step(1)   Next diff
            Show the next row that differs, without leaving the payloads
        N       prev  step(-1)  Prev diff
            Show the previous row that differs, without leaving the payloads
    """)

    def __init__(self, diff, row) -> None:
        super().__init__()
        self.diff = diff
        self.row = row

    def action_step(self, delta: int) -> None:
        rows = self.diff.rows
        differing = [r.index for r in rows if r.kind != "same"]
        if not differing or differing == [self.row.index]:
            self.notify("no other row differs", timeout=2)
            return
        cur = self.row.index
        if delta > 0:
            nxt = next((i for i in differing if i > cur), differing[0])
        else:
            nxt = next((i for i in reversed(differing) if i < cur), differing[-1])
        if (delta > 0 and nxt <= cur) or (delta < 0 and nxt >= cur):
            self.notify("wrapped around", timeout=1.5)
        self.row = rows[nxt]
        self._paint()

    def compose(self) -> ComposeResult:
        yield TopBar(id="topbar")
        with Horizontal(id="payloads"):
            yield Panel("payload-a", id="payload-a")
            yield Panel("payload-b", id="payload-b")
        yield Panel("payload-diff", id="payload-diff")
        yield KeyFooter()

    def on_mount(self) -> None:
        self._paint()
        self.query_one("#payload-a").focus()

    def _paint(self) -> None:
        from flux.timemachine.diff import payload_diff

        d, row = self.diff, self.row
        mark, style, _ = MARKERS[row_marker(row)]
        meaning = row_meaning(d, row)
        left = Text.assemble(("flux-tui", "bold"), "  ", ("diff ", "bold"), (d.a, "bold cyan"), " ↔ ", (d.b, "bold cyan"),
                             ("  ›  ", "dim"), (f"row {row.index}", "bold"))
        if d.sequence_aligned:  # the row pairs different positions: say which on each side
            left.append(f" · {side_refs(d, row)}", style="dim")
        right = Text.assemble((f"{mark} {meaning}", style))
        self.query_one(TopBar).set(left, right)
        # The same payloads `flux diff --explain` explains: outputs, cells (op, input, content) or statements.
        a, b, what = d.row_payloads(row)
        if what == "statement":
            a, b = _statement_display(a), _statement_display(b)
        ta, tb, is_json = side_by_side(a, b)
        if row.kind == "plan" and row.a_stmt is None:
            ta = Text(gap_text(d, row, "A"), style="dim italic")
        if row.kind == "plan" and row.b_stmt is None:
            tb = Text(gap_text(d, row, "B"), style="dim italic")
        pa, pb = self.query_one("#payload-a", Panel), self.query_one("#payload-b", Panel)
        # Text, not str: a border title given as str is parsed as markup (ids come from the store).
        pa.border_title = Text(f"A · {d.a} · {what}" + (" · JSON" if is_json else ""))
        pb.border_title = Text(f"B · {d.b} · {what}" + (" · JSON" if is_json else ""))
        pa.show(ta)
        pb.show(tb)
        pd = payload_diff(d, row)
        panel = self.query_one("#payload-diff", Panel)
        panel.border_title = {"json": "What changed · structural", "text": "What changed · line diff",
                              "none": "What changed"}[pd.kind]
        panel.show(render_changes(pd))

    def action_back(self) -> None:
        self.dismiss(self.row.index)  # the diff screen puts its cursor on the row n/N moved to


def _statement_display(source: str) -> str:
    from ..render import display_statement_text

    return display_statement_text(source) if source else ""


_CHANGE_WORDS = {  # deepdiff's report keys, in the order shown, and how each reads
    "values_changed": ("~", "changed", "yellow"), "type_changes": ("~", "changed type", "yellow"),
    "dictionary_item_added": ("+", "added", "green"), "iterable_item_added": ("+", "added", "green"),
    "attribute_added": ("+", "added", "green"),
    "dictionary_item_removed": ("-", "removed", "red"), "iterable_item_removed": ("-", "removed", "red"),
    "attribute_removed": ("-", "removed", "red"),
}


def _json_path(path: str) -> str:
    """deepdiff's ``root['input']['command']`` / ``root[3]`` as ``input.command`` / ``[3]``."""
    import re

    out = ""
    for key, index in re.findall(r"\['((?:[^'\\]|\\.)*)'\]|\[(\d+)\]", path):
        out += f"[{index}]" if index else (("." if out else "") + key)
    return out or "(the whole value)"


def _one_value(value, limit: int = 120) -> str:
    import json

    text = json.dumps(value, ensure_ascii=False)  # JSON: "1" and 1 differ, a newline reads \n
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _render_structural(changes: dict) -> Text:
    """One line per change — ``~ input.command  "pytest -q" → "pytest"`` — from deepdiff's report,
    values as one-line JSON: its own sentences broke lines in the middle of a value."""
    out = Text()
    for kind, (mark, word, style) in _CHANGE_WORDS.items():
        entries = changes.get(kind)
        if not isinstance(entries, dict):
            continue
        for path, value in entries.items():
            out.append(f"{mark} ", style=f"bold {style}")
            out.append(_json_path(path), style="bold")
            out.append(f"  {word}  ", style="dim")
            if isinstance(value, dict) and ("old_value" in value or "new_value" in value):
                out.append(_one_value(value.get("old_value")), style="red")
                out.append(" → ", style="dim")
                out.append(_one_value(value.get("new_value")), style="green")
            else:
                out.append(_one_value(value), style=style)
            out.append("\n")
    for kind in changes:
        if kind not in _CHANGE_WORDS:
            out.append(f"· {kind.replace('_', ' ')}\n", style="dim")
    out.rstrip()
    return out


def render_changes(pd) -> Text:
    if pd.kind == "none" or not pd.lines:
        return Text("nothing: both sides are the same", style="dim italic")
    if pd.kind == "json" and isinstance(pd.changes, dict) and pd.changes:
        return _render_structural(pd.changes)
    out = Text()
    for line in pd.lines:
        if pd.kind == "text":
            if line.startswith("+++") or line.startswith("---"):
                style = "bold"
            elif line.startswith("@@"):
                style = "cyan"
            elif line.startswith("+"):
                style = "green"
            elif line.startswith("-"):
                style = "red"
            else:
                style = "dim"
        else:
            low = line.lower()
            style = ("yellow" if "changed" in low else "green" if "added" in low else "red" if "removed" in low
                     else "")
        out.append(line + "\n", style=style)
    out.rstrip()
    return out
