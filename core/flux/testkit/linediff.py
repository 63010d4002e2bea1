"""The plan snapshot's line diff, as flux prints it.

Both texts are cut into lines as Rust's ``str::lines`` cuts them (:func:`snapshot_lines`), then compared
position by position, without alignment: ``"  x"`` equal, ``"- a"`` / ``"+ b"`` differing or on one side
only (docs/testing.md, "Golden mode").
"""

from __future__ import annotations

__all__ = ["snapshot_lines", "line_diff", "first_line_change"]


def snapshot_lines(text: str) -> list[str]:
    """``text``'s lines as Rust's ``str::lines`` gives them (docs/testing.md, "Golden mode")."""
    if not text:
        return []
    pieces = text.split("\n")
    ended = pieces[-1] == ""
    if ended:
        pieces.pop()
    last = len(pieces) - 1
    return [p[:-1] if p.endswith("\r") and (i < last or ended) else p for i, p in enumerate(pieces)]


def line_diff(old: str, new: str) -> str:
    """flux's per-position diff of two snapshot texts (docs/testing.md, "Golden mode"), one row a line, no trailing
    newline."""
    a, b = snapshot_lines(old), snapshot_lines(new)
    out: list[str] = []
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x == y:
            out.append(f"  {x}")
            continue
        if x is not None:
            out.append(f"- {x}")
        if y is not None:
            out.append(f"+ {y}")
    return "\n".join(out)


def first_line_change(expected: str, actual: str, name: str) -> str:
    """Where a plan snapshot (file ``name``) and the recorded plans first differ, in words: the
    line number and both lines — or, when every line is equal, that only line endings differ."""
    a, b = snapshot_lines(expected), snapshot_lines(actual)
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x != y:
            was = repr(x) if x is not None else "nothing (the file ends)"
            now = repr(y) if y is not None else "nothing (the plans end)"
            return f"{name} line {i + 1} is {was}, the recorded plans have {now}"
    return (f"{name} and the recorded plans have the same lines and differ only in line endings "
            "(a trailing newline, or \\r\\n)")
