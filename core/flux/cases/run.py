"""Run a saved case: re-drive its turn and resolve every call down the ladder.

An agent case re-drives the recorded input through this runtime's agent loop, a flow case re-runs
its recorded plans; either way every call goes through one :class:`Ladder`: the prefix answered from
the recording, then each call reused, simulated, live or stopped with a reason code (docs/cases.md).
Nothing waits (the replay clock), and the re-drive writes only to a scratch store that is removed.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional

from ..agent.approver import AutoApprove
from ..agent.builtin_ops import coding_ops
from ..agent.loop import RetryPolicy, TurnConfig, TurnRunner
from ..agent.model_cassette import request_hash
from ..agent.ops import Op, Toolbox
from ..agent.providers.base import Chunk, ModelRequest, ProviderError
from ..agent.registry import resolve_model
from ..canonical import canonical_json, sha256_hex
from ..cassette.redactor import Redactor
from ..cassette.replay import ReplayTape, TapeCell, make_outcome
from ..lang.catalog import OpCatalog
from ..lang.interpreter import Interpreter
from ..model.pricing import PriceTable, load_price_table
from ..model.stored_plan import StoredPlanError, parse_stored_plan
from ..store.store import StoreWriter
from ..store.usage import Usage
from ..timemachine.engine import MemorySink
from .bundle import Bundle
from .errors import CaseRefusal
from .supply import Supplied, model_answer, op_answer

__all__ = ["RunOptions", "CallLine", "CaseOutcome", "Ladder", "run_bundle"]

_NOT_WRITES = ("pure", "read")


@dataclass
class RunOptions:
    replay_only: bool = False
    from_start: bool = False
    model: Optional[str] = None  # -m: post-fork model calls go to this model
    prompt: Optional[str] = None  # --prompt-file: post-fork model calls use this system prompt
    inputs: dict[str, Any] = field(default_factory=dict)  # --input KEY=JSON
    supply: Supplied = field(default_factory=Supplied)
    live_budget: Optional[int] = None
    max_cost_usd: Optional[float] = None
    prices: Optional[PriceTable] = None
    allow_write: frozenset[str] = frozenset()
    values: bool = False
    workspace: Optional[Path] = None  # where live ops act (default: a scratch directory)
    ops: Optional[list[Op]] = None  # the ops of the code under test (default: the built-in coding ops)
    provider: Any = None  # a live model provider object (the API's; -m builds one)
    on_call: Optional[Callable[["CallLine"], None]] = None


@dataclass
class CallLine:
    """One call after the fork, as the run resolved it."""

    key: str  # "op:3" / "model:2"
    kind: str
    name: str
    provenance: str  # reused | simulated | live | changed | stopped
    fingerprint: str
    recorded_fingerprint: Optional[str] = None
    value: Any = None
    cost_usd: Optional[float] = None

    def to_json(self, values: bool = False) -> dict:
        d = {"type": "call", "key": self.key, "kind": self.kind, "name": self.name, "provenance": self.provenance,
             "fingerprint": self.fingerprint, "recorded_fingerprint": self.recorded_fingerprint}
        if self.cost_usd is not None:
            d["cost_usd"] = self.cost_usd
        if values:
            d["value"] = self.value
        return d


@dataclass
class CaseOutcome:
    fixture_hash: str
    status: str = "complete"  # complete | stopped | incomplete | failed | cancelled | refused
    code: Optional[str] = None
    reason: Optional[str] = None
    message: Optional[str] = None
    stop_key: Optional[str] = None
    stop_token: Optional[str] = None
    calls: list[CallLine] = field(default_factory=list)
    prefix_calls: int = 0
    unconsumed_keys: list[str] = field(default_factory=list)
    cost_usd: float = 0.0
    code_versions: dict = field(default_factory=dict)

    @property
    def provenance(self) -> dict[str, int]:
        out = {"reused": 0, "simulated": 0, "live": 0, "changed": 0}
        for c in self.calls:
            if c.provenance in out:
                out[c.provenance] += 1
        return out

    @property
    def changed_calls(self) -> list[str]:
        return [c.key for c in self.calls if c.provenance == "changed"]

    @property
    def live_calls(self) -> int:
        return sum(1 for c in self.calls if c.provenance in ("live", "changed"))

    @property
    def complete(self) -> bool:
        return self.status == "complete"

    @property
    def exit_code(self) -> int:
        return 0 if self.status == "complete" else (2 if self.status == "refused" else 3)

    def assert_complete(self) -> "CaseOutcome":
        if not self.complete:
            code = "".join(f" {x}" for x in (self.code, self.reason, self.stop_key) if x)
            raise AssertionError(f"case {self.fixture_hash[:16]}… {self.status}{code}: {self.message or ''}")
        return self

    def to_json(self) -> dict:
        return {"type": "outcome", "status": self.status, "code": self.code, "reason": self.reason,
                "message": self.message, "stop_key": self.stop_key, "stop_token": self.stop_token,
                "provenance": self.provenance, "prefix_calls": self.prefix_calls, "changed_calls": self.changed_calls,
                "live_calls": self.live_calls, "unconsumed_keys": self.unconsumed_keys,
                "cost_usd": round(self.cost_usd, 6), "code_versions": self.code_versions,
                "fixture_hash": self.fixture_hash}


class _Stopped(Exception):
    pass


@dataclass
class _Rec:
    key: int
    entry: dict
    consumed: bool = False

    @property
    def fingerprints(self) -> tuple:
        return (self.entry["fingerprint"], self.entry.get("fingerprint_redacted"))


def _chunks_of(blocks: list[dict]) -> list[Chunk]:
    out = []
    for b in blocks:
        if b.get("type") == "text":
            out.append(Chunk("text_delta", b.get("text", "")))
        else:
            out.append(Chunk("block", b))
    stop = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
    out.append(Chunk("done", {"stop_reason": stop}))
    return out


class Ladder:
    """The host and the model provider of one case run: both resolve their calls here."""

    hermetic = True  # the interpreter runs on the replay clock: nothing waits
    auto_approve = True

    def __init__(self, bundle: Bundle, opts: RunOptions, toolbox: Toolbox, outcome: CaseOutcome,
                 live_provider: Any = None, live_request_model: Optional[str] = None, redactor: Optional[Redactor] = None):
        self.bundle, self.opts, self.toolbox, self.outcome = bundle, opts, toolbox, outcome
        fork = bundle.manifest["fork"]
        self.prefix_ops = 0 if opts.from_start else fork["at"]
        self.prefix_models = 0 if opts.from_start else fork["prefix_model_calls"]
        self.ops = [_Rec(int(e["key"]), e) for e in bundle.ops()]
        self.models = {int(e["key"]): _Rec(int(e["key"]), e) for e in bundle.model_calls()}
        self.tape = ReplayTape([TapeCell(e["op"], e["fingerprint"], e.get("fingerprint_redacted"), "", None, False,
                                         False, False) for e in bundle.ops()])
        self.op_n = 0
        self.model_n = 0
        self.live_provider = live_provider
        self.live_request_model = live_request_model
        self.redactor = redactor or Redactor()
        self.stopped = False

    # -- bookkeeping -------------------------------------------------------------------------------
    def _line(self, line: CallLine) -> None:
        self.outcome.calls.append(line)
        if self.opts.on_call is not None:
            self.opts.on_call(line)

    def _answered(self, line: CallLine, provenance: str, value: Any) -> None:
        line.provenance, line.value = provenance, value
        self._line(line)

    def _supplied(self, key: str, op: Optional[str], at: Optional[_Rec], line: CallLine,
                  parse: Callable[[Any], Any], shape: str) -> Any:
        """The ladder's second rung: the supplied answer for this call, parsed (``None``: none was
        supplied). An answer of the wrong shape stops the run; a supplied one replaces ``at``."""
        found, value = self.opts.supply.for_call(key, op)
        if not found:
            return None
        answer = parse(value)
        if answer is None:
            what = key if op is None else f"{key} `{op}`"
            self.stop("missing_context", f"the supplied answer for {what} is not a string or {shape}", key, line=line)
        self._replace(at)
        return answer

    def stop(self, code: str, message: str, key: str, *, reason: Optional[str] = None,
             token: Optional[str] = None, line: Optional[CallLine] = None) -> None:
        o = self.outcome
        if not self.stopped:
            self.stopped = True
            o.status = "refused" if code == "prefix_diverged" else "stopped"
            o.code, o.reason, o.message, o.stop_key, o.stop_token = code, reason, message, key, token
            if line is not None:
                line.provenance = "stopped"
                self._line(line)
        raise _Stopped(message)

    def _budget(self, key: str, *, free: bool = False) -> None:
        if free:
            return
        lb = self.opts.live_budget
        if lb is not None and self.outcome.live_calls >= lb:
            self.stop("live_budget_exceeded", f"{key} would be live call {self.outcome.live_calls + 1}, over "
                                              f"--live-budget {lb}", key)

    # -- ops: the interpreter's host ---------------------------------------------------------------
    def dispatch(self, op: str, input: Any, input_json: Optional[str] = None) -> Any:
        if self.stopped:
            return make_outcome("case run stopped", is_error=True)
        try:
            return self._dispatch(op, input, canonical_json(input) if input_json is None else input_json)
        except _Stopped as e:
            return make_outcome(f"case run stopped: {e}", is_error=True)

    def approve(self, *args: Any, **kwargs: Any) -> bool:
        return True

    def _recorded_outcome(self, rec: _Rec) -> Any:
        e = rec.entry
        body = e.get("result") or e.get("error")
        return make_outcome(body["content"], view=body.get("view"), is_error="error" in e,
                            denied=bool(body.get("denied", False)))

    def _dispatch(self, op: str, input: Any, input_json: str) -> Any:
        i = self.op_n
        self.op_n += 1
        key = f"op:{i}"
        h = sha256_hex(input_json)
        at = self.ops[i] if i < len(self.ops) else None
        if i < self.prefix_ops:
            if at is None or at.entry["op"] != op or h not in at.fingerprints:
                what = "no call" if at is None else f"`{at.entry['op']}` with input {at.entry['fingerprint'][:16]}…"
                self.stop("prefix_diverged", f"prefix call {key}: the run called `{op}` with input {h[:16]}…, the "
                                             f"recording {what} — the code no longer makes the recorded prefix", key)
            at.consumed = True
            self.outcome.prefix_calls += 1
            return self._recorded_outcome(at)
        line = CallLine(key, "op", op, "", h, at.entry["fingerprint"] if at is not None else None)
        match = next((r for r in self.ops[self.prefix_ops:] if not r.consumed and r.entry["op"] == op
                      and h in r.fingerprints), None)
        if match is not None and not match.entry.get("truncated"):
            match.consumed = True
            out = self._recorded_outcome(match)
            self._answered(line, "reused", out.content)
            return out
        if self.opts.replay_only:
            if match is not None:
                reason, why = "recorded_error", f"its recorded result (op:{match.key}) was cut at the capture cap"
            elif at is not None and not at.consumed and at.entry["op"] == op:
                reason, why = "input_changed", f"the recording called `{op}` here with input {at.entry['fingerprint'][:16]}…"
            else:
                reason, why = "unexpected_call", "the recording has no unconsumed call of it"
            self.stop("replay_diverged", f"{key} `{op}` (input {h[:16]}…): {why} — --replay-only cannot answer it",
                      key, reason=reason, line=line)
        ans = self._supplied(key, op, at, line, op_answer, "{\"content\": str, \"is_error\": bool}")
        if ans is not None:
            self._answered(line, "simulated", ans[0])
            return make_outcome(ans[0], is_error=ans[1])
        o = self.toolbox.get(op)
        effect = o.effect if o is not None else "undeclared"
        if effect not in _NOT_WRITES:
            token = f"tool:{op}"
            if token not in self.opts.allow_write:
                self.stop("write_not_allowed", f"{key} `{op}` is a write (effect {effect}) the recording cannot "
                                               f"answer — allow it with --allow-write {token}", key, token=token,
                          line=line)
        self._budget(key, free=effect == "pure")
        if o is None:
            out = make_outcome(f"unknown op `{op}` — the code under test has no such op", is_error=True)
        else:
            out = o.call(input if isinstance(input, dict) else {})
        self._answered(line, "changed" if self._replace(at) else "live", out.content)
        return out

    def _replace(self, at: Optional[_Rec]) -> bool:
        """A live or supplied answer takes the place of the recorded call at this position."""
        if at is not None and not at.consumed:
            at.consumed = True
            return True
        return False

    # -- model calls: the loop's provider ------------------------------------------------------------
    name = "case"

    async def stream(self, request: ModelRequest):
        if self.stopped:
            raise ProviderError("case run stopped")
        try:
            chunks = await self._model(request)
        except _Stopped as e:
            raise ProviderError(f"case run stopped: {e}") from None
        for c in chunks:
            yield c

    async def _model(self, request: ModelRequest) -> list[Chunk]:
        self.model_n += 1
        n = self.model_n
        key = f"model:{n}"
        rec = self.models.get(n)
        if n <= self.prefix_models:
            h, _ = request_hash(request, self.redactor)
            if rec is None or rec.entry["fingerprint"] != h:
                self.stop("prefix_diverged", f"prefix call {key}: the request differs from the recorded one (hash "
                                             f"{h[:16]}… ≠ {(rec.entry['fingerprint'][:16] + '…') if rec else 'none'}) — "
                                             f"the code no longer makes the recorded prefix", key)
            rec.consumed = True
            self.outcome.prefix_calls += 1
            return [Chunk.from_json(c) for c in rec.entry["result"]["chunks"]]
        if self.opts.model is not None and self.live_request_model is not None:
            request = replace(request, model=self.live_request_model)
        if self.opts.prompt is not None:
            request = replace(request, system=self.opts.prompt, system_segments=[])
        h, _ = request_hash(request, self.redactor)
        model = request.model
        line = CallLine(key, "model", model, "", h, rec.entry["fingerprint"] if rec is not None else None)
        if rec is not None and not rec.consumed and rec.entry["fingerprint"] == h:
            rec.consumed = True
            chunks = [Chunk.from_json(c) for c in rec.entry["result"]["chunks"]]
            self._answered(line, "reused", [c.to_json() for c in chunks])
            return chunks
        if self.opts.replay_only:
            reason = "input_changed" if rec is not None and not rec.consumed else "unexpected_call"
            why = ("the request differs from the recorded one at this position" if reason == "input_changed"
                   else "the recording made no model call here")
            self.stop("replay_diverged", f"{key}: {why} (hash {h[:16]}…) — --replay-only cannot answer it", key,
                      reason=reason, line=line)
        blocks = self._supplied(key, None, rec, line, model_answer, "{\"role\": \"assistant\", \"content\": [blocks]}")
        if blocks is not None:
            self._answered(line, "simulated", blocks)
            return _chunks_of(blocks)
        if self.live_provider is None:
            self.stop("missing_context", f"{key}: the recording cannot answer it and there is no live rung — pass "
                                         f"-m MODEL to run it live, or supply it (--supply, calls[\"{key}\"])", key,
                      line=line)
        self._budget(key)
        price = None
        if self.opts.max_cost_usd is not None:
            table = self.opts.prices or load_price_table()
            price = table.lookup(model) or table.lookup(self.opts.model or "")
            if price is None:
                self.stop("live_budget_exceeded", f"{key}: model {model!r} has no price, so its spend is unknown under "
                                                  f"--max-cost-usd — add it with --prices FILE", key, line=line)
            if self.outcome.cost_usd >= self.opts.max_cost_usd:
                self.stop("live_budget_exceeded", f"{key}: the run has spent ${self.outcome.cost_usd:.4f}, the "
                                                  f"--max-cost-usd ceiling is ${self.opts.max_cost_usd:g}", key, line=line)
        chunks = [c async for c in self.live_provider.stream(request)]
        usage = Usage()
        for c in chunks:
            if c.t == "usage" and isinstance(c.c, dict):
                usage = usage + Usage.from_body(c.c)
        cost = price.cost(usage) if price is not None else None
        if cost is not None:
            self.outcome.cost_usd += cost
        line.provenance = "changed" if self._replace(rec) else "live"
        line.value, line.cost_usd = [c.to_json() for c in chunks], cost
        self._line(line)
        return chunks

    def unconsumed(self) -> list[str]:
        keys = [f"op:{r.key}" for r in self.ops if not r.consumed]
        keys += [f"model:{k}" for k, r in sorted(self.models.items()) if not r.consumed]
        return keys


def _toolbox(opts: RunOptions, workspace: Path) -> Toolbox:
    return Toolbox.of(list(opts.ops) if opts.ops is not None else coding_ops(workspace))


def _apply_inputs(bundle: Bundle, opts: RunOptions) -> dict:
    inputs = dict(bundle.manifest["inputs"])
    for k, v in opts.inputs.items():
        if k != "input" or bundle.manifest["kind"] != "agent":
            raise CaseRefusal("invalid_overrides", f"--input {k}: this {bundle.manifest['kind']} case has no input "
                                                   f"named {k!r} (an agent case's input is `input`, the user's prompt)")
        if not isinstance(v, str):
            raise CaseRefusal("invalid_overrides", f"--input {k}: the prompt is a JSON string (--input input='\"…\"')")
        if bundle.manifest["fork"]["at"] or bundle.manifest["fork"]["prefix_model_calls"]:
            if not opts.from_start:
                raise CaseRefusal("invalid_overrides", f"--input {k} changes the prefix's first model call — save the "
                                                       f"case without --at (inputs only) or run it --from-start")
        inputs[k] = v
    return inputs


def run_bundle(bundle: Bundle, opts: RunOptions) -> CaseOutcome:
    """Run one case (docs/cases.md); never raises for a run that started — the outcome says."""
    m = bundle.manifest
    outcome = CaseOutcome(bundle.hash, code_versions={"recorded": m.get("code_version"),
                                                        "product": m.get("product_version")})
    inputs = _apply_inputs(bundle, opts)
    scratch = Path(tempfile.mkdtemp(prefix="flux-case-run-"))
    try:
        workspace = opts.workspace or (scratch / "workspace")
        workspace.mkdir(parents=True, exist_ok=True)
        tb = _toolbox(opts, workspace)
        provider, request_model = opts.provider, None
        if opts.model is not None:
            resolved = resolve_model(opts.model)
            provider = provider or resolved.provider
            request_model = resolved.request_model
        elif provider is not None:
            request_model = getattr(provider, "model", None)
        ladder = Ladder(bundle, opts, tb, outcome, provider, request_model)
        try:
            if m["kind"] == "agent":
                asyncio.run(_drive_agent(bundle, inputs, ladder, tb, scratch / "store"))
            else:
                _drive_flow(bundle, ladder, tb)
        except KeyboardInterrupt:
            outcome.status, outcome.code, outcome.message = "cancelled", "cancelled", "the case run was interrupted"
            return outcome
        if outcome.status == "complete":
            left = ladder.unconsumed()
            if left:
                outcome.status = "incomplete"
                outcome.unconsumed_keys = left
                outcome.message = (f"{len(left)} recorded call(s) after the fork were never made: "
                                   f"{', '.join(left[:8])}{' …' if len(left) > 8 else ''}")
        return outcome
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


async def _drive_agent(bundle: Bundle, inputs: dict, ladder: Ladder, tb: Toolbox, store: Path) -> None:
    m = bundle.manifest
    cfg_rec = m["recorded_config"]
    ts = [r.get("ts") for r in bundle.history if isinstance(r.get("ts"), int)]
    clock_at = [ts[0] if ts else 0]

    def clock() -> int:
        clock_at[0] += 1
        return clock_at[0]

    async def no_sleep(_s: float) -> None:
        return None

    writer = StoreWriter(store, clock=clock)
    try:
        sid = writer.create_session(cfg_rec.get("session_model") or "case")
        cfg = TurnConfig(writer=writer, session=sid, model_name=cfg_rec.get("session_model") or "case",
                         request_model=cfg_rec.get("model") or "case", provider=ladder, provider_name="case",
                         toolbox=tb, approver=AutoApprove(), redactor=ladder.redactor, cap=1 << 20, cassette=True,
                         instructions=cfg_rec.get("system"), max_tokens=cfg_rec.get("max_tokens") or 4096,
                         temperature=cfg_rec.get("temperature"), retry=RetryPolicy(attempts=1), sleep=no_sleep,
                         host_wrap=lambda live: ladder, concurrent_ops=False)
        history = [msg for msg in inputs.get("conversation") or [] if isinstance(msg, dict)]
        out, _ = await TurnRunner(cfg).run_turn(history, inputs["input"])
    finally:
        writer.close()
    o = ladder.outcome
    if o.status == "complete" and out.outcome == "cancelled":
        o.status, o.code, o.message = "cancelled", "cancelled", "the case run was interrupted"
    elif o.status == "complete" and out.outcome not in ("ok",):
        o.status, o.code = "failed", "runtime_error"
        o.message = f"the re-driven turn ended {out.outcome}: {out.error or out.answer}"


def _drive_flow(bundle: Bundle, ladder: Ladder, tb: Toolbox) -> None:
    plans = bundle.manifest["inputs"].get("plans") or []
    if not plans:
        raise CaseRefusal("capture_incomplete", "the flow case holds no recorded plan to run")
    catalog = OpCatalog.permissive()
    for text in plans:
        try:
            draft, _key = parse_stored_plan(text)
        except StoredPlanError:
            raise CaseRefusal("bundle_corrupt", "a recorded plan of the case does not parse — re-save it") from None
        interp = Interpreter(catalog, ladder, MemorySink(), approver=lambda _m, _r: True, run_id="case")
        res = interp.run(draft, resumable=False)
        o = ladder.outcome
        if ladder.stopped:
            return
        if res.halted is not None and o.status == "complete":
            o.status, o.code = "failed", "runtime_error"
            o.message = f"the flow halted at statement {res.halted.node}: {res.halted.error}"
            return

