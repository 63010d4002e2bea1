"""The lossless formatter behind ``flux fmt``: a ``.flux`` file's flows rewritten in the canonical
spelling (:mod:`flux.lang.formatter`), with every comment kept, blank lines between statements kept
(one at most), and named arguments and template fields in the author's order.

Module declarations (``agent``, ``channel``, ``op``, ``journey``, …) and the lines between flows are
kept as written. A comment on a statement's first line stays at its end; any other comment becomes a
line of its own before the next statement (or at the end of its block). The result always reads
back as the same module: a rewrite that would not is refused with :class:`SourceFormatError`.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Optional

from flux.errors import FluxError

from . import ast as A
from .formatter import LineWriter, author_spelling, format_header, write_statement
from .parser import ParseError, new_parser, parse_program

__all__ = ["SourceFormatError", "format_source", "source_comments"]


class SourceFormatError(FluxError):
    """A file ``flux fmt`` cannot rewrite without changing what it means (never expected)."""


@dataclass(frozen=True)
class _Comment:
    pos: int
    line: int
    col: int
    text: str
    own_line: bool  # nothing but blanks before it on its line
    gap: int  # the blanks between the code and a comment at a line's end


class _Source:
    """The text read once by a recording parser: its comments, where every statement starts and
    ends, and the span of every top-level flow."""

    def __init__(self, text: str):
        p = new_parser(text, record=True)
        self.module = p.program()
        self.src = p.src
        self.line_starts = [0] + [i + 1 for i, ch in enumerate(self.src) if ch == "\n"]
        self.comments = [self._comment(pos, txt) for pos, txt in sorted(p.comments.items())]
        self.starts, self.ends = p.statement_starts, p.statement_ends
        self.flows = p.top_level_flows
        # where each line holding code (not blank, not only a comment) starts its code
        self.code_starts = [start + len(text) - len(text.lstrip(" \t"))
                            for start, text in ((self.line_starts[i], self.line_text(i))
                                                for i in range(len(self.line_starts)))
                            if text.strip() and not text.lstrip().startswith("#")]
        self.blank_lines = {i for i in range(len(self.line_starts)) if not self.line_text(i).strip()}

    def line_of(self, pos: int) -> int:
        return bisect.bisect_right(self.line_starts, pos) - 1

    def col_of(self, pos: int) -> int:
        return pos - self.line_starts[self.line_of(pos)]

    def line_text(self, line: int) -> str:
        start = self.line_starts[line]
        end = self.src.find("\n", start)
        return self.src[start:end if end >= 0 else len(self.src)]

    def _comment(self, pos: int, text: str) -> _Comment:
        line = self.line_of(pos)
        before = self.src[self.line_starts[line]:pos]
        gap = len(before) - len(before.rstrip(" \t"))
        return _Comment(pos, line, self.col_of(pos), text.rstrip(), not before.strip(), max(gap, 1))

    def next_code_after(self, pos: int, limit: int) -> int:
        """Where the first line of code at or after ``pos`` starts (``limit`` when none comes first)."""
        i = bisect.bisect_left(self.code_starts, pos)
        return min(self.code_starts[i], limit) if i < len(self.code_starts) else limit


class _CommentedWriter(LineWriter):
    """The canonical writer, with the author's comments and blank lines put back around statements."""

    def __init__(self, source: _Source, start: int, end: int):
        super().__init__()
        self.s = source
        self.end = end
        self.pending = [c for c in source.comments if start <= c.pos < end]
        self.header_line = source.line_of(start)
        self.block_has_output = False

    # -- comments and blank lines
    def _emit_comment(self, c: _Comment, level: int) -> None:
        self._blank_before(c.line)
        self.lines.append("  " * level + c.text + "\n")
        self.block_has_output = True

    def _blank_before(self, line: int) -> None:
        if self.block_has_output and line - 1 in self.s.blank_lines and self.lines and self.lines[-1] != "\n":
            self.lines.append("\n")

    def _flush(self, level: int, before: int, min_col: int = 0) -> None:
        """Write the pending comments that lie before position ``before`` (and at column
        ``min_col`` or right of it) as lines of their own at ``level``."""
        keep = []
        for c in self.pending:
            if c.pos < before and c.col >= min_col:
                self._emit_comment(c, level)
            else:
                keep.append(c)
        self.pending = keep

    def _trailing(self, line: int) -> Optional[_Comment]:
        for c in self.pending:
            if c.line == line and not c.own_line:
                self.pending.remove(c)
                return c
        return None

    # -- the writer's hooks
    def header(self, draft: A.DraftAst) -> None:
        text = format_header(draft)[:-1]
        c = self._trailing(self.header_line)
        self.lines.append(text + (" " * c.gap + c.text if c else "") + "\n")

    def body(self, nodes: tuple, level: int) -> None:
        outer = self.block_has_output
        self.block_has_output = False
        for node in nodes:
            start = self.s.starts.get(id(node))
            if start is None:  # a statement inside an `@json` line: it has no text of its own
                write_statement(node, level, self)
                continue
            self._flush(level, start)
            self._blank_before(self.s.line_of(start))
            first = len(self.lines)
            write_statement(node, level, self)
            self.block_has_output = True
            c = self._trailing(self.s.line_of(start))
            if c is not None:
                self.lines[first] = self.lines[first][:-1] + " " * c.gap + c.text + "\n"
        if nodes and id(nodes[-1]) in self.s.ends and id(nodes[0]) in self.s.starts:
            # comments after the block's last statement that sit at the block's indentation
            last_end = self.s.ends[id(nodes[-1])]
            block_col = self.s.col_of(self.s.starts[id(nodes[0])])
            self._flush(level, self.s.next_code_after(last_end, self.end), block_col)
        self.block_has_output = outer or bool(nodes)

    def finish(self) -> None:
        """The comments left at the end of the flow: indented ones in its body, the rest after it."""
        self._flush(1, self.end, min_col=1)
        for c in list(self.pending):
            self._emit_comment(c, 0)
        self.pending = []
        if self.s.line_of(self.end) - 1 in self.s.blank_lines and self.lines[-1] != "\n":
            self.lines.append("\n")  # the blank line the author left before what follows


def _format_flow(source: _Source, draft: A.DraftAst, start: int, end: int) -> str:
    out = _CommentedWriter(source, start, end)
    with author_spelling():
        out.header(draft)
        out.body(draft.body, 1)
    out.finish()
    return "".join(out.lines)


def format_source(text: str) -> str:
    """The file ``text`` formatted: canonical flows, comments and declarations kept.

    Raises :class:`ParseError` for text that does not parse and :class:`SourceFormatError` if the
    rewrite would read back as a different module (a guard; it does not happen)."""
    before = parse_program(text)
    source = _Source(text)
    pieces, cursor = [], 0
    for start, end, draft in source.flows:
        pieces.append(source.src[cursor:start])
        pieces.append(_format_flow(source, draft, start, end))
        cursor = end
    pieces.append(source.src[cursor:])
    out = "".join(pieces).rstrip("\n") + "\n"
    try:
        after = parse_program(out)
    except ParseError as e:
        raise SourceFormatError(f"formatting would not read back ({e}); the file is left as it is") from None
    if after != before:
        raise SourceFormatError("formatting would change what the file means; the file is left as it is")
    return out


def source_comments(text: str) -> list[str]:
    """Every comment of ``text``, in order (what ``flux fmt`` promises to keep)."""
    return [c.text for c in _Source(text).comments]
