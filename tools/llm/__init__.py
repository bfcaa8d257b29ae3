"""LLM providers: one small protocol, one module per SDK, chosen by name from a plain dict.

A provider sends one conversation (system text, cacheable context blocks, the ask, and any earlier tool calls with
the feedback on each) with one tool the model is forced to call, and returns the call, the usage and the raw
response. The SDKs (anthropic, openai) are imported inside the provider modules only.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from typing import Any, Protocol

from .. import plugins
from ..errors import ToolsError


class LLMError(ToolsError):
    """The endpoint could not be used: no key, refused request, unreachable after the SDK's retries."""


class LLMUnavailable(LLMError):
    """Overloaded, rate-limited, unreachable or too slow after the SDK's retries (HTTP 408, 409, 429, 5xx, a
    connection error, no whole answer within the deadline): asking again later may work, and the loop waits."""


RETRYABLE = (408, 409, 429)  # and every 5xx (529: overloaded)


def retryable(status: int) -> bool:
    return status in RETRYABLE or status >= 500


def deadline(timeout_s: float, max_retries: int) -> float:
    """Seconds one call may take in all: each attempt's ``timeout_s``, and 10 s of the SDK's backoff between two."""
    return timeout_s * (max_retries + 1) + 10.0 * max_retries


def within(seconds: float, fn, what: str):
    """``fn()`` given ``seconds`` in all: an endpoint trickling its answer a byte at a time keeps each read under
    the SDK's timeout, which bounds reads, not requests. Past it, ``what`` is unavailable (the call is left to
    finish in its own thread; its answer is dropped)."""
    import threading

    out: dict = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            out["error"] = e

    worker = threading.Thread(target=run, daemon=True, name="llm-request")
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise LLMUnavailable(f"{what}: no whole answer within {seconds:g} s (timeout_s per attempt, its retries "
                             "included)")
    if "error" in out:
        raise out["error"]
    return out["value"]


@dataclass
class Tool:
    name: str
    description: str
    schema: dict                 # JSON schema of the tool's input
    strict: bool = True          # ask the endpoint to enforce the schema (Anthropic strict tool use)


@dataclass
class ToolCall:
    id: str
    name: str
    input: dict | None           # None when the arguments were not a JSON object
    raw_arguments: str = ""      # the arguments as text (OpenAI-style endpoints send a string)


@dataclass
class Round:
    """An earlier answer and what we said back about it (a validation error, a duplicate)."""
    call: ToolCall | None
    text: str
    feedback: str


@dataclass
class Conversation:
    system: str
    cached: list[str]            # context blocks, stable first; each gets a cache breakpoint where supported
    ask: str
    rounds: list[Round] = field(default_factory=list)

    def chars(self) -> int:
        return (len(self.system) + sum(map(len, self.cached)) + len(self.ask)
                + sum(len(r.text) + len(r.feedback) + len(r.call.raw_arguments if r.call else "") for r in self.rounds))


@dataclass
class Usage:
    input_tokens: int = 0        # uncached input
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total_input(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens,
                     self.cache_read_tokens + other.cache_read_tokens,
                     self.cache_write_tokens + other.cache_write_tokens)


@dataclass
class Reply:
    call: ToolCall | None
    text: str
    usage: Usage
    stop_reason: str
    response: dict[str, Any]     # the raw response body, saved with the experiment


class Provider(Protocol):
    name: str
    model: str

    def call(self, conversation: Conversation, tool: Tool, max_tokens: int) -> Reply:
        """One request forcing ``tool``; the SDK retries rate limits and server errors itself."""

    def count_tokens(self, conversation: Conversation, tool: Tool) -> int | None:
        """Input tokens of the request, from the endpoint, or None when it cannot count."""


DEFAULT_MODELS = {"anthropic": "claude-opus-4-8"}  # an OpenAI-compatible endpoint: name its model

PROVIDERS = {
    "anthropic": "tools.llm.anthropic_provider:AnthropicProvider",
    "openai": "tools.llm.openai_provider:OpenAIProvider",
}


def get(name: str, **opts: Any) -> Provider:
    return plugins.load(PROVIDERS, name, "LLM provider", opts, LLMError)


def from_options(name: str, model: str | None = None, base_url: str | None = None,
                 api_key_env: str | None = None) -> Provider:
    """A provider from command-line options: ``model`` defaults to the provider's (``DEFAULT_MODELS``)."""
    model = model or DEFAULT_MODELS.get(name)
    if not model:
        raise LLMError(f"provider {name!r}: give a model (no default for this provider)")
    opts: dict[str, Any] = {"model": model, "base_url": base_url}
    if api_key_env:
        opts["api_key_env"] = api_key_env
    return get(name, **opts)


def api_key(env_var: str) -> str:
    """The key from the environment; it is passed to the SDK and never written anywhere."""
    key = os.environ.get(env_var, "")
    if not key:
        raise LLMError(f"set {env_var} in the environment (the key is read from there and never saved)")
    return key


def scrubbed(text: str, key: str) -> str:
    """``text`` (an endpoint's error message, which a gateway may echo the request's headers into) without the key
    itself, whatever its shape, and without anything else shaped like a secret."""
    from ..redact import MARK, redact

    return redact(text.replace(key, MARK) if key else text)


def require(module: str, extra: str = "llm"):
    """Import an optional SDK with a clear message when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise LLMError(f"the {module!r} package is not installed: pip install 'autoresearch-wiki[{extra}]'") from None
