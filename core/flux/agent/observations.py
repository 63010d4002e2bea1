"""The turn's observation rows and redacted message texts, written as flux writes them.

Everything is redacted before it is written; the text writers produce exactly what
``compact_json(redactor.redact_value(v))`` would, without building the redacted copy first."""

from __future__ import annotations

from itertools import chain, compress, repeat
from operator import is_ as _is
from json.encoder import encode_basestring as json_str  # serde's escapes, raw UTF-8 (as payload_encode.py)
from typing import Any, Callable, Optional

from ..canonical import compact_json
from ..cassette.redactor import Redactor, secret_name
from ..store.events import Observation
from ..store.payload_encode import encode_observation

__all__ = ["RedactedJson", "ToolObservations", "observation_texts", "verbatim_json", "message_text"]


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
    (:class:`DirectCall`) appends instead of three :class:`Observation` objects;
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
