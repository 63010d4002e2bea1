"""The adaptive agent loop, and authored-flow turns, recorded as flux records them (spec §2.6).

One adaptive turn writes, in this order:

1. the user ``message``;
2. ``turn_started`` (its ``global_seq`` is the turn id);
3. per tool call the model makes: an accepted ``plan_attempted`` holding the host-derived
   one-statement plan (§5.2: ``adaptive_gather_<k> = op({...})`` for reading ops, phase
   ``gather``; ``adaptive_batch_<id>_action_<i> = op({...})`` for mutating ops, phase ``execute``),
   then the interpreter's ``step_started``, the cassette cell ``op_recorded`` and
   ``step_succeeded``/``step_failed``;
4. ``flow_returned`` (the turn's answer as the loop's return value; not on error/cancel);
5. one ``call_usage`` per model call that reported usage;
6. ``turn_ended`` (outcome ``ok`` / ``max_iter`` / ``cancelled`` / ``error``);
7. the observation flush (``turn.iteration``, ``model.call``, ``tool_call``, ``tool.started``,
   ``tool.ended``), all stamped with the flush time;
8. the conversation messages without turn id: every intermediate assistant ``tool_use`` and user
   ``tool_result`` message, then the final assistant message — so the stored conversation stays a
   valid provider history (§2.4) that ``--continue`` resends.

Durability by effect (``docs/store-format.md``): the recorder group-commits. Rows are buffered and
written in one transaction before every dispatch of an op with an effect (write / delete / network /
exec, or undeclared) — so its plan and ``step_started`` are on disk while it runs; its cell is then
owed and rides with the next commit, which comes before the next dispatch of any op, an approval
prompt, a sleep, a model call or the turn's end (one commit per effectful op); before every model
call; and at the turn's end. Rows of ``pure``/``read`` ops (re-runnable) may sit in the buffer (at
most 512 rows or 50 ms) and are lost if the process dies first.

Everything written passes the redactor first (cells by the recording host; plan text, messages,
answers, step errors and observations here). The model itself sees the unredacted tool results.
A process killed mid-turn leaves 1–3: a turn with an accepted plan and no ``turn_ended``, which
``flux sessions`` flags as interrupted.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from itertools import chain, compress, repeat
from operator import is_ as _is
from json.encoder import encode_basestring as json_str  # serde's escapes, raw UTF-8 (as events.py)
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ..canonical import canonical_json, compact_json, scrub_text, scrub_value, sha256_hex
from ..cassette.record import CassetteWriteError, RecordingHost, scrub_outcome, truncate_utf8
from ..cassette.redact_plan import redacted_plan_source
from ..cassette.redactor import Redactor, secret_name
from ..errors import FluxError
from ..lang import ast as A
from ..lang.astjson import bind_call_json_text
from ..lang.formatter import _IDENT, _OPNAME, format_bind_call, format_flow
from ..lang.hashes import fingerprint, flow_key, one_statement_hashes
from ..lang.parser import RESERVED
from ..lang.interpreter import Interpreter, OpOutcome, completed_work
from ..store.events import (
    CallUsage, Message, Observation, OpRecorded, PlanAttempted, Run, TurnEnded, Usage, decode_run, encode_accepted_plan,
    encode_observation, encode_op_recorded, encode_run_step, new_op_recorded,
)
from ..model.pricing import Spend
from ..store.bindings import FlowDbBindings
from ..store.store import StoreWriter
from .approver import ApprovalRequest, Approver, AutoApprove
from .cancel import raise_if_cancelled
from .ops import MUTATING_EFFECTS, Op, Toolbox, validate_input
from .providers.base import Chunk, ModelRequest, ProviderError, assemble

__all__ = ["TurnOutput", "PlanRecord", "ToolCall", "TurnRunner", "provider_history", "RetryPolicy"]

log = logging.getLogger(__name__)

CANCELLED_ANSWER = "(turn cancelled)"
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{[A-Za-z_][A-Za-z0-9_]*\}")


@dataclass(slots=True)  # (no __dict__: one per tool call, kept for the turn)
class PlanRecord:
    step: int
    phase: Optional[str]
    fingerprint: str
    flow_key: str
    source: str  # the stored (redacted) plan_source


@dataclass(slots=True)  # (no __dict__: one per tool call, kept for the turn)
class ToolCall:
    id: str
    name: str
    input: Any
    status: str  # ok | error | denied | invalid
    content: str  # what the model got back (unredacted: this object never touches disk)
    plan_step: Optional[int] = None


def _turn_number(cfg: Any) -> int:
    """The 1-based number of the turn just begun in ``cfg.session`` (people count turns; ids are seqs)."""
    return cfg.writer.conn.execute(
        "SELECT COUNT(*) FROM events WHERE stream = ? AND kind = 'turn_started'", (cfg.session,)).fetchone()[0]


@dataclass
class TurnOutput:
    """What one turn produced. ``cells`` are the recorded (redacted) cassette cells."""

    session: str
    turn_id: int
    outcome: str
    answer: str
    usage: Usage
    cost: Optional[float]
    model: str
    plans: list[PlanRecord] = field(default_factory=list)
    cells: list[OpRecorded] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    model_calls: int = 0
    iterations: int = 0
    error: Optional[str] = None
    number: int = 0  # 1-based turn number in its session (turn_id is a global_seq, not for people)
    resurrected: Any = None  # the ResurrectReport of an interrupted turn finished before this one

    @property
    def ok(self) -> bool:
        return self.outcome in ("ok", "completed")

    def to_json(self) -> dict:
        return {
            "session": self.session, "turn": self.number, "turn_id": self.turn_id, "outcome": self.outcome, "answer": self.answer,
            "model": self.model, "usage": self.usage.to_body(), "cost_usd": self.cost, "model_calls": self.model_calls,
            "iterations": self.iterations, "error": self.error,
            "plans": [{"step": p.step, "phase": p.phase, "fingerprint": p.fingerprint, "flow_key": p.flow_key}
                      for p in self.plans],
            "tool_calls": [{"id": t.id, "name": t.name, "status": t.status} for t in self.tool_calls],
            "cells": len(self.cells),
        }


@dataclass
class RetryPolicy:
    """Retry a retryable provider error (429, 5xx, dropped connection) with exponential backoff."""

    attempts: int = 4  # total tries
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0

    def delay(self, attempt: int) -> float:
        return min(self.base_delay_s * (2 ** (attempt - 1)), self.max_delay_s)


# ---------------------------------------------------------------------------------------------
# History


def provider_history(messages: list[dict]) -> list[dict]:
    """A stored conversation made into a valid provider history (§2.4).

    Starts with ``user``; roles alternate (consecutive same-role messages are merged, which is
    what an interrupted turn leaves behind); no empty assistant message; every ``tool_use`` is
    answered by a ``tool_result`` in the next message (a missing one is filled in as an error)
    and stray ``tool_result`` blocks are dropped.
    """
    msgs: list[dict] = []
    for m in messages:
        role = m.get("role")
        content = [b for b in (m.get("content") or []) if isinstance(b, dict)]
        if role not in ("user", "assistant") or not content:
            continue
        if msgs and msgs[-1]["role"] == role:
            msgs[-1] = {"role": role, "content": msgs[-1]["content"] + content}
        else:
            msgs.append({"role": role, "content": content})
    while msgs and msgs[0]["role"] != "user":
        msgs.pop(0)
    out: list[dict] = []
    pending: list[str] = []
    for m in msgs:
        if m["role"] == "assistant":
            pending = [b.get("id") for b in m["content"] if b.get("type") == "tool_use"]
            out.append(m)
            continue
        content = m["content"]
        answered = {b.get("tool_use_id") for b in content if b.get("type") == "tool_result"}
        keep = [b for b in content if b.get("type") != "tool_result" or b.get("tool_use_id") in pending]
        missing = [i for i in pending if i not in answered]
        fill = [{"type": "tool_result", "tool_use_id": i, "content": [{"type": "text", "text": "(no result recorded)"}],
                 "is_error": True} for i in missing]
        results = [b for b in keep if b.get("type") == "tool_result"]
        others = [b for b in keep if b.get("type") != "tool_result"]
        content = results + fill + others
        pending = []
        if content:
            out.append({"role": "user", "content": content})
        elif out and out[-1]["role"] == "assistant":
            continue
    if out and out[-1]["role"] == "assistant" and pending:
        blocks = [b for b in out[-1]["content"] if b.get("type") != "tool_use"]
        if blocks:
            out[-1] = {"role": "assistant", "content": blocks}
        else:
            out.pop()
    # Merging may be needed again after drops.
    merged: list[dict] = []
    for m in out:
        if merged and merged[-1]["role"] == m["role"]:
            merged[-1] = {"role": m["role"], "content": merged[-1]["content"] + m["content"]}
        else:
            merged.append(m)
    return merged


def _escape_braces(v: Any) -> Any:
    """Make lit strings survive the interpreter's ``{name}`` interpolation unchanged."""
    if isinstance(v, str):
        if _PLACEHOLDER.search(v):
            return v.replace("{", "{{").replace("}", "}}")
        return v
    if isinstance(v, list):
        return [_escape_braces(x) for x in v]
    if isinstance(v, dict):
        return {k: _escape_braces(x) for k, x in v.items()}
    return v


