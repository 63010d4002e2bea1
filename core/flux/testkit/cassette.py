"""Strict model-cassette replay for the test kit: the Nth model call is served by the Nth record of
``model.jsonl``, one stream at a time.

A changed request (:class:`CassetteMismatch`), an extra call (:class:`CassetteExhausted`) or a second
open stream (:class:`CassetteError`) fails the turn loudly; with a ``fallback`` a miss goes live and
is counted in ``model_live``. Recorded failures and ``replay.override.json`` are served as written.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Optional

from ..agent.model_cassette import ModelRecord, RecordedProviderError, request_hash
from ..agent.providers.base import Chunk, ModelRequest, ProviderError
from ..cassette.redactor import Redactor
from ..documents import json_document, read_text, short
from ..errors import FluxError

__all__ = [
    "CassetteError", "CassetteMismatch", "CassetteExhausted", "ModelCallHung", "OverrideEntry", "StrictCassette",
    "load_overrides", "request_delta",
]

OVERRIDE_FILE = "replay.override.json"


class CassetteError(ProviderError):
    """The model cassette cannot serve this call (a test failure, never retried)."""

    def __init__(self, message: str, *, call: int, status: int | None = None, code: str | None = None):
        super().__init__(message, status=status, retryable=False)
        self.call = call
        self.code = code


class CassetteMismatch(CassetteError):
    """Call N's request differs from the recorded request N."""

    def __init__(self, message: str, *, call: int, delta: list[str]):
        super().__init__(message, call=call)
        self.delta = delta


class CassetteExhausted(CassetteError):
    """More model calls than the recording has."""


class ModelCallHung(CassetteError):
    """A ``hang`` override was cancelled (by a timeout)."""


@dataclass(frozen=True)
class OverrideEntry:
    kind: str  # chunks | throw | hang
    chunks: tuple[dict, ...] = ()
    message: str = ""
    status: Optional[int] = None
    code: Optional[str] = None

    @classmethod
    def parse(cls, d: Any, where: str) -> "OverrideEntry":
        if not isinstance(d, dict):
            raise FluxError(f"{where}: an override entry must be an object with a \"kind\" (chunks, throw or hang)")
        kind = d.get("kind")
        if kind not in ("chunks", "throw", "hang"):
            raise FluxError(f"{where}: unknown kind {short(kind)} — use \"chunks\", \"throw\" or \"hang\"")
        chunks = d.get("chunks", [])
        if not isinstance(chunks, list) or not all(isinstance(c, dict) and "t" in c for c in chunks):
            raise FluxError(f"{where}: \"chunks\" must be a list of {{\"t\": tag, \"c\": content}} objects")
        status = d.get("status")
        if status is not None and (not isinstance(status, int) or isinstance(status, bool)):
            raise FluxError(f"{where}: \"status\" must be an integer HTTP status")
        message = d.get("message", "")
        code = d.get("code")
        return cls(kind, tuple(chunks), str(message) if message is not None else "", status,
                   None if code is None else str(code))


@dataclass
class Overrides:
    replace: Optional[list[OverrideEntry]] = None  # the list form
    calls: dict[int, OverrideEntry] = field(default_factory=dict)  # the patch form, 1-based

    def entry(self, call: int) -> Optional[OverrideEntry]:
        if self.replace is not None:
            return self.replace[call - 1] if call <= len(self.replace) else None
        return self.calls.get(call)


def load_overrides(path: str | Path) -> Optional[Overrides]:
    """The sidecar at ``path``, or ``None`` when there is none. A malformed one is a FluxError."""
    p = Path(path)
    if not os.path.lexists(p):
        return None
    fix = "fix or delete the override sidecar"
    data = json_document(read_text(p, "the override sidecar", fix), str(p), fix)
    if isinstance(data, list):
        return Overrides(replace=[OverrideEntry.parse(d, f"{p}[{i}]") for i, d in enumerate(data)])
    if isinstance(data, dict) and isinstance(data.get("calls"), dict):
        calls: dict[int, OverrideEntry] = {}
        for k, v in data["calls"].items():
            try:
                n = int(k)
            except ValueError:
                n = 0
            if n < 1:
                raise FluxError(f"{p}: call keys are 1-based call numbers, got {short(k)}")
            calls[n] = OverrideEntry.parse(v, f"{p} call {n}")
        return Overrides(calls=calls)
    raise FluxError(f"{p}: expected a list of entries or {{\"calls\": {{\"N\": entry}}}}")


# ------------------------------------------------------------------------------------------------


def _short(v: Any, width: int = 80) -> str:
    s = json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else repr(v)
    return s if len(s) <= width else s[: width - 1] + "…"


