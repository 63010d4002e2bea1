"""Run diff: two recorded runs aligned statement by statement (or cell by cell), by position as flux
does or as a sequence when positions drift (:mod:`.align`), each row ``same``, ``plan`` or ``output``.

:func:`run_diff` returns a :class:`RunDiff`: ``to_json()`` is flux's ``flux diff --json`` object plus
``summary`` and ``first_divergence``, ``render()`` flux's human output; :func:`payload_diff` explains
one row. Where it goes beyond flux is in docs/cli.md (``flux diff``).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..canonical import canonical_json
from ..errors import FluxError
from ..lang.formatter import format_statement
from ..lang.hashes import stmt_hash16
from ..model.stored_plan import parse_stored_plan
from ..model.session import TRACE_KINDS, SessionDetail, StmtRow, diff_rows, load_session
from ..store.store import StoreReader
from .align import align

__all__ = [
    "DiffRow", "RunDiff", "PayloadDiff", "run_diff", "diff_details", "align_rows", "align_by_position",
    "align_by_sequence", "statement_texts",
    "payload_diff", "excerpt", "MISSING_STMT", "CellPayload", "cell_payloads",
]

MISSING_STMT = "∅ (no statement at this position)"
EXCERPT_BYTES = 96


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One aligned row. ``kind`` is ``same`` | ``plan`` | ``output``.

    ``index`` is the row's position in the diff (what ``first_divergence`` counts); ``a_index`` and
    ``b_index`` are the positions of the paired rows in A's and B's row lists (statement rows, or
    cells for a cell-row diff), ``None`` on the side a gap row lacks. Under flux's positional
    alignment all three agree wherever both sides have a row."""

    kind: str
    node: int
    stmt: str | None = None  # same / output
    op: str | None = None  # output
    a: str | None = None  # output: a's recorded content
    b: str | None = None  # output: b's recorded content
    a_stmt: str | None = None  # plan
    b_stmt: str | None = None  # plan
    index: int = 0  # position in the alignment
    a_index: int | None = None  # position in A's rows (None: a gap on A's side)
    b_index: int | None = None  # position in B's rows (None: a gap on B's side)

    @property
    def is_gap(self) -> bool:
        """Only one side has a row here (the other side's statement is null)."""
        return self.kind == "plan" and (self.a_stmt is None or self.b_stmt is None)

    def to_json(self, *, indices: bool = False) -> dict[str, Any]:
        """flux's row object; with ``indices``, plus ``a_index``/``b_index`` (a sequence alignment)."""
        if self.kind == "same":
            out = {"kind": "same", "node": self.node, "stmt": self.stmt}
        elif self.kind == "plan":
            out = {"a_stmt": self.a_stmt, "b_stmt": self.b_stmt, "kind": "plan", "node": self.node}
        else:
            out = {"a": self.a, "b": self.b, "kind": "output", "node": self.node, "op": self.op, "stmt": self.stmt}
        if indices:
            out["a_index"] = self.a_index
            out["b_index"] = self.b_index
        return out


def _pair_row(a: StmtRow | None, b: StmtRow | None, index: int, ai: int | None, bi: int | None) -> DiffRow:
    """flux's comparison of one pair of aligned rows (either may be missing)."""
    if a is not None and b is not None and a.stmt == b.stmt:
        for (aop, acontent), (bop, bcontent) in zip(a.cells, b.cells):
            if aop != bop or acontent != bcontent:
                return DiffRow("output", a.node, stmt=a.stmt, op=aop, a=acontent, b=bcontent, index=index,
                               a_index=ai, b_index=bi)
        if len(a.cells) != len(b.cells):
            k = min(len(a.cells), len(b.cells))
            if len(a.cells) > k:
                op, content = a.cells[k]
                return DiffRow("output", a.node, stmt=a.stmt, op=op, a=content, b="", index=index, a_index=ai, b_index=bi)
            op, content = b.cells[k]
            return DiffRow("output", a.node, stmt=a.stmt, op=op, a="", b=content, index=index, a_index=ai, b_index=bi)
        return DiffRow("same", a.node, stmt=a.stmt, index=index, a_index=ai, b_index=bi)
    node = a.node if a is not None else b.node  # type: ignore[union-attr]
    return DiffRow("plan", node, a_stmt=a.stmt if a else None, b_stmt=b.stmt if b else None, index=index,
                   a_index=ai, b_index=bi)


