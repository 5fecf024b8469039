"""The ollama backend against the Ollama-API test server (with a test completion function)."""

from __future__ import annotations

import asyncio
import dataclasses
import socket

import pytest
from llm_test_support import DECISION_SCHEMA, fake_completion
from ollama_test_server import OllamaTestServer

from governed_broker.config.llm import LLMConfig
from governed_broker.llm import (
    LLMError,
    LLMRequest,
    LLMTimeoutError,
    RetryPolicy,
    backend_from_config,
)
from governed_broker.llm.ollama_backend import OllamaBackend

FAST = RetryPolicy(timeout_s=5.0, retries=2, backoff_s=0.01, backoff_max_s=0.02)


def request(seed=5, content="household 17: should we insure?"):
    return LLMRequest.of(
        [{"role": "system", "content": "You are a household."},
         {"role": "user", "content": content}],
        json_schema=DECISION_SCHEMA, seed=seed, temperature=0.3, max_tokens=50, num_ctx=2048,
    )


def closed_port_url():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_chat_sends_schema_and_options_and_maps_the_reply(fake_server):
    backend = OllamaBackend("qwen2.5-coder:0.5b", [fake_server.host], policy=FAST,
                            keep_alive=-1)
    reply = backend.chat(request())
    sent = fake_server.requests[-1]
    assert sent["path"] == "/api/chat" and sent["format"] == DECISION_SCHEMA
    assert sent["options"] == {"seed": 5, "temperature": 0.3, "num_ctx": 2048, "num_predict": 50}
    assert sent["keep_alive"] == -1 and sent["stream"] is False
    assert reply.parsed == {"decision": "buy_insurance",
                            "reason": "seed 5, prompt 31 chars"}
    assert reply.backend == "ollama" and reply.completion_tokens == 12
    assert reply.model == "qwen2.5-coder:0.5b@sha256:" + "0" * 64  # digest from /api/tags
    assert reply.extra["eval_duration_s"] == pytest.approx(0.003)  # ns converted to seconds
    backend.chat(dataclasses.replace(request(), top_p=0.8, top_k=20))
    assert fake_server.requests[-1]["options"]["top_p"] == 0.8
    assert fake_server.requests[-1]["options"]["top_k"] == 20


def test_unreachable_host_fails_fast_with_what_to_do():
    with pytest.raises(LLMError, match=r"cannot reach Ollama at http://127\.0\.0\.1:\d+.*"
                                       r"ollama serve.*llm.hosts / OLLAMA_HOST"):
        OllamaBackend("gemma3:4b", [closed_port_url()], policy=FAST)


def test_model_not_pulled_on_host_names_the_pull_command(fake_server):
    with pytest.raises(LLMError, match=r"model 'gemma3:4b' is not pulled on Ollama host .*"
                                       r"has: qwen2.5-coder:0.5b.*`ollama pull gemma3:4b`"):
        OllamaBackend("gemma3:4b", [fake_server.host], policy=FAST)


def test_model_removed_after_start_is_not_retried(fake_server):
    backend = OllamaBackend("qwen2.5-coder:0.5b", [fake_server.host], policy=FAST)
    fake_server.model = "other:1b"
    with pytest.raises(LLMError, match="not found.*`ollama pull qwen2.5-coder:0.5b`"):
        backend.chat(request())
    assert sum(r["path"] == "/api/chat" for r in fake_server.requests) == 1


def test_server_overload_is_retried(fake_server):
    backend = OllamaBackend("qwen2.5-coder:0.5b", [fake_server.host], policy=FAST)
    fake_server.fail_next(503, 500)
    assert backend.chat(request()).parsed["decision"] == "buy_insurance"
    assert sum(r["path"] == "/api/chat" for r in fake_server.requests) == 3


def test_timeout_is_a_clear_error(fake_server):
    policy = RetryPolicy(timeout_s=0.2, retries=1, backoff_s=0.01)
    backend = OllamaBackend("qwen2.5-coder:0.5b", [fake_server.host], policy=policy)
    fake_server.delay_s = 0.5
    with pytest.raises(LLMTimeoutError, match="giving up after 2 attempt.*raise llm.timeout_s"):
        backend.chat(request())


def test_host_dying_mid_run_is_a_transport_error_after_retries():
    server = OllamaTestServer(fake_completion).__enter__()
    backend = OllamaBackend("qwen2.5-coder:0.5b", [server.host], policy=FAST)
    server.__exit__(None, None, None)
    with pytest.raises(LLMError, match="giving up after 3 attempt.*cannot connect|ConnectError"):
        backend.chat(request())


def test_load_is_spread_over_hosts_with_bounded_concurrency():
    with OllamaTestServer(fake_completion) as one, OllamaTestServer(fake_completion) as two:
        one.delay_s = two.delay_s = 0.05
        backend = OllamaBackend("qwen2.5-coder:0.5b", [one.host, two.host], concurrency=2,
                                policy=FAST)
        assert backend.max_concurrency == 4

        async def run_all():
            return await asyncio.gather(*(backend.achat(request(seed=s)) for s in range(8)))

        replies = asyncio.run(run_all())
    assert [r.parsed["decision"] for r in replies][:4] == [
        "do_nothing", "buy_insurance", "elevate_house", "relocate"]
    hosts = [r.extra["host"] for r in replies]
    assert hosts.count(one.host) == hosts.count(two.host) == 4


def test_different_model_versions_on_hosts_are_refused():
    with OllamaTestServer(fake_completion) as one, OllamaTestServer(
        fake_completion, digest="sha256:" + "1" * 64
    ) as two:
        with pytest.raises(LLMError, match="differs between hosts"):
            OllamaBackend("qwen2.5-coder:0.5b", [one.host, two.host], policy=FAST)


def test_backend_from_config_builds_a_cached_logged_ollama_backend(fake_server, tmp_path):
    cfg = LLMConfig(backend="ollama", model="qwen2.5-coder:0.5b", hosts=(fake_server.host,),
                    cache={"path": tmp_path / "cache.sqlite"})
    backend = backend_from_config(cfg, call_log_path=tmp_path / "llm_calls.sqlite")
    first, second = backend.chat(request()), backend.chat(request())
    assert not first.cached and second.cached and second.text == first.text
    stats = backend.stats()
    assert stats["cache"]["hits"] == 1 and stats["calls"]["calls"] == 2
    assert backend.kind == "ollama" and backend.max_concurrency == 1
    assert backend.describe()["hosts"] == [fake_server.host]


def test_cancelled_calls_release_their_slot(fake_server):
    backend = OllamaBackend("qwen2.5-coder:0.5b", [fake_server.host], concurrency=1,
                            policy=FAST)
    fake_server.delay_s = 0.3

    async def cancel_then_call():
        task = asyncio.create_task(backend.achat(request(seed=1)))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert backend.pool.in_flight() == {fake_server.host: 0}
        fake_server.delay_s = 0.0
        reply = await asyncio.wait_for(backend.achat(request(seed=2)), timeout=5)
        await backend.aclose()
        return reply

    assert asyncio.run(cancel_then_call()).parsed["decision"] == "elevate_house"
