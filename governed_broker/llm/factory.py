"""Build the configured backend, with the response cache and the call log around it."""

from __future__ import annotations

import hashlib
from pathlib import Path

from governed_broker.config.llm import LLMConfig
from governed_broker.config.yamlsafe import read_yaml
from governed_broker.llm.base import LLMBackend, LLMError
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


def _policy(cfg: LLMConfig) -> RetryPolicy:
    return RetryPolicy(
        timeout_s=cfg.timeout_s,
        retries=cfg.retries,
        backoff_s=cfg.backoff_s,
        backoff_max_s=cfg.backoff_max_s,
        patience_s=cfg.patience_s,
    )


def _embedded(cfg: LLMConfig, base_dir: Path | None) -> LLMBackend:
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
    )
    return EmbeddedBackend(settings, model_name=name, sha256=sha, timeout_s=cfg.timeout_s)


def _scripted(cfg: LLMConfig, base_dir: Path | None) -> LLMBackend:
    assert cfg.script is not None  # guaranteed by LLMConfig's validator
    path = _resolve(cfg.script, base_dir)
    raw = read_yaml(path, "scripted-backend rules file")
    if not isinstance(raw, list):
        raise LLMError(f"llm.script {path}: expected a list of {{pattern, reply, times}} rules")
    rules = []
    for index, rule in enumerate(raw):
        if not isinstance(rule, dict) or set(rule) - {"pattern", "reply", "times"} or (
            "pattern" not in rule or "reply" not in rule
        ):
            raise LLMError(
                f"llm.script {path}: rule {index} must have keys pattern, reply and optionally "
                f"times; got {rule!r}"
            )
        rules.append(ScriptRule(str(rule["pattern"]), rule["reply"], rule.get("times")))
    backend = ScriptedBackend(rules, name=cfg.model or path.stem)
    # the script's content is its model identity: two scripts never share cached replies
    backend.model_id += "@sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return backend


def build_backend(cfg: LLMConfig, base_dir: Path | None = None) -> LLMBackend:
    """The bare backend of ``cfg`` (no cache, no log). Fails fast with actionable errors."""
    if cfg.backend == "embedded":
        return _embedded(cfg, base_dir)
    if cfg.backend == "ollama":
        from governed_broker.llm.ollama_backend import OllamaBackend

        return OllamaBackend(
            model=str(cfg.model),
            hosts=cfg.hosts,
            concurrency=cfg.concurrency or 1,
            policy=_policy(cfg),
            keep_alive=cfg.keep_alive,
            health_check=cfg.health_check,
        )
    if cfg.backend == "openai":
        from governed_broker.llm.openai_backend import OpenAICompatibleBackend

        return OpenAICompatibleBackend(
            model=str(cfg.model),
            base_urls=cfg.hosts,
            concurrency=cfg.concurrency or 4,
            policy=_policy(cfg),
            api_key_env=cfg.api_key_env,
            health_check=cfg.health_check,
        )
    if cfg.backend == "scripted":
        return _scripted(cfg, base_dir)
    raise LLMError(f"unknown llm.backend {cfg.backend!r}")  # pragma: no cover - Literal-checked


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