def align_by_position(ra: Sequence[StmtRow], rb: Sequence[StmtRow]) -> list[DiffRow]:
    """flux's alignment: row ``i`` pairs A's row ``i`` with B's row ``i``."""
    la, lb = len(ra), len(rb)
    return [_pair_row(ra[i] if i < la else None, rb[i] if i < lb else None, i, i if i < la else None,
                      i if i < lb else None) for i in range(max(la, lb))]


def align_by_sequence(ra: Sequence[StmtRow], rb: Sequence[StmtRow],
                      pairs: Sequence[tuple[int | None, int | None]] | None = None) -> list[DiffRow]:
    """Pair rows as a sequence over their keys (statement hash, or ``call:<op>:<input hash>``):
    a common subsequence of equal keys (:mod:`.align`), leftovers between two matches paired by
    position, the excess as one-sided gap rows. ``pairs``: an alignment already computed."""
    if pairs is None:
        pairs = align([r.stmt for r in ra], [r.stmt for r in rb])
    return [_pair_row(ra[i] if i is not None else None, rb[j] if j is not None else None, n, i, j)
            for n, (i, j) in enumerate(pairs)]


def align_rows(ra: Sequence[StmtRow], rb: Sequence[StmtRow]) -> list[DiffRow]:
    """The diff's rows (paired by position as flux pairs them, aligned as a sequence when positions drift).

    flux aligns by position. When positions drift — one side gained or lost a row, as an
    inject fork of an adaptive session does (its injected ``bind`` dispatches nothing) — every
    later position compares the wrong rows. So: by position whenever position pairs every row it
    can (equal keys at every shared position: flux's result, unchanged); else the sequence
    alignment, but only if it pairs strictly more rows with equal keys than position does.
    """
    shared = min(len(ra), len(rb))
    by_position = sum(1 for i in range(shared) if ra[i].stmt == rb[i].stmt)
    if by_position < shared:  # no common subsequence can be longer than the shorter side
        ka, kb = [r.stmt for r in ra], [r.stmt for r in rb]
        pairs = align(ka, kb)
        by_sequence = sum(1 for i, j in pairs if i is not None and j is not None and ka[i] == kb[j])
        if by_sequence > by_position:
            return align_by_sequence(ra, rb, pairs)
    return align_by_position(ra, rb)


def drifts(rows: Sequence[DiffRow]) -> bool:
    """True when some row pairs positions other than its own: the rows were aligned as a sequence
    (a sequence alignment is only chosen when it differs from the positional one)."""
    return any((r.a_index is not None and r.a_index != r.index) or (r.b_index is not None and r.b_index != r.index)
               for r in rows)


