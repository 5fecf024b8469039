"""Timeouts, bounded retries with exponential back-off and jitter, and reply parsing.

Only transport failures (``LLMTransportError``: connection refused, HTTP 5xx/429, timeouts) are
retried; an error about content or configuration (unknown model, bad request) is raised at
once. Back-off jitter is drawn from a generator seeded by the request seed, so even the timing
pattern of retries is reproducible.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from governed_broker.contracts.text import loads_bounded
from governed_broker.llm.base import (
    LLMRequest,
    LLMResponse,
    LLMTimeoutError,
    LLMTransportError,
)

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry transport failures.

    Attributes:
        timeout_s: Seconds one attempt may take.
        retries: Retries after the first attempt (0 = try once).
        backoff_s: Delay before the first retry; doubled per retry (seconds).
        backoff_max_s: Upper bound of a delay (seconds).
    """

    timeout_s: float = 300.0
    retries: int = 3
    backoff_s: float = 1.0
    backoff_max_s: float = 30.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Delay before retry ``attempt`` (1-based): ``U(0.5, 1) * min(max, base * 2^(a-1))``."""
        ceiling = min(self.backoff_max_s, self.backoff_s * (2 ** (attempt - 1)))
        return ceiling * (0.5 + 0.5 * rng.random())


async def call_with_retries(
    attempt_fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    seed: int,
    what: str,
    on_retry: Callable[[int, BaseException], None] | None = None,
) -> T:
    """Run ``attempt_fn`` with a per-attempt timeout, retrying transport errors.

    Cancellation (``asyncio.CancelledError``) is never swallowed: it propagates at once, and
    ``asyncio.wait_for`` cancels the attempt in flight.

    Args:
        attempt_fn: Makes one attempt (a fresh coroutine per call).
        policy: Timeout and retry settings.
        seed: Seeds the jitter generator (use the request seed).
        what: Names the target in error messages, e.g. ``"Ollama at http://h:11434"``.
        on_retry: Called with (retry number, error) before each back-off sleep.

    Raises:
        LLMError: Non-transport errors immediately; after the last retry, an error that says
            how many attempts failed and what to check.
    """
    rng = random.Random(seed)
    last: LLMTransportError | None = None
    for attempt in range(policy.retries + 1):
        if attempt:
            if on_retry is not None and last is not None:
                on_retry(attempt, last)
            await asyncio.sleep(policy.delay(attempt, rng))
        try:
            return await asyncio.wait_for(attempt_fn(), timeout=policy.timeout_s)
        except TimeoutError:
            last = LLMTimeoutError(f"{what}: no reply within {policy.timeout_s:g} s")
        except LLMTransportError as exc:
            last = exc
    assert last is not None
    hint = (
        "raise llm.timeout_s, lower llm.max_tokens or llm.concurrency, or check the server load"
        if isinstance(last, LLMTimeoutError)
        else "check that the server is running and reachable"
    )
    raise type(last)(
        f"{what}: giving up after {policy.retries + 1} attempt(s); last error: {last}; {hint}"
    ) from last


def parse_json_reply(text: str) -> tuple[Any, str | None]:
    """Parse a JSON reply; return ``(object, None)`` or ``(None, reason)`` when it fails.

    Parsing is bounded (``contracts.text.loads_bounded``): a reply too long, too deeply nested
    or holding non-finite numbers is a failure with a reason, never an exception.
    """
    try:
        return loads_bounded(text), None
    except json.JSONDecodeError as exc:
        return None, f"reply is not valid JSON ({exc.msg} at char {exc.pos}): {text[:120]!r}"
    except ValueError as exc:
        return None, f"reply not parsed: {exc}"


def chat_completion_response(
    data: Mapping[str, Any], text: str, request: LLMRequest, *, latency_s: float,
    backend: str, model: str, extra: dict[str, Any],
) -> LLMResponse:
    """The ``LLMResponse`` of an OpenAI-style chat-completion reply (llama.cpp, vLLM, ...).

    Parses ``text`` when the request asked for a schema (a parse failure is recorded in
    ``extra["parse_error"]``, never guessed) and takes token counts from ``data["usage"]``.
    """
    parsed, parse_error = (None, None)
    if request.json_schema is not None:
        parsed, parse_error = parse_json_reply(text)
    if parse_error:
        extra["parse_error"] = parse_error
    usage = data.get("usage") or {}
    return LLMResponse(
        text=text,
        parsed=parsed,
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        latency_s=latency_s,
        backend=backend,
        model=model,
        extra=extra,
    )


def openai_response_format(schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``response_format`` of an OpenAI-style request for a JSON schema (None: free text)."""
    if schema is None:
        return None
    return {"type": "json_schema", "json_schema": {"name": "reply", "schema": dict(schema)}}


def transport_error_class(exc: BaseException) -> type[LLMTransportError] | None:
    """The transport error class for an httpx exception (timeouts apart), else None."""
    try:
        import httpx
    except ImportError:  # httpx comes with the ollama client; without it nothing matches
        return None
    if isinstance(exc, httpx.TimeoutException):
        return LLMTimeoutError
    if isinstance(exc, httpx.TransportError):
        return LLMTransportError
    return None
