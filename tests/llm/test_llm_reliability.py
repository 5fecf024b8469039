"""Retries with back-off on transport errors only; timeouts; cancellation."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_broker.llm import LLMError, LLMTimeoutError, LLMTransportError, RetryPolicy
from governed_broker.llm.reliability import call_with_retries, parse_json_reply

FAST = RetryPolicy(timeout_s=1.0, retries=3, backoff_s=0.001, backoff_max_s=0.002)


def flaky(failures, error=None):
    error = error or LLMTransportError("connection refused")
    calls = []

    async def attempt():
        calls.append(1)
        if len(calls) <= failures:
            raise error
        return "ok"

    return attempt, calls


def test_transport_errors_are_retried_until_success():
    attempt, calls = flaky(2)
    retries = []
    result = asyncio.run(call_with_retries(attempt, FAST, seed=1, what="srv",
                                           on_retry=lambda n, e: retries.append(n)))
    assert result == "ok" and len(calls) == 3 and retries == [1, 2]


def test_retries_are_bounded_and_the_message_says_what_to_check():
    attempt, calls = flaky(10)
    with pytest.raises(LLMTransportError, match="giving up after 4 attempt.*server is running"):
        asyncio.run(call_with_retries(attempt, FAST, seed=1, what="srv"))
    assert len(calls) == 4


def test_content_errors_are_not_retried():
    attempt, calls = flaky(1, LLMError("model 'x' not found"))
    with pytest.raises(LLMError, match="not found"):
        asyncio.run(call_with_retries(attempt, FAST, seed=1, what="srv"))
    assert len(calls) == 1


def test_timeout_is_a_clear_error():
    async def slow():
        await asyncio.sleep(5)

    policy = RetryPolicy(timeout_s=0.05, retries=1, backoff_s=0.001)
    with pytest.raises(LLMTimeoutError, match=r"no reply within 0.05 s.*raise llm.timeout_s"):
        asyncio.run(call_with_retries(slow, policy, seed=1, what="srv"))


def test_cancellation_propagates_and_stops_the_attempt():
    cancelled = []

    async def slow():
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main():
        task = asyncio.create_task(call_with_retries(slow, FAST, seed=1, what="srv"))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cancelled == [True]


@given(attempt=st.integers(1, 20), base=st.floats(0, 10), cap=st.floats(0, 60),
       seed=st.integers(0, 2**32))
def test_backoff_is_exponential_jittered_and_capped(attempt, base, cap, seed):
    policy = RetryPolicy(backoff_s=base, backoff_max_s=cap)
    delay = policy.delay(attempt, random.Random(seed))
    ceiling = min(cap, base * 2 ** (attempt - 1))
    assert 0.5 * ceiling - 1e-12 <= delay <= ceiling + 1e-12
    assert delay == policy.delay(attempt, random.Random(seed))  # reproducible jitter


def test_parse_json_reply_reports_position():
    assert parse_json_reply('{"a": 1}') == ({"a": 1}, None)
    parsed, error = parse_json_reply('```json\n{"a": 1}```')
    assert parsed is None and "not valid JSON" in error
