"""Layers around a backend: the response cache and the call log.

``backend_from_config`` stacks them as ``LoggedBackend(CachedBackend(backend))`` so that every
call, whether answered from the cache or by the model, is logged with its timing and tokens.
Wrappers present the inner backend's identity and capabilities unchanged.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from governed_broker import progress
from governed_broker.llm.base import LLMBackend, LLMRequest, LLMResponse
from governed_broker.llm.cache import ResponseCache, cache_key
from governed_broker.llm.call_log import CallLog


class BackendWrapper(LLMBackend):
    """A backend that delegates to ``inner``; identity and capabilities are the inner one's."""

    def __init__(self, inner: LLMBackend) -> None:
        self.inner = inner

    @property  # type: ignore[override]
    def kind(self) -> str:
        """The wrapped backend's kind."""
        return self.inner.kind

    @property  # type: ignore[override]
    def model_id(self) -> str:
        """The wrapped backend's model id."""
        return self.inner.model_id

    @property  # type: ignore[override]
    def supports_schema(self) -> bool:
        """Whether the wrapped backend takes a JSON schema."""
        return self.inner.supports_schema

    @property  # type: ignore[override]
    def max_concurrency(self) -> int:
        """The wrapped backend's concurrency."""
        return self.inner.max_concurrency

    async def achat(self, request: LLMRequest) -> LLMResponse:
        """The wrapped backend's reply."""
        return await self.inner.achat(request)

    async def aclose(self) -> None:
        """Close the wrapped backend."""
        await self.inner.aclose()

    def flush(self) -> None:
        """Flush the wrapped backend."""
        self.inner.flush()

    def stats(self) -> dict[str, Any]:
        """The wrapped backend's statistics."""
        return self.inner.stats()

    def reply_settings(self) -> dict[str, Any]:
        """The wrapped backend's reply settings."""
        return self.inner.reply_settings()

    def describe(self) -> dict[str, Any]:
        """The wrapped backend's description."""
        return self.inner.describe()


class CachedBackend(BackendWrapper):
    """Answers repeated requests from a :class:`ResponseCache`; stores fresh replies.

    The cache key (see :func:`cache_key`) is added to each reply's ``extra["cache_key"]``.
    """

    def __init__(self, inner: LLMBackend, cache: ResponseCache) -> None:
        super().__init__(inner)
        self.cache = cache

    def key_for(self, request: LLMRequest) -> str:
        """The cache key of ``request`` for this backend and model."""
        return cache_key(self.inner.kind, self.inner.model_id, request,
                         self.inner.reply_settings())

    async def achat(self, request: LLMRequest) -> LLMResponse:
        """The cached reply when there is one, else the backend's (then stored)."""
        key = self.key_for(request)
        hit = self.cache.get(key)
        if hit is not None:
            return _with_extra(hit, cache_key=key)
        response = await self.inner.achat(request)
        self.cache.put(key, response)
        return _with_extra(response, cache_key=key)

    async def aclose(self) -> None:
        """Close the cache and the wrapped backend."""
        self.cache.close()
        await self.inner.aclose()

    def flush(self) -> None:
        """Write the cache's pending rows, then flush the wrapped backend."""
        self.cache.flush()
        self.inner.flush()

    def stats(self) -> dict[str, Any]:
        """The wrapped backend's statistics with the cache's."""
        return {**self.inner.stats(), "cache": self.cache.stats()}


class LoggedBackend(BackendWrapper):
    """Records every call (successful or failed, cached or not) in a :class:`CallLog`.

    It also reports each finished call to the open progress line (``governed_broker.progress``).
    """

    def __init__(self, inner: LLMBackend, log: CallLog) -> None:
        super().__init__(inner)
        self.log = log

    async def achat(self, request: LLMRequest) -> LLMResponse:
        """The wrapped backend's reply, logged (a failed call too)."""
        started = datetime.now(UTC)
        start = time.perf_counter()
        try:
            response = await self.inner.achat(request)
        except Exception as exc:  # logged, then re-raised unchanged
            self.log.record(
                request, started, time.perf_counter() - start, self.kind, self.model_id,
                error=exc,
            )
            raise
        seconds = time.perf_counter() - start
        self.log.record(
            request, started, seconds, self.kind, self.model_id,
            response=response, cache_key=response.extra.get("cache_key"),
        )
        progress.llm_call(request.tag, seconds, response.cached)
        return response

    async def aclose(self) -> None:
        """Close the call log and the wrapped backend."""
        self.log.close()
        await self.inner.aclose()

    def flush(self) -> None:
        """Write the log's pending rows, then flush the wrapped backend."""
        self.log.flush()
        self.inner.flush()

    def stats(self) -> dict[str, Any]:
        """The wrapped backend's statistics with the log's."""
        return {**self.inner.stats(), "calls": self.log.summary()}


def _with_extra(response: LLMResponse, **extra: Any) -> LLMResponse:
    return replace(response, extra={**dict(response.extra), **extra})
