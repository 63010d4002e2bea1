"""Key tables: a screen's or widget's ``BINDINGS`` written as a table of data (one row per key: its
keys, id, action, label, tooltip and flags) rather than as repeated ``Binding(...)`` calls."""

from __future__ import annotations

import re
import textwrap

from textual.binding import Binding

__all__ = ["key_table"]

_FLAGS = re.compile(r"\s+\[([^\[\]]*)\]$")


def _flags(text: str, groups: dict[str, Binding.Group]) -> dict:
    options: dict = {}
    for flag in (f.strip() for f in text.split(",")):
        if flag == "hidden":
            options["show"] = False
        elif flag.startswith("group "):
            name = flag[len("group "):].strip()
            options["group"] = groups.setdefault(name, Binding.Group(name, compact=True))
        else:
            raise ValueError(f"unknown key-table flag {flag!r} (use 'hidden' or 'group <Name>')")
    return options


def key_table(prefix: str, table: str) -> list[Binding]:
    """The bindings the ``table`` describes, their ids under ``prefix``.

    Each entry is a first line ``<keys> <id> <action> <label…> [flags]`` and the tooltip on the
    indented lines under it. ``<id>`` is joined to the prefix (``session`` + ``back`` →
    ``session.back``, the name a user keymap remaps); the label is the rest of the line; the
    optional flags in brackets are ``hidden`` (not in the footer) and ``group <Name>`` (a compact
    footer group). A line that starts with ``#`` is a comment (the column heads)::

        key_table("session", '''
        # keys  id          action      label
        escape  back        back        Back
            Clear the replay marks if shown, else back to the previous screen
        p       agent_loop  agent_loop  Agent loop  [hidden]
            Show / hide the agent-loop program the turn ran
        ''')

    A malformed entry raises ``ValueError`` naming its line, when the module is imported."""
    bindings: list[Binding] = []
    groups: dict[str, Binding.Group] = {}
    entry: list[str] | None = None
    tooltip: list[str] = []

    def finish() -> None:
        if entry is None:
            return
        head = entry[0]
        flags = _FLAGS.search(head)
        options = _flags(flags.group(1), groups) if flags else {}
        fields = (head[: flags.start()] if flags else head).split(None, 3)
        if len(fields) < 4:
            raise ValueError(f"key table {prefix}: {head!r} needs <keys> <id> <action> <label>")
        if not tooltip:
            raise ValueError(f"key table {prefix}: {head!r} has no tooltip line under it")
        keys, ident, action, label = fields
        bindings.append(Binding(keys, action, label.strip(), id=f"{prefix}.{ident}", tooltip=" ".join(tooltip),
                                **options))

    for line in textwrap.dedent(table).splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line[0].isspace():
            if entry is None:
                raise ValueError(f"key table {prefix}: a tooltip line {line.strip()!r} before any key")
            tooltip.append(line.strip())
            continue
        finish()
        entry, tooltip = [line.strip()], []
    finish()
    return bindings
