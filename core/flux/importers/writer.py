"""The one writer every importer shares: an :class:`~flux.importers.model.ImportedRun` becomes sessions of
a flux store, recorded by this runtime's own agent loop (a provider replaying the log's model calls, an op
per tool handing back the recorded result), with an ``import_source`` event that makes the import
content-addressed. All or nothing: a failed or incomplete recording deletes what it made. What a run
becomes: docs/import.md."""

from __future__ import annotations

import asyncio
import hashlib
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Callable, Optional

from .. import __version__
from ..agent.ops import Op, OpError
from ..agent.providers.base import Chunk, ModelRequest
from ..agent.providers.scripted import response_chunks
from ..canonical import canonical_json
from ..cassette.redactor import Redactor
from ..errors import FluxError
from ..lang.parser import RESERVED
from ..store.events import Custom
from ..model.provenance import SOURCE_EVENT, find_import
from ..store.store import StoreReader, StoreWriter
from .model import ImportedRun, ModelCall, ToolUse, Turn

__all__ = ["Source", "ImportResult", "LiveRecorder", "write_run", "redact_source", "secrets_in", "op_name", "file_hash"]


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]")

# The effect a well-known foreign tool has (a name not listed is `exec`: whatever it did, replay
# never runs it again — its result is served from the cell).
_READ = {"read", "glob", "grep", "ls", "webfetch", "websearch", "read_file", "list_dir", "list_files", "search",
         "view", "find", "todoread", "notebookread", "bashoutput", "view_image", "read_many_files", "web_search",
         "fs_read", "fs_search", "fs_list"}
_WRITE = {"write", "edit", "multiedit", "notebookedit", "apply_patch", "write_file", "edit_file", "str_replace",
          "todowrite", "update_plan", "fs_write", "fs_edit", "create_file"}
_PURE = {"task", "agent", "exitplanmode"}


def _effect(name: str) -> str:
    low = name.lower()
    if low in _READ:
        return "read"
    if low in _WRITE:
        return "write"
    if low in _PURE:
        return "pure"
    return "exec"


def op_name(name: str) -> str:
    """The op name a foreign tool is recorded under: the name itself when Flux-Lang can call it, else
    the name with every other character made ``_`` (and ``t_`` in front of a leading digit or a
    reserved word)."""
    if _IDENT.match(name) and name not in RESERVED:
        return name
    out = _NOT_IDENT.sub("_", name) or "tool"
    if out[0].isdigit() or out in RESERVED:
        out = "t_" + out
    return out


@dataclass
class Source:
    """The file an import reads: its format, bytes' hash, name, size and redacted text."""

    format: str
    file_hash: str
    name: str
    size: int
    text: str  # redacted
    files: dict = field(default_factory=dict)  # the run's other files (name -> redacted text)


@dataclass
class ImportResult:
    session: str
    created: list[str]
    already: bool = False  # the file was imported before: nothing was written
    tool_calls: int = 0
    model_calls: int = 0
    turns: int = 0


def redact_source(text: str, redactor: Redactor, found: tuple[str, ...] = ()) -> str:
    """The source kept beside the session: verbatim, except that each JSON line (or the whole JSON
    document) has the redactor's secrets replaced on its decoded values, and any other line by the
    text passes. ``found``: secrets the parsed log holds (:func:`secrets_in`) — a log that streams
    a value in pieces (a tool call's arguments over several chunks) can split a secret across two
    JSON strings, where no pass sees it whole; every 8 characters of such a secret still in the
    text are replaced too."""
    stripped = text.lstrip()
    if stripped.startswith("{") and "\n" in stripped.rstrip():
        out = "\n".join(_redact_piece(line, redactor) for line in text.split("\n"))
    else:
        out = _redact_piece(text, redactor)
    grams = sorted({s[i:i + _GRAM] for s in found for i in range(len(s) - _GRAM + 1)}, key=len, reverse=True)
    if grams:
        pattern = re.compile("(?:" + "|".join(re.escape(g) for g in grams) + ")+")
        out = pattern.sub(redactor.marker, out)
    return out


_GRAM = 8


