"""The readout's sources (llm.logprobs) against toy servers.

the embedded llama.cpp server's routes and an OpenAI-compatible chat endpoint, both answering from
the toy model's rules, and the clear error for backends that give no token probabilities.
"""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest
from readout_support import (
    DECISION_EXPECTED,
    THREAT_EXPECTED,
    TOKENIZER,
    ToyLlamaServer,
    chat_handler,
    reply,
    schema,
    template,
)

from governed_broker.llm import CachedBackend, LLMError, LLMRequest, ResponseCache, ScriptedBackend
from governed_broker.llm.logprobs import ChatLogprobsSource, LlamaCppSource, token_source
from governed_broker.llm.readout import ReadoutError, ReadoutSettings, read_distributions
from governed_broker.llm.sampler_chain import LlamaCppSampler

SYSTEM = "You are a household."
#: Two households whose prompts share the system message; B's greedy threat label is VH too.
REPLIES = {"household A": reply(), "household B, a longer message": reply(reason="other")}


def request(user: str = "household A") -> LLMRequest:
    return LLMRequest.of([{"role": "system", "content": SYSTEM},
                          {"role": "user", "content": user}],
                         json_schema=schema(), max_tokens=99)


@pytest.fixture
def server():
    toy = ToyLlamaServer(REPLIES)
    yield toy
    toy.close()


def without_time(readout) -> dict:
    data = readout.to_json()
    data.pop("seconds")
    return data


MODEL_VIEW = ReadoutSettings(view="model")


def test_embedded_source_reads_the_exact_distributions(server):
    source = LlamaCppSource(server, "toy-llama")
    readout = read_distributions(source, request(), MODEL_VIEW)
    assert readout.field("threat_appraisal.label").distribution() == pytest.approx(
        THREAT_EXPECTED, abs=1e-12)
    assert readout.field("decision").distribution() == pytest.approx(DECISION_EXPECTED,
                                                                     abs=1e-12)
    assert readout.source == "toy-llama" and readout.path == REPLIES["household A"]


def test_embedded_source_renders_the_prompt_with_the_servers_template_and_reads_whole(server):
    read_distributions(LlamaCppSource(server, "toy-llama"), request())
    greedy, *passes = server.payloads
    ids = TOKENIZER.encode(template(request().messages))
    assert greedy["prompt"] == ids
    assert greedy["cache_prompt"] is False and greedy["temperature"] == 0.0
    assert greedy["n_predict"] == 99
    assert greedy["json_schema"]["properties"]["reason"] == {"type": "string", "maxLength": 0}
    path = TOKENIZER.encode(REPLIES["household A"])
    first = passes[0]["prompt"]
    assert first[:len(ids)] == ids and first[len(ids):] == path[:len(first) - len(ids)]
    assert all(p["cache_prompt"] and p["n_predict"] == 1 and p["n_probs"] == 20
               for p in passes)


def test_embedded_sampled_accounts_are_drawn_as_the_embedded_backend_draws(server):
    """A sampled account goes to the server with the request's temperature, truncation, seed."""
    sampled = LLMRequest.of(request().messages, json_schema=schema(), max_tokens=99,
                            temperature=0.7, top_k=40, top_p=0.95, min_p=0.05, seed=2**33 + 5)
    read_distributions(LlamaCppSource(server, "toy-llama"), sampled,
                       ReadoutSettings(accounts=1), seeds=[2**33 + 5])
    path = server.payloads[0]
    assert (path["temperature"], path["top_k"], path["top_p"], path["min_p"]) == (
        0.7, 40, 0.95, 0.05)
    assert path["seed"] == (2**33 + 5) % (2**32 - 1) and path["cache_prompt"] is False


def test_embedded_readout_does_not_depend_on_the_call_before(server):
    """A readout reads the same on a fresh server and after another prompt.

    The toy server's numbers move when a reused evaluation was made for another prompt (as
    llama.cpp's do); a readout evaluates its prompt whole first, so A reads the same on a
    fresh server and after B (whose evaluation of the shared system message is in the
    cache).
    """
    alone = without_time(read_distributions(LlamaCppSource(server, "toy-llama"), request()))
    other = ToyLlamaServer(REPLIES)
    try:
        source = LlamaCppSource(other, "toy-llama")
        read_distributions(source, request("household B, a longer message"))
        after_b = without_time(read_distributions(source, request()))
        assert without_time(read_distributions(source, request())) == after_b == alone
    finally:
        other.close()