def host_plan(bind: str, op: str, input_obj: dict) -> A.DraftAst:
    """The host-derived one-statement plan of §5.2 for one tool call."""
    return A.DraftAst(name=None, params=(), returns=None,
                      body=(A.Bind(name=bind, value=A.Call(op=op, args=(A.Lit(value=_escape_braces(input_obj)),))),))


def host_plan_facts(bind: str, op: str, input_obj: dict) -> tuple[Any, str, str, str]:
    """The host plan (:func:`host_plan`) as the loop records and runs it, without building it:
    ``(value, text, fingerprint, flow key)`` — the call's literal argument (the input with its
    braces escaped), ``format_flow``, ``fingerprint`` and ``flow_key(None, body)`` of the plan.

    One call per tool call, so the three are written from the statement's parts — its JSON text
    once, the two hashes around it, the text from its one-line spelling — instead of building the
    AST and walking it three times. A property test (tests/agent/test_host_plan.py) checks every
    part equals the general path's; a plan the fast path cannot write takes the general path."""
    value = _escape_braces(input_obj)
    try:
        text = bind_call_json_text(bind, op, value)
        source = format_bind_call(bind, op, value)
    except (RecursionError, TypeError, ValueError):
        source = None
    if source is None:  # no plain spelling, or too deep: the AST and the formatter say what to write
        draft = host_plan(bind, op, input_obj)
        return value, format_flow(draft), fingerprint(draft), flow_key(None, draft.body)
    fp, key = one_statement_hashes(text)
    return value, source, fp, key