def request_delta(recorded: Any, actual: Any, limit: int = 6) -> list[str]:
    """The first ``limit`` differing leaves between two canonical request objects, as
    ``path: recorded → actual`` lines (``(absent)`` for a missing side)."""
    out: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if len(out) >= limit:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted(set(a) | set(b)):
                p = f"{path}.{k}" if path else k
                if k not in a:
                    out.append(f"{p}: (absent) → {_short(b[k])}")
                elif k not in b:
                    out.append(f"{p}: {_short(a[k])} → (absent)")
                else:
                    walk(a[k], b[k], p)
                if len(out) >= limit:
                    return
        elif isinstance(a, list) and isinstance(b, list):
            for i in range(max(len(a), len(b))):
                p = f"{path}[{i}]"
                if i >= len(a):
                    out.append(f"{p}: (absent) → {_short(b[i])}")
                elif i >= len(b):
                    out.append(f"{p}: {_short(a[i])} → (absent)")
                else:
                    walk(a[i], b[i], p)
                if len(out) >= limit:
                    return
        elif a != b or type(a) is not type(b):
            out.append(f"{path or '(request)'}: {_short(a)} → {_short(b)}")

    walk(recorded, actual, "")
    return out


class StrictCassette:
    """A provider that serves ``records`` positionally; a miss fails, or with a ``fallback``
    provider goes live and is counted (see the module doc)."""

    name = "cassette"

    def __init__(self, records: list[ModelRecord], overrides: Optional[Overrides] = None,
                 redactor: Optional[Redactor] = None, *, check_requests: bool = True, fallback: Any = None):
        self.records = records
        self.overrides = overrides
        self.redactor = redactor
        self.check_requests = check_requests
        self.fallback = fallback
        self.calls = 0  # model calls asked for
        self.served = 0  # calls answered from the recording (or an override)
        self.live = 0  # misses answered by the fallback provider
        self.failures: list[CassetteError] = []
        self._open = False

    @property
    def expected(self) -> int:
        if self.overrides is not None and self.overrides.replace is not None:
            return len(self.overrides.replace)
        return max([len(self.records), *(self.overrides.calls if self.overrides else ())])

    @property
    def unconsumed(self) -> int:
        return max(0, self.expected - self.calls)

    @property
    def model_live(self) -> int:
        """Calls the recording could not answer: those that went live, and those that would have
        had to (a strict miss stops the run, so it counts at most one)."""
        return self.live + sum(1 for f in self.failures if isinstance(f, (CassetteMismatch, CassetteExhausted)))

    async def _go_live(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        self.live += 1
        async for ch in self.fallback.stream(request):
            yield ch

    def _fail(self, err: CassetteError) -> CassetteError:
        self.failures.append(err)
        return err

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        if self._open:
            raise self._fail(CassetteError(
                f"model call {self.calls + 1} started while call {self.calls} is still streaming — positional "
                f"replay serves one stream at a time; run the scenario's model calls sequentially", call=self.calls + 1))
        self.calls += 1
        n = self.calls
        self._open = True
        try:
            entry = self.overrides.entry(n) if self.overrides is not None else None
            replacing = self.overrides is not None and self.overrides.replace is not None
            rec = self.records[n - 1] if not replacing and n <= len(self.records) else None
            if entry is None and rec is None and self.fallback is not None:
                async for ch in self._go_live(request):
                    yield ch
                return
            if entry is None and rec is None:
                raise self._fail(CassetteExhausted(
                    f"model call {n}: the cassette is exhausted — it recorded {self.expected} call(s) and the agent "
                    f"made an extra one (re-record the scenario if the extra call is intended: FLUX_GOLDEN=update)",
                    call=n))
            if rec is not None and self.check_requests:
                h, obj = request_hash(request, self.redactor)
                if h != rec.hash and self.fallback is not None:
                    async for ch in self._go_live(request):
                        yield ch
                    return
                if h != rec.hash:
                    delta = request_delta(rec.request, obj)
                    detail = "; ".join(delta) if delta else "the redacted canonical request hashes differently"
                    raise self._fail(CassetteMismatch(
                        f"model call {n}: the request differs from the recorded one — {detail} "
                        f"(re-record if the change is intended: FLUX_GOLDEN=update)", call=n, delta=delta))
            if entry is None:
                assert rec is not None
                self.served += 1
                for c in rec.chunks:
                    yield Chunk.from_json(c)
                if rec.error is not None:  # a recorded failure fails again, as recorded — and is retried
                    again = n < len(self.records) and self.records[n].hash == rec.hash  # only if it was
                    e = rec.error
                    raise RecordedProviderError(e["message"], status=e["status"], code=e["code"], call=n,
                                                retryable=bool(e["retryable"]) and again)
                return
            self.served += 1
            for c in entry.chunks:
                yield Chunk.from_json(c)
            if entry.kind == "throw":  # exactly its message, no "model call N:" prefix: the agent must
                # see what the provider said, or a recorded error could never match the re-drive's
                raise RecordedProviderError(entry.message or "provider error (replay.override.json throw)",
                                            status=entry.status, code=entry.code, call=n)
            if entry.kind == "hang":
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    self.failures.append(ModelCallHung(
                        f"model call {n} hung (replay.override.json hang) and was cancelled", call=n))
                    raise
        finally:
            self._open = False
