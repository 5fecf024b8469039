"""Build the configured backend, with the response cache and the call log around it."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from governed_broker.config.base import excerpt
from governed_broker.config.llm import LLM_BACKENDS, LLMConfig
from governed_broker.config.registry import load_registered
from governed_broker.config.yamlsafe import read_yaml
from governed_broker.llm.base import LLMBackend, LLMError, LLMRequest
from governed_broker.llm.cache import ResponseCache
from governed_broker.llm.call_log import CallLog
from governed_broker.llm.catalogue import default_model_name, get_model_spec
from governed_broker.llm.model_store import cache_dir, ensure_model
from governed_broker.llm.reliability import RetryPolicy
from governed_broker.llm.scripted import ScriptedBackend, ScriptRule
from governed_broker.llm.wrappers import CachedBackend, LoggedBackend

RESPONSE_CACHE_FILE = "llm_responses.sqlite"


def _resolve(path: Path, base_dir: Path | None) -> Path:
    path = path.expanduser()
    return path if path.is_absolute() or base_dir is None else base_dir / path


def policy_of(cfg: LLMConfig) -> RetryPolicy:
    """The retry policy of an ``llm`` section (for backends that call a server)."""
    return RetryPolicy(
        timeout_s=cfg.timeout_s,
        retries=cfg.retries,
        backoff_s=cfg.backoff_s,
        backoff_max_s=cfg.backoff_max_s,
        patience_s=cfg.patience_s,
    )


def build_embedded(cfg: LLMConfig, base_dir: Path | None) -> LLMBackend:
    """The embedded llama.cpp backend of ``cfg`` (registered as ``embedded``)."""
    from governed_broker.llm.embedded import EmbeddedBackend, EmbeddedSettings

    if cfg.model_path is not None:
        path, name, sha = _resolve(cfg.model_path, base_dir), None, None
    else:
        spec = get_model_spec(cfg.model or default_model_name())
        path = ensure_model(spec.name, auto_pull=cfg.auto_pull)
        name, sha = spec.name, spec.sha256
    settings = EmbeddedSettings(
        model_path=path,
        n_ctx=cfg.num_ctx,
        n_parallel=cfg.concurrency or 1,
        threads=cfg.threads or 0,
        prompt_cache=cfg.prompt_cache,
    )
    return EmbeddedBackend(settings, model_name=name, sha256=sha, timeout_s=cfg.timeout_s)


def build_scripted(cfg: LLMConfig, base_dir: Path | None) -> LLMBackend:
    """The scripted test backend of ``cfg`` (registered as ``scripted``)."""
    assert cfg.script is not None  # guaranteed by LLMConfig's validator
    path = _resolve(cfg.script, base_dir)
    raw = read_yaml(path, "scripted-backend rules file")
    if not isinstance(raw, list):
        raise LLMError(f"llm.script {path}: expected a list of {{pattern, reply, times}} rules")
    rules = []
    for index, rule in enumerate(raw):
        if not isinstance(rule, dict) or set(rule) - {"pattern", "reply", "choices", "times"} or (
            "pattern" not in rule or ("reply" in rule) == ("choices" in rule)
        ):
            raise LLMError(
                f"llm.script {path}: rule {index} must have keys pattern, reply or choices, and "
                f"optionally times; got {excerpt(rule)}"
            )
        reply = rule["reply"] if "reply" in rule else _sampled(path, index, rule["choices"])
        rules.append(ScriptRule(str(rule["pattern"]), reply, rule.get("times")))
    backend = ScriptedBackend(rules, name=cfg.model or path.stem, keep_calls=False)
    # the script's content is its model identity: two scripts never share cached replies
    backend.model_id += "@sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return backend


def build_reference(cfg: LLMConfig, base_dir: Path | None) -> LLMBackend:
    """A reference respondent of the validity battery (registered as ``reference``)."""
    from governed_broker.llm.reference import ReferenceBackend

    return ReferenceBackend(str(cfg.model))


def _sampled(path: Path, index: int, choices: Any) -> Callable[[LLMRequest], Any]:
    """A scripted reply drawn from weighted ``choices`` by the request's seed.

    The same seed gives the same reply, as with a seeded model.
    """
    if not isinstance(choices, list) or not choices or any(
            not isinstance(c, dict) or set(c) != {"weight", "reply"}
            or not isinstance(c["weight"], int | float) or not c["weight"] > 0 for c in choices):
        raise LLMError(f"llm.script {path}: rule {index}: choices must be a list of {{weight, "
                       f"reply}} with positive weights; got {excerpt(choices)}")
    replies = [c["reply"] for c in choices]
    weights = [float(c["weight"]) for c in choices]

    def draw(request: LLMRequest) -> Any:
        return random.Random(request.seed).choices(replies, weights)[0]

    return draw


def build_ollama(cfg: LLMConfig, base_dir: Path | None) -> LLMBackend:
    """The Ollama backend of ``cfg`` (registered as ``ollama``)."""
    from governed_broker.llm.ollama_backend import OllamaBackend

    return OllamaBackend(
        model=str(cfg.model),
        hosts=cfg.hosts,
        concurrency=cfg.concurrency or 1,
        policy=policy_of(cfg),
        keep_alive=cfg.keep_alive,
        health_check=cfg.health_check,
    )


def build_openai(cfg: LLMConfig, base_dir: Path | None) -> LLMBackend:
    """The OpenAI-compatible backend of ``cfg`` (registered as ``openai``)."""
    from governed_broker.llm.openai_backend import OpenAICompatibleBackend

    return OpenAICompatibleBackend(
        model=str(cfg.model),
        base_urls=cfg.hosts,
        concurrency=cfg.concurrency or 4,
        policy=policy_of(cfg),
        api_key_env=cfg.api_key_env,
        health_check=cfg.health_check,
    )


def build_backend(cfg: LLMConfig, base_dir: Path | None = None) -> LLMBackend:
    """The bare backend of ``cfg`` (no cache, no log). Fails fast with actionable errors.

    The builder is looked up by name in ``config.llm.LLM_BACKENDS`` and imported only now, so
    a backend's dependencies are needed only by runs that use it.
    """
    builder = load_registered(LLM_BACKENDS, cfg.backend, kind="backend", setting="llm.backend",
                              registry_name="LLM_BACKENDS", what="builder", error=LLMError)
    return builder(cfg, base_dir)


def backend_from_config(
    cfg: LLMConfig,
    call_log_path: Path | str | None = None,
    base_dir: Path | None = None,
) -> LLMBackend:
    """Build the configured backend wrapped in the response cache and (optionally) call log.

    Args:
        cfg: The experiment's ``llm`` section.
        call_log_path: SQLite file for the call log (a run passes
            ``<run_dir>/llm_calls.sqlite``); None: no call log.
        base_dir: Directory against which relative ``model_path``, ``script`` and
            ``cache.path`` are resolved (the experiment file's directory).

    Returns:
        ``LoggedBackend(CachedBackend(backend))`` (layers left out when disabled). Its
        ``stats()`` gives cache hits/misses and call totals for the manifest, ``describe()``
        the model identity.

    Raises:
        LLMError: Missing dependency, unknown or unpulled model, unreachable host, ... The
            message says what to do.
    """
    backend = build_backend(cfg, base_dir)
    if cfg.cache.mode != "off":
        path = (
            _resolve(cfg.cache.path, base_dir)
            if cfg.cache.path is not None
            else cache_dir() / RESPONSE_CACHE_FILE
        )
        backend = CachedBackend(backend, ResponseCache(path, cfg.cache.mode))
    if call_log_path is not None:
        backend = LoggedBackend(backend, CallLog(call_log_path))
    return backend
