"""LLMConfig validation and backend_from_config for every backend kind."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from governed_broker.config.llm import LLMConfig
from governed_broker.llm import (
    CachedBackend,
    LLMError,
    LLMRequest,
    LoggedBackend,
    ScriptedBackend,
    backend_from_config,
)
from governed_broker.llm.catalogue import get_model_spec
from governed_broker.llm.sampling import resolve_sampling


def test_defaults_are_the_embedded_catalogue_model_with_a_cache():
    cfg = LLMConfig()
    assert cfg.backend == "embedded" and cfg.model is None and cfg.cache.mode == "readwrite"
    assert (cfg.num_ctx, cfg.retries) == (4096, 3)
    # sampling left unset: the catalogue's settings for the model (llm.sampling)
    assert (cfg.temperature, cfg.top_p, cfg.top_k, cfg.min_p) == (None, None, None, None)


def test_an_unquoted_yaml_off_turns_the_cache_off():
    # YAML 1.1 reads `mode: off` (or --set llm.cache.mode=off) as False
    assert LLMConfig.model_validate({"cache": {"mode": False}}).cache.mode == "off"
    with pytest.raises(ValueError, match="cache.mode"):
        LLMConfig.model_validate({"cache": {"mode": True}})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"backend": "ollama"}, "llm.model is required for backend 'ollama'"),
        ({"backend": "openai", "model": "m"}, "llm.hosts is required"),
        ({"backend": "ollama", "model": "m", "model_path": "x.gguf"}, "only to backend"),
        ({"model": "a", "model_path": "x.gguf"}, "either llm.model or llm.model_path"),
        ({"backend": "scripted"}, "llm.script"),
        ({"backend": "vllm"}, "backend"),
        ({"temprature": 0.5}, "temprature"),
        ({"cache": {"mode": "sometimes"}}, "mode"),
        ({"concurrency": 0}, "concurrency"),
        ({"top_p": 0}, "top_p"),
        ({"min_p": 1.5}, "min_p"),
        ({"top_k": -1}, "top_k"),
    ],
)
def test_bad_settings_are_rejected_with_the_field_named(fields, message):
    with pytest.raises(ValidationError, match=message):
        LLMConfig(**fields)


def test_scripted_backend_from_a_rules_file(tmp_path):
    script = tmp_path / "rules.yaml"
    script.write_text(
        "- pattern: insure\n  reply: {decision: buy_insurance, reason: cheap}\n  times: 1\n"
        "- pattern: insure\n  reply: {decision: do_nothing, reason: again}\n"
    )
    cfg = LLMConfig(backend="scripted", script="rules.yaml", cache={"mode": "off"})
    backend = backend_from_config(cfg, call_log_path=tmp_path / "run" / "llm_calls.sqlite",
                                  base_dir=tmp_path)
    assert isinstance(backend, LoggedBackend) and isinstance(backend.inner, ScriptedBackend)
    ask = LLMRequest.of([{"role": "user", "content": "insure?"}], json_schema={})
    assert backend.chat(ask).parsed["decision"] == "buy_insurance"
    assert backend.chat(ask).parsed["decision"] == "do_nothing"
    assert backend.model_id.startswith("scripted:rules@sha256:")
    assert backend.stats()["calls"]["calls"] == 2


def test_bad_script_file_is_named(tmp_path):
    (tmp_path / "rules.yaml").write_text("- {pattern: x}\n")
    cfg = LLMConfig(backend="scripted", script=tmp_path / "rules.yaml")
    with pytest.raises(LLMError, match=r"rules.yaml: rule 0 must have keys pattern, reply"):
        backend_from_config(cfg)


def test_scripted_choices_are_drawn_by_the_request_seed(tmp_path):
    (tmp_path / "rules.yaml").write_text(
        "- pattern: .\n  choices:\n    - {weight: 3, reply: insure}\n"
        "    - {weight: 1, reply: wait}\n")
    cfg = LLMConfig(backend="scripted", script=tmp_path / "rules.yaml", cache={"mode": "off"})
    backend = backend_from_config(cfg, call_log_path=tmp_path / "calls.sqlite")

    def reply(seed: int) -> str:
        return backend.chat(LLMRequest.of([{"role": "user", "content": "?"}], seed=seed)).text

    drawn = [reply(seed) for seed in range(400)]
    assert drawn == [reply(seed) for seed in range(400)]  # the same seed, the same reply
    assert 0.65 < drawn.count("insure") / 400 < 0.85  # weights 3 : 1


@pytest.mark.parametrize("rule", [
    "- {pattern: x, choices: []}\n", "- {pattern: x, choices: [{weight: 0, reply: a}]}\n",
    "- {pattern: x, reply: a, choices: [{weight: 1, reply: a}]}\n"])
def test_bad_choices_are_named(tmp_path, rule):
    (tmp_path / "rules.yaml").write_text(rule)
    cfg = LLMConfig(backend="scripted", script=tmp_path / "rules.yaml")
    with pytest.raises(LLMError, match=r"rules.yaml: rule 0"):
        backend_from_config(cfg)


def test_cache_path_is_resolved_against_the_experiment_directory(tmp_path):
    (tmp_path / "rules.yaml").write_text("- {pattern: ., reply: ok}\n")
    cfg = LLMConfig(backend="scripted", script="rules.yaml",
                    cache={"path": "cache/responses.sqlite"})
    backend = backend_from_config(cfg, base_dir=tmp_path)
    assert isinstance(backend, CachedBackend)
    assert (tmp_path / "cache" / "responses.sqlite").is_file()


def test_default_cache_lives_in_the_user_cache_dir(tmp_path, model_cache):
    (tmp_path / "rules.yaml").write_text("- {pattern: ., reply: ok}\n")
    backend_from_config(LLMConfig(backend="scripted", script=tmp_path / "rules.yaml"))
    assert (model_cache / "llm_responses.sqlite").is_file()


def test_embedded_unknown_model_is_an_error():
    with pytest.raises(LLMError, match="unknown embedded model 'tinyllama'.*model list"):
        backend_from_config(LLMConfig(model="tinyllama"))


def test_embedded_model_not_pulled_names_the_command(model_cache):
    cfg = LLMConfig(auto_pull=False, cache={"mode": "off"})
    with pytest.raises(LLMError, match="not pulled.*run `governed-broker model pull "
                                       "qwen2.5-coder-0.5b-instruct-q4_k_m`"):
        backend_from_config(cfg)


def test_an_experiment_selects_the_larger_catalogue_model(experiments, model_cache):
    name = "qwen2.5-coder-1.5b-instruct-q4_k_m"
    config = experiments.config(["decision.maker=llm", f"llm.model={name}",
                                 "llm.auto_pull=false", "llm.cache.mode='off'"])
    assert resolve_sampling(config.llm) == get_model_spec(name).sampling
    # resolved through the catalogue to its own file (the empty cache lacks it)
    with pytest.raises(LLMError, match=f"not pulled.*{name}.gguf.*model pull {name}`"):
        backend_from_config(config.llm)


def test_embedded_missing_model_path_is_an_error(tmp_path):
    cfg = LLMConfig(model_path=tmp_path / "none.gguf", cache={"mode": "off"})
    with pytest.raises(LLMError, match="none.gguf does not exist"):
        backend_from_config(cfg)
