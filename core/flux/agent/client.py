"""The runtime's client: it records turns into a store (:class:`flux.sdk.Client` adds the time machine).

It holds the provider (resolved by :mod:`flux.agent.registry`), the ops (default: the built-in coding
ops confined to ``workspace``), the store (``None``: an ephemeral one removed on close), the approver,
the instructions and the redactor's secrets (``secrets=``, the environment's secret-named variables
unless ``env_secrets=False``, the provider's key).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, Mapping, Optional

from ..cassette.record import cap_from_env, cassette_enabled
from ..cassette.redactor import DEFAULT_MARKER, Redactor, secret_name
from ..documents import short
from ..errors import FluxError, SessionNotFound
from ..model.pricing import load_price_table
from ..store.store import SessionRow, StoreWriter, session_number
from .approver import Approver, AutoApprove, DenyAll, load_policy
from .builtin_ops import coding_ops
from .loop import RetryPolicy, TurnConfig, TurnOutput
from .model_cassette import CassetteProvider, ModelCassetteWriter, TeeProvider, load_records
from .ops import Op, Toolbox, load_ops
from .registry import DEFAULT_MODEL, resolve_model
from .session import Session
from .toolboxes import store_toolbox

__all__ = ["Client", "DEFAULT_INSTRUCTIONS", "env_secret_values"]

DEFAULT_INSTRUCTIONS = (
    "You are a careful coding agent working in a local workspace. Use the tools to look before you "
    "change anything, keep changes small, and finish with a short answer that says what you did."
)

_BORING = {"true", "false", "yes", "no", "none", "null", "enabled", "disabled"}


def env_secret_values(env: Optional[Mapping[str, str]] = None) -> list[str]:
    """Values of environment variables whose name declares a secret.

    Only values that look like credentials are taken (8+ characters, not a boolean-ish word, and
    either 16+ characters or containing a digit), so ``GIT_ASKPASS_DISABLED=true`` does not make
    every ``true`` in the store read ``[redacted]``."""
    env = os.environ if env is None else env
    out = []
    for k, v in env.items():
        if not v or not secret_name(k):
            continue
        v = v.strip()
        if len(v) < 8 or v.lower() in _BORING:
            continue
        if len(v) >= 16 or any(c.isdigit() for c in v):
            out.append(v)
    return out


class Client:
    """The runtime's client: a provider, ops, an approver and a store, and the sessions recorded in it.
    (:class:`flux.sdk.Client` is this client with the time machine on its sessions.)"""

    session_class: ClassVar[type[Session]] = Session  # what session() and open_session() open

    def __init__(
        self,
        provider: Any = DEFAULT_MODEL,
        *,
        model: Optional[str] = None,
        ops: Optional[Iterable[Op | Callable] | str] = None,
        workspace: str | os.PathLike[str] | None = None,
        store: str | os.PathLike[str] | None = None,
        approver: Optional[Approver] = None,
        auto_approve: bool = False,
        policy: str | os.PathLike[str] | None = None,
        instructions: Optional[str] = DEFAULT_INSTRUCTIONS,
        secrets: Iterable[str] = (),
        env_secrets: bool = True,
        redaction_marker: str = DEFAULT_MARKER,
        cassette: Optional[bool] = None,
        cassette_cap: Optional[int] = None,
        max_iter: int = 20,
        max_tokens: int = 4096,
        temperature: Optional[float] = None,
        base_url: Optional[str] = None,
        api_key: Optional[str] = None,
        model_cassette: str | os.PathLike[str] | None = None,
        serve_model_cassette: str | os.PathLike[str] | None = None,
        clock: Optional[Callable[[], int]] = None,
        timer: Optional[Callable[[], int]] = None,
        prices: Any = None,
        retry: Optional[RetryPolicy] = None,
        sleep: Optional[Callable[[float], Any]] = None,
        concurrent_ops: bool = True,
        on_event: Optional[Callable[[dict], None]] = None,
        context: Optional[dict[str, str | None]] = None,
    ):
        own_retries, provider_secrets = self._set_provider(provider, model, base_url, api_key)
        self.redactor = Redactor(marker=redaction_marker)
        for s in list(secrets) + provider_secrets + (env_secret_values() if env_secrets else []):
            self.redactor.register(s)
        self._add_model_cassettes(model_cassette, serve_model_cassette)
        self.workspace = Path(workspace or ".").expanduser().resolve()
        self._own_ops = ops is not None
        self.toolbox = self._toolbox(ops)
        self.approver: Approver = _approver(approver, policy, auto_approve)

        # Storage.
        self._ephemeral: Optional[str] = None
        if store is None:
            self._ephemeral = tempfile.mkdtemp(prefix="flux-mem-")
            store = self._ephemeral
        self.store_dir = Path(store).expanduser()
        self._clock = clock or (lambda: int(time.time() * 1000))
        if max_iter < 1:
            raise FluxError("max_iter must be at least 1")
        # Everything the store directory holds besides the databases is read before the writer
        # opens them: a bad prices.json fails with no connection left open.
        self.prices = prices if prices is not None else load_price_table(store_dir=self.store_dir)
        self.writer = StoreWriter(self.store_dir, clock=self._clock)

        self.instructions = instructions
        self.cassette = cassette_enabled() if cassette is None else cassette
        self.cap = cap_from_env() if cassette_cap is None else cassette_cap
        self.max_iter = max_iter
        self.max_tokens = max_tokens
        self.temperature = temperature
        # A provider that retries 429/5xx itself is not retried again by the loop.
        self.retry = retry or (RetryPolicy(attempts=1) if own_retries else RetryPolicy())
        self._sleep = sleep or asyncio.sleep
        self._timer = timer or (lambda: time.perf_counter_ns() // 1000)
        # `parallel`/`race` branches' ops run in worker threads at the same time (False: one at a
        # time, in dispatch order — a recording whose event order does not depend on thread timing)
        self.concurrent_ops = concurrent_ops
        self.on_event = on_event
        self.context = context

    # ---------------------------------------------------------------- set-up
    def _set_provider(self, provider: Any, model: Optional[str], base_url: Optional[str],
                      api_key: Optional[str]) -> tuple[bool, list[str]]:
        """Provider, stored model name and request model; returns (retries itself?, secrets it knows)."""
        secrets = [api_key] if api_key else []
        if isinstance(provider, str):
            name = provider if model is None or model == provider else (model if ":" in model else f"{provider}:{model}")
            resolved = resolve_model(name, base_url=base_url, api_key=api_key)
            self.provider = resolved.provider
            self.model = resolved.name
            self.request_model = resolved.request_model
            self.provider_name = resolved.provider_name
            return resolved.own_retries, resolved.secrets + secrets
        if not hasattr(provider, "stream"):
            raise FluxError("provider must be a model name (e.g. 'mock', 'openai:gpt-4.1-mini') or an object with stream()")
        self.provider = provider
        self.provider_name = str(getattr(provider, "name", "provider"))
        self.model = model or str(getattr(provider, "model", None) or self.provider_name)
        self.request_model = self.model.split(":", 1)[1] if ":" in self.model and self.provider_name in (
            "openai", "anthropic", "ollama") else self.model
        return hasattr(provider, "max_retries"), secrets

    def _add_model_cassettes(self, tee_to: Any, serve_from: Any) -> None:
        """Model cassette: serve first (misses fall through live), tee what goes live."""
        if tee_to is not None:
            self.provider = TeeProvider(self.provider, ModelCassetteWriter(tee_to, self.redactor))
        self.model_server: Optional[CassetteProvider] = None
        if serve_from is not None:
            self.model_server = CassetteProvider(load_records(serve_from), self.provider, self.redactor)
            self.provider = self.model_server

    def _toolbox(self, ops: Optional[Iterable[Op | Callable] | str]) -> Toolbox:
        # ``ops_ref``: the "module:attr" the ops were named by — what a recorded scenario writes
        # down so the scenario can be re-driven with the same ops.
        self.ops_ref: Optional[str] = ops if isinstance(ops, str) else None
        if isinstance(ops, str):
            ops = load_ops(ops)
        if ops is not None:
            return Toolbox.of(ops)
        if not self.workspace.is_dir():
            raise FluxError(f"workspace {self.workspace} is not a directory — pass --workspace DIR")
        return Toolbox.of(coding_ops(self.workspace, secrets=self.redactor.secrets))

    def resurrect_toolbox(self) -> tuple[Toolbox, Path]:
        """The live ops (and their workspace) a resurrect of this store's sessions runs with: the
        client's own when it was given ``ops``, else the toolbox the store was recorded with
        (``toolbox.json``: its ops, bound to its workspace unless it names none), else the client's
        — what ``flux resurrect`` uses. A malformed ``toolbox.json`` is a :class:`FluxError`."""
        if self._own_ops:
            return self.toolbox, self.workspace
        recorded = store_toolbox(self.store_dir)
        if not recorded.declared:
            return self.toolbox, self.workspace
        ws = recorded.workspace or self.workspace
        if not ws.is_dir():
            raise FluxError(f"workspace {ws} (named by {self.store_dir / 'toolbox.json'}) is not a directory — "
                            "fix toolbox.json or pass FLUX_AUTO_RESURRECT=0")
        return Toolbox.of(recorded.ops(ws, secrets=self.redactor.secrets)), ws

    # ---------------------------------------------------------------- sessions
    def session(self, *, context: Optional[dict[str, str | None]] = None) -> Session:
        """Start a new session (a ``session_started`` row in the store)."""
        sid = self.writer.create_session(self.model, context=context if context is not None else self.context)
        return self.session_class(self, sid)

    def open_session(self, session_id: str) -> Session:
        """Continue an existing session (``s_<n>`` or ``last``)."""
        if session_id == "last":
            row = self.writer.conn.execute("SELECT n FROM streams ORDER BY n DESC LIMIT 1").fetchone()
            if row is None:
                raise SessionNotFound(f"{self.store_dir} has no sessions yet — start one without --session/--continue")
            session_id = f"s_{row[0]}"
        if session_number(session_id) is None or not self.writer.session_exists(session_id):
            raise SessionNotFound(f"no session {short(session_id)} in {self.store_dir} — list them with `flux sessions --store {self.store_dir}`")
        return self.session_class(self, session_id)

    def sessions(self) -> list[SessionRow]:
        """The store's sessions, newest activity first (as ``flux sessions`` lists them)."""
        rows = self.writer.conn.execute(
            "SELECT n, model, created_at, updated_at, last_seq, msg_count, account, agent_id, agent_version, correlation_id "
            "FROM streams ORDER BY updated_at DESC, n DESC").fetchall()
        return [SessionRow(*r) for r in rows]

    async def run(self, prompt: str, *, session: Optional[Session] = None) -> TurnOutput:
        """One turn on ``session`` (a new one if omitted)."""
        return await (session or self.session()).send(prompt)

    def run_sync(self, prompt: str, *, session: Optional[Session] = None) -> TurnOutput:
        return (session or self.session()).send_sync(prompt)

    # ---------------------------------------------------------------- internals
    def turn_config(self, sid: str, on_event: Optional[Callable[[dict], None]]) -> TurnConfig:
        """Everything a turn on session ``sid`` runs with: this client's store, model, ops, approver and limits."""
        return TurnConfig(
            writer=self.writer, session=sid, model_name=self.model, request_model=self.request_model,
            provider=self.provider, provider_name=self.provider_name, toolbox=self.toolbox, approver=self.approver,
            redactor=self.redactor, cap=self.cap, cassette=self.cassette, instructions=self.instructions,
            max_iter=self.max_iter, max_tokens=self.max_tokens, temperature=self.temperature, prices=self.prices,
            retry=self.retry, sleep=self._sleep, timer=self._timer, on_event=on_event or self.on_event,
            concurrent_ops=self.concurrent_ops,
        )

    def close(self) -> None:
        self.writer.close()
        if self._ephemeral is not None:
            shutil.rmtree(self._ephemeral, ignore_errors=True)
            self._ephemeral = None

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _approver(approver: Optional[Approver], policy: Any, auto_approve: bool) -> Approver:
    """The one approval source the caller chose (none: deny every effectful call)."""
    if sum(x is not None and x is not False for x in (approver, policy, auto_approve or None)) > 1:
        raise FluxError("pass only one of approver=, policy= and auto_approve=True (or --yes / --policy)")
    if approver is not None:
        return approver
    if policy is not None:
        return load_policy(policy)
    return AutoApprove() if auto_approve else DenyAll()
