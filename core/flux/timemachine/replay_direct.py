"""Replay's direct path for host plans — the one-statement plan the runtime records for each tool
call (``name = op({…})``), or a resumable turn's plan of such lines — served from the tape straight
from its text: no parse, no AST, no interpreter walk. :func:`host_call` and :func:`host_plan` take a
text only when its keys provably equal the parser's; :class:`DirectRunner` leaves exactly the
events, values and symbols the interpreter would, or declines (:data:`NOT_DIRECT`) before doing
anything. Why this is exact: docs/architecture.md, "Replay"."""

from __future__ import annotations

import json
import re
from hashlib import sha256 as _sha256
from typing import Any, NamedTuple, Sequence

from ..canonical import canonical_json, json_string, scrub_text, sha256_hex
from ..cassette.replay import ReplayHost, TapeFirstHost
from ..lang.catalog import map_args_to_input
from ..model.stored_plan import parse_stored_plan
from ..model.stored_plan import statements_before_last_plan as count_statements_before_last_plan
from ..lang.host_plans import HOST_LINE, HOST_PLAN, host_statement
from ..lang.interpreter import PLACEHOLDER, PlanHalt, ResumeError, interpolate_json
from ..lang.parser import MAX_JSON_DEPTH, RESERVED

__all__ = ["HostCall", "HostPlan", "HostStatement", "host_call", "host_plan", "direct_plan", "DirectRunner", "NOT_DIRECT"]

#: A :class:`DirectRunner`'s answer when the plan must go through the interpreter instead.
NOT_DIRECT: Any = object()

# A run of 19 digits may be an integer serde (and the parser) read as an f64, not an i64/u64.
_LONG_DIGITS = re.compile(r"[0-9]{19}")
# A JSON string as the parser delimits one (its escapes are checked when the whole is decoded).
_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\[\s\S])*"')


class HostCall(NamedTuple):
    """A host plan recognised from its text: ``name = op(<canonical JSON object>)``."""

    flow_key: str
    body_text: bytes  # the plan body's AST JSON, ``[<its one statement's>]`` (``flow_key`` hashes it, ``stmt`` its inside)
    name: str  # the binder, without `$`
    op: str
    arg: str  # the literal argument: canonical JSON, so also the op's input JSON
    value: Any  # the decoded argument when it may hold `{name}` placeholders, else None
    input_hash: str | None  # sha256 of ``arg``, the op's input hash, when ``value`` is None
    source: str  # the plan text, for the full parser when the direct path does not apply

    @property
    def stmt(self) -> str:
        """``stmt_hash16`` of its one statement (hashed on each ask: a plan that runs through with no
        latch open never needs it, see :meth:`DirectRunner.run_through`)."""
        return _sha256(self.body_text[1:-1]).hexdigest()[:16]

    def draft(self) -> Any:
        """The parsed plan (what the interpreter runs when the direct path does not apply)."""
        return parse_stored_plan(self.source)[0]


def host_call(source: Any) -> HostCall | None:
    """``source`` as a :class:`HostCall`, or None when it is not exactly the canonical host shape."""
    if type(source) is not str:
        return None
    m = _HOST_PLAN_FLAT.fullmatch(source)  # the common case: a flat object of up to three members
    if m is None and source.count("\n", 7) > 1 and '"""' not in source:
        return None  # a line break in the argument, which canonical JSON never writes (a host_plan's, perhaps)
    if not source.isascii() and scrub_text(source) is not source:
        return None
    st = _statement(m, HOST_PLAN, source, True)
    if st is None:
        return None
    name, op, arg, value, ih = st
    body = ('[{"kind":"bind","name":"' + name + '","value":{"kind":"call","op":"' + op
            + '","args":[{"kind":"lit","value":' + arg + '}]}}]').encode()
    return _new_tuple(HostCall, ("h:" + _sha256(body).hexdigest()[:16], body, name, op, arg, value, ih, source))