def _bind_safe(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", s)


# ---------------------------------------------------------------------------------------------
# Observations


class RedactedJson:
    """``compact_json(redactor.redact_value(v))`` written straight from ``v`` — the same text —
    for what the recorder redacts by the thousand at a turn's end (the observations, three per
    tool call, and the conversation's tool_use / tool_result blocks).

    ``redact_value`` of a dict builds a new dict (each key redacted and checked for a secret name,
    each value redacted by type) that ``compact_json`` then encodes. Here each key set is looked at
    once per writer (its redacted keys' JSON fragments and secret-name flags) and each value's text
    is written from the value by the same rules, nested dicts and lists too. A dict whose keys are
    not all strings or whose redacted keys collide, and any value that is not of an exact JSON type,
    take the general path. Use one writer per batch: it keeps the key sets it has seen, not the
    redactor's later secrets. Property tests (tests/agent/test_observation_texts.py) check every
    text equals the general path's."""

    def __init__(self, redactor: Redactor):
        self.redactor = redactor
        self.red, self.red_value = redactor.redact, redactor.redact_value
        self.numbers_stay = not redactor.has_registered  # redact_value leaves numbers alone only then
        self.marker = json_str(redactor.marker)
        self.shapes: dict[tuple, Optional[tuple]] = {}

    def text(self, v: Any) -> str:
        t = type(v)
        if t is str:
            return json_str(self.red(v))
        if t is dict:
            return self.dict_text(v)
        if t is list:
            return "[" + ",".join([self.text(x) for x in v]) + "]"
        if v is None:
            return "null"
        if t is bool:
            return "true" if v else "false"
        if t is int and self.numbers_stay:
            return int.__repr__(v)
        return compact_json(self.red_value(v))

    def dict_text(self, d: dict) -> str:
        keys = tuple(d)
        shape = self.shapes.get(keys, _NO_SHAPE)
        if shape is _NO_SHAPE:
            shape = self.shapes[keys] = _dict_shape(keys, self.redactor)
        if shape is None:
            return compact_json(self.red_value(d))
        red, numbers_stay, marker = self.red, self.numbers_stay, self.marker
        parts = []
        for (frag, secret), v in zip(shape, d.values()):
            t = type(v)
            if secret and v is not None and not isinstance(v, (dict, list, bool)):
                parts.append(frag + marker)  # a scalar under a key that names a secret
            elif t is str:
                parts.append(frag + json_str(red(v)))
            elif t is int and numbers_stay:
                parts.append(frag + int.__repr__(v))
            else:
                parts.append(frag + self.text(v))
        return "{" + "".join(parts) + "}"


_NO_SHAPE: Any = object()


def _dict_shape(keys: tuple, redactor: Redactor) -> Optional[tuple[tuple[str, bool], ...]]:
    """Per key of a dict: (``,"<redacted key>":`` — no comma for the first —, names a secret);
    None when a key is not a string or two keys redact to the same text (the general path)."""
    if any(type(k) is not str for k in keys):
        return None
    red = [redactor.redact(k) for k in keys]
    if len(set(red)) != len(red):
        return None
    return tuple((("," if i else "") + json_str(r) + ":", secret_name(k))
                 for i, (k, r) in enumerate(zip(keys, red)))


class ToolObservations:
    """The observations of one adaptive tool call, in one entry of the turn's observation list:
    ``tool_call`` {caller, subjects, tool} and ``tool.started`` {dispatch, elapsed_us: 0, tool} when
    the call begins, ``tool.ended`` {dispatch, elapsed_us, execution_us, status, tool} once
    :meth:`end` is called (a turn cut short in between has the first two only). What the fused call
    (:class:`_DirectCall`) appends instead of three :class:`Observation` objects;
    :func:`observation_texts` writes the same texts (:meth:`observations` are the three)."""

    __slots__ = ("dispatch", "tool", "subjects", "elapsed_us", "execution_us", "status")

    def __init__(self, dispatch: int, tool: str, subjects: Optional[list]):  # (None: no subjects, [])
        self.dispatch, self.tool, self.subjects = dispatch, tool, subjects
        self.status: Optional[str] = None
        self.elapsed_us = self.execution_us = 0

    def end(self, elapsed_us: int, execution_us: int, status: str) -> None:
        self.elapsed_us, self.execution_us, self.status = elapsed_us, execution_us, status

    def observations(self) -> list[Observation]:
        subjects = [] if self.subjects is None else self.subjects
        obs = [Observation("tool_call", "turn", {"caller": "local", "subjects": subjects, "tool": self.tool}),
               Observation("tool.started", "turn", {"dispatch": self.dispatch, "elapsed_us": 0, "tool": self.tool})]
        if self.status is not None:
            obs.append(Observation("tool.ended", "turn", {
                "dispatch": self.dispatch, "elapsed_us": self.elapsed_us, "execution_us": self.execution_us,
                "status": self.status, "tool": self.tool}))
        return obs


_OBS_HEAD = '{"kind":"observation","data":{"kind":"'
_TOOL_CALL_HEAD = _OBS_HEAD + 'tool_call","phase":"turn","data":{'
_TOOL_STARTED_HEAD = _OBS_HEAD + 'tool.started","phase":"turn","data":{'
_TOOL_ENDED_HEAD = _OBS_HEAD + 'tool.ended","phase":"turn","data":{'
_TOOL_CALL_KEYS = ("caller", "subjects", "tool")
_TOOL_STARTED_KEYS = ("dispatch", "elapsed_us", "tool")
_TOOL_ENDED_KEYS = ("dispatch", "elapsed_us", "execution_us", "status", "tool")


def _tool_frags(writer: RedactedJson) -> Optional[tuple[str, str, str]]:
    """The three tool observations' texts as %-formats — the key fragments
    :meth:`RedactedJson.dict_text` writes and the text of the caller (``"local"``) in place, a ``%s``
    for each value that varies (call: subjects, tool; started: dispatch, tool; ended: dispatch,
    elapsed, execution, status, tool); None when a value would not be written as it is (a key that
    names a secret or redacts to another's text, or numbers the redactor may change): then the
    general path."""
    if not writer.numbers_stay:
        return None
    frags = []
    for keys in (_TOOL_CALL_KEYS, _TOOL_STARTED_KEYS, _TOOL_ENDED_KEYS):
        shape = writer.shapes.get(keys, _NO_SHAPE)
        if shape is _NO_SHAPE:
            shape = writer.shapes[keys] = _dict_shape(keys, writer.redactor)
        if shape is None or any(secret for _, secret in shape):
            return None
        frags.append(tuple(frag.replace("%", "%%") for frag, _ in shape))
    (c0, c1, c2), (s0, s1, s2), (e0, e1, e2, e3, e4) = frags
    local = writer.text("local").replace("%", "%%")
    return (_TOOL_CALL_HEAD + c0 + local + c1 + "%s" + c2 + "%s}}}",
            _TOOL_STARTED_HEAD + s0 + "%s" + s1 + "0" + s2 + "%s}}}",
            _TOOL_ENDED_HEAD + e0 + "%s" + e1 + "%s" + e2 + "%s" + e3 + "%s" + e4 + "%s}}}")


def _tool_observation_texts(ob: ToolObservations, writer: RedactedJson, frags: Any, names: dict, add: Callable) -> None:
    """The texts of ``ob.observations()`` (as :func:`observation_texts` writes them), from the
    formats of :func:`_tool_frags` (``frags``) and the texts of the tool's name and of its status
    (``writer.text`` of each string, kept in ``names``)."""
    if frags is None:
        for o in ob.observations():
            add(_OBS_HEAD + o.kind + '","phase":"turn","data":' + writer.text(o.data) + "}}")
        return
    call, started, ended = frags
    tool = names.get(ob.tool)
    if tool is None:
        tool = names[ob.tool] = writer.text(ob.tool)
    d = ob.dispatch
    d = int.__repr__(d) if type(d) is int else writer.text(d)
    subjects = ob.subjects
    add(call % ("[]" if not subjects else writer.text(subjects), tool))
    add(started % (d, tool))
    status = ob.status
    if status is not None:
        el, ex = ob.elapsed_us, ob.execution_us
        st = names.get(status)  # (writer.text of a string, as a tool's name)
        if st is None:
            st = names[status] = writer.text(status)
        add(ended % (d, int.__repr__(el) if type(el) is int else writer.text(el),
                     int.__repr__(ex) if type(ex) is int else writer.text(ex), st, tool))


def observation_texts(observations: list, redactor: Redactor) -> list[str]:
    """``[encode_observation(o.kind, o.phase, redactor.redact_value(o.data)) for o in observations]``
    — the same texts — for the turn's observation flush (:class:`RedactedJson`); a
    :class:`ToolObservations` entry stands for its :meth:`~ToolObservations.observations`."""
    writer = RedactedJson(redactor)
    heads: dict[tuple[str, str], str] = {}
    out: list[str] = []
    add = out.append
    frags: Any = _NO_SHAPE
    names: dict = {}
    for ob in observations:
        if type(ob) is ToolObservations:
            if frags is _NO_SHAPE:
                frags = _tool_frags(writer)
            _tool_observation_texts(ob, writer, frags, names, add)
            continue
        kind, phase, data = ob.kind, ob.phase, ob.data
        if type(kind) is not str or type(phase) is not str:
            add(encode_observation(kind, phase, writer.red_value(data)))
            continue
        head = heads.get((kind, phase))
        if head is None:
            head = heads[(kind, phase)] = ('{"kind":"observation","data":{"kind":' + json_str(kind) + ',"phase":'
                                           + json_str(phase) + ',"data":')
        add(head + writer.text(data) + "}}")
    return out


def _plain_json(v: Any) -> bool:
    """Whether ``v`` is made of exact JSON types only (dicts with str keys, lists, str, int, float,
    bool, None) — iteratively, so depth costs no stack. A list of many items (a turn's closing
    messages: a block per tool call) is looked at a level at a time in C loops
    (:func:`_plain_json_levels`)."""
    if type(v) is list and len(v) > 16:
        return _plain_json_levels(v)
    stack = [v]
    pop, push = stack.pop, stack.extend
    while stack:
        x = pop()
        t = type(x)
        if t is dict:
            for k in x:
                if type(k) is not str:
                    return False
            push(x.values())
        elif t is list:
            push(x)
        elif not (t is str or t is int or x is None or t is bool or t is float):
            return False
    return True


_PLAIN_TYPES_ALL = frozenset({dict, list, str, int, float, bool, type(None)})
_flat = chain.from_iterable
_STR_ONLY = frozenset({str})


def _plain_json_levels(v: Any) -> bool:
    """:func:`_plain_json` of ``v``, breadth first: each level's types gathered by ``map(type, …)``,
    its exact dicts and lists picked by ``compress``, their keys' types and the next level by
    ``chain`` — no bytecode per node (property-tested equal to the walk,
    tests/agent/test_plain_json.py)."""
    level = [v]
    while level:
        types = list(map(type, level))
        kinds = set(types)
        if not kinds <= _PLAIN_TYPES_ALL:
            return False
        below: list = []
        if dict in kinds:
            dicts = list(compress(level, map(_is, types, repeat(dict))))
            if not set(map(type, _flat(dicts))) <= _STR_ONLY:  # every key of every dict
                return False
            below += _flat(map(dict.values, dicts))
        if list in kinds:
            below += _flat(compress(level, map(_is, types, repeat(list))))
        level = below
    return True


def verbatim_json(v: Any, redactor: Redactor) -> Optional[str]:
    """``RedactedJson(redactor).text(v)`` when it is ``compact_json(v)`` — None otherwise (then ask
    the writer). It is when ``v`` holds exact JSON types only and its compact text has no escape
    (so every key and string stands in it verbatim) and the redactor finds nothing in the whole
    text (``Redactor.finds_nothing``): then no string or key is changed by a redaction, no key names
    a secret (the prefilter looks for every secret-name word), and no number's text holds a secret
    (it stands in the text too). One C encode and one scan of the text, for the closing messages'
    thousands of blocks, instead of a redaction per string; property-tested equal
    (tests/agent/test_observation_texts.py)."""
    if not _plain_json(v):
        return None
    text = compact_json(v)
    if "\\" in text or not redactor.finds_nothing(text):
        return None
    return text


def message_text(role: str, content: list, writer: RedactedJson) -> Optional[str]:
    """``encode_payload(Message(role, redactor.redact_value(content)))`` (the writer's redactor),
    or None when ``role`` is not a string or ``content`` not a list (the caller takes that path)."""
    if type(role) is not str or type(content) is not list:
        return None
    body = verbatim_json(content, writer.redactor) if len(content) > 1 else None
    if body is None:
        body = writer.text(content)
    return '{"kind":"message","data":{"role":' + json_str(role) + ',"content":' + body + "}}"


# ---------------------------------------------------------------------------------------------
# Recording


RERUNNABLE_EFFECTS = frozenset({"pure", "read"})  # safe to run again: their rows may be group-committed


class _Recorder:
    """Appends the turn's events to the store, redacting every free-text field first.

    ``durable(op)`` says whether ``op`` has an effect (or an unknown one): everything buffered
    (with its plan and ``step_started``) is written before it dispatches, so the store shows it in
    flight. Its cell is then written right away — or, with ``defer_cells`` (a run that never has
    two branches at once: the runner checks the plan), *owed*: it rides with the next commit, which
    :meth:`settle` forces before anything else dispatches (an op of any effect), waits (an approval
    prompt, a sleep) or calls the model, and the turn's end writes it too — one commit per
    effectful op. A kill meanwhile finds that op in flight without its cell — the one op resurrect
    runs at least once, as it would had the kill come while its cell was being written."""

    def __init__(self, writer: StoreWriter, sid: str, redactor: Redactor, cap: int,
                 durable: Callable[[str], bool] = lambda op: True, *, defer_cells: bool = False):
        self.w, self.sid, self.redactor, self.cap = writer, sid, redactor, cap
        self.durable = durable
        self.defer_cells = defer_cells
        self.appended = 0
        self.cells: list[OpRecorded] = []
        self.owed: list[OpRecorded] = []  # effectful ops' cells not yet committed (defer_cells)

    def before_dispatch(self, op: str) -> None:
        raise_if_cancelled()  # after a Ctrl-C nothing further runs
        if self.owed:
            self.settle()
        elif self.durable(op):
            self.w.flush()

    def settle(self) -> None:
        """Commit the owed effectful cells (and everything buffered with them) now; a failure is
        the loud failure of the first one's op (:class:`CassetteWriteError`)."""
        owed, self.owed = self.owed, []
        if not owed:
            return
        try:
            self.w.flush()
        except Exception as e:
            lost = {id(c) for c in owed}
            self.cells = [c for c in self.cells if id(c) not in lost]
            raise CassetteWriteError(owed[0].op, e) from e

    def sleep(self, seconds: float) -> None:
        self.settle()
        time.sleep(seconds)

    def confirming(self, confirm: Callable[[str, str], bool]) -> Callable[[str, str], bool]:
        def ask(message: str, risk: str) -> bool:
            self.settle()
            return confirm(message, risk)
        return ask

    def emit(self, ev: dict) -> None:
        """The interpreter's and the cassette's sink: one ``run`` row per event."""
        kind = ev.get("event")
        if kind in ("step_failed", "plan_halted") and isinstance(ev.get("error"), str):
            ev = dict(ev)
            err = self.redactor.redact(scrub_text(ev["error"]))
            data = err.encode("utf-8")
            if len(data) > self.cap:
                err = data[:self.cap].decode("utf-8", "ignore")
            ev["error"] = err
        text = encode_run_step(ev)  # the per-call step rows, straight to their payload text
        if text is not None:
            self.w.append_text(self.sid, "run", text)
            self.appended += 1
            return
        body = decode_run(ev)
        if isinstance(body, OpRecorded):
            self.emit_cell(body)
            return
        self.w.append(self.sid, Run(event=body))
        self.appended += 1

    def emit_cell(self, cell: OpRecorded, text: Optional[str] = None) -> None:
        """The cassette's sink for a cell (the ``op_recorded`` row of one dispatch); ``text``: its
        payload, when the caller wrote it (``encode_op_recorded(cell)``)."""
        self.w.append_text(self.sid, "run", encode_op_recorded(cell) if text is None else text)
        self.appended += 1
        self.cells.append(cell)
        if self.durable(cell.op):
            if self.defer_cells:
                self.owed.append(cell)  # committed before anything else dispatches, waits or calls the model
            else:
                self.w.flush()  # acknowledged: on disk before the run goes on

    def append(self, body: Any, *, turn_id: Optional[int] = None, ts: Optional[int] = None) -> Any:
        self.appended += 1
        return self.w.append(self.sid, body, turn_id=turn_id, ts=ts)

    def append_text(self, kind: str, payload: str, turn_id: Optional[int] = None) -> None:
        """:meth:`append` of a payload already written as text (``StoreWriter.append_text``)."""
        self.appended += 1
        self.w.append_text(self.sid, kind, payload, turn_id=turn_id)

    def message(self, role: str, content: list[dict], ts: Optional[int] = None,
                writer: Optional[RedactedJson] = None) -> None:
        """Append a conversation message, redacted (``writer``: a :class:`RedactedJson` shared by a
        batch of messages; the text is :func:`message_text`'s, the same as the Message body's)."""
        text = message_text(role, content, writer or RedactedJson(self.redactor))
        if text is None:
            self.append(Message(role=role, content=self.redactor.redact_value(content)), ts=ts)
            return
        self.appended += 1
        self.w.append_message_text(self.sid, text, ts=ts)


class _LiveHost:
    """Dispatches to the toolbox after asking the approver; a refusal is a denied outcome."""

    def __init__(self, toolbox: Toolbox, approver: Approver, timer: Callable[[], int],
                 before_dispatch: Callable[[str], None] = lambda op: None, *, concurrent: bool = True,
                 keep_log: bool = True):
        self.toolbox, self.approver, self.timer = toolbox, approver, timer
        self.before_dispatch = before_dispatch
        self.concurrent = concurrent
        self.last: Optional[OpOutcome] = None
        self.last_exec_us = 0
        self.dispatches = 0
        # op, input, status, started_us, exec_us per dispatch — what a flow turn's observations are
        # written from; an adaptive turn writes them as it goes and keeps none (keep_log=False)
        self.keep_log = keep_log
        self.log: list[tuple[str, Any, str, int, int]] = []
        # ("tool_start" | "tool_end", fields) for a display, as each dispatch starts and ends (a flow turn's)
        self.notify: Optional[Callable[..., None]] = None

    def dispatch(self, op: str, input: Any, input_json: str) -> OpOutcome:
        return self.begin(op, input, input_json)()

    def begin(self, op: str, input: Any, input_json: str) -> Callable[[], OpOutcome]:
        """Start a dispatch on the interpreter's thread (durability flush, approval — one prompt
        at a time) and return the tool call, which may run in a worker thread while other
        `parallel`/`race` branches go on (see flux.lang.scheduler)."""
        raise_if_cancelled()
        self.before_dispatch(op)
        self.dispatches += 1
        started = self.timer()
        o = self.toolbox.get(op)
        refusal: Optional[OpOutcome] = None
        if o is None:
            refusal = OpOutcome(content=f"unknown op `{op}`", is_error=True)
        else:
            d = self.approver.decide(ApprovalRequest(op=op, effect=o.effect, input=input))
            if not d.allowed:
                refusal = OpOutcome(content=d.reason or f"denied: `{op}`", is_error=True, denied=True)
        notify = self.notify
        if notify is not None:
            notify("tool_start", name=op, input=input)

        def work() -> OpOutcome:
            out = refusal if refusal is not None else \
                scrub_outcome(o.call(input if isinstance(input, dict) else {}))
            exec_us = max(0, self.timer() - started)
            self.last_exec_us = exec_us
            status = "denied" if out.denied else ("error" if out.is_error else "ok")
            if self.keep_log:
                self.log.append((op, input, status, started, exec_us))
            self.last = out
            if notify is not None:
                notify("tool_end", name=op, status=status, content=out.content if isinstance(out.content, str) else "")
            return out
        return work if self.concurrent else completed_work(work())


class _NotPlain(Exception):
    """An input the fused call does not take (see :func:`_plain_copy`)."""


def _plain_copy(v: Any) -> Any:
    """A copy of a JSON value of exact built-in types (dict with str keys, list, str, int, float,
    bool, None) — what ``_interpolate_json(_escape_braces(v), {})`` returns for it (the run_call path
    escapes a tool input's braces for the plan, then interpolates them back with no symbols bound);
    raises :class:`_NotPlain` for anything else."""
    t = type(v)
    if t is dict:
        out = {}
        for k, x in v.items():
            if type(k) is not str:
                raise _NotPlain
            tx = type(x)
            out[k] = x if (tx is str or tx is int or x is None or tx is bool or tx is float) else _plain_copy(x)
        return out
    if t is list:
        return [_plain_copy(x) for x in v]
    if t is str or t is int or v is None or t is bool or t is float:
        return v
    raise _NotPlain


_STEP_STARTED = '{"kind":"run","data":{"event":"step_started","step":'
_STEP_SUCCEEDED = '{"kind":"run","data":{"event":"step_succeeded","step":'
# The fused call's texts (every part plain: a step id, an op name's JSON, hex, a value id), one
# %-format each: the rows encode_run_step / encode_op_recorded write, the statement node_json_text writes.
_STEP_STARTED_ROW = _STEP_STARTED + '"%s","op":%s,"input_hash":"%s"}}'
_STEP_SUCCEEDED_ROW = _STEP_SUCCEEDED + '"%s","output":"%s"}}'
_OP_RECORDED_ROW = ('{"kind":"run","data":{"event":"op_recorded","seq":%d,"step":"%s","op":%s,"input_hash":"%s",'
                    '"input_view":%s,"input_view_truncated":%s,"content":%s,"is_error":%s,"denied":%s,"redacted":%s,'
                    '"truncated":%s}}')
# encode_accepted_plan(step, fingerprint, phase, plan_source) of an int step, a hex fingerprint and a
# plain phase (its JSON in the third %s), the plan source's JSON in the fourth
_PLAN_ROW = '{"kind":"plan_attempted","data":{"step":%d,"outcome":"accepted","fingerprint":"%s","phase":%s,"plan_source":%s}}'
_JSON_BOOL = ("false", "true")
_BIND_STMT = '{"kind":"bind","name":"%s","value":{"kind":"call","op":%s,"args":[{"kind":"lit","value":%s}]}}'


_MISSING: Any = object()
_ANY: Any = object()  # a property of any type (no "type" in its schema)
_PLAIN_TYPES = {"string": str, "integer": int, "boolean": bool}  # (a "number" may be a float: general path)
_PLAIN_SCHEMA_KEYS = frozenset({"type", "description", "title", "default"})


@dataclass(frozen=True)
class _OpFacts:
    """What the fused tool call needs of one op (:meth:`_DirectCall._facts_of`)."""

    op: Any
    types: dict  # property -> str / int / bool / _ANY
    required: frozenset
    mutating: bool
    phase: str
    name_json: str
    durable: bool  # the recorder's durable(op): its cell is committed before the next dispatch
    phase_json: str  # json_str(phase)


def _bind_head_ok(head: str) -> bool:
    """Whether ``head + digits`` is a plain bind name for every run of ASCII digits — the text of a
    non-negative int (``not in RESERVED`` and ``_IDENT.match``, the fused call's test of its bind):
    an identifier's tail may hold digits, so ``head + "0"`` stands for them all, and no reserved
    word is ``head`` followed by digits alone."""
    if not _IDENT.match(head + "0"):
        return False
    return not any(w.startswith(head) and w[len(head):].isdigit() for w in RESERVED)


class _DirectCall:
    """One adaptive tool call recorded in one pass: what ``Interpreter.run_call`` of its host plan
    does through ``RecordingHost`` → ``_LiveHost`` with ``_Recorder`` as the sink — the same rows in
    the same order, the same flushes, approver call, op call, cell, log, values, symbols and step
    count — without the layers in between: no scheduler or root task, no interpolation of the
    escaped input (a plain copy), no phase closures, no event dicts round-tripped through
    ``encode_run_step`` (the step rows are written as text), the input hashed once (the cell reuses
    the step's hash) and the outcome scrubbed once. Only for the plain case, checked once per turn
    (:meth:`of`): the recording host wraps the live host directly with the cassette on; a call
    whose input is not plain JSON takes ``run_call``. The differential tests
    (tests/agent/test_direct_call.py) record turns this way, through ``run_call`` and through
    ``Interpreter.run`` and compare them row for row."""

    def __init__(self, interp: Interpreter, host: RecordingHost, live: _LiveHost, rec: "_Recorder",
                 cfg: Optional["TurnConfig"] = None):
        self.interp, self.host, self.live, self.rec, self.cfg = interp, host, live, rec, cfg
        self.facts: dict[str, Any] = {}  # op name -> _OpFacts, or None (the op never takes the fused tool call)
        self.bind_heads: dict[str, bool] = {}  # a bind's head -> _bind_head_ok(head)

    @classmethod
    def of(cls, interp: Interpreter, host: Any, live: Any, rec: "_Recorder",
           cfg: Optional["TurnConfig"] = None) -> Optional["_DirectCall"]:
        if (type(host) is not RecordingHost or host.inner is not live or type(live) is not _LiveHost
                or not host.enabled or interp.host is not host or interp.sink is not rec or type(rec) is not _Recorder):
            return None
        return cls(interp, host, live, rec, cfg)

    def _facts_of(self, name: str, o: Any) -> Optional["_OpFacts"]:
        """What :meth:`tool` needs of op ``o`` (the toolbox's ``name``), or None when its calls take
        the general path: an op whose name has no plain spelling in a plan, or whose input schema
        is more than flat typed properties (its validation is then :func:`validate_input`'s)."""
        if type(o) is not Op or name in RESERVED or not _OPNAME.match(name) or o.name != name:
            return None
        schema = o.input_schema
        if type(schema) is not dict:
            return None
        props = schema.get("properties", {})
        required = schema.get("required", ())
        if type(props) is not dict or type(required) not in (list, tuple) or "__malformed_arguments__" in props:
            return None
        types: dict[str, Any] = {}
        for k, sub in props.items():
            if type(k) is not str or type(sub) is not dict or any(x not in _PLAIN_SCHEMA_KEYS for x in sub):
                return None
            t = sub.get("type", _ANY)
            if t is not _ANY and (type(t) is not str or t not in _PLAIN_TYPES):
                return None
            types[k] = _PLAIN_TYPES.get(t, _ANY)
        if any(type(k) is not str or k not in types for k in required):
            return None  # (a required argument the schema does not list: validate_input says what is wrong)
        mutating = o.effect in MUTATING_EFFECTS
        phase = "execute" if mutating else "gather"
        return _OpFacts(o, types, frozenset(required), mutating, phase, json_str(name), bool(self.rec.durable(name)),
                        json_str(phase))

    def tool(self, tu: dict, index: int, batch: str, out: "TurnOutput", observations: list, turn_id: int) -> Optional[dict]:
        """``TurnRunner._tool`` of one tool call, fused with :meth:`call`, for the common case: a
        known op with a flat typed schema, its input a JSON object of plain scalars that passes
        validation (strings printable, without quotes, backslashes or braces; ints, bools, nulls —
        so the plan's literal, the input's canonical JSON and the AST's literal are one text), a
        plan in which the redactor finds nothing (``Redactor.finds_nothing``: then neither the
        plan's text, nor the input's, nor any node of its view changes). None — before anything is done — for any other call, which
        ``_tool`` then makes the general way. The same rows, values, state and observations
        (tests/agent/test_direct_call.py compares them with the general path)."""
        name, tid, inp = tu.get("name"), tu.get("id"), tu.get("input")
        if type(name) is not str or type(tid) is not str or type(inp) is not dict:
            return None
        cfg = self.cfg
        o = cfg.toolbox.get(name)
        facts = self.facts.get(name)
        if facts is None or facts.op is not o:
            if facts is None and name in self.facts:
                return None
            facts = self.facts[name] = self._facts_of(name, o)
            if facts is None:
                return None
        # Validation and the literal in one pass over the sorted keys (validate_input's verdict for
        # what passes; anything else goes to the general path, which says what is wrong).
        types = facts.types
        parts = []
        required = 0
        try:
            keys = sorted(inp)
        except TypeError:
            return None
        for k in keys:
            want = types.get(k, _MISSING) if type(k) is str else _MISSING
            if want is _MISSING or not k.isprintable() or '"' in k or "\\" in k or "{" in k or "}" in k:
                return None
            v = inp[k]
            t = type(v)
            if t is str:
                if not v.isprintable() or '"' in v or "\\" in v or "{" in v or "}" in v or (want is not _ANY and want is not str):
                    return None
                parts.append('"' + k + '":"' + v + '"')
            elif t is int:
                if want is not _ANY and want is not int:
                    return None
                parts.append('"' + k + '":' + int.__repr__(v))
            elif t is bool:
                if want is not _ANY and want is not bool:
                    return None
                parts.append('"' + k + '":' + ("true" if v else "false"))
            elif v is None:
                parts.append('"' + k + '":null')
            else:
                return None
            if k in facts.required:
                required += 1
        if required != len(facts.required):
            return None
        literal = "{" + ",".join(parts) + "}"
        mutating = facts.mutating
        out_step = len(out.plans) + 1
        if mutating:
            head, number = f"adaptive_{batch}_action_", index
        else:
            head, number = "adaptive_gather_", out_step
        bind = f"{head}{number}"
        ok = self.bind_heads.get(head) if type(number) is int and number >= 0 else None
        if ok is None:  # (a head's verdict holds for every head + digits: see _bind_head_ok)
            ok = _bind_head_ok(head)
            if type(number) is int and number >= 0:
                self.bind_heads[head] = ok
            ok = ok and bind not in RESERVED and _IDENT.match(bind) is not None
        if not ok:
            return None
        plan_text = "flow\n  %s = %s(%s)\n" % (bind, name, literal)
        redactor = cfg.redactor
        secrets = redactor.secret_pattern
        if not redactor.finds_nothing(plan_text):  # (nor in the literal, a part of it)
            return None
        # -- from here on the call is made: the general path's steps, in its order -----------------
        interp, live, rec, host = self.interp, self.live, self.rec, self.host
        w, sid = rec.w, rec.sid
        path = inp.get("path")
        obs = ToolObservations(len(out.tool_calls) + 1, name, [path] if type(path) is str else None)  # (None: [])
        observations.append(obs)
        t0 = cfg.timer()
        stmt = _BIND_STMT % (bind, facts.name_json, literal)
        fp, key = one_statement_hashes(stmt)
        phase = facts.phase
        # The plan row, then call()'s: the input (a plain copy), its hash, step_started (one append
        # of the two rows, as two appends would write them); the durability flush, approval, the op.
        ih = sha256_hex(literal)
        step = "step_%s_%s" % (name, ih[:16])
        w.append_text_pair(sid, "plan_attempted", _PLAN_ROW % (out_step, fp, facts.phase_json, json_str(plan_text)),
                           turn_id, "run", _STEP_STARTED_ROW % (step, facts.name_json, ih), None)
        rec.appended += 2
        out.plans.append(PlanRecord(out_step, phase, fp, key, plan_text))
        live.last = None
        interp.symbols = {}
        input_obj = dict(inp)
        interp._last_vid = None
        rec.before_dispatch(name)
        live.dispatches += 1
        started = live.timer()
        approver = live.approver
        if type(approver) is AutoApprove:  # its decision is known: allowed
            allowed, reason = True, None
        else:
            d = approver.decide(ApprovalRequest(op=name, effect=o.effect, input=input_obj))
            allowed, reason = d.allowed, d.reason
        if allowed:
            res = o.call(input_obj)
            if type(res) is not OpOutcome or res.view is not None or type(res.content) is not str \
                    or scrub_text(res.content) is not res.content:  # else scrub_outcome has nothing to replace
                res = scrub_outcome(res)
            outcome = res
        else:
            res = OpOutcome(content=reason or f"denied: `{name}`", is_error=True, denied=True)
            outcome = scrub_outcome(res)  # the refusal's text is scrubbed by RecordingHost.begin alone
        exec_us = max(0, live.timer() - started)
        live.last_exec_us = exec_us
        failed = outcome.denied or outcome.is_error
        status = "denied" if res.denied else ("error" if res.is_error else "ok")
        if live.keep_log:
            live.log.append((name, input_obj, status, started, exec_us))
        live.last = res
        # RecordingHost.record: the cell, written from its parts when build_cell's general steps
        # would find nothing to do (an outcome without a view, an input the redactor leaves alone).
        content = outcome.content
        if outcome is res and allowed and type(content) is str and res.view is None \
                and redactor.secret_pattern is secrets:  # (no secret registered since the plan was checked)
            try:
                self._cell(name, facts.name_json, step, ih, literal, content, res, facts.durable)
            except Exception as e:
                raise CassetteWriteError(name, e) from e
        else:
            host.record(name, literal, outcome, input_hash=ih)
        interp.clock.dispatched()
        interp._steps_base += 1
        if failed:
            rec.emit({"event": "step_failed", "step": step, "error": outcome.content})
        else:
            vid = interp._mint(content)
            interp._last_vid = vid
            w.append_text(sid, "run", _STEP_SUCCEEDED_ROW % (step, vid))
            rec.appended += 1
            interp.symbols[bind] = content
        # _tool's end: the call's observations, its record and the model's tool result.
        content = res.content if isinstance(res.content, str) else str(res.content)
        obs.elapsed_us, obs.execution_us, obs.status = cfg.timer() - t0, live.last_exec_us, status  # (obs.end)
        out.tool_calls.append(ToolCall(tid, name, inp, status, content, out_step))
        return {"type": "tool_result", "tool_use_id": tid, "content": [{"type": "text", "text": content}],
                "is_error": status != "ok"}

    def _cell(self, op: str, op_json: str, step: str, ih: str, input_json: str, raw: str, res: OpOutcome,
              durable: bool) -> None:
        """``host.record(op, input_json, res, input_hash=ih)`` for an outcome with text content and
        no view, whose input the redactor leaves alone: build_cell's steps that change nothing
        skipped, the row's text written from the fields, and ``_Recorder.emit_cell`` inline
        (``durable``: ``rec.durable(op)``)."""
        host, rec = self.host, self.rec
        redactor, cap = host.redactor, host.cap
        content = redactor.redact(raw)
        changed = content != raw
        content, truncated = truncate_utf8(content, cap)
        view, view_truncated = truncate_utf8(input_json, cap)
        is_error, denied = bool(res.is_error), bool(res.denied)
        seq = host.seq
        # (OpRecorded(...) positionally, without the frozen __init__'s 13 object.__setattr__ calls)
        cell = new_op_recorded(seq, step, op, ih, None, view, view_truncated, content, None, is_error, denied, changed,
                               truncated)
        rec.w.append_text(rec.sid, "run", _OP_RECORDED_ROW % (
            seq, step, op_json, ih, json_str(view), _JSON_BOOL[view_truncated], json_str(content), _JSON_BOOL[is_error],
            _JSON_BOOL[denied], _JSON_BOOL[changed], _JSON_BOOL[truncated]))
        rec.appended += 1  # (rec.emit_cell, inline)
        rec.cells.append(cell)
        if durable:
            if rec.defer_cells:
                rec.owed.append(cell)  # committed before anything else dispatches, waits or calls the model
            else:
                rec.w.flush()  # acknowledged: on disk before the run goes on
        host.seq = seq + 1
        host.cells.append(cell)

    def call(self, bind: str, op: str, o: Any, inp: Any) -> bool:
        """Run and record the call ``bind = op(inp)``; False (nothing done) when ``inp`` is not plain."""
        try:
            input_obj = _plain_copy(inp)
        except (_NotPlain, RecursionError):
            return False
        interp, live, rec, host = self.interp, self.live, self.rec, self.host
        w, sid = rec.w, rec.sid
        # Interpreter._dispatch_start: the input's canonical text, its hash, step_started.
        input_json = canonical_json(input_obj)
        ih = sha256_hex(input_json)
        step = f"step_{op}_{ih[:16]}"
        interp._last_vid = None
        w.append_text(sid, "run", _STEP_STARTED + json_str(step) + ',"op":' + json_str(op) + ',"input_hash":'
                      + json_str(ih) + "}}")
        rec.appended += 1
        # _LiveHost.begin and its work: the durability flush, the approval, the op.
        rec.before_dispatch(op)
        live.dispatches += 1
        started = live.timer()
        d = live.approver.decide(ApprovalRequest(op=op, effect=o.effect, input=input_obj))
        if d.allowed:
            out = o.call(input_obj)
            if type(out) is not OpOutcome or out.view is not None or type(out.content) is not str \
                    or scrub_text(out.content) is not out.content:  # else scrub_outcome has nothing to replace
                out = scrub_outcome(out)
            outcome = out  # RecordingHost.begin's scrub finds nothing left to replace
        else:
            out = OpOutcome(content=d.reason or f"denied: `{op}`", is_error=True, denied=True)
            outcome = scrub_outcome(out)  # the refusal's text is scrubbed by RecordingHost.begin alone
        exec_us = max(0, live.timer() - started)
        live.last_exec_us = exec_us
        if live.keep_log:
            live.log.append((op, input_obj, "denied" if out.denied else ("error" if out.is_error else "ok"), started,
                             exec_us))
        live.last = out
        # RecordingHost.settle: the cell (the input hash is the step's).
        host.record(op, input_json, outcome, input_hash=ih)
        interp.clock.dispatched()
        # Interpreter._dispatch_end: the step counted, then step_failed (a halt: nothing bound) or
        # the value minted, step_succeeded, the binding.
        interp._steps_base += 1
        if outcome.denied or outcome.is_error:
            rec.emit({"event": "step_failed", "step": step, "error": outcome.content})
            return True
        value = outcome.content
        vid = interp._mint(value)
        interp._last_vid = vid
        w.append_text(sid, "run", _STEP_SUCCEEDED + json_str(step) + ',"output":' + json_str(vid) + "}}")
        rec.appended += 1
        interp.symbols[bind] = value
        return True


# ---------------------------------------------------------------------------------------------
# The runner


@dataclass
class TurnConfig:
    writer: StoreWriter
    session: str
    model_name: str  # stored on events (``openai:gpt-4.1-mini``)
    request_model: str  # sent in requests
    provider: Any
    provider_name: str
    toolbox: Toolbox
    approver: Approver
    redactor: Redactor
    cap: int
    cassette: bool
    instructions: Optional[str] = None
    max_iter: int = 20
    max_tokens: int = 4096
    temperature: Optional[float] = None
    prices: Any = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Callable[[float], Any] = asyncio.sleep
    timer: Callable[[], int] = lambda: time.perf_counter_ns() // 1000
    on_event: Optional[Callable[[dict], None]] = None
    # Wraps the live host (approver + toolbox) — what-if re-plans pin the world with a Frozen tape.
    host_wrap: Optional[Callable[[Any], Any]] = None
    # Ops of concurrent `parallel`/`race` branches run in worker threads (False: inline, in order).
    concurrent_ops: bool = True


def _bindings(cfg: "TurnConfig") -> FlowDbBindings:
    """The session's durable bindings in the store's flow.db (parallel branch names, throttle
    buckets, debounce tokens — what flux keeps in its session store; flux.lang.session)."""
    return FlowDbBindings(cfg.writer.dir, cfg.session, now=cfg.writer.now)


class _LastOutcome:
    """Keeps ``live.last`` right when a wrapper answers a dispatch without the live host."""

    def __init__(self, inner: Any, live: "_LiveHost"):
        self.inner, self.live = inner, live

    def dispatch(self, op: str, input: Any, input_json: str) -> OpOutcome:
        out = self.inner.dispatch(op, input, input_json)
        self.live.last = out
        return out

    def settle(self, op: str, input_json: str, outcome: OpOutcome) -> OpOutcome:
        self.live.last = outcome
        return outcome


class TurnRunner:
    """Runs one adaptive turn (:meth:`run_turn`) or one authored flow turn (:meth:`run_flow`)."""

    def __init__(self, cfg: TurnConfig):
        self.cfg = cfg

    def _durable(self, op: str) -> bool:
        o = self.cfg.toolbox.get(op)
        return o is None or o.effect not in RERUNNABLE_EFFECTS

    def _recorder(self, *, defer_cells: bool, keep_log: bool) -> tuple[_Recorder, _LiveHost]:
        cfg = self.cfg
        rec = _Recorder(cfg.writer, cfg.session, cfg.redactor, cfg.cap, self._durable, defer_cells=defer_cells)
        return rec, _LiveHost(cfg.toolbox, cfg.approver, cfg.timer, rec.before_dispatch,
                              concurrent=cfg.concurrent_ops, keep_log=keep_log)

    def _notify(self, kind: str, **data: Any) -> None:
        if self.cfg.on_event is not None:
            try:
                self.cfg.on_event({"kind": kind, **data})
            except Exception:  # a display callback must not break the turn — but it must not vanish either
                log.exception("the on_event callback failed on a %r event (the turn goes on)", kind)

    # ------------------------------------------------------------------ model calls
    async def _call_model(self, request: ModelRequest, round_: int, observations: list, turn_id: int,
                          usages: list[Usage]) -> list[Chunk]:
        cfg = self.cfg
        attempt = 0
        while True:
            attempt += 1
            chunks: list[Chunk] = []
            cfg.writer.flush()  # nothing buffered waits on a model call
            t0 = cfg.timer()
            ttft = None
            try:
                async for ch in cfg.provider.stream(request):
                    if ttft is None:
                        ttft = cfg.timer() - t0
                    # A model's text or tool input may carry a lone surrogate ("\ud83d"): scrubbed here,
                    # once, so the answer, the tool inputs, their hashes and the store all agree. A
                    # tool_input_delta is informational (its block carries the input; assemble skips it,
                    # nothing here shows or stores it): nothing to scrub it for.
                    t = ch.t
                    if t != "tool_input_delta":
                        c = scrub_value(ch.c)
                        if c is not ch.c:
                            ch = Chunk(t, c)
                    chunks.append(ch)
                    if t == "text_delta":
                        self._notify("text", text=str(ch.c))
                    elif t == "thinking_delta":
                        self._notify("thinking", text=str(ch.c))
            except ProviderError as e:
                dur = cfg.timer() - t0
                observations.append(Observation("model.call", "turn", {
                    "attempt": attempt, "chunks": len(chunks), "duration_us": dur, "error": str(e), "model": cfg.model_name,
                    "ok": False, "provider": cfg.provider_name, "round": round_, "session_id": cfg.session,
                    "stage": "adaptive", "status": e.status, "turn_id": turn_id}))
                if e.retryable and attempt < cfg.retry.attempts:
                    delay = cfg.retry.delay(attempt)
                    self._notify("retry", attempt=attempt, delay_s=delay, error=str(e))
                    await cfg.sleep(delay)
                    continue
                raise
            dur = cfg.timer() - t0
            usage = Usage()
            has_usage = False
            for ch in chunks:
                if ch.t == "usage":
                    has_usage = True
                    usage = usage + Usage.from_body(ch.c)
            if has_usage:
                usages.append(usage)
            observations.append(Observation("model.call", "turn", {
                "attempt": attempt, "chunks": len(chunks), "duration_us": dur, "model": cfg.model_name, "ok": True,
                "provider": cfg.provider_name, "round": round_, "session_id": cfg.session, "stage": "adaptive",
                "ttft_us": ttft or dur, "turn_id": turn_id, "usage": usage.to_body()}))
            return chunks

    # ------------------------------------------------------------------ adaptive turn
    async def run_turn(self, history: list[dict], user_input: str) -> tuple[TurnOutput, list[dict]]:
        """Run one turn; returns the output and the messages to append to the conversation."""
        with self.cfg.writer.grouped():
            return await self._run_turn(history, user_input)

    async def _run_turn(self, history: list[dict], user_input: str) -> tuple[TurnOutput, list[dict]]:
        cfg = self.cfg
        rec, live = self._recorder(defer_cells=True, keep_log=False)  # a host plan is one call: never two branches
        user_input = scrub_text(user_input)
        user_msg = {"role": "user", "content": [{"type": "text", "text": user_input}]}
        rec.message("user", user_msg["content"])
        turn_id = cfg.writer.begin_turn(cfg.session, cfg.redactor.redact(user_input), cfg.model_name)
        out = TurnOutput(cfg.session, turn_id, "ok", "", Usage(), None, cfg.model_name)
        out.number = _turn_number(cfg)
        observations: list[Observation] = []
        usages: list[Usage] = []
        turn_msgs: list[dict] = []  # assistant/user exchanges of this turn (unredacted)
        inner = _LastOutcome(cfg.host_wrap(live), live) if cfg.host_wrap is not None else live
        host = RecordingHost(inner, rec, cfg.redactor, cfg.cap, enabled=cfg.cassette)
        interp = Interpreter(cfg.toolbox.catalog(), host, rec, run_id=cfg.session, sleep=rec.sleep,
                             session=_bindings(cfg))
        direct = _DirectCall.of(interp, host, live, rec, cfg)
        base = provider_history(history + [user_msg])
        answer = ""
        outcome = "ok"
        cancelled: BaseException | None = None
        tools = cfg.toolbox.tools()
        try:
            for round_ in range(1, cfg.max_iter + 1):
                raise_if_cancelled()  # a Ctrl-C during the last op: no further model call
                observations.append(Observation("turn.iteration", "turn", {"iteration": round_, "turn_id": turn_id}))
                out.iterations = round_
                request = ModelRequest(model=cfg.request_model, messages=base + turn_msgs, system=cfg.instructions,
                                       tools=tools, max_tokens=cfg.max_tokens, temperature=cfg.temperature)
                self._notify("model_call", round=round_)
                rec.settle()  # an owed cell is on disk before the model sees its result
                try:
                    chunks = await self._call_model(request, round_, observations, turn_id, usages)
                except ProviderError as e:
                    outcome, answer, out.error = "error", str(e), str(e)
                    break
                out.model_calls += 1
                asm = assemble(chunks, cfg.request_model)
                uses = asm.tool_uses
                if not uses:
                    answer = asm.text
                    content = asm.content if asm.content else [{"type": "text", "text": "(no answer)"}]
                    turn_msgs.append({"role": "assistant", "content": content})
                    break
                turn_msgs.append({"role": "assistant", "content": asm.content})
                results: list[dict] = []
                turn_msgs.append({"role": "user", "content": results})  # filled as tools finish
                # From what the model asked (its tool-call ids) and the round, not the session id:
                # a re-drive of the same answers (the test kit's check) derives the same plan.
                batch = sha256_hex(f"{round_}:" + ",".join(str(u.get("id", "")) for u in uses))[:20]
                batch = _bind_safe("batch-" + batch)  # the binds' batch part, once per round (action_<i> is safe as it is)
                for i, tu in enumerate(uses, 1):
                    raise_if_cancelled()
                    results.append(self._tool(tu, i, batch, interp, host, live, rec, out, observations, turn_id,
                                              direct))
            else:
                outcome, answer = "max_iter", ""
                self._notify("max_iter", iterations=cfg.max_iter)
        except CassetteWriteError as e:  # the op ran, its cell did not reach the store: stop, loudly
            outcome, answer, out.error = "error", str(e), str(e)
        except (KeyboardInterrupt, asyncio.CancelledError) as e:
            outcome, answer, cancelled = "cancelled", CANCELLED_ANSWER, e
        out.outcome, out.answer = outcome, answer
        out.cells = list(rec.cells)
        self._finish(rec, out, interp, observations, usages, turn_msgs, live)
        new_msgs = [user_msg] + self._closing_messages(turn_msgs, outcome, answer)
        if isinstance(cancelled, asyncio.CancelledError):
            raise cancelled
        return out, new_msgs

    def _tool(self, tu: dict, index: int, batch: str, interp: Interpreter, host: RecordingHost, live: _LiveHost,
              rec: _Recorder, out: TurnOutput, observations: list, turn_id: int,
              direct: Optional["_DirectCall"] = None) -> dict:
        cfg = self.cfg
        if direct is not None and cfg.on_event is None:  # the common call, fused (None: it is not one)
            result = direct.tool(tu, index, batch, out, observations, turn_id)
            if result is not None:
                return result
        name = str(tu.get("name", ""))
        tid = str(tu.get("id", ""))
        inp = tu.get("input")
        subjects = [inp["path"]] if isinstance(inp, dict) and isinstance(inp.get("path"), str) else []
        n_dispatch = len(out.tool_calls) + 1
        observations.append(Observation("tool_call", "turn", {"caller": "local", "subjects": subjects, "tool": name}))
        t0 = cfg.timer()
        observations.append(Observation("tool.started", "turn", {"dispatch": n_dispatch, "elapsed_us": 0, "tool": name}))
        if cfg.on_event is not None:  # (a display callback: the kwargs dict is not built for nobody)
            self._notify("tool_start", name=name, input=inp, id=tid)
        o = cfg.toolbox.get(name)
        err = None
        if o is None:
            known = ", ".join(sorted(cfg.toolbox.ops)) or "none"
            err = f"unknown tool `{name}` — the available tools are: {known}"
        else:
            err = validate_input(o, inp)
        if err is not None:
            status, content, plan_step = "invalid", err, None
        else:
            out_step = len(out.plans) + 1
            mutating = o.effect in MUTATING_EFFECTS
            phase = "execute" if mutating else "gather"
            bind = f"adaptive_{batch}_action_{index}" if mutating \
                else f"adaptive_gather_{out_step}"
            value, plan_text, fp, key = host_plan_facts(bind, name, inp)
            src = redacted_plan_source(plan_text, cfg.redactor, inp,
                                       lambda red_inp: host_plan_facts(bind, name, red_inp)[1])
            rec.append_text("plan_attempted", encode_accepted_plan(out_step, fp, phase, src), turn_id)
            out.plans.append(PlanRecord(out_step, phase, fp, key, src))
            live.last = None
            interp.symbols = {}
            if direct is None or not direct.call(bind, name, o, inp):
                interp.run_call(bind, name, value)  # = interp.run(host_plan(bind, name, inp), resumable=False)
            res = live.last
            plan_step = out_step
            if res is None:  # halted before dispatch (cannot happen for a validated single call)
                status, content = "error", "the call could not be dispatched"
            else:
                status = "denied" if res.denied else ("error" if res.is_error else "ok")
                content = res.content if isinstance(res.content, str) else str(res.content)
        dur = cfg.timer() - t0
        observations.append(Observation("tool.ended", "turn", {
            "dispatch": n_dispatch, "elapsed_us": dur, "execution_us": live.last_exec_us if plan_step else 0,
            "status": status, "tool": name}))
        out.tool_calls.append(ToolCall(tid, name, inp, status, content, plan_step))
        if cfg.on_event is not None:  # (a display callback: the kwargs dict is not built for nobody)
            self._notify("tool_end", name=name, id=tid, status=status, content=content)
        return {"type": "tool_result", "tool_use_id": tid, "content": [{"type": "text", "text": content}],
                "is_error": status != "ok"}

    def _closing_messages(self, turn_msgs: list[dict], outcome: str, answer: str) -> list[dict]:
        """This turn's messages, made a valid history whatever the outcome."""
        msgs = [m for m in turn_msgs]
        # A tool round cut short: answer every tool_use of the last assistant message.
        if msgs and msgs[-1]["role"] == "user" and len(msgs) >= 2:
            uses = [b["id"] for b in msgs[-2]["content"] if b.get("type") == "tool_use"]
            got = {b.get("tool_use_id") for b in msgs[-1]["content"]}
            for u in uses:
                if u not in got:
                    msgs[-1]["content"].append({"type": "tool_result", "tool_use_id": u,
                                                "content": [{"type": "text", "text": CANCELLED_ANSWER}], "is_error": True})
        elif msgs and msgs[-1]["role"] == "assistant" and any(b.get("type") == "tool_use" for b in msgs[-1]["content"]):
            msgs.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": b["id"], "content": [{"type": "text", "text": CANCELLED_ANSWER}],
                 "is_error": True} for b in msgs[-1]["content"] if b.get("type") == "tool_use"]})
        if not msgs or msgs[-1]["role"] == "user":
            if outcome == "max_iter":
                text = "(stopped at the iteration cap before a final answer)"
            else:
                text = answer or "(no answer)"
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": text}]})
        return msgs

    def _observation_flush(self, rec: _Recorder, observations: list, turn_id: int) -> None:
        """The observation flush (§2.4): one batch stamped with the flush time, written in one
        transaction together with whatever is buffered before it."""
        cfg = self.cfg
        flush = cfg.writer.now()
        texts = observation_texts(observations, cfg.redactor)
        cfg.writer.append_texts(cfg.session, "observation", texts, turn_id=turn_id, ts=flush)  # with what is buffered
        rec.appended += len(texts)
        cfg.writer.flush()

    def _finish(self, rec: _Recorder, out: TurnOutput, interp: Interpreter, observations: list, usages: list[Usage],
                turn_msgs: list[dict], live: _LiveHost) -> None:
        cfg = self.cfg
        tid = out.turn_id
        if out.outcome in ("ok", "max_iter"):
            vid = f"v_{interp._next_vid}"
            interp._next_vid += 1
            rec.emit({"event": "flow_returned", "value": vid})
        total = Usage()
        for u in usages:
            rec.append(CallUsage(model=cfg.model_name, usage=u), turn_id=tid)
            total = total + u
        out.usage = total
        if cfg.prices is not None:  # priced per call, by the one rule (flux.model.pricing)
            out.cost = Spend(cfg.prices).add_all((cfg.model_name, u) for u in usages).usd
        rec.append(TurnEnded(outcome=out.outcome, iterations=out.iterations, answer=cfg.redactor.redact(out.answer),
                             usage=total), turn_id=tid)
        self._observation_flush(rec, observations, tid)
        writer = RedactedJson(cfg.redactor)
        for m in self._closing_messages(turn_msgs, out.outcome, out.answer):
            rec.message(m["role"], m["content"], writer=writer)

    # ------------------------------------------------------------------ authored flows
    def run_flow(self, draft: A.DraftAst, confirm: Callable[[str, str], bool]) -> tuple[TurnOutput, list[dict]]:
        """``flux flow run``: the flow as one turn, in resumable mode (statement ledger), recorded."""
        with self.cfg.writer.grouped():
            return self._run_flow(draft, confirm)

    def _run_flow(self, draft: A.DraftAst, confirm: Callable[[str, str], bool]) -> tuple[TurnOutput, list[dict]]:
        cfg = self.cfg
        rec, live = self._recorder(defer_cells=runs_one_branch(draft), keep_log=True)
        if cfg.on_event is not None:
            live.notify = self._notify  # each op shown as it starts, not after the flow
        user_input = "<flow run>"
        rec.message("user", [{"type": "text", "text": user_input}])
        turn_id = cfg.writer.begin_turn(cfg.session, user_input, cfg.model_name)
        # a flow never calls a model: its spend is known, and nothing
        out = TurnOutput(cfg.session, turn_id, "completed", "", Usage(), 0.0, cfg.model_name)
        out.number = _turn_number(cfg)
        src = redacted_plan_source(format_flow(draft), cfg.redactor, draft)
        fp = fingerprint(draft)
        rec.append(PlanAttempted(step=1, outcome="accepted", fingerprint=fp, plan_source=src), turn_id=turn_id)
        out.plans.append(PlanRecord(1, None, fp, flow_key(draft.name, draft.body), src))
        host = RecordingHost(live, rec, cfg.redactor, cfg.cap, enabled=cfg.cassette)
        interp = Interpreter(cfg.toolbox.catalog(), host, rec, approver=rec.confirming(confirm), run_id=cfg.session,
                             sleep=rec.sleep, session=_bindings(cfg))
        cancelled = False
        cassette_error: CassetteWriteError | None = None
        try:
            res = interp.run(draft, resumable=True)
        except KeyboardInterrupt:
            res, cancelled = None, True
        except CassetteWriteError as e:  # the op ran, its cell did not reach the store: stop, loudly
            res, cassette_error = None, e
        observations = []
        for n, (op, inp, status, started, exec_us) in enumerate(live.log, 1):
            subjects = [inp["path"]] if isinstance(inp, dict) and isinstance(inp.get("path"), str) else []
            observations += [
                Observation("tool_call", "turn", {"caller": "local", "subjects": subjects, "tool": op}),
                Observation("tool.started", "turn", {"dispatch": n, "elapsed_us": 0, "tool": op}),
                Observation("tool.ended", "turn", {"dispatch": n, "elapsed_us": exec_us, "execution_us": exec_us,
                                                   "status": status, "tool": op}),
            ]
            out.tool_calls.append(ToolCall(f"flow_{n}", op, inp, status, "", 1))
        steps = live.dispatches
        if cancelled:
            out.outcome, out.answer = "cancelled", CANCELLED_ANSWER
        elif cassette_error is not None:
            out.outcome, out.answer, out.error = "error", str(cassette_error), str(cassette_error)
        elif res.halted is not None:
            h = res.halted
            out.outcome = "halted"
            out.answer = f"Flow halted at statement {h.node} ({h.kind}): {h.error}"
            out.error = h.error
        else:
            out.answer = f"Flow completed ({steps} step(s))."
        out.iterations = steps
        out.cells = list(rec.cells)
        rec.append(TurnEnded(outcome=out.outcome, iterations=steps, answer=cfg.redactor.redact(out.answer)), turn_id=turn_id)
        self._observation_flush(rec, observations, turn_id)
        answer_msg = {"role": "assistant", "content": [{"type": "text", "text": out.answer}]}
        rec.message("assistant", answer_msg["content"])
        if cancelled:
            raise KeyboardInterrupt
        return out, [{"role": "user", "content": [{"type": "text", "text": user_input}]}, answer_msg]


