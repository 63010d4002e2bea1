"""Finding things in a session: the matches of ``/`` (this turn's plan rows, the conversation shown,
then the other turns' recorded calls) and the targets ``:`` jumps to (turn, statement, cell)."""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple, Sequence

from flux.model.session import Cell

from ..widgets.timeline_view import TLRow

__all__ = ["Search", "find_matches", "parse_jump"]

_JUMP = re.compile(r"\s*(t|turn|s|stmt|statement|c|cell|#)?\s*(\d+)\s*", re.IGNORECASE)


class Search(NamedTuple):
    """An active search: its matches — ("row", timeline index), ("conv", conversation line),
    ("cell", cell index of another turn) — and the one shown."""

    query: str
    matches: list[tuple[str, int]]
    position: int = -1

    def step(self, delta: int) -> "Search":
        return self._replace(position=(self.position + delta) % len(self.matches))

    @property
    def current(self) -> tuple[str, int]:
        return self.matches[self.position]


def _call_text(cell: Cell) -> str:
    rec = cell.rec
    return "\n".join((rec.op, rec.input_view or "", rec.content, rec.view or ""))


def find_matches(query: str, rows: Sequence[TLRow], conversation: str, cells: Iterable[Cell],
                 turn_number: int | None) -> list[tuple[str, int]]:
    """Where ``query`` occurs (case-insensitive), in the order n steps through them."""
    q = query.casefold()
    matches: list[tuple[str, int]] = []
    for i, r in enumerate(rows):
        if r.kind == "statement" and r.statement is not None:
            hay = r.display or r.statement.text
        elif r.kind == "cell" and r.cell is not None:
            hay = _call_text(r.cell)
        else:
            continue
        if q in hay.casefold():
            matches.append(("row", i))
    matches += [("conv", j) for j, line in enumerate(conversation.splitlines()) if q in line.casefold()]
    if turn_number is not None:  # the other turns' recorded calls (op, input, content)
        matches += [("cell", c.index) for c in cells if c.turn_number != turn_number and q in _call_text(c).casefold()]
    return matches


def parse_jump(text: str) -> tuple[str, int] | None:
    """``3`` / ``t3`` → ("t", 3), ``s2`` → ("s", 2), ``c7`` / ``#7`` → ("c", 7); None: unreadable."""
    m = _JUMP.fullmatch(text)
    if m is None:
        return None
    kind = (m.group(1) or "t").lower()[0]
    return ("c" if kind == "#" else kind), int(m.group(2))