def _statement(flat: Any, pattern: Any, text: str, verbatim: bool) -> tuple[str, str, str, Any, str | None] | None:
    """One host statement ``name = op({…})`` read from ``text``: ``(name, op, arg, value,
    input_hash)`` as :func:`_canonical_arg` gives the last three, or None when it is not exactly the
    canonical shape. ``flat`` is the flat pattern's match of ``text`` — its argument canonical as it
    stands when its keys are in order, no decoding — or None, and ``pattern`` (the general one)
    reads it."""
    if flat is not None:
        _sigil, name, op, arg, k1, k2, k3 = flat.groups()
        if k2 is not None and not (k1 < k2 and (k3 is None or k2 < k3)):
            return None  # keys out of order (or twice): never canonical
        got: Any = (arg, None, _sha256(arg.encode()).hexdigest())
    else:
        m = pattern.fullmatch(text)
        if m is None:
            return None
        _sigil, name, op, arg = m.groups()
        got = (arg, None, _sha256(arg.encode()).hexdigest()) if _flat_canonical(arg) else _canonical_arg(arg, verbatim)
        if got is None:
            return None
    if name in RESERVED or op in RESERVED or op == "fmt":
        return None
    return (name, op) + got


def _canonical_arg(arg: str, verbatim: bool) -> tuple[str, Any, str | None] | None:
    """``(arg, value, input_hash)`` of a host statement's argument text that is a JSON object exactly
    as canonical JSON writes it (its triple-quoted strings rewritten as JSON ones first when
    ``verbatim``), ``value`` the decoded object when it may hold ``{name}`` placeholders (then
    ``input_hash`` is None: it depends on the symbols), else None; None when it is not canonical."""
    if arg.count("{") + arg.count("[") > MAX_JSON_DEPTH or _LONG_DIGITS.search(arg) is not None:
        return None
    if '"""' in arg:
        if not verbatim:
            return None
        arg = _without_triple_quotes(arg)
        if arg is None:
            return None
    try:
        value = json.loads(arg)
        if type(value) is not dict or canonical_json(value) != arg:
            return None
    except (ValueError, RecursionError, TypeError, OverflowError):  # UnicodeError is a ValueError
        return None
    # (hashlib straight away: the text holds no surrogate, so sha256_hex would not scrub anything)
    # What `interpolate` rewrites (PLACEHOLDER), looked for in the argument's text: canonical JSON
    # escapes neither a brace nor a name's character, so a string holding one shows it there; the
    # structure's braces match only as `}}` (a nested object's end), which merely sends the argument
    # through the interpolation (it hashes the same).
    if PLACEHOLDER.search(arg) is not None:
        return arg, value, None
    return arg, None, _sha256(arg.encode()).hexdigest()


class HostStatement(NamedTuple):
    """One statement of a :class:`HostPlan`: ``name = op(<canonical JSON object>)``."""

    name: str  # the binder, without `$`
    op: str
    arg: str  # the literal argument: canonical JSON, so also the op's input JSON
    value: Any  # the decoded argument when it may hold `{name}` placeholders, else None
    input_hash: str | None  # sha256 of ``arg``, the op's input hash, when ``value`` is None
    text: bytes  # the statement's AST JSON (``stmt`` hashes it)

    @property
    def stmt(self) -> str:
        """``stmt_hash16`` of the statement (hashed on each ask: only a ledger row needs it)."""
        return _sha256(self.text).hexdigest()[:16]


class HostPlan(NamedTuple):
    """A plan of two or more host statements, one a line (how a resumable turn's plans are
    stored), recognised from its text: each line as :func:`host_call` reads a host plan's one."""

    flow_key: str
    stmts: tuple[HostStatement, ...]
    source: str  # the plan text, for the full parser when the direct path does not apply

    def draft(self) -> Any:
        """The parsed plan (what the interpreter runs when the direct path does not apply)."""
        return parse_stored_plan(self.source)[0]

    @property
    def ops(self) -> list[str]:
        return [s.op for s in self.stmts]

    def stmt_hashes(self) -> list[str]:
        return [s.stmt for s in self.stmts]


def host_plan(source: Any) -> HostPlan | None:
    """``source`` as a :class:`HostPlan` — ``flow`` then two or more lines ``  name = op({…})``, each
    argument canonical JSON as :func:`host_call` requires (no triple-quoted string) — or None.
    Its keys are the parser's (a property test compares them with :func:`~flux.lang.parser.parse`'s)."""
    if type(source) is not str or not source.startswith("flow\n  "):
        return None
    lines = source[5:-1 if source.endswith("\n") else None].split("\n")
    if len(lines) < 2:
        return None
    if not source.isascii() and scrub_text(source) is not source:
        return None
    stmts = []
    texts = []
    flat_line = _HOST_LINE_FLAT.fullmatch
    for line in lines:
        st = _statement(flat_line(line), HOST_LINE, line, False)
        if st is None:
            return None
        name, op, arg, value, ih = st
        text = f'{{"kind":"bind","name":"{name}","value":{{"kind":"call","op":"{op}","args":[{{"kind":"lit","value":{arg}}}]}}}}'.encode()
        texts.append(text)
        stmts.append(_new_tuple(HostStatement, (name, op, arg, value, ih, text)))
    return _new_tuple(HostPlan, (_texts_key(texts), tuple(stmts), source))


