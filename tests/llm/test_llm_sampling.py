"""Sampling settings: the catalogue's per-model defaults under the experiment's llm keys."""

from __future__ import annotations

import pytest

from governed_broker.config.llm import LLMConfig
from governed_broker.llm import catalogue
from governed_broker.llm.base import LLMError, Sampling
from governed_broker.llm.catalogue import _spec_from_yaml, default_model_name, get_model_spec
from governed_broker.llm.sampling import DEFAULT_TEMPERATURE, resolve_sampling


def test_an_embedded_catalogue_model_samples_as_its_catalogue_entry_says():
    for name in catalogue.load_catalogue()[1]:
        assert resolve_sampling(LLMConfig(model=name)) == get_model_spec(name).sampling
    assert resolve_sampling(LLMConfig()) == get_model_spec(default_model_name()).sampling


def test_the_experiment_s_settings_win_over_the_catalogue_one_by_one():
    name = default_model_name()
    given = resolve_sampling(LLMConfig(model=name, temperature=0.05, top_k=7))
    spec = get_model_spec(name).sampling
    assert given == Sampling(temperature=0.05, top_p=spec.top_p, top_k=7, min_p=spec.min_p)


def test_models_outside_the_catalogue_get_the_plain_default(tmp_path):
    ollama = LLMConfig(backend="ollama", model="gemma3:4b")
    assert resolve_sampling(ollama) == Sampling(temperature=DEFAULT_TEMPERATURE)
    local = LLMConfig(model_path=tmp_path / "any.gguf", min_p=0.1)
    assert resolve_sampling(local) == Sampling(temperature=DEFAULT_TEMPERATURE, min_p=0.1)


def test_an_unknown_embedded_model_is_an_error_naming_the_known_ones():
    with pytest.raises(LLMError, match="unknown embedded model"):
        resolve_sampling(LLMConfig(model="gpt-9"))


@pytest.mark.parametrize("sampling", [
    {"temperature": 0.5},  # no source
    {"source": "x"},  # no temperature
    {"temperature": 0.5, "source": "x", "top_n": 3},  # unknown key
    {"temperature": "warm", "source": "x"},
])
def test_a_malformed_sampling_entry_is_a_packaging_error(sampling):
    raw = {"filename": "m.gguf", "size": 1, "sha256": "ab", "parts": [], "sampling": sampling}
    with pytest.raises(LLMError, match="entry 'm' is malformed"):
        _spec_from_yaml("m", raw)
