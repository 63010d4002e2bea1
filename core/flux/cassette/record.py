"""Cassette recording: after every live dispatch, append one redacted ``op_recorded`` cell, then
hand the **unredacted** outcome back to the run (:class:`RecordingHost` wraps any op host).

A cell that cannot be built or written fails that dispatch with :class:`CassetteWriteError` (flux
swallows it; we do not), since the run could no longer be replayed past it (docs/agent.md).
``FLUX_CASSETTE=0`` disables recording; ``FLUX_CASSETTE_MAX_BYTES`` caps each field (default 1 MiB).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Callable, Mapping

from ..canonical import canonical_json, scrub_text, scrub_value, sha256_hex
from ..errors import FluxError
from ..store.events import OpRecorded
from .redactor import Redactor

__all__ = [
    "DEFAULT_CAP", "CassetteWriteError", "RecordingHost", "build_cell", "cassette_enabled", "cap_from_env", "input_view",
    "scrub_outcome", "truncate_utf8",
]

DEFAULT_CAP = 1_048_576


class CassetteWriteError(FluxError):
    """A dispatched op's cassette cell could not be recorded: the op ran, its cell is missing."""

    def __init__(self, op: str, cause: BaseException):
        self.op, self.cause = op, cause
        super().__init__(f"op `{op}` ran but its cassette cell could not be recorded ({type(cause).__name__}: {cause}) — "
                         "the turn stops here; fix the store (disk space, permissions) and run again")


def cassette_enabled(env: Mapping[str, str] | None = None) -> bool:
    """``FLUX_CASSETTE`` is ``"0"`` → off; any other value, or unset → on."""
    env = os.environ if env is None else env
    return env.get("FLUX_CASSETTE") != "0"


def cap_from_env(env: Mapping[str, str] | None = None) -> int:
    """``FLUX_CASSETTE_MAX_BYTES`` as an integer (≥ 0); unset or unparsable → the default."""
    env = os.environ if env is None else env
    raw = env.get("FLUX_CASSETTE_MAX_BYTES")
    if raw is None:
        return DEFAULT_CAP
    try:
        cap = int(raw.strip())
    except ValueError:
        return DEFAULT_CAP
    return cap if cap >= 0 else DEFAULT_CAP