def statements_key(stmts: "Sequence[HostStatement]") -> str:
    """The flow key of a plan of these host statements (unnamed, no parameters): what parsing its
    text keys it — the sha256 of the statements' AST JSON texts as a JSON list."""
    return _texts_key([st.text for st in stmts])


def _texts_key(texts: list[bytes]) -> str:
    """:func:`statements_key` of statements with these AST JSON texts (``HostStatement.text``)."""
    return "h:" + _sha256(b"[" + b",".join(texts) + b"]").hexdigest()[:16]


def direct_plan(source: Any) -> HostCall | HostPlan | None:
    """:func:`host_call` or :func:`host_plan` (no text is both: a line break inside a host call's
    argument is in a triple-quoted string, which no host plan's line holds): a stored plan the
    direct path runs, or None."""
    hc = host_call(source)
    return hc if hc is not None else host_plan(source)


def statements_before_last_plan(turn: Any) -> int:
    """How many top-level statements the turn's accepted plans hold before its last one: the number
    a statement of the last plan is offset by when the turn's plans are laid end to end — how
    `flux fork --turn T --at N` counts (in an adaptive turn every tool call is a one-statement plan)."""
    return statements_before_last([att.plan_source for att in turn.plan_attempts
                                   if att.outcome == "accepted" and att.plan_source is not None])


def statements_before_last(sources: Sequence[Any]) -> int:
    """:func:`flux.model.stored_plan.statements_before_last_plan` (the one counting rule) over a
    turn's accepted plan texts, in order, each host plan counted without the parser."""
    return count_statements_before_last_plan(sources, _statement_count)


def _statement_count(source: str) -> int:
    hc = direct_plan(source)
    if type(hc) is HostCall:
        return 1
    if hc is not None:
        return len(hc.stmts)
    return len(parse_stored_plan(source)[0].body)


_new_tuple = tuple.__new__  # HostCall(*fields) without the named tuple's own __new__ (all it does)


# One member of a flat object as canonical JSON writes it: a key and a scalar value — a string with
# nothing canonical JSON escapes (no quote, backslash or control character) and no brace, an
# integer as serde and the parser read one (no sign on zero, no leading zero, at most 18 digits:
# an i64), true, false or null — then the `,` or `}` after it.
_FLAT_MEMBER = re.compile(r'"([^"\\\x00-\x1f{}]*)":(?:"[^"\\\x00-\x1f{}]*"|0|-?[1-9][0-9]{0,17}|true|false|null)([,}])')
_FLAT_KEY = r'"([^"\\\x00-\x1f{}]*)":'
_FLAT_VALUE = r'(?:"[^"\\\x00-\x1f{}]*"|0|-?[1-9][0-9]{0,17}|true|false|null)'
# The parser's host-plan pattern (``HOST_PLAN``, the same groups) whose argument is a flat object of
# one to three members as :data:`_FLAT_MEMBER` reads them, their keys captured (the caller checks
# they ascend). The argument is then the one ``HOST_PLAN`` finds: it holds no brace but its own,
# so its ``}`` is the text's last before ``)`` and the optional newline.
_HOST_PLAN_FLAT = re.compile(r"flow\n  (\$?)([A-Za-z_][A-Za-z0-9_]*) = ([A-Za-z_][A-Za-z0-9_.\-]*)\((\{"
                             + _FLAT_KEY + _FLAT_VALUE + "(?:," + _FLAT_KEY + _FLAT_VALUE + ")?(?:,"
                             + _FLAT_KEY + _FLAT_VALUE + r")?\})\)\n?")

# One line of a multi-statement host plan (``HOST_LINE``'s groups) whose argument is a flat object
# of one to three members (:data:`_HOST_PLAN_FLAT`'s, less the frame).
_HOST_LINE_FLAT = re.compile(r"  (\$?)([A-Za-z_][A-Za-z0-9_]*) = ([A-Za-z_][A-Za-z0-9_.\-]*)\((\{"
                             + _FLAT_KEY + _FLAT_VALUE + "(?:," + _FLAT_KEY + _FLAT_VALUE + ")?(?:,"
                             + _FLAT_KEY + _FLAT_VALUE + r")?\})\)")


