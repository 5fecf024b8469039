"""The distribution readout on the embedded model (marked ``real_llm``).

A short household prompt and short reasons keep each readout to a short greedy path and a few
one-token passes. No test asserts what the model believes: only that the readout reads the
prompt a run sends, is deterministic, and agrees with the other way of reading it.
"""

from __future__ import annotations

import json
from dataclasses import replace

import httpx
import pytest

from governed_broker.cognition.schema import decision_json_schema
from governed_broker.config.llm import LLMConfig
from governed_broker.llm import LLMRequest, build_backend
from governed_broker.llm.embedded import EmbeddedBackend, load_server, openai_base_url
from governed_broker.llm.logprobs import ChatLogprobsSource, token_source
from governed_broker.llm.readout import ReadoutSettings, path_schema, read_distributions

pytestmark = pytest.mark.real_llm

LABELS = ["VL", "L", "M", "H", "VH"]
ACTIONS = ["do_nothing", "buy_insurance", "elevate_house", "elevate_and_insure", "relocate"]
SYSTEM = (
    "You role-play one household deciding about flood risk. Rate the flood threat and your "
    "ability to cope on this scale: VL = very low, L = low, M = medium, H = high, VH = very "
    "high. Then choose one action. Reply with one JSON object in this format:\n"
    '{"threat_appraisal": {"label": "VL|L|M|H|VH", "reason": "a few words"},\n'
    ' "coping_appraisal": {"label": "VL|L|M|H|VH", "reason": "a few words"},\n'
    ' "decision": "the id of one action", "reason": "a few words"}')
HOUSEHOLDS = [
    "You own your home in a high-risk zone. A flood reached your home this year: 1.5 m of "
    "water, $80,000 of damage. Actions: do_nothing, buy_insurance ($900), elevate_house "
    "($60,000), elevate_and_insure ($60,900), relocate ($20,000).",
    "You own your home in a low-risk zone. There was no flood at your home. Actions: "
    "do_nothing, buy_insurance ($300), elevate_house ($60,000), elevate_and_insure ($60,300), "
    "relocate ($20,000).",
]


def request(index: int) -> LLMRequest:
    return LLMRequest.of([{"role": "system", "content": SYSTEM},
                          {"role": "user", "content": HOUSEHOLDS[index]}],
                         json_schema=decision_json_schema(ACTIONS, LABELS, max_reason_chars=15),
                         temperature=0.7, seed=3, max_tokens=160, num_ctx=1024)


@pytest.fixture(scope="module")
def embedded() -> EmbeddedBackend:
    backend = build_backend(LLMConfig(num_ctx=1024))
    assert isinstance(backend, EmbeddedBackend)
    load_server(backend.settings)
    return backend


@pytest.fixture(scope="module")
def first_read(embedded) -> dict:
    """The readout of each household once (the tests share them to stay short)."""
    source = token_source(embedded)
    return {i: read_distributions(source, request(i)) for i in range(len(HOUSEHOLDS))}


def without_time(readout) -> dict:
    data = readout.to_json()
    data.pop("seconds")
    return data


def test_the_readout_reads_the_prompt_a_run_sends(embedded, first_read):
    """The path is the backend's own greedy reply to the request (chat route, whole prompt).

    the readout's template and tokens are those of a run.
    """
    readout = first_read[0]
    for f in readout.fields:
        assert sum(f.probabilities) == pytest.approx(1.0)
        assert 0.0 <= f.forbidden_mass < 1.0 and f.passes >= 1
    whole = EmbeddedBackend(replace(embedded.settings, prompt_cache=False),
                            model_name="whole", sha256=embedded.sha256)
    chat = whole.chat(replace(request(0), temperature=0.0, json_schema=path_schema(
        request(0).json_schema, "decision")))
    assert chat.text == readout.path
    parsed = json.loads(readout.path)
    assert parsed["decision"] == readout.field("decision").path_value


def test_a_readout_does_not_depend_on_the_call_before(embedded, first_read):
    """Household 0 read again after household 1 gives exactly what it gave first.

    Household 1's evaluation is in llama.cpp's cache then.
    """
    embedded.chat(replace(request(1), max_tokens=1))  # household 1's prompt in the cache
    again = read_distributions(token_source(embedded), request(0))
    assert without_time(again) == without_time(first_read[0])


def test_accounts_that_reuse_the_first_ones_prompt_do_not_depend_on_the_call_before(embedded):
    """Three accounts of household 0, read twice with household 1's prompt evaluated between.

    The later accounts reuse the first's evaluation of the prompt (llama.cpp evaluates its
    last token again); the first is evaluated whole, so the second readout is the same. (On
    this model and machine a first account that reused household 1's system message read the
    same too: the toy server's test, tests/llm/test_logprobs.py, is the one that tells.)
    """
    settings = ReadoutSettings(accounts=3)
    first = read_distributions(token_source(embedded), request(0), settings, seeds=[1, 2, 3])
    embedded.chat(replace(request(1), max_tokens=1))
    again = read_distributions(token_source(embedded), request(0), settings, seeds=[1, 2, 3])
    assert without_time(again) == without_time(first)


def test_the_chat_route_reads_the_same_distributions(embedded, first_read):
    """The OpenAI-compatible route of the same server agrees with the embedded source.

    llama-server's chat completions, reading the text of the path again, give the token-exact
    embedded source's path and distributions, whatever the server evaluated before: two other
    prompts are in its cache first (a path that reused the cache read P(VL) 0.034 apart).
    The server does not say how it samples, so the model's own view is compared.
    """
    base = openai_base_url(embedded.settings)
    model = httpx.get(f"{base}/models", timeout=10).json()["data"][0]["id"]
    for other in (1, 0):
        embedded.chat(replace(request(other), max_tokens=1))
    exact = first_read[1]
    chat = read_distributions(ChatLogprobsSource(base, model), request(1),
                              ReadoutSettings(view="model"))
    assert chat.path == exact.path
    for a, b in zip(exact.fields, chat.fields, strict=True):
        mine = a.root.distribution()
        assert [mine.get(v, 0.0) for v in a.values] == pytest.approx(b.probabilities,
                                                                     abs=1e-6), a.field


def test_a_sampled_account_is_the_reply_a_run_draws(embedded):
    """An account drawn for the readout writes what the backend samples for the same request.

    With the same seed, up to the decision (after it the account's grammar asks for nothing
    more); the backend evaluates the prompt whole (``prompt_cache: false``), as the readout
    does, so nothing but the request decides either.
    """
    whole = EmbeddedBackend(replace(embedded.settings, prompt_cache=False),
                            model_name="whole", sha256=embedded.sha256)
    sampled = replace(request(0), seed=11)
    run = json.loads(whole.chat(sampled).text)
    read = read_distributions(token_source(embedded), sampled, ReadoutSettings(accounts=1),
                              seeds=[11])
    account = json.loads(read.path)
    assert account["decision"] == run["decision"]
    assert account["threat_appraisal"] == run["threat_appraisal"]
    assert account["coping_appraisal"] == run["coping_appraisal"]
    assert read.field("decision").accounts[0].value == run["decision"]