def truncate_utf8(text: str, cap: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``cap`` UTF-8 bytes on a character boundary."""
    if len(text) <= cap and text.isascii():  # (one byte a character: nothing to cut, nothing to encode)
        return text, False
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text, False
    # errors="ignore" only drops the partial character the cut made at the end.
    return data[:cap].decode("utf-8", errors="ignore"), True


def input_view(input_json: str, redactor: Redactor) -> str:
    """The redacted view of an op input: :meth:`Redactor.redact_json_text` — the input
    parsed and scrubbed node by node (string leaves, numbers, object keys, and scalars under
    secret-naming keys); unchanged, the text is kept verbatim (after the text passes, which find
    nothing in ordinary input); otherwise the scrubbed value is re-serialized canonically. The
    text passes run over the result as a last guard, so no pattern the redactor knows can survive
    into the view."""
    return redactor.redact_json_text(input_json)


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    return canonical_json(v)


def _redacted_text(v: Any, text: str, redactor: Redactor) -> str:
    """An outcome's content or view redacted: a text as it is, a JSON value on its decoded leaves."""
    return redactor.redact(text) if v is None or isinstance(v, str) else redactor.redact_json_text(text)


def build_cell(seq: int, op: str, input_json: str, outcome: Any, redactor: Redactor, cap: int, *,
               input_hash: str | None = None) -> OpRecorded:
    """The ``op_recorded`` cell for one dispatch. Text is scrubbed of lone
    surrogates first (flux.canonical.scrub_text), as every hashed or stored text is.
    ``input_hash``: ``sha256_hex(input_json)`` when the caller has it already (the step's hash)."""
    input_json = scrub_text(input_json)
    h = sha256_hex(input_json) if input_hash is None else input_hash
    # The input redacted on its decoded values: the view, and the text the second hash is of (what
    # a replay of the redacted plan rebuilds).
    red_input = input_json if redactor.leaves_alone(input_json) else input_view(input_json, redactor)
    view_in = red_input
    h_red = sha256_hex(red_input) if red_input != input_json else None
    view_in_changed = view_in != input_json
    view_in, view_in_trunc = truncate_utf8(view_in, cap)

    raw_content_value = getattr(outcome, "content", "")
    raw_content = scrub_text(_text(raw_content_value))
    content = _redacted_text(raw_content_value, raw_content, redactor)
    content_changed = content != raw_content
    content, content_trunc = truncate_utf8(content, cap)

    raw_view = getattr(outcome, "view", None)
    view: str | None = None
    view_changed = view_trunc = False
    if raw_view is not None:
        raw_view_text = scrub_text(_text(raw_view))
        view = _redacted_text(raw_view, raw_view_text, redactor)
        view_changed = view != raw_view_text
        view, view_trunc = truncate_utf8(view, cap)

    return OpRecorded(
        seq=seq,
        step=f"step_{op}_{h[:16]}",
        op=op,
        input_hash=h,
        input_hash_redacted=h_red,
        input_view=view_in,
        input_view_truncated=view_in_trunc,
        content=content,
        view=view,
        is_error=bool(getattr(outcome, "is_error", False)),
        denied=bool(getattr(outcome, "denied", False)),
        redacted=content_changed or view_changed or h_red is not None or view_in_changed,
        truncated=content_trunc or view_trunc,
    )


def scrub_outcome(outcome: Any) -> Any:
    """The outcome with lone surrogates replaced in its content and view (flux.canonical.scrub_text):
    the live run then sees exactly what its cell stores and what a replay will hand back."""
    if not dataclasses.is_dataclass(outcome) or isinstance(outcome, type):
        return outcome
    changes = {}
    for name in ("content", "view"):
        v = getattr(outcome, name, None)
        if v is not None:
            s = scrub_value(v)
            if s is not v and s != v:
                changes[name] = s
    return dataclasses.replace(outcome, **changes) if changes else outcome


def _completed_work() -> Any:
    """flux.lang.interpreter.completed_work (imported on first use: the interpreter imports cassette
    modules lazily too)."""
    global _COMPLETED
    if _COMPLETED is None:
        from ..lang.interpreter import completed_work

        _COMPLETED = completed_work
    return _COMPLETED


_COMPLETED: Any = None


class RecordingHost:
    """An op host that records a cassette cell after every live dispatch of ``inner``.

    ``cells`` keeps the cells this scope recorded (already redacted — exactly what went to the
    sink), ``seq`` is the per-scope counter (starts at 0). A cell that cannot be built or appended
    raises :class:`CassetteWriteError` after the dispatch. Attributes the wrapper does not define are
    forwarded to ``inner`` (its catalog, approver hooks, …).
    """

    def __init__(self, inner: Any, sink: Any, redactor: Redactor | None = None, cap: int | None = None, *,
                 enabled: bool | None = None, env: Mapping[str, str] | None = None):
        self.inner = inner
        self.redactor = redactor or Redactor()
        self.cap = cap_from_env(env) if cap is None else cap
        self.enabled = cassette_enabled(env) if enabled is None else enabled
        self._emit: Callable[[dict], Any] = sink.emit if hasattr(sink, "emit") else sink
        # A sink that takes the cell itself (the agent's recorder) spares the dict round trip.
        self._emit_cell: Callable[[OpRecorded], Any] | None = getattr(sink, "emit_cell", None)
        self.seq = 0
        self.cells: list[OpRecorded] = []

    def __getattr__(self, name: str) -> Any:
        # Only reached for attributes not set in __init__.
        if name.startswith("__") or name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def dispatch(self, op: str, input: Any, input_json: str | None = None) -> Any:
        if input_json is None:
            input_json = canonical_json(input)
        return self.settle(op, input_json, self.begin(op, input, input_json)())

    # The two phases of a dispatch, for the interpreter's scheduler (flux.lang.interpreter._phases):
    # ``begin`` starts the op and returns the work, which may run in a worker thread while other
    # branches go on (if ``inner`` has a ``begin`` of its own; otherwise ``inner.dispatch`` runs
    # right here); ``settle`` writes the cell on the interpreter's thread, in completion order, and
    # only for an op whose result the run takes — a cancelled op gets none (flux's RecordScope
    # records after the dispatch returns, and a dropped future never returns).
    def _inner_phases(self) -> tuple:
        """``inner``'s own ``begin``/``settle`` (or None), looked up once per inner host."""
        cached = self.__dict__.get("_phases_of")
        if cached is None or cached[0] is not self.inner:
            inner = self.inner
            cached = (inner, getattr(inner, "begin", None), getattr(inner, "settle", None))
            self.__dict__["_phases_of"] = cached
        return cached

    def begin(self, op: str, input: Any, input_json: str) -> Callable[[], Any]:
        _, inner_begin, _ = self._inner_phases()
        if inner_begin is None:
            return _completed_work()(scrub_outcome(self.inner.dispatch(op, input, input_json)))
        work = inner_begin(op, input, input_json)
        if getattr(work, "completed", False):
            return _completed_work()(scrub_outcome(work()))
        return lambda: scrub_outcome(work())

    def settle(self, op: str, input_json: str, outcome: Any) -> Any:
        _, _, inner_settle = self._inner_phases()
        if inner_settle is not None:
            outcome = inner_settle(op, input_json, outcome)
        if self.enabled:
            self.record(op, input_json, outcome)
        return outcome

    def record(self, op: str, input_json: str, outcome: Any, *, input_hash: str | None = None) -> OpRecorded:
        """Build and append the cell for one dispatch; raises :class:`CassetteWriteError` if either
        fails. ``input_hash``: ``sha256_hex(input_json)``, if the caller has it."""
        try:
            cell = build_cell(self.seq, op, input_json, outcome, self.redactor, self.cap, input_hash=input_hash)
            if self._emit_cell is not None:
                self._emit_cell(cell)
            else:
                self._emit(cell.to_body())
        except Exception as e:
            raise CassetteWriteError(op, e) from e
        self.seq += 1
        self.cells.append(cell)
        return cell
