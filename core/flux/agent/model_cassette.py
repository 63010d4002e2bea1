"""The model cassette: ``model.jsonl``, one redacted model call per line.

:func:`request_hash` hashes the redacted canonical request; :class:`ModelCassetteWriter` appends a
record per call (a failed call with its ``error``); :class:`TeeProvider` tees a live provider's calls
to a writer; :class:`CassetteProvider` serves recorded calls first-in-first-out per request hash,
replaying a recorded failure as it happened.
"""

from __future__ import annotations

import json
import os
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Iterable, Optional

from ..canonical import canonical_json, compact_json, scrub_text, scrub_value, sha256_hex
from ..cassette.redactor import Redactor
from ..documents import json_document, read_text
from .providers.base import Chunk, ModelRequest, Provider, ProviderError

__all__ = ["redact_chunks", "redacted_record", "request_hash", "resplit", "ModelRecord", "ModelCassetteWriter",
           "TeeProvider", "CassetteProvider", "load_records", "RecordedProviderError", "error_record"]


def request_hash(request: ModelRequest, redactor: Redactor | None = None) -> tuple[str, Any]:
    """``(hash, redacted request object)`` — the object is ``"[redacted]"`` if redaction broke the JSON."""
    text = canonical_json(request.canonical())
    red = redactor.redact_json_text(text) if redactor is not None else text
    try:
        obj: Any = json.loads(red)
    except ValueError:
        obj = redactor.marker if redactor is not None else "[redacted]"
    return sha256_hex(red), obj


class RecordedProviderError(ProviderError):
    """A provider failure served from a cassette: the recorded message, status and code, raised
    after the chunks the recorded call streamed before it failed."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False,
                 code: str | None = None, call: int | None = None):
        super().__init__(message, status=status, retryable=retryable)
        self.code = code
        self.call = call


def error_record(e: ProviderError, redactor: Redactor | None = None) -> dict:
    """The ``error`` object of a failed call's record."""
    msg = scrub_text(str(e))
    return {"message": redactor.redact(msg) if redactor is not None else msg, "status": e.status,
            "code": getattr(e, "code", None), "retryable": bool(e.retryable)}


def _error_of(d: Any) -> Optional[dict]:
    if not isinstance(d, dict):
        return None
    status = d.get("status")
    code = d.get("code")
    return {"message": str(d.get("message", "") or "provider error"),
            "status": status if isinstance(status, int) and not isinstance(status, bool) else None,
            "code": None if code is None else str(code), "retryable": d.get("retryable") is True}


@dataclass
class ModelRecord:
    hash: str
    model: str
    request: Any
    chunks: list[dict]
    v: int = 1
    error: Optional[dict] = None  # the call failed after ``chunks`` (see the module doc)

    def to_line(self) -> str:
        d = {"v": self.v, "hash": self.hash, "model": self.model, "request": self.request, "chunks": self.chunks}
        if self.error is not None:
            d["error"] = self.error
        return compact_json(d) + "\n"

    @classmethod
    def from_json(cls, d: dict) -> "ModelRecord":
        chunks = d.get("chunks")
        v = d.get("v", 1)
        return cls(_text(d.get("hash")), _text(d.get("model")), d.get("request"),
                   [c for c in chunks if isinstance(c, dict)] if isinstance(chunks, list) else [],
                   v if type(v) is int else 1, _error_of(d.get("error")))

    def raise_error(self, call: int | None = None) -> None:
        """Raise the recorded failure (a record without one returns)."""
        e = self.error
        if e is not None:
            raise RecordedProviderError(e["message"], status=e["status"], retryable=e["retryable"], code=e["code"],
                                        call=call)


def _text(v: Any) -> str:
    return v if isinstance(v, str) else ""


def load_records(path: str | os.PathLike[str]) -> list[ModelRecord]:
    """Every record of a ``model.jsonl`` (a missing file is no records, as flux reads it)."""
    p = Path(path).expanduser()
    if not os.path.lexists(p):
        return []
    fix = "the model cassette is damaged; re-record the scenario"
    out = []
    for n, line in enumerate(read_text(p, "the model cassette", fix).splitlines(), 1):
        if not line.strip():
            continue
        d = json_document(line, f"{p}, line {n}", fix)
        if isinstance(d, dict):
            out.append(ModelRecord.from_json(d))
    return out


