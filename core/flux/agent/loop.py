"""The adaptive agent loop, and authored-flow turns, recorded as flux records them.

Everything written passes the redactor first (cells by the recording host; plan text, messages,
answers, step errors and observations here); the model itself sees the unredacted tool results.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any, Callable, Optional

from ..canonical import scrub_text, scrub_value, sha256_hex
from ..cassette.record import CassetteWriteError, RecordingHost
from ..cassette.redact_plan import redacted_plan_source
from ..cassette.replay import ReplayTape, TapeFirstHost
from ..errors import FluxError
from ..lang import ast as A
from ..lang.astjson import bind_call_json_text
from ..lang.formatter import format_bind_call, format_flow
from ..lang.hashes import fingerprint, flow_key, one_statement_hashes
from ..lang.interpreter import PLACEHOLDER, Interpreter, OpOutcome
from ..store.events import CallUsage, Observation, PlanAttempted, TurnEnded, Usage
from ..store.payload_encode import encode_accepted_plan
from ..model.pricing import Spend
from ..store.bindings import FlowDbBindings
from .cancel import raise_if_cancelled
from .ops import MUTATING_EFFECTS, Toolbox, validate_input
from .providers.base import Chunk, ModelRequest, ProviderError, assemble
from .direct_call import DirectCall
from .observations import RedactedJson, observation_texts
from .recording import RERUNNABLE_EFFECTS, LiveHost, Recorder
from .turns import PlanRecord, RetryPolicy, ToolCall, TurnConfig, TurnOutput

__all__ = ["TurnOutput", "PlanRecord", "ToolCall", "TurnRunner", "provider_history", "RetryPolicy"]

log = logging.getLogger(__name__)

CANCELLED_ANSWER = "(turn cancelled)"

def _turn_number(cfg: Any) -> int:
    """The 1-based number of the turn just begun in ``cfg.session`` (people count turns; ids are seqs)."""
    return cfg.writer.conn.execute(
        "SELECT COUNT(*) FROM events WHERE stream = ? AND kind = 'turn_started'", (cfg.session,)).fetchone()[0]


# ---------------------------------------------------------------------------------------------
# History


def provider_history(messages: list[dict]) -> list[dict]:
    """A stored conversation made into a valid provider history.

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


def escape_braces(v: Any) -> Any:
    """Make lit strings survive the interpreter's ``{name}`` interpolation unchanged."""
    if isinstance(v, str):
        if PLACEHOLDER.search(v):
            return v.replace("{", "{{").replace("}", "}}")
        return v
    if isinstance(v, list):
        return [escape_braces(x) for x in v]
    if isinstance(v, dict):
        return {k: escape_braces(x) for k, x in v.items()}
    return v


def host_plan(bind: str, op: str, input_obj: dict) -> A.DraftAst:
    """The host-derived one-statement plan flux writes for one tool call."""
    return A.DraftAst(name=None, params=(), returns=None,
                      body=(A.Bind(name=bind, value=A.Call(op=op, args=(A.Lit(value=escape_braces(input_obj)),))),))


def host_plan_facts(bind: str, op: str, input_obj: dict) -> tuple[Any, str, str, str]:
    """The host plan (:func:`host_plan`) as the loop records and runs it, without building it:
    ``(value, text, fingerprint, flow key)`` — the call's literal argument (the input with its
    braces escaped), ``format_flow``, ``fingerprint`` and ``flow_key(None, body)`` of the plan.

    One call per tool call, so the three are written from the statement's parts — its JSON text
    once, the two hashes around it, the text from its one-line spelling — instead of building the
    AST and walking it three times. A property test (tests/agent/test_host_plan.py) checks every
    part equals the general path's; a plan the fast path cannot write takes the general path."""
    value = escape_braces(input_obj)
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
# The runner

def _bindings(cfg: "TurnConfig") -> FlowDbBindings:
    """The session's durable bindings in the store's flow.db (parallel branch names, throttle
    buckets, debounce tokens — what flux keeps in its session store; flux.lang.session)."""
    return FlowDbBindings(cfg.writer.dir, cfg.session, now=cfg.writer.now)


class _LastOutcome:
    """Keeps ``live.last`` right when a wrapper answers a dispatch without the live host."""

    def __init__(self, inner: Any, live: "LiveHost"):
        self.inner, self.live = inner, live

    def dispatch(self, op: str, input: Any, input_json: str) -> OpOutcome:
        out = self.inner.dispatch(op, input, input_json)
        self.live.last = out
        return out

    def settle(self, op: str, input_json: str, outcome: OpOutcome) -> OpOutcome:
        self.live.last = outcome
        return outcome