def secrets_in(run: ImportedRun, redactor: Redactor) -> tuple[str, ...]:
    """The secrets the redactor finds in the run's values (texts, tool inputs and results), each as
    the text it would hide."""
    import difflib

    found: set[str] = set()

    def look(v: Any) -> None:
        if isinstance(v, str):
            if len(v) >= _GRAM and not redactor.finds_nothing(v):
                red = redactor.redact(v)
                for op, i1, i2, _j1, _j2 in difflib.SequenceMatcher(None, v, red, autojunk=False).get_opcodes():
                    if op in ("replace", "delete") and i2 - i1 >= _GRAM:
                        found.add(v[i1:i2])
        elif isinstance(v, dict):
            for k, x in v.items():
                look(k)
                look(x)
        elif isinstance(v, list):
            for x in v:
                look(x)

    def walk(r: ImportedRun) -> None:
        look(r.instructions or "")
        for t in r.turns:
            look(t.user)
            for c in t.calls:
                look(c.text)
                look(c.thinking)
                look(c.error or "")
                for u in c.tool_uses:
                    look(u.input)
                    look(u.result or "")
                    if u.child is not None:
                        walk(u.child)

    walk(run)
    return tuple(sorted(found))


def _redact_piece(text: str, redactor: Redactor) -> str:
    if not text.strip():
        return text
    if redactor.leaves_alone(text):
        return text
    try:
        return redactor.redact_json_text(text, sort=False)
    except Exception:  # (not JSON: the text passes alone)
        return redactor.redact(text)


# ------------------------------------------------------------------------------------------ recording


class _Clock:
    """The store's clock during an import: the log's own times, never going backwards."""

    def __init__(self, start: int):
        self.t = start

    def at(self, ms: Optional[int]) -> None:
        if ms is not None and ms > self.t:
            self.t = ms

    def __call__(self) -> int:
        return self.t


class _Timer:
    """Durations (µs) for the observations: a fixed step, so two imports of one log record the same."""

    def __init__(self) -> None:
        self.t = 0

    def __call__(self) -> int:
        self.t += 1_000
        return self.t


class _LogProvider:
    """Serves the run's model calls in order, each as the chunk stream of its response; the clock
    moves to the call's time first."""

    def __init__(self, entries: list[tuple[dict, Optional[int]]], model: str, clock: _Clock, name: str):
        self.entries = entries
        self.model = model
        self.clock = clock
        self.name = name
        self.served = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        if self.served >= len(self.entries):
            raise FluxError(f"the imported log has no model call {self.served + 1}")
        entry, ts = self.entries[self.served]
        self.served += 1
        self.clock.at(ts)
        for ch in response_chunks(entry, request.model, self.served - 1):
            yield ch


def _usage(u: Optional[dict]) -> Optional[dict]:
    if not u:
        return None
    return {k: int(u.get(k) or 0) for k in ("input_tokens", "output_tokens", "cache_read_input_tokens",
                                              "cache_creation_input_tokens", "reasoning_tokens")}


_ENDS_WITHOUT_ANSWER = "the imported log ends here: the agent made no final answer for this turn"


def _script(run: ImportedRun, names: dict[str, str]) -> tuple[list[tuple[dict, Optional[int]]], list[Turn]]:
    """The provider's entries for the whole run, and the turns as they will be sent (a text-only
    call that is not the last of its turn is joined to the next call: the agent loop ends a turn at
    a response without tool calls)."""
    entries: list[tuple[dict, Optional[int]]] = []
    turns: list[Turn] = []
    for turn in run.turns:
        calls: list[ModelCall] = []
        carry = ""
        for i, call in enumerate(turn.calls):
            last = i == len(turn.calls) - 1
            if call.error is None and not call.tool_uses and not last:
                carry += call.text + ("\n\n" if call.text else "")
                continue
            if carry:
                call = ModelCall(text=carry + call.text, thinking=call.thinking, tool_uses=call.tool_uses,
                                 usage=call.usage, ts=call.ts, model=call.model, error=call.error, status=call.status)
                carry = ""
            calls.append(call)
        if calls and calls[-1].tool_uses and calls[-1].error is None:
            calls.append(ModelCall(error=turn.error or _ENDS_WITHOUT_ANSWER, ts=calls[-1].ts))
        elif not calls:
            calls.append(ModelCall(error=turn.error or _ENDS_WITHOUT_ANSWER, ts=turn.ts))
        elif turn.error and calls[-1].error is None and not calls[-1].tool_uses:
            pass  # the answer stands; the turn's error is kept in the source
        turns.append(Turn(user=turn.user, ts=turn.ts, calls=calls, error=turn.error))
        for call in calls:
            if call.error is not None:
                e: dict[str, Any] = {"error": call.error}
                if call.status is not None:
                    e["status"] = call.status
                entries.append((e, call.ts))
                continue
            entry: dict[str, Any] = {}
            if call.text:
                entry["text"] = call.text
            if call.thinking:
                entry["thinking"] = call.thinking
            if call.tool_uses:
                entry["tool_calls"] = [{"name": names[t.name], "input": t.input, "id": t.id} for t in call.tool_uses]
            u = _usage(call.usage)
            if u is not None:
                entry["usage"] = u
            entries.append((entry, call.ts))
    return entries, turns