def _flat_canonical(arg: str) -> bool:
    """Whether ``arg`` (``{…}``) is a flat object exactly as :func:`canonical_json` writes it —
    members as :data:`_FLAT_MEMBER` reads them, keys strictly ascending in code-point order (sorted,
    none twice) — so ``canonical_json(json.loads(arg)) == arg`` without decoding it; and it holds
    no brace but its own, so no ``{name}`` placeholder. False sends it to the full check."""
    if arg == "{}":
        return True
    pos, end, prev = 1, len(arg), None
    match = _FLAT_MEMBER.match
    while True:
        m = match(arg, pos)
        if m is None:
            return False
        key = m.group(1)
        if prev is not None and key <= prev:
            return False
        prev = key
        pos = m.end()
        if m.group(2) == "}":
            return pos == end


def _without_triple_quotes(arg: str) -> str | None:
    '''``arg`` with every triple-quoted (verbatim) string written as a JSON string, read as the
    parser reads it: outside a string, a ``"`` opens a verbatim string when two more follow (it
    ends at the next three), else a JSON string (it ends at the next unescaped ``"``). Every other
    character is kept, so the result is JSON exactly when the parser reads ``arg`` as JSON with the
    same tokens. None for a carriage return (the parser rewrites CRLF) or an unterminated string.'''
    if "\r" in arg:
        return None
    out: list[str] = []
    i = 0
    while True:
        q = arg.find('"', i)
        if q < 0:
            out.append(arg[i:])
            return "".join(out)
        if arg.startswith('"""', q):
            end = arg.find('"""', q + 3)
            if end < 0:
                return None
            out.append(arg[i:q])
            out.append(json_string(arg[q + 3:end]))
            i = end + 3
        else:
            m = _JSON_STRING.match(arg, q)
            if m is None:
                return None
            out.append(arg[i:m.end()])
            i = m.end()


def _live_input(st: Any, symbols: dict[str, Any], catalog: Any) -> tuple[Any, str]:
    """``(input, input JSON)`` of a host statement's dispatch as the interpreter builds them
    (``_dispatch_start``): its AST's literal (the parser's own ``host_statement``) interpolated, mapped
    to the op's input by the catalog, and serialized canonically."""
    node = host_statement("", st.name, st.op, st.arg)
    input_obj = map_args_to_input(catalog.get(st.op), [interpolate_json(node.value.args[0].value, symbols)])
    return input_obj, canonical_json(input_obj)


def _placeholder_hash(value: Any, symbols: dict[str, Any]) -> str:
    """The input hash of a host statement whose argument ``value`` may hold ``{name}`` placeholders,
    as the interpreter computes it: the value interpolated from ``symbols``, canonical JSON, hashed."""
    return sha256_hex(canonical_json(interpolate_json(value, symbols)))


def walk(hashes: Any, ledger: Any) -> int:
    """:func:`~flux.lang.interpreter.ledger_walk`'s stop for a body of statements with these
    ``stmt_hash16`` values (none a checkpoint or an await): the first index with no latch row, or
    whose row records another statement."""
    i = 0
    for h in hashes:
        entry = ledger.entry(i)
        if entry is None or entry.stmt != h:
            break
        i += 1
    return i