class TurnRunner:
    """Runs one adaptive turn (:meth:`run_turn`) or one authored flow turn (:meth:`run_flow`).

    One adaptive turn writes, in this order:

    1. the user ``message``;
    2. ``turn_started`` (its ``global_seq`` is the turn id);
    3. per tool call the model makes: an accepted ``plan_attempted`` holding the host-derived
       one-statement plan (``adaptive_gather_<k> = op({...})`` for reading ops, phase
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
       valid provider history that ``--continue`` resends.

    A process killed mid-turn leaves 1–3: a turn with an accepted plan and no ``turn_ended``, which
    ``flux sessions`` flags as interrupted. Rows are committed by effect (:class:`~.recording.Recorder`).
    """

    def __init__(self, cfg: TurnConfig):
        self.cfg = cfg

    def _durable(self, op: str) -> bool:
        o = self.cfg.toolbox.get(op)
        return o is None or o.effect not in RERUNNABLE_EFFECTS

    def _recorder(self, *, defer_cells: bool, keep_log: bool) -> tuple[Recorder, LiveHost]:
        cfg = self.cfg
        rec = Recorder(cfg.writer, cfg.session, cfg.redactor, cfg.cap, self._durable, defer_cells=defer_cells)
        return rec, LiveHost(cfg.toolbox, cfg.approver, cfg.timer, rec.before_dispatch,
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
        direct = DirectCall.of(interp, host, live, rec, cfg)
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

    def _tool(self, tu: dict, index: int, batch: str, interp: Interpreter, host: RecordingHost, live: LiveHost,
              rec: Recorder, out: TurnOutput, observations: list, turn_id: int,
              direct: Optional["DirectCall"] = None) -> dict:
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

    def _observation_flush(self, rec: Recorder, observations: list, turn_id: int) -> None:
        """The observation flush: one batch stamped with the flush time, written in one
        transaction together with whatever is buffered before it."""
        cfg = self.cfg
        flush = cfg.writer.now()
        texts = observation_texts(observations, cfg.redactor)
        cfg.writer.append_texts(cfg.session, "observation", texts, turn_id=turn_id, ts=flush)  # with what is buffered
        rec.appended += len(texts)
        cfg.writer.flush()

    def _finish(self, rec: Recorder, out: TurnOutput, interp: Interpreter, observations: list, usages: list[Usage],
                turn_msgs: list[dict], live: LiveHost) -> None:
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
    def run_flow(self, draft: A.DraftAst, confirm: Callable[[str, str], bool],
                 resume: Any = None) -> tuple[TurnOutput, list[dict]]:
        """``flux flow run``: the flow as one turn, in resumable mode (statement ledger), recorded.
        ``resume`` (a :class:`flux.agent.flow_resume.FlowResume`): the session's halted plan — its
        ledger fast-forwards, its values re-bind, and a dispatch its cells answer is served from them."""
        with self.cfg.writer.grouped():
            return self._run_flow(draft, confirm, resume)

    def _run_flow(self, draft: A.DraftAst, confirm: Callable[[str, str], bool],
                  resume: Any = None) -> tuple[TurnOutput, list[dict]]:
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
        inner = live if resume is None else TapeFirstHost(ReplayTape(resume.cells), live)
        host = RecordingHost(inner, rec, cfg.redactor, cfg.cap, enabled=cfg.cassette)
        interp = Interpreter(cfg.toolbox.catalog(), host, rec, approver=rec.confirming(confirm), run_id=cfg.session,
                             sleep=rec.sleep, session=_bindings(cfg),
                             values=dict(resume.values) if resume is not None else None)
        cancelled = False
        cassette_error: CassetteWriteError | None = None
        try:
            res = interp.run(draft, resumable=True, ledger=resume.ledger if resume is not None else None)
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
# scheduler, so an effectful cell is written at once rather than owed (see Recorder).
_BRANCHING = (A.Parallel, A.Race, A.Timeout)


def runs_one_branch(draft: A.DraftAst) -> bool:
    """Whether ``draft`` can never have two branches (or a deadline) at once."""
    return not any(isinstance(x, _BRANCHING) for x in _nodes(draft))


def check_flow(draft: A.DraftAst, toolbox: Toolbox) -> None:
    unknown = sorted({o for o in flow_ops(draft) if o not in toolbox})
    if unknown:
        raise FluxError(f"the flow calls unknown op(s) {', '.join(unknown)} — available: {', '.join(sorted(toolbox.ops))}")