def statement_texts(*sessions: SessionDetail, wanted: set[str] | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """``stmt_hash16`` → one-line text (``⏎``-joined) and → the multi-line formatted statement.

    Every ``plan_source`` of every plan attempt of the given sessions is parsed (a source that does
    not parse is skipped, as flux does); each top-level node is formatted as its own one-statement
    flow. Later sessions win on a hash collision. With ``wanted``, only those hashes are formatted.
    """
    one_line: dict[str, str] = {}
    full: dict[str, str] = {}
    seen_sources: set[str] = set()
    for s in sessions:
        for t in s.turns:
            for att in t.plan_attempts:
                src = att.plan_source
                if src is None or src in seen_sources:
                    continue
                seen_sources.add(src)
                try:
                    draft, _key = parse_stored_plan(src)
                except FluxError:
                    continue
                for node in draft.body:
                    try:
                        h = stmt_hash16(node)
                        if wanted is not None and h not in wanted:
                            continue
                        text = format_statement(node).strip()
                    except Exception:  # an AST the formatter cannot print: fall back to the hash
                        continue
                    one_line[h] = text.replace("\n", " ⏎ ")
                    full[h] = text
    return one_line, full


def excerpt(s: str) -> str:
    """The first 96 bytes (cut on a char boundary), newlines as spaces, ``…`` if cut."""
    data = s.encode("utf-8")
    if len(data) <= EXCERPT_BYTES:
        return s.replace("\n", " ")
    cut = data[:EXCERPT_BYTES].decode("utf-8", errors="ignore")
    return cut.replace("\n", " ") + "…"


def _call_label(stmt: str) -> str | None:
    if not stmt.startswith("call:"):
        return None
    rest = stmt[len("call:"):]
    op, sep, h = rest.rpartition(":")
    if not sep or not op:
        return None
    return f"op `{op}` ({h}…)"


@dataclass(frozen=True, slots=True)
class CellPayload:
    """What one cassette cell recorded, for a cell-row diff (runs without statement rows): the op,
    its input (the recorded ``input_view``) and the content it returned."""

    op: str
    input_view: str | None
    content: str

    def to_json(self) -> dict[str, Any]:
        parsed = _json_value(self.input_view) if self.input_view is not None else None
        return {"content": self.content, "input": parsed if parsed is not _NOT_JSON else self.input_view, "op": self.op}

    def text(self) -> str:
        """Pretty JSON (keys sorted), so both sides diff structurally and line by line."""
        return json.dumps(self.to_json(), ensure_ascii=False, indent=2, sort_keys=True)

    def label(self) -> str:
        """One line for a row: ``op `edit` {"path":"a.py",…}`` (the input, not its hash)."""
        view = self.input_view if self.input_view is not None else ""
        return f"op `{self.op}` {excerpt(' '.join(view.split()))}".rstrip()


_NOT_JSON = object()


def _json_value(s: str) -> Any:
    try:
        return json.loads(s)
    except (ValueError, TypeError):
        return _NOT_JSON


def cell_payloads(detail: SessionDetail) -> list[CellPayload]:
    return [CellPayload(c.op, c.rec.input_view, c.rec.content) for c in detail.cells]


@dataclass(frozen=True, slots=True)
class PayloadDiff:
    """Why one row differs. ``kind`` is ``json`` (structural), ``text`` (line diff) or ``none``."""

    kind: str
    lines: tuple[str, ...]
    changes: dict[str, Any] = field(default_factory=dict)  # deepdiff's report, JSON-safe

    def to_json(self) -> dict[str, Any]:
        return {"changes": self.changes, "kind": self.kind, "lines": list(self.lines)}


def _json_payload(s: str) -> Any:
    try:
        v = json.loads(s)
    except (ValueError, TypeError):
        return None
    return v if isinstance(v, (dict, list)) else None


def _text_diff(a: str, b: str, a_name: str, b_name: str) -> PayloadDiff:
    lines = tuple(difflib.unified_diff(a.splitlines(), b.splitlines(), a_name, b_name, lineterm="", n=2))
    return PayloadDiff("text" if lines else "none", lines)


def payload_diff_values(a: str, b: str, a_name: str = "a", b_name: str = "b") -> PayloadDiff:
    """A structural diff when both sides are JSON objects/arrays, else a unified line diff."""
    ja, jb = _json_payload(a), _json_payload(b)
    if ja is not None and jb is not None:
        from deepdiff import DeepDiff

        dd = DeepDiff(ja, jb, verbose_level=2)
        if not dd:
            return PayloadDiff("none", ())
        changes = json.loads(dd.to_json())
        lines = tuple(line for line in dd.pretty().splitlines() if line.strip())
        return PayloadDiff("json", lines, changes)
    return _text_diff(a, b, a_name, b_name)


@dataclass
class RunDiff:
    a: str
    b: str
    rows: list[DiffRow]
    texts: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    cell_rows: bool = False  # True when the cell-row fallback (a run with no statement rows) was used
    # Cell-row diffs only: each side's cells (a row's a_index / b_index index them).
    a_cells: list[CellPayload] = field(default_factory=list)
    b_cells: list[CellPayload] = field(default_factory=list)
    # True when positions drifted and the rows were aligned as a sequence (rows carry distinct
    # a_index / b_index; --json then adds them to every row). False: flux's positional alignment.
    sequence_aligned: bool = False
    a_rows: int = 0  # how many rows (statements or cells) each side has
    b_rows: int = 0

    @property
    def identical(self) -> bool:
        return all(r.kind == "same" for r in self.rows)

    @property
    def first_divergence(self) -> int | None:
        for r in self.rows:
            if r.kind != "same":
                return r.index
        return None

    @property
    def summary(self) -> dict[str, int]:
        out = {"output": 0, "plan": 0, "same": 0}
        for r in self.rows:
            out[r.kind] += 1
        return out

    def summary_line(self) -> str:
        s = self.summary
        fd = self.first_divergence
        tail = f" · first divergence at row {fd} (node {self.rows[fd].node})" if fd is not None else ""
        if self.sequence_aligned:
            unit = "cells" if self.cell_rows else "statements"
            tail += f" · aligned as a sequence ({self.a} has {self.a_rows} {unit}, {self.b} has {self.b_rows})"
        return f"{s['same']} same · {s['plan']} plan · {s['output']} world{tail}"

    def text(self, stmt: str | None) -> str:
        """Statement text for a hash or label."""
        if stmt is None:
            return MISSING_STMT
        if stmt in self.texts:
            return self.texts[stmt]
        label = _call_label(stmt)
        return label if label is not None else f"<{stmt}>"

    def row_payloads(self, row: DiffRow | int) -> tuple[str, str, str]:
        """(A's payload, B's payload, what they are) for one row — what the app's payload view
        shows and ``--explain`` diffs: the recorded outputs of a ``≠`` row; for a cell-row diff each
        side's cell as JSON (op, input, content); else the statements' source ("" = no statement)."""
        if isinstance(row, int):
            row = self.rows[row]
        if row.kind == "output":
            return row.a or "", row.b or "", f"op `{row.op}` output"
        if self.cell_rows:
            a = self._cell_text(self.a_cells, row.a_index)
            b = self._cell_text(self.b_cells, row.b_index)
            return a, b, "cell (op, input, content)"
        if row.kind == "plan":
            a = self.sources.get(row.a_stmt or "", self.text(row.a_stmt)) if row.a_stmt else ""
            b = self.sources.get(row.b_stmt or "", self.text(row.b_stmt)) if row.b_stmt else ""
            return a, b, "statement"
        src = self.sources.get(row.stmt or "", self.text(row.stmt))
        return src, src, "statement"

    @staticmethod
    def _cell_text(cells: list[CellPayload], i: int | None) -> str:
        return cells[i].text() if i is not None and 0 <= i < len(cells) else ""

    def to_json(self) -> dict[str, Any]:
        seq = self.sequence_aligned
        return {
            "a": self.a,
            "b": self.b,
            "first_divergence": self.first_divergence,  # addition (not in flux)
            "identical": self.identical,
            # addition when positions drifted: each row's a_index / b_index (null on a gap)
            "rows": [r.to_json(indices=seq) for r in self.rows],
            "summary": self.summary,  # addition (not in flux)
        }

    def json_text(self) -> str:
        """The ``--json`` line: compact, keys sorted, as serde_json prints a ``Value``."""
        return canonical_json(self.to_json())

    def render(self) -> list[tuple[str, str | None]]:
        """The human output as ``(line, style)``; style ``"dim"`` for ``=`` rows."""
        out: list[tuple[str, str | None]] = [(f"diff {self.a} ↔ {self.b}", None)]
        for r in self.rows:
            if r.kind == "same":
                out.append((f"  = {self.text(r.stmt)}", "dim"))
            elif r.kind == "plan":
                ta, tb = self.text(r.a_stmt), self.text(r.b_stmt)
                if ta == tb:  # same input text, different hash (a tampered or re-canonicalised input)
                    ta, tb = f"{ta} [{r.a_stmt}]", f"{tb} [{r.b_stmt}]"
                out.append(("  ~ plan diverges:", None))
                out.append((f"    - {ta}", None))
                out.append((f"    + {tb}", None))
            else:
                out.append((f"  ≠ same statement, different world — {self.text(r.stmt)}", None))
                out.append((f"    op `{r.op}`:", None))
                out.append((f"    - {excerpt(r.a or '')}", None))
                out.append((f"    + {excerpt(r.b or '')}", None))
        if self.identical:
            out.append((f"runs are identical ({len(self.rows)} statement(s))", None))
        return out

    def render_text(self) -> str:
        return "".join(line + "\n" for line, _ in self.render())

    def payload_diff(self, row: DiffRow | int) -> PayloadDiff:
        return payload_diff(self, row)


def payload_diff(diff: RunDiff, row: DiffRow | int) -> PayloadDiff:
    """Explain one row: the output payloads (``output``), the statements (``plan``), or nothing."""
    if isinstance(row, int):
        row = diff.rows[row]
    if row.kind == "output":
        return payload_diff_values(row.a or "", row.b or "", f"{diff.a}", f"{diff.b}")
    if row.kind == "plan":
        a, b, _ = diff.row_payloads(row)
        if diff.cell_rows and a and b:
            return payload_diff_values(a, b, diff.a, diff.b)  # two cells: structural (op, input, content)
        return _text_diff(a, b, diff.a, diff.b)
    return PayloadDiff("none", ())


def diff_details(a: SessionDetail, b: SessionDetail) -> RunDiff:
    """Diff two already-loaded sessions."""
    ra, rb = diff_rows(a.run_events, a.cells, b.run_events, b.cells)
    used_cells = bool(ra or rb) and any(r.stmt.startswith("call:") for r in (*ra, *rb))
    # Only statement hashes need text; cell-row labels (`call:…`) render without parsing anything.
    wanted = {r.stmt for r in (*ra, *rb) if not r.stmt.startswith("call:")}
    texts, sources = statement_texts(a, b, wanted=wanted) if wanted else ({}, {})
    a_cells = b_cells = []
    if used_cells:
        # A cell row's label names the op and its input hash; show the input itself (same hash,
        # same canonical input, so one text per label).
        a_cells, b_cells = cell_payloads(a), cell_payloads(b)
        for rows, cells in ((ra, a_cells), (rb, b_cells)):
            for r, c in zip(rows, cells):
                texts.setdefault(r.stmt, c.label())
    rows = align_rows(ra, rb)
    return RunDiff(a=a.id, b=b.id, rows=rows, texts=texts, sources=sources, cell_rows=used_cells,
                   a_cells=a_cells, b_cells=b_cells, sequence_aligned=drifts(rows), a_rows=len(ra), b_rows=len(rb))


def run_diff(reader_a: StoreReader, a_ref: str | None, reader_b: StoreReader | None = None, b_ref: str | None = None) -> RunDiff:
    """Diff session ``a_ref`` of ``reader_a`` against ``b_ref`` of ``reader_b`` (default: the same
    store). Refs are ``s_<n>`` or ``last``; an unknown id raises :class:`~flux.errors.SessionNotFound`."""
    a = load_session(reader_a, a_ref, kinds=TRACE_KINDS)
    b = load_session(reader_b or reader_a, b_ref, kinds=TRACE_KINDS)
    return diff_details(a, b)