def test_embedded_accounts_reuse_the_first_accounts_prompt_and_still_not_the_call_before(
        server):
    """The first account evaluates the prompt whole, the later ones reuse that evaluation.

    So the readout of A's accounts is the same on a fresh server and after B; with
    ``prompt_reuse`` off every account evaluates it whole, and reads the same here (the toy
    moves its numbers only for an evaluation made for another prompt).
    """
    sampled = replace(request(), temperature=0.7)
    settings = ReadoutSettings(accounts=3)
    alone = without_time(read_distributions(LlamaCppSource(server, "toy-llama"), sampled,
                                            settings, seeds=[1, 2, 3]))
    paths = [p for p in server.payloads if p["n_predict"] > 1]
    assert [p["cache_prompt"] for p in paths] == [False, True, True]
    other = ToyLlamaServer(REPLIES)
    try:
        source = LlamaCppSource(other, "toy-llama")
        read_distributions(source, request("household B, a longer message"))
        after_b = without_time(read_distributions(source, sampled, settings, seeds=[1, 2, 3]))
        before = len(other.payloads)
        whole = without_time(read_distributions(
            source, sampled, replace(settings, prompt_reuse=False), seeds=[1, 2, 3]))
        assert after_b == alone == whole
        assert [p["cache_prompt"] for p in other.payloads[before:] if p["n_predict"] > 1] == [
            False, False, False]
    finally:
        other.close()


def test_the_toy_server_would_show_a_dependence_on_the_call_before(server):
    """The toy's dependence is real.

    when A's prompt reuses the evaluation made for B (its system message), the numbers at A's threat
    label move.
    """
    source = LlamaCppSource(server, "toy-llama")
    reply_a = source.path(request())
    at_label = reply_a.tokens[:len(TOKENIZER.encode('{"threat_appraisal": {"label": "'))]
    fresh = source.top_tokens(reply_a, at_label, 5)
    source.path(request("household B, a longer message"))
    server._evaluate(reply_a.prompt, reuse=True, owner="household A")
    moved = source.top_tokens(reply_a, at_label, 5)
    assert [c.token for c in moved] == [c.token for c in fresh]
    assert [c.logprob for c in moved] != [c.logprob for c in fresh]


def chat_source(**kwargs) -> ChatLogprobsSource:
    client = httpx.Client(transport=httpx.MockTransport(chat_handler(REPLIES, **kwargs)))
    return ChatLogprobsSource("http://gpu01:8000/v1", "toy", client=client)


def test_embedded_source_reads_what_llama_cpps_sampler_draws(server):
    """The default view: each position through the request's sampler (``LlamaCppSampler``)."""
    source = LlamaCppSource(server, "toy-llama")
    readout = read_distributions(source, request())
    threat = readout.field("threat_appraisal.label")
    sampler = LlamaCppSampler.of(request())
    assert threat.sampler == sampler
    drawn = threat.root.distribution(sampler)
    assert threat.distribution() == pytest.approx(drawn, abs=1e-12)
    assert sum(drawn.values()) == pytest.approx(1.0)
    # temperature 0.7 sharpens the rules' distribution towards its most probable value
    assert drawn["VH"] > THREAT_EXPECTED["VH"] and drawn["M"] < THREAT_EXPECTED["M"]


def test_chat_source_cannot_say_what_its_server_draws():
    with pytest.raises(ReadoutError, match="--view model"):
        read_distributions(chat_source(), request())


def test_chat_source_continues_the_assistants_text():
    readout = read_distributions(chat_source(), request(), MODEL_VIEW)
    assert readout.field("threat_appraisal.label").distribution() == pytest.approx(
        THREAT_EXPECTED, abs=1e-12)
    assert readout.field("decision").distribution() == pytest.approx(DECISION_EXPECTED,
                                                                     abs=1e-12)
    assert readout.source == "openai toy at http://gpu01:8000/v1"


def test_chat_source_of_a_server_that_starts_a_new_turn_is_an_error():
    with pytest.raises(ReadoutError, match="threat_appraisal.label"):
        read_distributions(chat_source(continues=False), request(), MODEL_VIEW)


def test_chat_source_without_logprobs_is_an_error():
    with pytest.raises(LLMError, match="returned no token log-probabilities"):
        read_distributions(chat_source(logprobs=False), request(), MODEL_VIEW)


def test_chat_source_reads_at_most_twenty_alternatives():
    with pytest.raises(ReadoutError, match="at most 20 top_logprobs"):
        read_distributions(chat_source(), request(), ReadoutSettings(top_k=21, view="model"))


def test_backends_without_token_probabilities_say_what_to_use(tmp_path):
    from governed_broker.llm.ollama_backend import OllamaBackend

    scripted = ScriptedBackend([])
    for backend, kind in [(scripted, "scripted"),
                          (CachedBackend(scripted, ResponseCache(tmp_path / "c.sqlite")),
                           "scripted"),
                          (OllamaBackend("qwen2.5:0.5b", ["http://127.0.0.1:9"],
                                         health_check=False), "ollama")]:
        with pytest.raises(LLMError, match=f"the {kind} backend .* llm.backend: embedded"):
            token_source(backend)


def test_an_openai_backend_is_read_through_its_first_server():
    from governed_broker.llm.openai_backend import OpenAICompatibleBackend

    backend = OpenAICompatibleBackend("m", ["http://a:1/v1", "http://b:2/v1"],
                                      health_check=False)
    source = token_source(backend)
    assert isinstance(source, ChatLogprobsSource)
    assert source.url == "http://a:1/v1/chat/completions" and source.model == "m"
