"""Model names to providers: ``mock``, ``scripted:PATH``, ``null``, ``openai:NAME``, ``ollama:NAME`` and
``anthropic:NAME`` (``provider/model`` is accepted too; the table is in docs/agent.md).

The SDK-backed providers are imported lazily: a missing SDK is a :class:`~flux.errors.FluxError`
naming the extra to install.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from ..errors import FluxError

__all__ = ["ResolvedModel", "resolve_model", "KNOWN_PROVIDERS", "DEFAULT_MODEL", "UnknownModel"]

DEFAULT_MODEL = "mock"
KNOWN_PROVIDERS = ("mock", "scripted", "null", "openai", "ollama", "anthropic")
OLLAMA_BASE_URL = "http://localhost:11434/v1"


class UnknownModel(FluxError):
    """A model name no provider serves."""


@dataclass
class ResolvedModel:
    provider: Any  # implements the Provider protocol
    name: str  # the full name stored on the session (``openai:gpt-4.1-mini``)
    request_model: str  # the id sent in the request (``gpt-4.1-mini``)
    provider_name: str
    secrets: list[str] = field(default_factory=list)  # API keys, for the redactor
    own_retries: bool = False  # the provider retries 429/5xx itself (the loop then does not)


def _split(name: str) -> tuple[str, str]:
    for sep in (":", "/"):
        if sep in name:
            head, rest = name.split(sep, 1)
            if head in KNOWN_PROVIDERS:
                return head, rest
    return name, ""


OFFLINE_PROVIDERS = ("mock", "scripted", "null")  # answer in-process: no request leaves the machine


def model_effect(name: Optional[str]) -> str:
    """What calling the model ``name`` does to the world, as the side-effect gate says it:
    ``offline`` for an in-process provider (mock, scripted:FILE, null), else ``network``."""
    provider, _ = _split((name or DEFAULT_MODEL).strip() or DEFAULT_MODEL)
    return "offline" if provider in OFFLINE_PROVIDERS else "network"


def _sdk_class(provider: str, module: str, cls: str, extra: str) -> Any:
    try:
        mod = importlib.import_module(f"flux.agent.providers.{module}")
    except ModuleNotFoundError as e:
        if e.name in (extra, f"{extra}._client") or (e.name or "").split(".")[0] == extra:
            raise FluxError(f"the {provider} provider needs the `{extra}` package — install it with "
                            f"pip install 'flux-tui[{extra}]'") from None
        if e.name == f"flux.agent.providers.{module}":
            raise FluxError(f"the {provider} provider is not available in this build of flux-tui "
                            f"(no flux.agent.providers.{module})") from None
        raise
    try:
        return getattr(mod, cls)
    except AttributeError:
        raise FluxError(f"flux.agent.providers.{module} has no {cls} — this build of flux-tui is incomplete") from None


# provider -> (module, class, the extra that installs its SDK, an example model, the error with no key and no URL)
_SDK_PROVIDERS = {
    "openai": ("openai_provider", "OpenAIProvider", "openai", "openai:gpt-4.1-mini",
               "missing key: set OPENAI_API_KEY (or point OPENAI_BASE_URL / --base-url at a local "
               "OpenAI-compatible server, which needs no key)"),
    "ollama": ("openai_provider", "OpenAIProvider", "openai", "ollama:qwen2.5:1.5b", ""),  # always has a URL
    "anthropic": ("anthropic_provider", "AnthropicProvider", "anthropic", "anthropic:claude-sonnet-4-5",
                  "missing key: set ANTHROPIC_API_KEY (or point ANTHROPIC_BASE_URL / --base-url at a local "
                  "Anthropic-compatible server)"),
}


def _build(cls: Any, model: str, url: Optional[str], key: Optional[str]) -> Any:
    from .providers.base import ProviderError

    try:
        return cls(model, base_url=url, api_key=key)
    except ProviderError as e:  # e.g. the provider's own missing-key check
        raise FluxError(str(e)) from None


def resolve_model(name: Optional[str], *, base_url: Optional[str] = None, api_key: Optional[str] = None,
                  env: Optional[Mapping[str, str]] = None) -> ResolvedModel:
    """Build the provider for a model name (the names are in docs/agent.md). Errors are one-line FluxErrors."""
    env = os.environ if env is None else env
    name = (name or DEFAULT_MODEL).strip()
    if not name:
        name = DEFAULT_MODEL
    provider, model = _split(name)
    known = ", ".join(f"{p}:MODEL" if p in _SDK_PROVIDERS else
                      ("scripted:PATH" if p == "scripted" else p) for p in KNOWN_PROVIDERS)

    if provider == "mock":
        from .providers.mock import MockProvider

        return ResolvedModel(MockProvider(model=name), name, name, "mock")
    if provider == "null":
        from .providers.null import NullProvider

        return ResolvedModel(NullProvider(model=name), name, name, "null")
    if provider == "scripted":
        if not model:
            raise UnknownModel("the scripted provider needs a script file: -m scripted:PATH (a JSON or JSONL file of model turns)")
        from .providers.scripted import ScriptedProvider

        return ResolvedModel(ScriptedProvider(model, model="scripted"), f"scripted:{model}", "scripted", "scripted")
    if provider in _SDK_PROVIDERS:
        module, cls_name, extra, example, missing_key = _SDK_PROVIDERS[provider]
        if not model:
            raise UnknownModel(f"name the model: -m {provider}:MODEL (e.g. {example})")
        cls = _sdk_class(provider, module, cls_name, extra)
        prefix = provider.upper()
        url = base_url or env.get(f"{prefix}_BASE_URL") or (OLLAMA_BASE_URL if provider == "ollama" else None)
        key = api_key or env.get(f"{prefix}_API_KEY") or None
        if key is None and url is None:
            raise FluxError(missing_key)
        return ResolvedModel(_build(cls, model, url, key), name, model, provider, [key] if key else [], own_retries=True)
    hint = ""
    if name.startswith(("gpt", "o1", "o3", "o4")):
        hint = f" — did you mean openai:{name}?"
    elif name.startswith("claude"):
        hint = f" — did you mean anthropic:{name}?"
    raise UnknownModel(f"unknown model {name!r}: name it provider:model with a known provider ({known}){hint}")