def _nodes(draft: A.DraftAst) -> list[Any]:
    """Every AST node of a flow, nested ones included."""
    found: list[Any] = []

    def walk(x: Any) -> None:
        if isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif hasattr(x, "__dataclass_fields__"):
            found.append(x)
            for f in x.__dataclass_fields__:
                walk(getattr(x, f))

    walk(draft.body)
    return found


def flow_ops(draft: A.DraftAst) -> list[str]:
    """Every op name a flow calls (to refuse unknown ops before anything is written)."""
    return [x.op for x in _nodes(draft) if isinstance(x, A.Call)]


# The constructs that give the interpreter's scheduler more than one branch (or a deadline) at a
# time: while they run, ops may complete while others are in flight and sleeps wait in the
# scheduler, so an effectful cell is written at once rather than owed (see _Recorder).
_BRANCHING = (A.Parallel, A.Race, A.Timeout)


def runs_one_branch(draft: A.DraftAst) -> bool:
    """Whether ``draft`` can never have two branches (or a deadline) at once."""
    return not any(isinstance(x, _BRANCHING) for x in _nodes(draft))


def check_flow(draft: A.DraftAst, toolbox: Toolbox) -> None:
    unknown = sorted({o for o in flow_ops(draft) if o not in toolbox})
    if unknown:
        raise FluxError(f"the flow calls unknown op(s) {', '.join(unknown)} — available: {', '.join(sorted(toolbox.ops))}")
