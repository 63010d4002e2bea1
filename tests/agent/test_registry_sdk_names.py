"""The SDK-backed model names (openai:, ollama:, anthropic:): a name, a URL and a key, or one line saying
what is missing."""

from __future__ import annotations

import pytest

from flux.agent.registry import OLLAMA_BASE_URL, UnknownModel, resolve_model
from flux.errors import FluxError


@pytest.mark.parametrize("provider, example", [("openai", "openai:gpt-4.1-mini"), ("ollama", "ollama:qwen2.5:1.5b"),
                                               ("anthropic", "anthropic:claude-sonnet-4-5")])
def test_a_provider_without_a_model_name_says_how_to_name_one(provider, example):
    with pytest.raises(UnknownModel) as ei:
        resolve_model(f"{provider}:", env={})
    assert str(ei.value) == f"name the model: -m {provider}:MODEL (e.g. {example})"


@pytest.mark.parametrize("provider, server", [("openai", "OpenAI-compatible server, which needs no key"),
                                              ("anthropic", "Anthropic-compatible server")])
def test_no_key_and_no_url_is_one_line_naming_the_variables(provider, server):
    p = provider.upper()
    with pytest.raises(FluxError) as ei:
        resolve_model(f"{provider}:m", env={})
    assert str(ei.value) == (f"missing key: set {p}_API_KEY (or point {p}_BASE_URL / --base-url at a local "
                             f"{server})")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_the_key_and_url_come_from_the_arguments_before_the_environment(provider):
    p = provider.upper()
    env = {f"{p}_API_KEY": "env-key-123", f"{p}_BASE_URL": "http://127.0.0.1:9/env"}
    from_env = resolve_model(f"{provider}:m", env=env)
    assert from_env.provider_name == provider and from_env.secrets == ["env-key-123"]
    given = resolve_model(f"{provider}:m", env=env, api_key="arg-key-456", base_url="http://127.0.0.1:9/arg")
    assert given.secrets == ["arg-key-456"] and given.own_retries
    # a URL alone is enough (a local server needs no key), and then there is no secret to register
    assert resolve_model(f"{provider}:m", env={f"{p}_BASE_URL": "http://127.0.0.1:9"}).secrets == []


def test_ollama_needs_no_key_and_defaults_to_the_local_server():
    r = resolve_model("ollama:qwen2.5:1.5b", env={})
    assert r.provider_name == "ollama" and r.request_model == "qwen2.5:1.5b" and r.secrets == []
    assert r.provider.base_url.startswith(OLLAMA_BASE_URL.rstrip("/"))
    assert resolve_model("ollama:m", env={"OLLAMA_BASE_URL": "http://127.0.0.1:9/v1"}).provider.base_url.startswith(
        "http://127.0.0.1:9")