_STREAMED_TEXT = ("text_delta", "thinking_delta")
_TOOL_INPUT_DELTA = "tool_input_delta"


def resplit(original: list[str], redacted: str) -> list[str]:
    """``redacted`` (the redaction of ``"".join(original)``) cut where ``original`` was cut, so the
    stream keeps its number of pieces: a cut in the unchanged head or tail keeps its place; a cut
    inside the changed middle moves to the same fraction of the redacted middle (a marker may be
    cut in two; what it replaced is gone either way). Only a middle too short to hold every cut
    loses pieces. Empty pieces go."""
    joined = "".join(original)
    if redacted == joined:
        return [p for p in original if p]
    head = 0  # the length of the common prefix, and of the common suffix (not overlapping it)
    limit = min(len(joined), len(redacted))
    while head < limit and joined[head] == redacted[head]:
        head += 1
    tail = 0
    while tail < limit - head and joined[-1 - tail] == redacted[-1 - tail]:
        tail += 1
    old_mid = len(joined) - tail - head  # the changed span, before and after
    new_mid = len(redacted) - tail - head
    before: list[int] = []  # cuts in the unchanged head, inside the changed middle, in the unchanged tail
    inside: list[int] = []
    after: list[int] = []
    pos = 0
    for piece in original[:-1]:
        pos += len(piece)
        if pos <= head:
            before.append(pos)
        elif len(joined) - pos <= tail:
            after.append(len(redacted) - (len(joined) - pos))
        else:  # at its fraction of the redacted middle
            inside.append(head + round((pos - head) * new_mid / max(old_mid, 1)))
    # strictly increasing, each strictly inside the middle (as many as it has room for)
    for i in range(len(inside)):
        inside[i] = max(inside[i], head + 1, inside[i - 1] + 1 if i else head + 1)
    for i in reversed(range(len(inside))):
        inside[i] = min(inside[i], head + new_mid - 1, inside[i + 1] - 1 if i + 1 < len(inside) else head + new_mid - 1)
    cuts = before + inside + after
    out = []
    last = 0
    for c in cuts:
        if c > last:
            out.append(redacted[last:c])
            last = c
    out.append(redacted[last:])
    return [p for p in out if p]


def _redact_text_run(redactor: Redactor, tag: str, pieces: list[str]) -> list[dict]:
    one_by_one = [redactor.redact(p) for p in pieces]
    joined = redactor.redact("".join(pieces))
    if joined == "".join(one_by_one):
        return [{"t": tag, "c": p} for p in one_by_one]
    return [{"t": tag, "c": p} for p in resplit(pieces, joined)]


def _redact_tool_input_run(redactor: Redactor, run: list[dict]) -> list[dict]:
    """Consecutive ``tool_input_delta`` chunks of one tool: their ``partial_json`` pieces are one
    JSON text, redacted on its decoded values and cut again where the stream cut it."""
    pieces = [c["c"]["partial_json"] for c in run]
    joined = "".join(pieces)
    red = redactor.redact_json_text(joined, sort=False)
    out_pieces = pieces if red == joined else resplit(pieces, red)
    rest = redactor.redact_value({k: v for k, v in run[0]["c"].items() if k != "partial_json"})
    return [{"t": _TOOL_INPUT_DELTA, "c": {**rest, "partial_json": p}} for p in out_pieces] or \
        [{"t": _TOOL_INPUT_DELTA, "c": {**rest, "partial_json": ""}}]


def _tool_input_piece(c: dict) -> Any:
    """The ``(name, other keys)`` a ``tool_input_delta`` chunk continues a run under, or None."""
    body = c.get("c")
    if c.get("t") != _TOOL_INPUT_DELTA or not isinstance(body, dict) or not isinstance(body.get("partial_json"), str):
        return None
    return tuple(sorted((k, repr(v)) for k, v in body.items() if k != "partial_json"))


