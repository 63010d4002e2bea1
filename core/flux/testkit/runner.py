"""The offline clients a check re-drives scenarios with, and ``-k`` matching of scenario names.

:func:`offline_client` re-drives a scenario as ``flux record`` recorded it (its request settings and
ops; a provider that refuses every call, since the strict cassette answers them); :class:`ClientCache`
shares one between scenarios recorded the same way. The verdict is :mod:`flux.testkit.verdict`.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional

from ..agent.client import DEFAULT_INSTRUCTIONS, Client
from ..agent.model_cassette import load_records
from ..agent.providers.base import ModelRequest, ProviderError
from ..errors import FluxError
from .scenario import MODEL_FILE, throwaway, work_root

__all__ = ["OfflineProvider", "ClientCache", "offline_client", "live_client", "keyword_match"]


class OfflineProvider:
    """A provider that refuses every call — the offline check client's; the strict cassette
    answers every model call before it could be asked."""

    def __init__(self, name: str, model: str):
        self.name = name
        self.model = model

    async def stream(self, request: ModelRequest):
        raise ProviderError("offline: flux test never calls a live model")
        yield  # pragma: no cover


_TOKEN = re.compile(r"\s*(\(|\)|[^\s()]+)")


def keyword_match(expr: str, name: str) -> bool:
    """pytest's ``-k``: words (substring, case-insensitive) with ``and``/``or``/``not``/parentheses."""
    tokens = [t for t in _TOKEN.findall(expr) if t]
    pos = 0

    def peek() -> Optional[str]:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def atom() -> bool:
        t = peek()
        if t is None:
            raise FluxError(f"-k {expr!r}: the expression ends too early")
        if t == "not":
            take()
            return not atom()
        if t == "(":
            take()
            v = either()
            if peek() != ")":
                raise FluxError(f"-k {expr!r}: a parenthesis is not closed")
            take()
            return v
        if t in (")", "and", "or"):
            raise FluxError(f"-k {expr!r}: unexpected {t!r}")
        return take().lower() in name.lower()

    def joined(word: str, operand: Callable[[], bool]) -> bool:
        """Operands joined by ``word`` (``and`` binds tighter than ``or``); every operand is parsed."""
        v = operand()
        while peek() == word:
            take()
            rhs = operand()
            v = (v and rhs) if word == "and" else (v or rhs)
        return v

    def both() -> bool:
        return joined("and", atom)

    def either() -> bool:
        return joined("or", both)

    result = either()
    if peek() is not None:
        raise FluxError(f"-k {expr!r}: unexpected {peek()!r}")
    return result


def _client_settings(scenario: Any) -> tuple[dict[str, Any], Optional[str]]:
    """The recorded request settings (system prompt, max tokens, temperature) and request model
    id, read from model.jsonl's first record; the client defaults when there is none."""
    records = load_records(Path(scenario.path) / MODEL_FILE)
    if records and isinstance(records[0].request, dict):
        req = records[0].request
        model = req.get("model")
        return ({"instructions": req.get("system"), "max_tokens": req.get("max_tokens") or 4096,
                 "temperature": req.get("temperature")}, model if isinstance(model, str) else None)
    return {"instructions": DEFAULT_INSTRUCTIONS}, None


class ClientCache:
    """One offline client per distinct recorded configuration, shared by the scenarios of a run
    (``flux test`` over many scenarios recorded the same way builds one client, not one each).
    Its own store is a throwaway directory: check writes into each scenario's work copy."""

    def __init__(self, ops: Optional[str] = None) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="flux-test-clients-", dir=work_root()))
        self.clients: dict[str, Any] = {}
        self.ops = ops  # every scenario's ops (``flux test --ops``), else each scenario's own

    def __call__(self, scenario: Any) -> Any:
        settings, request_model = _client_settings(scenario)
        ops = self.ops or scenario.manifest.ops
        key = json.dumps([scenario.manifest.model, request_model, settings, ops], sort_keys=True, default=str)
        c = self.clients.get(key)
        if c is None:
            c = offline_client(scenario, store=self.dir / str(len(self.clients)), settings=(settings, request_model),
                               ops=self.ops)
            c.shared = True
            self.clients[key] = c
        return c

    def close(self) -> None:
        for c in self.clients.values():
            c.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def offline_client(scenario: Any, *, store: Any = None, settings: Any = None, ops: Optional[str] = None) -> Any:
    """A client that re-drives ``scenario`` as it was recorded: the recorded request settings, the
    ops it was recorded with (``ops = "module:attr"`` in scenario.toml, or ``ops`` to override;
    the built-in coding ops when it names none), no network. Ops that cannot be imported are a
    one-line :class:`FluxError`."""
    m = scenario.manifest
    provider = m.model.split(":", 1)[0] if ":" in m.model else m.model
    kw, request_model = settings if settings is not None else _client_settings(scenario)
    store_dir = store if store is not None else scenario.work
    client = Client(OfflineProvider(provider, m.model), model=m.model, workspace=scenario.work, store=store_dir,
                    env_secrets=True, ops=ops or m.ops, **kw)
    if isinstance(request_model, str):
        client.request_model = request_model
    throwaway(client.writer)  # its store is the scenario's throwaway work copy
    client.offline = True  # check never re-records through it, even under FLUX_GOLDEN=update
    return client


def live_client(scenario: Any, *, model: Optional[str] = None, base_url: Optional[str] = None,
                ops: Optional[str] = None) -> Any:
    """Like :func:`offline_client`, but with a live provider behind the cassette — the scenario's
    recorded model (or ``model``) at ``base_url``, its key from the environment — for a check whose
    model misses go live (``flux test --live-misses``: they spend). The recorded request settings
    and model id and the recorded ops (or ``ops``) are kept, so every call the recording answers is
    still served from it."""
    m = scenario.manifest
    kw, request_model = _client_settings(scenario)
    client = Client(model or m.model, workspace=scenario.work, store=scenario.work, base_url=base_url,
                    env_secrets=True, ops=ops or m.ops, **kw)
    if isinstance(request_model, str) and model is None:
        client.request_model = request_model
    throwaway(client.writer)
    client.offline = True  # a check through it never re-records the scenario
    return client

