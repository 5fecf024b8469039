"""The small LLM interface every backend implements.

A request is a list of chat messages plus an optional JSON schema that the backend must
constrain its output to; a response carries the text, the parsed JSON object (when a schema was
given and the text parsed), token counts and timings. Backends implement ``achat``; ``chat`` is a
synchronous convenience wrapper.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from governed_broker.contracts.text import clean_text

#: Sampling settings a request may set beyond temperature (llama.cpp, Ollama and vLLM name them
#: alike); unset ones are not sent, so the server's default applies.
SAMPLING_OPTIONS = ("top_p", "top_k", "min_p")


@dataclass(frozen=True)
class Sampling:
    """How replies are sampled: temperature and the optional truncation settings.

    Attributes:
        temperature: Sampling temperature (0: greedy).
        top_p: Nucleus threshold, or None for the backend's default.
        top_k: Top-k cut, or None for the backend's default.
        min_p: Min-p cut, or None for the backend's default.
    """

    temperature: float = 0.7
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None

    def request_fields(self) -> dict[str, Any]:
        """Keyword arguments of ``LLMRequest`` for these settings."""
        return {"temperature": self.temperature, "top_p": self.top_p, "top_k": self.top_k,
                "min_p": self.min_p}


class LLMError(RuntimeError):
    """An LLM backend failed in a way the user must act on (message says what to do)."""


class LLMTransportError(LLMError):
    """A transient transport failure (connection refused, timeout); retried with back-off."""


class LLMTimeoutError(LLMTransportError):
    """A call took longer than the configured timeout (retried like other transport errors)."""


@dataclass(frozen=True)
class LLMRequest:
    """One chat request.

    Attributes:
        messages: Chat messages, each ``{"role": "system"|"user"|"assistant", "content": str}``.
        json_schema: JSON schema the reply must satisfy (constrained decoding where supported).
        temperature: Sampling temperature.
        seed: Sampling seed; derived per call from (experiment seed, agent, year, attempt).
        max_tokens: Maximum generated tokens.
        num_ctx: Context window in tokens (backends that accept it).
        tag: Free label for the call log, e.g. ``"decision"``, ``"reflection"``, ``"hyde"``.
        top_p: Nucleus sampling threshold; None leaves the backend's default.
        top_k: Sample from the k most likely tokens only; None leaves the backend's default.
        min_p: Drop tokens below this share of the most likely one's probability; None leaves
            the backend's default.
    """

    messages: tuple[Mapping[str, str], ...]
    json_schema: Mapping[str, Any] | None = None
    temperature: float = 0.7
    seed: int = 0
    max_tokens: int = 256
    num_ctx: int = 4096
    tag: str = ""
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None

    def sampling_options(self) -> dict[str, float | int]:
        """The sampling settings beyond temperature that this request sets (None left out).

        Under the names llama.cpp, Ollama and vLLM share.
        """
        return {name: value for name in SAMPLING_OPTIONS
                if (value := getattr(self, name)) is not None}

    @staticmethod
    def of(messages: Sequence[Mapping[str, str]], **kwargs: Any) -> LLMRequest:
        """Build a request from any sequence of messages (copied into an immutable tuple)."""
        return LLMRequest(messages=tuple(dict(m) for m in messages), **kwargs)


@dataclass(frozen=True)
class LLMResponse:
    """A backend's reply.

    Attributes:
        text: Raw generated text.
        parsed: The JSON object parsed from ``text`` (None when no schema or unparseable).
        prompt_tokens: Tokens in the prompt.
        completion_tokens: Tokens generated.
        latency_s: Wall-clock seconds for the call (0 for cache hits is not assumed: measured).
        backend: Backend kind, e.g. ``"embedded"``, ``"ollama"``, ``"openai"``, ``"scripted"``.
        model: Model identity (name and, where known, sha256 or digest).
        cached: Whether the reply came from the response cache.
        extra: Backend-specific timings or metadata (JSON-serialisable).
    """

    text: str
    parsed: Any = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    backend: str = ""
    model: str = ""
    cached: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    def sanitised(self) -> tuple[LLMResponse, list[str]]:
        """This reply with its text made safe for files, stores and prompts, and what changed.

        The text goes through ``contracts.text.clean_text`` (size cap, lone surrogates,
        control characters). When it changed, the backend's own parse is dropped, so that the
        caller parses exactly the text it records; the notes belong in the audit as repairs.
        """
        text, notes = clean_text(self.text)
        if not notes:
            return self, []
        return replace(self, text=text, parsed=None), notes


class LLMBackend:
    """Base class of LLM backends.

    Subclasses set ``kind``, ``model_id``, ``supports_schema`` and ``max_concurrency`` and
    implement ``achat``. ``chat`` runs ``achat`` to completion in a private event loop.
    """

    kind: str = "abstract"
    model_id: str = ""
    #: Whether the backend enforces ``json_schema`` by constrained decoding.
    supports_schema: bool = False
    #: How many requests are useful in flight at once.
    max_concurrency: int = 1

    async def achat(self, request: LLMRequest) -> LLMResponse:  # pragma: no cover - abstract
        """The model's reply to ``request``."""
        raise NotImplementedError

    def chat(self, request: LLMRequest) -> LLMResponse:
        """Synchronous wrapper around ``achat``."""
        return asyncio.run(self.achat(request))

    async def aclose(self) -> None:
        """Release resources (connections, model memory)."""

    def close(self) -> None:
        """Synchronous ``aclose``."""
        asyncio.run(self.aclose())

    def flush(self) -> None:
        """Write what the backend holds back to write in batches.

        The response cache's and the call log's rows; the broker calls it at the end of each phase
        of a year.
        """

    def stats(self) -> dict[str, Any]:
        """Counters for the run manifest (cache hits/misses, calls); empty for bare backends."""
        return {}

    def reply_settings(self) -> dict[str, Any]:
        """Settings of the backend beyond the request that change its replies.

        For example the embedded model's thread count; part of the response-cache key. Empty:
        none.
        """
        return {}

    def describe(self) -> dict[str, Any]:
        """Identity for manifests: kind, model and capabilities."""
        return {
            "kind": self.kind,
            "model": self.model_id,
            "supports_schema": self.supports_schema,
            "max_concurrency": self.max_concurrency,
        }
