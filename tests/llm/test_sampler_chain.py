"""llama.cpp's sampler as the readout works it out: chain, grammar check, redraw."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_broker.llm.base import LLMRequest
from governed_broker.llm.readout import UNDER_GRAMMAR
from governed_broker.llm.sampler_chain import LlamaCppSampler

NO_CUT = dict(top_k=0, top_p=1.0, min_p=0.0)


def test_a_request_without_truncation_settings_gets_llama_cpps_defaults():
    request = LLMRequest.of([{"role": "user", "content": "x"}], temperature=0.4, min_p=0.1)
    assert LlamaCppSampler.of(request) == LlamaCppSampler(0.4, top_k=40, top_p=0.95, min_p=0.1)


def test_a_forbidden_token_drawn_first_is_drawn_again_under_the_grammar():
    """Allowed 0.6 and 0.02, forbidden 0.3 and 0.08, temperature 1.

    The chain over everything keeps 0.6, 0.3 and 0.08 (top-p 0.95 is reached at 0.08; 0.02 is
    cut): the first allowed token is drawn at once with 0.6 / 0.98, a forbidden one with
    0.38 / 0.98. Redrawn over the allowed tokens, 0.6 / 0.62 already passes top-p, so 0.02 is
    cut again: it is never written, where renormalising would give it 0.02 / 0.62.
    """
    shares = LlamaCppSampler(1.0).allowed_shares([0.6, 0.02], [0.3, 0.08], 0.0)
    assert shares == pytest.approx([1.0, 0.0])
    assert UNDER_GRAMMAR.allowed_shares([0.6, 0.02], [0.3, 0.08], 0.0)[1] == pytest.approx(
        0.02 / 0.62)


def test_the_temperature_sharpens_after_truncation():
    """0.8 and 0.2 at temperature 0.5: weights 0.64 and 0.04."""
    shares = LlamaCppSampler(0.5).allowed_shares([0.8, 0.2], [], 0.0)
    assert shares == pytest.approx([0.64 / 0.68, 0.04 / 0.68])


def test_greedy_writes_the_most_probable_allowed_token():
    assert LlamaCppSampler(0.0).allowed_shares([0.3, 0.1], [0.6], 0.0) == [1.0, 0.0]


def test_the_shares_of_a_sampled_position_match_draws_from_the_chain():
    """The closed form against a simulation of llama.cpp's three steps, 200,000 draws."""
    allowed, forbidden = [0.35, 0.2, 0.08, 0.02], [0.25, 0.07, 0.03]
    sampler = LlamaCppSampler(0.7, top_k=5, top_p=0.9, min_p=0.1)
    rng = random.Random(7)
    tokens = list(range(len(allowed) + len(forbidden)))
    first = sampler._chain([*allowed, *forbidden], 0.0)
    second = sampler._chain(allowed, 0.0)
    counts = [0] * len(allowed)
    n = 200_000
    for _ in range(n):
        t = rng.choices(tokens, first)[0]
        if t >= len(allowed):
            t = rng.choices(range(len(allowed)), second)[0]
        counts[t] += 1
    shares = sampler.allowed_shares(allowed, forbidden, 0.0)
    assert [c / n for c in counts] == pytest.approx(shares, abs=0.005)


def test_tokens_not_read_count_only_where_truncation_may_keep_them():
    """Read 0.5 and 0.3 of the vocabulary, 0.2 unseen.

    Top-p 0.95 is not reached, so a token not read may be drawn; with min-p 0.7 the token read
    at 0.3 is cut, and every token not read is less probable still.
    """
    assert LlamaCppSampler(0.7).keeps_unseen([0.5, 0.3], [], 0.2)
    assert not LlamaCppSampler(0.7, min_p=0.7).keeps_unseen([0.5, 0.3], [], 0.2)
    assert not LlamaCppSampler(0.7).keeps_unseen([0.5, 0.3], [0.19], 0.01)


probabilities = st.lists(st.floats(min_value=1e-4, max_value=1.0), min_size=1, max_size=8)


@given(probabilities, st.lists(st.floats(min_value=1e-4, max_value=1.0), max_size=8))
def test_without_temperature_or_truncation_the_sampler_is_the_model_under_the_grammar(
        allowed, forbidden):
    total = sum(allowed) + sum(forbidden)
    allowed = [a / total for a in allowed]
    forbidden = [f / total for f in forbidden]
    plain = LlamaCppSampler(1.0, **NO_CUT).allowed_shares(allowed, forbidden, 0.0)
    assert plain == pytest.approx(UNDER_GRAMMAR.allowed_shares(allowed, forbidden, 0.0))


@given(probabilities, st.lists(st.floats(min_value=1e-4, max_value=1.0), max_size=8),
       st.floats(min_value=0.05, max_value=2.0), st.integers(min_value=0, max_value=6),
       st.floats(min_value=0.1, max_value=1.0), st.floats(min_value=0.0, max_value=0.9))
def test_the_shares_always_sum_to_one(allowed, forbidden, temperature, top_k, top_p, min_p):
    total = sum(allowed) + sum(forbidden)
    sampler = LlamaCppSampler(temperature, top_k=top_k, top_p=top_p, min_p=min_p)
    shares = sampler.allowed_shares([a / total for a in allowed],
                                    [f / total for f in forbidden], 0.0)
    assert sum(shares) == pytest.approx(1.0) and min(shares) >= 0.0


def test_a_position_whose_drawable_tokens_lead_nowhere_is_an_error():
    """The sampler keeps only a token whose branch reached no value: read more tokens."""
    from governed_broker.llm.readout import Branch, Candidate, Node, ReadoutError, Token

    dead_end = Node("e", (), (Candidate(Token(b"x"), -0.1),), 0.0)
    root = Node("", (Branch(Token(b"e"), -0.05, child=dead_end),
                     Branch(Token(b"VL"), -6.0, value="VL")), (), 0.0)
    assert root.distribution() == {"VL": 1.0}  # the model view keeps VL's share
    with pytest.raises(ReadoutError, match="larger top_k"):
        root.distribution(LlamaCppSampler(0.7))
