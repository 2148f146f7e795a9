"""Tool-call style: native function calling (``json``) or calls written as XML in text (``xml``).

Hosts such as Kilo Code and Roo Code call this setting *Tool Call Style*: ``xml`` describes the
tools in the system prompt and the model writes calls as XML tags in its reply; ``json`` uses
the API's native function calling (Gemini ``functionDeclarations``, OpenAI ``tools``); unset
("let it decide") is resolved by a rule, applied in this order:

1. a provider that is named and cannot do native calls -> ``xml`` (even if ``json`` was asked
   for: the request would fail);
2. an explicit choice (``json`` or ``xml``) wins;
3. a model on the native-by-default list -> ``json``;
4. otherwise ``xml`` (the conservative default).

Nothing named at all (no provider, no model, no choice) falls through to ``xml``. The lists are
a :class:`StylePolicy`; :data:`KILO_POLICY` holds the seed's lists verbatim and
:data:`DEFAULT_POLICY` is what this package uses: the same providers plus its own Gemini
endpoints (``gemini`` for the Developer API and google-genai, ``gemini-cli`` for Code Assist),
and Gemini models on the native list, because the bridge's Gemini loops are built and tested
for native calls (the seed keeps Gemini on ``xml`` only while its own native path is
experimental). Model entries are exact names or ``fnmatch`` patterns (``gemini-*``); a
``models/`` prefix on the model name is ignored.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Literal

ToolStyle = Literal["json", "xml"]
TOOL_STYLES: tuple[ToolStyle, ...] = ("json", "xml")
STYLE_CHOICES = ("json", "xml", "auto")
"""What a user may say: ``auto`` (or ``None``) means "decide for me"."""

SEED_NATIVE_PROVIDERS = frozenset(
    {"openrouter", "kilocode", "openai", "lmstudio", "chutes", "deepinfra", "xai", "zai", "gemini-cli"}
)
SEED_NATIVE_MODELS = frozenset({"anthropic/claude-haiku-4.5"})


def normalize_choice(choice: str | None) -> ToolStyle | None:
    """``"json"``/``"xml"`` as given, ``"auto"``/``None``/``""`` as ``None``; anything else is an error."""
    if choice is None or choice == "" or choice == "auto":
        return None
    if choice in TOOL_STYLES:
        return choice  # type: ignore[return-value]
    raise ValueError(f"tool style must be one of {', '.join(STYLE_CHOICES)}, not {choice!r}")


@dataclass(frozen=True)
class StylePolicy:
    """Which providers can make native calls, and which models use them unless told otherwise."""

    native_providers: frozenset[str] = field(default_factory=frozenset)
    native_models: frozenset[str] = field(default_factory=frozenset)

    def with_native(self, *, providers: Iterable[str] = (), models: Iterable[str] = ()) -> StylePolicy:
        """A copy with more providers and/or models added to the native lists."""
        return replace(
            self,
            native_providers=self.native_providers | frozenset(providers),
            native_models=self.native_models | frozenset(models),
        )

    def model_defaults_to_native(self, model: str | None) -> bool:
        if not model:
            return False
        name = model.removeprefix("models/")
        return any(name == entry or fnmatchcase(name, entry) for entry in self.native_models)

    def resolve(self, choice: str | None = None, *, provider: str | None = None, model: str | None = None) -> ToolStyle:
        """The style to use; see the module docstring for the order of the rules."""
        choice = normalize_choice(choice)
        if provider and provider not in self.native_providers:
            return "xml"
        if choice is not None:
            return choice
        if self.model_defaults_to_native(model):
            return "json"
        return "xml"


KILO_POLICY = StylePolicy(SEED_NATIVE_PROVIDERS, SEED_NATIVE_MODELS)
"""The seed's lists exactly (Kilo Code's ``getActiveToolUseStyle``)."""

DEFAULT_POLICY = KILO_POLICY.with_native(providers=("gemini",), models=("gemini-*",))
"""This package's default: the seed's lists plus its own Gemini endpoints and Gemini models."""


def resolve_tool_style(
    choice: str | None = None,
    *,
    provider: str | None = None,
    model: str | None = None,
    policy: StylePolicy | None = None,
) -> ToolStyle:
    """Decide between ``json`` and ``xml`` (``policy`` defaults to :data:`DEFAULT_POLICY`)."""
    return (policy or DEFAULT_POLICY).resolve(choice, provider=provider, model=model)
