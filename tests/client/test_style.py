"""The "decide for me" rule, against the seed's table of cases (Kilo Code's getActiveToolUseStyle).

The seed's rule, in order: no settings or an unsupported provider -> xml; an explicit user
choice wins; a model on the native-by-default list -> json; otherwise xml. KILO_POLICY holds
the seed's lists verbatim; DEFAULT_POLICY adds this package's Gemini endpoints and models.
"""

from __future__ import annotations

import pytest

from coretools.client import Bridge
from coretools.client.loop import choose_tool_style
from coretools.client.style import (
    DEFAULT_POLICY,
    KILO_POLICY,
    SEED_NATIVE_MODELS,
    SEED_NATIVE_PROVIDERS,
    StylePolicy,
    normalize_choice,
    resolve_tool_style,
)

# (case, provider, user choice, model, expected) -- the seed's cases, "Let Kilo decide" = None.
SEED_TABLE = [
    ("no settings at all", None, None, None, "xml"),
    ("unsupported provider", "anthropic", None, "claude-sonnet-4", "xml"),
    ("unsupported provider overrides an explicit json", "anthropic", "json", "anthropic/claude-haiku-4.5", "xml"),
    ("unsupported provider, explicit xml", "vertex", "xml", None, "xml"),
    ("gemini-cli, Let Kilo decide, Gemini model (the seed's walk-through)", "gemini-cli", None, "gemini-2.0-flash-exp", "xml"),
    ("gemini-cli, JSON (experimental)", "gemini-cli", "json", "gemini-2.0-flash-exp", "json"),
    ("gemini-cli, XML (traditional)", "gemini-cli", "xml", "gemini-2.0-flash-exp", "xml"),
    ("supported provider, model on the native list", "openrouter", None, "anthropic/claude-haiku-4.5", "json"),
    ("user choice beats the model list", "openrouter", "xml", "anthropic/claude-haiku-4.5", "xml"),
    ("supported provider, other model", "openai", None, "gpt-4o", "xml"),
    ("supported provider, explicit json", "lmstudio", "json", "qwen2.5-coder", "json"),
    ("settings without a provider, explicit json", None, "json", None, "json"),
    ("settings without a provider, model on the list", None, None, "anthropic/claude-haiku-4.5", "json"),
    ("settings without a provider, other model", None, None, "gpt-4o", "xml"),
]


@pytest.mark.parametrize(("case", "provider", "choice", "model", "expected"), SEED_TABLE, ids=[row[0] for row in SEED_TABLE])
def test_seed_table(case: str, provider: str | None, choice: str | None, model: str | None, expected: str) -> None:
    assert KILO_POLICY.resolve(choice, provider=provider, model=model) == expected
    assert resolve_tool_style(choice, provider=provider, model=model, policy=KILO_POLICY) == expected


def test_seed_lists_are_verbatim() -> None:
    assert SEED_NATIVE_PROVIDERS == {"openrouter", "kilocode", "openai", "lmstudio", "chutes", "deepinfra", "xai", "zai", "gemini-cli"}
    assert SEED_NATIVE_MODELS == {"anthropic/claude-haiku-4.5"}


def test_every_supported_provider_honours_an_explicit_choice() -> None:
    for provider in SEED_NATIVE_PROVIDERS:
        assert KILO_POLICY.resolve("json", provider=provider) == "json"
        assert KILO_POLICY.resolve("xml", provider=provider) == "xml"
        assert KILO_POLICY.resolve(None, provider=provider, model="some-model") == "xml"


def test_the_seeds_future_extension_adds_models() -> None:
    """The seed's "future extension": more models defaulting to native calls."""
    extended = KILO_POLICY.with_native(models=("gemini-2.0-flash-exp", "gpt-4o"))
    assert extended.resolve(provider="gemini-cli", model="gemini-2.0-flash-exp") == "json"
    assert extended.resolve(provider="openai", model="gpt-4o") == "json"
    assert extended.resolve("xml", provider="openai", model="gpt-4o") == "xml"
    assert KILO_POLICY.resolve(provider="openai", model="gpt-4o") == "xml", "with_native must not change the original"


def test_default_policy_adds_gemini_endpoints_and_models() -> None:
    assert DEFAULT_POLICY.native_providers >= SEED_NATIVE_PROVIDERS | {"gemini"}
    assert resolve_tool_style(provider="gemini", model="gemini-2.5-flash") == "json"
    assert resolve_tool_style(provider="gemini-cli", model="models/gemini-3-pro-preview") == "json"
    assert resolve_tool_style(provider="openai", model="qwen2.5-coder:7b") == "xml"
    assert resolve_tool_style(provider="ollama", model="gemini-2.5-flash") == "xml", "an unsupported provider still wins"
    assert resolve_tool_style("xml", provider="gemini", model="gemini-2.5-flash") == "xml"


def test_patterns_and_custom_policies() -> None:
    policy = StylePolicy(frozenset({"local"}), frozenset({"qwen*-coder*", "exact-model"}))
    assert policy.resolve(provider="local", model="qwen2.5-coder:7b") == "json"
    assert policy.resolve(provider="local", model="exact-model") == "json"
    assert policy.resolve(provider="local", model="exact-model-2") == "xml"
    assert policy.resolve(provider="openai", model="exact-model") == "xml"


@pytest.mark.parametrize(("given", "expected"), [(None, None), ("", None), ("auto", None), ("json", "json"), ("xml", "xml")])
def test_normalize_choice(given: str | None, expected: str | None) -> None:
    assert normalize_choice(given) == expected


@pytest.mark.parametrize("bad", ["JSON", "yaml", "native"])
def test_unknown_choices_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="tool style must be one of json, xml, auto"):
        resolve_tool_style(bad)
    with pytest.raises(ValueError):
        Bridge([], tool_style=bad)


def test_loop_choice_order_run_argument_then_bridge_then_rule() -> None:
    bridge = Bridge([], tool_style="xml")
    assert choose_tool_style(bridge, None, provider="gemini", model="gemini-2.5-flash") == "xml", "the bridge's choice"
    assert choose_tool_style(bridge, "json", provider="gemini", model="gemini-2.5-flash") == "json", "the run's choice"
    assert choose_tool_style(bridge, "auto", provider="gemini", model="gemini-2.5-flash") == "json", "auto: the rule"
    assert choose_tool_style(Bridge([]), None, provider="openai", model="llama3") == "xml"
    assert choose_tool_style(Bridge([], tool_style="json"), None, provider="nope", model="x") == "xml"