class _Tape:
    """The recorded results of one run, handed out in dispatch order, checked against the call."""

    def __init__(self, uses: list[ToolUse], clock: _Clock):
        self.uses = uses
        self.next = 0
        self.clock = clock
        self.broken: Optional[str] = None  # why a call could not be served as the log recorded it

    def take(self, name: str, given: dict) -> ToolUse:
        if self.next >= len(self.uses):
            self.broken = f"the agent loop made a call of `{name}` the log does not have"
            raise OpError(self.broken)
        use = self.uses[self.next]
        self.next += 1
        if canonical_json(given) != canonical_json(use.input):
            self.broken = f"the agent loop called `{name}` with other arguments than the log (call {self.next})"
            raise OpError(self.broken)
        self.clock.at(use.ts)
        return use


class _Recorder:
    """Records one run (and, from its sub-agent tool calls, its children) into the store."""

    def __init__(self, store_dir: Path, source: Source, model_cassette: Optional[Path] = None):
        self.store_dir = store_dir
        self.model_cassette = model_cassette
        self.source = source
        self.created: list[str] = []
        self.clients: list[Any] = []
        self.workspace = Path(tempfile.mkdtemp(prefix="flux-import-ws-"))

    def close(self) -> None:
        import shutil

        for c in self.clients:
            c.close()
        shutil.rmtree(self.workspace, ignore_errors=True)

    async def record(self, run: ImportedRun, context: Optional[dict] = None, role: Optional[str] = None) -> str:
        from ..agent.client import Client

        names = {t.name: op_name(t.name) for turn in run.turns for c in turn.calls for t in c.tool_uses}
        entries, turns = _script(run, names)
        first = run.started_ms if run.started_ms is not None else next(
            (t.ts for t in run.turns if t.ts is not None), 0)
        clock = _Clock(first or 0)
        uses = [t for turn in turns for c in turn.calls for t in c.tool_uses]
        tape = _Tape(uses, clock)
        parent: dict[str, str] = {}
        ops = [self._op(name, op, uses, tape, parent) for name, op in sorted({v: k for k, v in names.items()}.items())]
        provider = _LogProvider(entries, run.model, clock, f"import:{run.format}")
        most = max((len(t.calls) for t in turns), default=1)
        client = Client(provider, model=run.model, store=self.store_dir, workspace=self.workspace, ops=ops,
                        env_secrets=False, model_cassette=self.model_cassette, clock=clock, timer=_Timer(), cassette=True,
                        cassette_cap=None, concurrent_ops=False, auto_approve=True, max_iter=most + 1,
                        instructions=run.instructions)
        self.clients.append(client)
        ctx = dict(context or {})
        ctx.setdefault("agent_id", f"import:{run.format}")
        ctx.setdefault("agent_version", run.version)
        session = client.session(context=ctx)
        self.created.append(session.id)
        parent["id"] = session.id
        tools = 0
        for turn in turns:
            clock.at(turn.ts)
            out = await session.send(turn.user)
            tools += len(out.tool_calls)
        if tape.broken is not None:
            raise FluxError(f"{tape.broken} — the import was undone")
        if tools != len(uses) or tape.next != len(uses) or provider.served != len(entries):
            raise FluxError(f"the agent loop recorded {tools} of the log's {len(uses)} tool call(s) and asked for "
                            f"{provider.served} of its {len(entries)} model response(s) — the import was undone")
        payload: dict[str, Any] = {
            "format": run.format, "version": run.version, "agent": run.agent, "file_hash": self.source.file_hash,
            "file": self.source.name, "bytes": self.source.size, "importer": __version__,
            "foreign_session": run.foreign_id, "root": context is None or "correlation_id" not in context,
        }
        if role is not None:
            payload["role"] = role
        renamed = {k: v for k, v in names.items() if k != v}
        if renamed:
            payload["tool_names"] = renamed
        if run.extra:
            payload["extra"] = run.extra
        if payload["root"]:
            payload["source"] = self.source.text
            if self.source.files:
                payload["files"] = self.source.files
        client.writer.append(session.id, Custom(name=SOURCE_EVENT, payload=client.redactor.redact_value(payload)))
        return session.id

    def _op(self, name: str, original: str, uses: list[ToolUse], tape: _Tape, parent: dict) -> Op:
        recorder = self

        def outcome(use: ToolUse) -> Any:
            from ..lang.interpreter import OpOutcome

            if use.result is None:
                return OpOutcome(content="(the imported log holds no result for this call)", is_error=True)
            return OpOutcome(content=use.result, is_error=use.is_error)

        def serve(**given: Any) -> Any:  # (synchronous: the interpreter calls it without a thread)
            return outcome(tape.take(name, given))

        async def serve_with_subagents(**given: Any) -> Any:
            use = tape.take(name, given)
            if use.child is not None:
                ctx = {"correlation_id": parent["id"], "agent_id": f"subagent:{use.role or 'agent'}"}
                try:
                    await recorder.record(use.child, context=ctx, role=use.role)
                except Exception as e:  # (an op's exception would be a mere tool error: the import fails)
                    tape.broken = f"the sub-agent of `{name}` could not be recorded ({e})"
                    raise OpError(tape.broken) from None
            return outcome(use)

        mine = [u for u in uses if u.name == original]
        keys = sorted({k for u in mine for k in u.input})
        schema = {"type": "object", "properties": {k: {} for k in keys}, "additionalProperties": True}
        fn = serve_with_subagents if any(u.child is not None for u in mine) else serve
        return Op(name=name, fn=fn, input_schema=schema, description=f"`{original}`, as the imported log recorded it",
                  effect=_effect(original))


