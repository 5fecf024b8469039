"""Real-model tests: the embedded model answers, directly, via Ollama's API and via /v1.

Marked ``real_llm``: CI pulls the model first (``governed-broker model pull``). The model is
loaded once per session; every reply must validate against the schema. No test asserts a
particular decision: the grammar guarantees syntax and allowed values, not sense.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import jsonschema
import pytest
from ollama_test_server import OllamaTestServer

from governed_broker.config.llm import LLMConfig
from governed_broker.llm import CachedBackend, LLMRequest, ResponseCache, build_backend
from governed_broker.llm.embedded import (
    EmbeddedBackend,
    _Generation,
    generations_running,
    load_server,
    openai_base_url,
)
from governed_broker.llm.ollama_backend import OllamaBackend
from governed_broker.llm.openai_backend import OpenAICompatibleBackend

pytestmark = pytest.mark.real_llm

SCHEMA = {
    "type": "object",
    "properties": {
        "threat_appraisal": {"enum": ["low", "medium", "high"]},
        "coping_appraisal": {"enum": ["low", "medium", "high"]},
        "decision": {"enum": ["do_nothing", "buy_insurance", "elevate_house", "relocate"]},
        "reason": {"type": "string", "minLength": 5, "maxLength": 60},
    },
    "required": ["threat_appraisal", "coping_appraisal", "decision", "reason"],
    "additionalProperties": False,
}
SYSTEM = (
    "You are a household deciding how to adapt to flood risk (protection motivation theory). "
    "Actions: do_nothing; buy_insurance ($1,200/year); elevate_house ($45,000, owners only); "
    "relocate ($60,000). Reply with JSON: threat_appraisal, coping_appraisal (low|medium|"
    "high), decision, reason (one short sentence)."
)
HOUSEHOLDS = [
    "Owner, income $85,000, savings $40,000, zone AE, flooded 1 year ago (0.6 m).",
    "Renter, income $32,000, savings $2,000, zone X, never flooded.",
    "Owner, income $120,000, savings $90,000, zone VE, flooded twice, insured.",
    "Owner, income $55,000, savings $8,000, zone AE, not flooded in 10 years.",
    "Renter, income $48,000, savings $12,000, zone AE, flooded 2 years ago (0.3 m).",
    "Owner, income $70,000, savings $25,000, zone X, neighbours elevated their houses.",
    "Owner, income $40,000, savings $3,000, zone VE, flooded last year (1.2 m), uninsured.",
    "Renter, income $95,000, savings $60,000, zone AE, worried after a forecast.",
]


def pmt_request(index: int) -> LLMRequest:
    return LLMRequest.of(
        [{"role": "system", "content": SYSTEM},
         {"role": "user", "content": HOUSEHOLDS[index % len(HOUSEHOLDS)]}],
        json_schema=SCHEMA, temperature=0.7, seed=1000 + index, max_tokens=96, num_ctx=1024,
        tag="decision",
    )


def assert_valid(reply) -> None:
    assert reply.parsed is not None, reply.text
    jsonschema.validate(reply.parsed, SCHEMA)
    assert reply.completion_tokens > 0 and reply.prompt_tokens > 0


@pytest.fixture(scope="session")
def embedded() -> EmbeddedBackend:
    """The embedded default model, loaded once for the whole session."""
    backend = build_backend(LLMConfig(num_ctx=1024))
    assert isinstance(backend, EmbeddedBackend)
    load_server(backend.settings)
    return backend


def test_direct_schema_constrained_calls_and_cached_replay(embedded, tmp_path):
    backend = CachedBackend(embedded, ResponseCache(tmp_path / "cache.sqlite"))
    replies = [backend.chat(pmt_request(index)) for index in range(8)]
    for reply in replies:
        assert_valid(reply)
        assert reply.backend == "embedded" and not reply.cached
        assert reply.model.endswith(
            "@sha256:1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32")
        assert reply.extra["finish_reason"] in ("stop", "length")
    again = backend.chat(pmt_request(3))  # answered from the cache, not by the model
    assert again.cached and again.text == replies[3].text
    assert backend.cache.stats()["hits"] == 1 and backend.cache.stats()["misses"] == 8


def test_through_the_ollama_test_server_with_the_official_client(embedded):
    import ollama

    server_engine = load_server(embedded.settings)
    with OllamaTestServer(server_engine.handle_chat_completions) as server:
        backend = OllamaBackend("qwen2.5-coder:0.5b", [server.host], keep_alive=-1)
        for index in range(3):
            reply = backend.chat(pmt_request(index))
            assert_valid(reply)
            assert reply.extra["eval_duration_s"] > 0 and reply.extra["done_reason"] == "stop"
        client = ollama.Client(host=server.host)
        assert client.show("qwen2.5-coder:0.5b").details.family == "qwen2"
        generated = client.generate(
            model="qwen2.5-coder:0.5b", system=SYSTEM, prompt=HOUSEHOLDS[5], format=SCHEMA,
            options={"seed": 7, "temperature": 0.7, "num_predict": 96},
        )
        jsonschema.validate(json.loads(generated.response), SCHEMA)
        assert generated.eval_count > 0 and generated.total_duration > 0


def test_through_the_openai_compatible_route(embedded):
    base = openai_base_url(embedded.settings)
    model = httpx.get(f"{base}/models", timeout=10).json()["data"][0]["id"]
    backend = OpenAICompatibleBackend(model, [base], concurrency=1)

    async def two():
        return [await backend.achat(pmt_request(i)) for i in (6, 7)]

    for reply in asyncio.run(two()):
        assert_valid(reply)
        assert reply.backend == "openai" and reply.extra["timings"]["predicted_n"] > 0


def test_without_prompt_cache_a_reply_does_not_depend_on_the_call_before(embedded):
    """With the prompt cache the second of two identical calls reads (almost) nothing anew.

    So what it reuses was computed in the previous call's batches; without it the whole prompt is
    read every time and the same request gets the same reply whatever came before.
    """
    from dataclasses import replace

    whole = EmbeddedBackend(replace(embedded.settings, prompt_cache=False),
                            model_name="whole", sha256=embedded.sha256)

    def read(backend, index):
        payload = backend._payload(pmt_request(index))
        return backend._run(payload, _Generation())

    read(embedded, 0)
    assert read(embedded, 0)["timings"]["prompt_n"] < 5  # reused
    first = read(whole, 0)
    read(whole, 1)
    again = read(whole, 0)
    assert first["timings"]["prompt_n"] == again["timings"]["prompt_n"] == (
        first["usage"]["prompt_tokens"])
    assert first["choices"][0]["message"]["content"] == again["choices"][0]["message"]["content"]


def test_a_streamed_reply_is_the_unstreamed_reply(embedded):
    """Streaming (what makes a stall timeout and Ctrl-C possible) changes no reply.

    The same request and seed give the same text as llama.cpp's blocking call.
    """
    payload = embedded._payload(pmt_request(3))
    streamed = embedded._run(dict(payload), _Generation())
    payload.pop("stream"), payload.pop("stream_options")
    blocking = load_server(embedded.settings).handle_chat_completions(payload)
    assert streamed["choices"][0]["message"]["content"] == (
        blocking["choices"][0]["message"]["content"])
    assert streamed["usage"]["completion_tokens"] == blocking["usage"]["completion_tokens"]


def test_a_cancelled_generation_stops_within_seconds_and_frees_the_model(embedded):
    """A call cancelled while the model writes ends at the next token.

    Ctrl-C cancels the run's tasks; the call does not finish its reply, and the model takes
    the next call at once.
    """
    import time

    long = LLMRequest.of([{"role": "user", "content": "Write a long essay about floods."}],
                         temperature=0.7, seed=5, max_tokens=2000, num_ctx=1024)

    async def cancel_while_writing():
        task = asyncio.ensure_future(embedded.achat(long))
        while generations_running() == 0:
            await asyncio.sleep(0.05)
        await asyncio.sleep(2.0)  # reading the short prompt, then writing
        cancelled = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        while generations_running():
            await asyncio.sleep(0.05)
        return time.monotonic() - cancelled

    stopped_after = asyncio.run(cancel_while_writing())
    assert stopped_after < 5, f"the generation ran {stopped_after:.1f} s after its cancellation"
    assert_valid(embedded.chat(pmt_request(4)))


ONE_REPLY = """
import json
import os
from governed_broker.config.llm import LLMConfig
from governed_broker.llm import LLMRequest, build_backend
backend = build_backend(LLMConfig(num_ctx=1024, prompt_cache=False))
reply = backend.chat(LLMRequest.of(
    [{"role": "user", "content": "Owner, zone AE, flooded last year. Insure? One sentence."}],
    temperature=0.7, seed=7, max_tokens=40, num_ctx=1024))
print(json.dumps({"text": reply.text, "wait": backend.describe()["thread_wait"],
                  "left": os.environ.get("GOMP_SPINCOUNT")}))
"""


def test_how_the_threads_wait_changes_no_reply():
    """A short spin (the backend's default) and libgomp's full spin give the same text.

    That is why the wait policy is recorded in the manifest but is in neither key. It is read
    once per process, so each policy answers in a process of its own.
    """
    import os
    import subprocess
    import sys

    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    replies = []
    for extra in ({}, {"GOMP_SPINCOUNT": "300000"}):  # the default, libgomp's own default
        done = subprocess.run([sys.executable, "-c", ONE_REPLY], env=base | extra,
                              capture_output=True, text=True, check=True, timeout=600)
        replies.append(json.loads(done.stdout.splitlines()[-1]))
    assert replies[0]["wait"] == "GOMP_SPINCOUNT=10000 (the backend's default)"
    assert replies[0]["left"] is None  # set only while the runtime loaded
    assert replies[1]["wait"] == "GOMP_SPINCOUNT=300000 (from the environment)"
    assert replies[0]["text"] and replies[0]["text"] == replies[1]["text"]
