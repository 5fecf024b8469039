"""The OpenAI-compatible backend against the test server's /v1 routes."""

from __future__ import annotations

import pytest
from llm_test_support import DECISION_SCHEMA
from test_llm_ollama_backend import closed_port_url, request

from governed_broker.llm import LLMError, LLMTransportError, RetryPolicy
from governed_broker.llm.openai_backend import OpenAICompatibleBackend

FAST = RetryPolicy(timeout_s=5.0, retries=2, backoff_s=0.01, backoff_max_s=0.02)


def test_chat_sends_a_json_schema_response_format(fake_server):
    backend = OpenAICompatibleBackend("qwen2.5-coder:0.5b", [fake_server.host + "/v1"],
                                      policy=FAST)
    reply = backend.chat(request(seed=6))
    sent = fake_server.requests[-1]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "reply", "schema": DECISION_SCHEMA}}
    assert (sent["seed"], sent["temperature"], sent["max_tokens"]) == (6, 0.3, 50)
    assert reply.parsed["decision"] == "elevate_house" and reply.backend == "openai"
    assert reply.prompt_tokens > 0 and reply.extra["finish_reason"] == "stop"


def test_unreachable_server_fails_fast():
    with pytest.raises(LLMError, match="cannot reach the OpenAI-compatible server.*llm.hosts"):
        OpenAICompatibleBackend("m", [closed_port_url() + "/v1"], policy=FAST)


def test_unknown_model_lists_served_models(fake_server):
    with pytest.raises(LLMError, match=r"does not serve model 'llama3'.*qwen2.5-coder:0.5b"):
        OpenAICompatibleBackend("llama3", [fake_server.host + "/v1"], policy=FAST)


def test_overload_is_retried_and_bounded(fake_server):
    backend = OpenAICompatibleBackend("qwen2.5-coder:0.5b", [fake_server.host + "/v1"],
                                      policy=FAST)
    fake_server.fail_next(503)
    assert backend.chat(request()).parsed is not None
    fake_server.fail_next(503, 503, 503)
    with pytest.raises(LLMTransportError, match="giving up after 3 attempt"):
        backend.chat(request())


def test_missing_api_key_variable_is_an_error(fake_server, monkeypatch):
    monkeypatch.delenv("GB_TEST_KEY", raising=False)
    with pytest.raises(LLMError, match="GB_TEST_KEY.*not set"):
        OpenAICompatibleBackend("qwen2.5-coder:0.5b", [fake_server.host + "/v1"],
                                api_key_env="GB_TEST_KEY")