def write_run(store_dir: str | Path, run: ImportedRun, source: Source, *,
              model_cassette: Optional[Path] = None) -> ImportResult:
    """Record ``run`` into the store at ``store_dir`` (see the module doc). A file already imported
    (same hash) writes nothing and names the session it made. ``model_cassette``: a ``model.jsonl``
    every model call is teed to, as ``flux record`` writes it."""
    store = Path(store_dir).expanduser()
    done = find_import(store, source.file_hash)
    if done is not None:
        return ImportResult(done, [], already=True)
    rec = _Recorder(store, source, model_cassette)
    try:
        sid = asyncio.run(rec.record(run))
    except BaseException as e:
        created = list(rec.created)
        rec.close()
        if created:
            with StoreWriter(store) as w:
                w.delete_sessions(created)
        if isinstance(e, FluxError):
            raise FluxError(f"{source.name}: {e} — nothing was imported") from None
        raise
    rec.close()
    return ImportResult(sid, rec.created, tool_calls=run.tool_calls(), model_calls=run.model_calls(), turns=len(run.turns))


def file_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class LiveRecorder(_Recorder):
    """Records a conversation turn by turn as it happens (``flux proxy``): one session, one client,
    the provider's entries and the tape's results extended before each turn is sent."""

    def __init__(self, store_dir: str | Path, meta: ImportedRun):
        super().__init__(Path(store_dir), Source(format=meta.format, file_hash="", name="proxy", size=0, text=""))
        self.meta = meta
        self.client: Any = None
        self.session: Any = None
        self.provider: Optional[_LogProvider] = None
        self.tape: Optional[_Tape] = None
        self.clock = _Clock(0)
        self.ops: set[str] = set()
        self.secrets: list[str] = []

    def register_secret(self, secret: str) -> None:
        self.secrets.append(secret)
        if self.client is not None:
            self.client.redactor.register(secret)

    async def add_turn(self, turn: Turn, events: list[Custom]) -> str:
        from ..agent.client import Client
        from ..timefmt import now_ms

        run = ImportedRun(format=self.meta.format, version=self.meta.version, agent=self.meta.agent,
                          model=self.meta.model, turns=[turn])
        names = {t.name: op_name(t.name) for c in turn.calls for t in c.tool_uses}
        entries, turns = _script(run, names)
        uses = [t for tr in turns for c in tr.calls for t in c.tool_uses]
        self.clock.at(now_ms())
        if self.client is None:
            self.provider = _LogProvider([], self.meta.model, self.clock, f"import:{self.meta.format}")
            self.tape = _Tape([], self.clock)
            self.client = Client(self.provider, model=self.meta.model, store=self.store_dir, workspace=self.workspace,
                                 ops=[], env_secrets=False, secrets=self.secrets, clock=self.clock, timer=_Timer(),
                                 cassette=True, concurrent_ops=False, auto_approve=True, max_iter=10_000,
                                 instructions=None)
            self.clients.append(self.client)
            self.session = self.client.session(context={"agent_id": f"import:{self.meta.format}",
                                                        "agent_version": self.meta.version})
        assert self.provider is not None and self.tape is not None
        for original, name in names.items():
            if name not in self.ops:
                self.ops.add(name)
                self.client.toolbox.add(self._op(name, original, uses, self.tape, {"id": self.session.id}))
        self.provider.entries.extend(entries)
        self.tape.uses.extend(uses)
        await self.session.send(turns[0].user)
        if self.tape.broken is not None:
            raise FluxError(self.tape.broken)
        for ev in events:
            self.client.writer.append(self.session.id, Custom(name=ev.name, payload=self.client.redactor.redact_value(ev.payload)))
        return self.session.id
