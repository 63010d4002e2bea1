"""One adaptive tool call recorded in one pass — the fast path of the adaptive loop, the same rows
as the interpreter's general path without the layers in between."""

from __future__ import annotations

from json.encoder import encode_basestring as json_str  # serde's escapes, raw UTF-8 (as payload_encode.py)
from dataclasses import dataclass
from typing import Any, Optional

from ..canonical import canonical_json, scrub_text, sha256_hex
from ..cassette.record import CassetteWriteError, RecordingHost, scrub_outcome, truncate_utf8
from ..lang.parse_text import IDENT, OPNAME
from ..lang.hashes import one_statement_hashes
from ..lang.parser import RESERVED
from ..lang.interpreter import Interpreter, OpOutcome
from ..store.events import new_op_recorded
from .approver import ApprovalRequest, AutoApprove
from .ops import MUTATING_EFFECTS, Op
from .observations import ToolObservations
from .recording import LiveHost, Recorder
from .turns import PlanRecord, ToolCall, TurnConfig, TurnOutput

__all__ = ["DirectCall"]


class _NotPlain(Exception):
    """An input the fused call does not take (see :func:`_plain_copy`)."""


def _plain_copy(v: Any) -> Any:
    """A copy of a JSON value of exact built-in types (dict with str keys, list, str, int, float,
    bool, None) — what ``interpolate_json(escape_braces(v), {})`` returns for it (the run_call path
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
    """What the fused tool call needs of one op (:meth:`DirectCall._facts_of`)."""

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
    non-negative int (``not in RESERVED`` and ``IDENT.fullmatch``, the fused call's test of its bind):
    an identifier's tail may hold digits, so ``head + "0"`` stands for them all, and no reserved
    word is ``head`` followed by digits alone."""
    if not IDENT.fullmatch(head + "0"):
        return False
    return not any(w.startswith(head) and w[len(head):].isdigit() for w in RESERVED)


def _plain_literal(inp: dict, facts: _OpFacts) -> Optional[str]:
    """The tool input's literal (its canonical JSON, the plan's text of it) when it is a JSON object of
    plain scalars that passes validation for ``facts``'s op; None for anything else."""
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
    return "{" + ",".join(parts) + "}"


class DirectCall:
    """One adaptive tool call recorded in one pass: what ``Interpreter.run_call`` of its host plan
    does through ``RecordingHost`` → ``LiveHost`` with ``Recorder`` as the sink — the same rows in
    the same order, the same flushes, approver call, op call, cell, log, values, symbols and step
    count — without the layers in between: no scheduler or root task, no interpolation of the
    escaped input (a plain copy), no phase closures, no event dicts round-tripped through
    ``encode_run_step`` (the step rows are written as text), the input hashed once (the cell reuses
    the step's hash) and the outcome scrubbed once. Only for the plain case, checked once per turn
    (:meth:`of`): the recording host wraps the live host directly with the cassette on; a call
    whose input is not plain JSON takes ``run_call``. The differential tests
    (tests/agent/test_direct_call.py) record turns this way, through ``run_call`` and through
    ``Interpreter.run`` and compare them row for row."""

    def __init__(self, interp: Interpreter, host: RecordingHost, live: LiveHost, rec: "Recorder",
                 cfg: Optional["TurnConfig"] = None):
        self.interp, self.host, self.live, self.rec, self.cfg = interp, host, live, rec, cfg
        self.facts: dict[str, Any] = {}  # op name -> _OpFacts, or None (the op never takes the fused tool call)
        self.bind_heads: dict[str, bool] = {}  # a bind's head -> _bind_head_ok(head)

    @classmethod
    def of(cls, interp: Interpreter, host: Any, live: Any, rec: "Recorder",
           cfg: Optional["TurnConfig"] = None) -> Optional["DirectCall"]:
        if (type(host) is not RecordingHost or host.inner is not live or type(live) is not LiveHost
                or not host.enabled or interp.host is not host or interp.sink is not rec or type(rec) is not Recorder):
            return None
        return cls(interp, host, live, rec, cfg)

    def _facts_of(self, name: str, o: Any) -> Optional["_OpFacts"]:
        """What :meth:`tool` needs of op ``o`` (the toolbox's ``name``), or None when its calls take
        the general path: an op whose name has no plain spelling in a plan, or whose input schema
        is more than flat typed properties (its validation is then :func:`validate_input`'s)."""
        if type(o) is not Op or name in RESERVED or not OPNAME.fullmatch(name) or o.name != name:
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
        literal = _plain_literal(inp, facts)
        if literal is None:
            return None
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
            ok = ok and bind not in RESERVED and IDENT.fullmatch(bind) is not None
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
        skipped, the row's text written from the fields, and ``Recorder.emit_cell`` inline
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
        # LiveHost.begin and its work: the durability flush, the approval, the op.
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
