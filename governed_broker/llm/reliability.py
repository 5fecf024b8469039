"""Timeouts, bounded retries with exponential back-off and jitter, and reply parsing.

Only transport failures (``LLMTransportError``: connection refused, HTTP 5xx/429, timeouts) are
retried; an error about content or configuration (unknown model, bad request) is raised at
once. Back-off jitter is drawn from a generator seeded by the request seed, so even the timing
pattern of retries is reproducible.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
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
logger = logging.getLogger("governed_broker.llm")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry transport failures.

    A call is retried at least ``retries`` times, and beyond that for as long as the server
    has been failing for less than ``patience_s`` seconds, so that a run rides out a server
    restart on a shared cluster instead of dying after a few seconds.

    Attributes:
        timeout_s: Seconds one attempt may take.
        retries: Retries made whatever the patience (0 = none guaranteed).
        backoff_s: Delay before the first retry; doubled per retry (seconds).
        backoff_max_s: Upper bound of a delay (seconds).
        patience_s: Keep retrying while the first failure of this call is less than this many
            seconds ago (0 = only the ``retries``).
        notice_every_s: Seconds between two console lines about the same outage.
    """

    timeout_s: float = 300.0
    retries: int = 3
    backoff_s: float = 1.0
    backoff_max_s: float = 30.0
    patience_s: float = 0.0
    notice_every_s: float = 30.0

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Delay before retry ``attempt`` (1-based): ``U(0.5, 1) * min(max, base * 2^(a-1))``."""
        ceiling = min(self.backoff_max_s, self.backoff_s * (2 ** min(attempt - 1, 60)))
        return ceiling * (0.5 + 0.5 * rng.random())


@dataclass
class RetryReport:
    """What the retries of one call cost, for the call's ``extra`` (call log and audit).

    Attributes:
        retries: Transport retries made.
        wait_s: Seconds from the first failure to the success (0 when none failed).
    """

    retries: int = 0
    wait_s: float = 0.0

    def as_extra(self) -> dict[str, Any]:
        """The fields a backend adds to ``LLMResponse.extra``."""
        return {"transport_retries": self.retries, "transport_wait_s": round(self.wait_s, 3)}


async def call_with_retries(
    attempt_fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    seed: int,
    what: str,
    on_retry: Callable[[int, BaseException], None] | None = None,
    report: RetryReport | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
) -> T:
    """Run ``attempt_fn`` with a per-attempt timeout, retrying transport errors patiently.

    Cancellation (``asyncio.CancelledError``) is never swallowed: it propagates at once, and
    ``asyncio.wait_for`` cancels the attempt in flight. While retrying, a line on the console
    (the ``governed_broker.llm`` logger, warning level) says what fails and how long is left,
    at most once per ``policy.notice_every_s``.

    Args:
        attempt_fn: Makes one attempt (a fresh coroutine per call).
        policy: Timeout, retry and patience settings.
        seed: Seeds the jitter generator (use the request seed).
        what: Names the target in error messages, e.g. ``"Ollama at http://h:11434"``.
        on_retry: Called with (retry number, error) before each back-off sleep.
        report: Filled with the retries made and the seconds waited.
        clock: Monotonic clock (seconds); injectable for tests.
        sleep: Coroutine function that waits (seconds); injectable for tests.

    Raises:
        LLMError: Non-transport errors immediately; past the retries and the patience, an
            error that says how long the server failed, what to check and how to resume.
    """
    rng = random.Random(seed)
    report = report if report is not None else RetryReport()
    first_failure: float | None = None
    noticed_at: float | None = None
    attempt = 0
    while True:
        try:
            result = await asyncio.wait_for(attempt_fn(), timeout=policy.timeout_s)
        except TimeoutError:
            last: LLMTransportError = LLMTimeoutError(
                f"{what}: no reply within {policy.timeout_s:g} s")
        except LLMTransportError as exc:
            last = exc
        else:
            report.wait_s = 0.0 if first_failure is None else clock() - first_failure
            return result
        now = clock()
        first_failure = now if first_failure is None else first_failure
        attempt += 1
        delay = policy.delay(attempt, rng)
        waited = now - first_failure
        if attempt > policy.retries and waited + delay > policy.patience_s:
            raise _gave_up(last, what, attempt, waited, policy)
        if noticed_at is None or now - noticed_at >= policy.notice_every_s:
            noticed_at = now
            logger.warning("%s failing for %.0f s (%s); retrying, patience left %.0f s", what,
                           waited, last, max(0.0, policy.patience_s - waited))
        if on_retry is not None:
            on_retry(attempt, last)
        report.retries = attempt
        await sleep(delay)


def _gave_up(last: LLMTransportError, what: str, attempts: int, waited: float,
             policy: RetryPolicy) -> LLMTransportError:
    hint = (
        "raise llm.timeout_s, lower llm.max_tokens or llm.concurrency, or check the server load"
        if isinstance(last, LLMTimeoutError)
        else "check that the server is running and reachable"
    )
    error = type(last)(
        f"{what}: giving up after {attempts} attempt(s) over {waited:.0f} s (llm.patience_s = "
        f"{policy.patience_s:g}); last error: {last}; {hint}. The years completed so far are "
        "checkpointed: run the same command again to resume")
    error.__cause__ = last
    return error


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