class DirectRunner:
    """Runs host plans (:class:`HostCall`, :class:`HostPlan`) on one interpreter as
    ``interp.run(<plan's AST>, resumable=True, ledger=ledger, flow_key=plan.flow_key)`` would —
    the same events, values, symbols and step count — without the AST or the interpreter's walk:
    one loop over the plan's statements (:meth:`_statements`), fed by the request that serves a
    statement (the tape; resurrect's crash tail, then live). What does not change between plans
    is looked up once: the host and its tape, the sink (and whether it is quiet: nothing reads a
    ``step_*`` event, so none is built), whether the catalog has every op. Any method answers
    :data:`NOT_DIRECT`, before anything is done, when the plan must go to the interpreter."""

    __slots__ = ("interp", "tape", "sink", "emit", "quiet", "catalog", "every_op", "on_served")

    def __init__(self, interp: Any, on_served: Any = None):
        """``on_served(i)``: called with the tape index of every cell a request consumes (a hit, an
        error or a refusal), right after the serve and before the step's outcome rows — fork's
        prefix host re-records the served cell there, as its ``dispatch`` does on the interpreter's
        path. A host that is a ReplayHost subclass is taken only with it."""
        self.interp = interp
        host = interp.host
        self.on_served = on_served
        direct_host = type(host) is ReplayHost or (on_served is not None and isinstance(host, ReplayHost))
        self.tape = host.tape if direct_host else None
        self.sink = interp.sink
        self.emit = interp.sink.emit
        self.quiet = getattr(self.sink, "quiet", False) is True  # serve.ScratchSink, nothing kept or written
        self.catalog = interp.catalog
        self.every_op = getattr(interp.catalog, "is_permissive", False) is True

    def _takes(self, stmts: Any) -> bool:
        """Whether the catalog has every op of ``stmts`` and no plan is running (the interpreter's
        scheduler is idle): what every direct run needs."""
        if self.interp.plan_running:
            return False
        if self.every_op:
            return True
        catalog = self.catalog
        return all(s.op in catalog for s in stmts)

    def run(self, plan: "HostCall | HostPlan", ledger: Any) -> Any:
        """Run ``plan`` resumably against the halt latch ``ledger`` (None: none open), its cells
        served from the tape: the resume fast-forward over the latch's rows (:func:`walk`), then
        each statement's request and its ``statement_completed`` or ``plan_halted`` row. Its
        :class:`PlanHalt` or None."""
        stmts = plan.stmts if type(plan) is HostPlan else (plan,)
        tape = self.tape
        if tape is None or not self._takes(stmts):
            return NOT_DIRECT
        key = plan.flow_key
        start = 0 if ledger is None else self._fast_forward(stmts, key, ledger)
        serve = tape.serve_cell if self.on_served is None else self._serve_and_report
        return self._statements(stmts, key, start, serve, True)

    def run_resume(self, plan: "HostCall | HostPlan", ledger: Any, resumable: bool) -> Any:
        """Resurrect's mode: :meth:`run` on an interpreter whose host is a
        :class:`~flux.cassette.replay.TapeFirstHost` — each request served from the crash tail
        exactly once when a cell matches (``from_tape``), else run live through the same host
        (``go_live``: its approver, its recording) with the input the interpreter would build.
        Non-resumable (``resumable`` False, no latch): ``step_started`` then ``step_succeeded`` /
        ``step_failed`` per statement, no statement row, nothing after a halt."""
        stmts = plan.stmts if type(plan) is HostPlan else (plan,)
        host = self.interp.host
        if type(host) is not TapeFirstHost or (ledger is not None and not resumable) or not self._takes(stmts):
            return NOT_DIRECT
        key = plan.flow_key
        start = 0 if ledger is None else self._fast_forward(stmts, key, ledger)
        return self._statements(stmts, key, start, host.from_tape, resumable)

    def _statements(self, stmts: Any, key: str, start: int, serve: Any, resumable: bool) -> Any:
        """The one loop: statements ``start..`` of a plan keyed ``key``, each request answered by
        ``serve(op, input_hash)`` (None: no recorded answer, so it runs live on the host), its rows
        emitted as the interpreter emits them (``resumable``: the statement rows too); a quiet sink
        gets a completed statement's row straight (``completed``), and no ``step_*`` event. A
        statement's hash is computed only for a row it writes. Its :class:`PlanHalt` or None."""
        interp = self.interp
        emit = self.emit
        quiet = self.quiet
        symbols = interp.symbols
        for i in range(start, len(stmts)):
            st = stmts[i]
            op = st.op
            ih = st.input_hash or _placeholder_hash(st.value, symbols)
            sid = "" if quiet else "step_" + op + "_" + ih[:16]
            if not quiet:
                emit({"event": "step_started", "step": sid, "op": op, "input_hash": ih})
            outcome = serve(op, ih)
            if outcome is None:  # a miss on resurrect's tail: live, with the input exactly as the interpreter builds it
                input_obj, input_json = _live_input(st, symbols, self.catalog)
                outcome = interp.host.go_live(op, ih, input_obj, input_json)
            interp.clock.dispatched()
            content = outcome.content
            if outcome.denied or outcome.is_error:
                interp.record_failed()
                if not quiet:
                    emit({"event": "step_failed", "step": sid, "error": content})
                stmt = st.stmt
                kind = "denied" if outcome.denied else "runtime"
                if resumable:
                    emit({"event": "plan_halted", "plan": key, "node": i, "stmt": stmt, "op": op, "kind": kind,
                          "error": content})
                return PlanHalt(kind, content, i, stmt, op)
            vid = interp.record_completed(content)
            symbols[st.name] = content
            if quiet:
                self.sink.completed(key, i, st.stmt, vid)
            else:
                emit({"event": "step_succeeded", "step": sid, "output": vid})
                if resumable:
                    emit({"event": "statement_completed", "plan": key, "node": i, "stmt": st.stmt, "value": vid,
                          "skipped": False})
        return None

    def _serve_and_report(self, op: str, ih: str) -> Any:
        """``tape.serve_cell(op, ih)``, then ``on_served`` with the tape index of the cell it consumed
        (if it consumed one)."""
        tape = self.tape
        served = len(tape.served)
        outcome = tape.serve_cell(op, ih)
        if len(tape.served) > served:
            self.on_served(tape.served[-1])
        return outcome

    def _fast_forward(self, stmts: Any, key: str, ledger: Any) -> int:
        """The resume fast-forward over host statements, as ``Interpreter._fast_forward`` does it
        resumably: re-bind the values of the statements the latch proves done (:func:`walk`), write
        their skipped ``statement_completed`` rows and ``plan_resumed``; the index to run from."""
        interp = self.interp
        emit = self.emit
        end = walk([s.stmt for s in stmts], ledger)
        values, symbols = interp.values, interp.symbols
        entries = [ledger.entry(i) for i in range(end)]
        for i, entry in enumerate(entries):
            vid = entry.value
            if vid is not None:
                if vid not in values:
                    raise ResumeError(f"recorded value {vid} of statement {i} is missing from the value store; "
                                      "resume from a store that holds it")
                symbols[stmts[i].name] = values[vid]
        for i, entry in enumerate(entries):
            ev: dict[str, Any] = {"event": "statement_completed", "plan": key, "node": i, "stmt": entry.stmt}
            if entry.value is not None:
                ev["value"] = entry.value
            ev["skipped"] = True
            emit(ev)
        emit({"event": "plan_resumed", "plan": key, "prior": ledger.plan, "skipped": end})
        cp = ledger.checkpoint
        return max(end, cp + 1 if cp is not None else 0)

    def run_through(self, plan: "HostCall | HostPlan") -> Any:
        """The let-go case of a quiet sink (the streamed replay): ``plan`` runs with no halt latch
        open and its key holds no row yet, and nothing is kept of it once it completes — exactly
        what :meth:`run` followed by the sink's ``let_go_of_rows`` leaves behind: no row, each
        value id minted without storing the value, no statement hashed. One that halts at
        statement ``i`` leaves the rows (and values) of statements ``0..i-1`` as :meth:`run`
        leaves them — the plan is the latch now, and a retry's fast-forward reads them. Its
        :class:`PlanHalt` or None; :data:`NOT_DIRECT` when the sink is not quiet, the key holds
        rows or :meth:`run` would decline."""
        interp = self.interp
        sink = self.sink
        key = plan.flow_key
        stmts = plan.stmts if type(plan) is HostPlan else (plan,)
        tape = self.tape
        if not self.quiet or tape is None or key in sink.completed_rows or key in sink.checkpoints \
                or not self._takes(stmts):
            return NOT_DIRECT
        symbols = interp.symbols
        serve = tape.serve_cell
        done: list[Any] = []  # the values of the statements completed so far, kept aside until the plan completes
        for i in range(len(stmts)):
            st = stmts[i]
            op = st.op
            ih = st.input_hash or _placeholder_hash(st.value, symbols)
            outcome = serve(op, ih)
            interp.clock.dispatched()
            content = outcome.content
            if outcome.denied or outcome.is_error:
                for j, value in enumerate(done):  # what the run left: its rows and their values
                    sink.completed(key, j, stmts[j].stmt, interp.record_completed(value))
                interp.record_failed()
                stmt = st.stmt
                kind = "denied" if outcome.denied else "runtime"
                self.emit({"event": "plan_halted", "plan": key, "node": i, "stmt": stmt, "op": op, "kind": kind,
                           "error": content})
                return PlanHalt(kind, content, i, stmt, op)
            symbols[st.name] = content
            done.append(content)
        interp.record_completed_unkept(len(done))  # their value ids used up, none stored
        return None