def redact_chunks(redactor: Redactor, chunks: list[dict]) -> list[dict]:
    """Every chunk redacted, and no secret left because a stream split it across chunks.

    A run of consecutive ``text_delta`` (or ``thinking_delta``) chunks is one text to a reader:
    ``api_key = "pl`` + ``ain"`` hides from a chunk-by-chunk pass. So the run's joined text is
    redacted too; when that differs from the chunk-wise result, the redacted joined text is cut
    again where the stream cut it (:func:`resplit`; the assembled message a replay rebuilds is the
    same). A run of ``tool_input_delta`` chunks of one tool is one JSON text, redacted on its
    decoded values (:meth:`Redactor.redact_json_text`) and cut again the same way.
    """
    out: list[dict] = []
    i = 0
    n = len(chunks)
    while i < n:
        c = chunks[i]
        tag = c.get("t")
        if tag in _STREAMED_TEXT and isinstance(c.get("c"), str):
            j = i
            while j < n and chunks[j].get("t") == tag and isinstance(chunks[j].get("c"), str):
                j += 1
            out.extend(_redact_text_run(redactor, tag, [chunks[k]["c"] for k in range(i, j)]))
            i = j
            continue
        key = _tool_input_piece(c)
        if key is not None:
            j = i + 1
            while j < n and _tool_input_piece(chunks[j]) == key:
                j += 1
            out.extend(_redact_tool_input_run(redactor, chunks[i:j]))
            i = j
            continue
        out.append(redactor.redact_value(c))
        i += 1
    return out


def redacted_record(request: ModelRequest, chunks: Iterable[Chunk], redactor: Redactor) -> ModelRecord:
    """The line a model cassette (``model.jsonl``, ``judge.jsonl``) keeps of one call: the request's
    hash and redacted object, and its chunks redacted (:func:`redact_chunks`)."""
    h, obj = request_hash(request, redactor)
    return ModelRecord(h, request.model, obj, redact_chunks(redactor, [scrub_value(c.to_json()) for c in chunks]))


class ModelCassetteWriter:
    """Appends redacted records to ``path`` (created with its directory)."""

    def __init__(self, path: str | os.PathLike[str], redactor: Redactor | None = None):
        self.path = Path(path).expanduser()
        self.redactor = redactor or Redactor()
        self.records = 0
        self._lock = threading.Lock()

    def record(self, request: ModelRequest, chunks: Iterable[Chunk], error: ProviderError | None = None) -> ModelRecord:
        rec = redacted_record(request, chunks, self.redactor)
        if error is not None:
            rec.error = error_record(error, self.redactor)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(scrub_text(rec.to_line()))
            self.records += 1
        return rec


class TeeProvider:
    """A live provider whose calls are also written to a model cassette — a failed one too, with its
    error (an unanswered endpoint, a 401 on call 2): what happened is recorded, so it replays."""

    def __init__(self, inner: Provider, writer: ModelCassetteWriter):
        self.inner = inner
        self.writer = writer
        self.name = getattr(inner, "name", "provider")

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        got: list[Chunk] = []
        try:
            async for ch in self.inner.stream(request):
                got.append(ch)
                yield ch
        except ProviderError as e:
            self.writer.record(request, got, error=e)
            raise
        self.writer.record(request, got)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


@dataclass
class CassetteProvider:
    """Serves recorded calls FIFO per request hash; misses fall through to ``fallback`` (counted)."""

    records: list[ModelRecord]
    fallback: Optional[Provider] = None
    redactor: Optional[Redactor] = None
    name: str = "cassette"
    hits: int = 0
    model_live: int = 0
    _queues: dict[str, deque] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for r in self.records:
            self._queues.setdefault(r.hash, deque()).append(r)

    @property
    def unconsumed(self) -> int:
        return sum(len(q) for q in self._queues.values())

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        h, _ = request_hash(request, self.redactor)
        q = self._queues.get(h)
        if q:
            rec = q.popleft()
            self.hits += 1
            for c in rec.chunks:
                yield Chunk.from_json(c)
            rec.raise_error()
            return
        self.model_live += 1
        if self.fallback is None:
            raise ProviderError(f"model cassette miss (request hash {h[:16]}…) and no live provider to fall through to "
                                f"— re-record the cassette or configure a provider")
        async for ch in self.fallback.stream(request):
            yield ch
