"""The OpenAI-compatible backend: llama.cpp server, vLLM and similar chat endpoints over HTTP.

Requests go to ``<base>/chat/completions`` with ``response_format`` of type ``json_schema``
(grammar-constrained on llama.cpp, xgrammar on vLLM). Several base URLs share the load through the
host pool the Ollama backend uses too (``llm.hosts.HostPool``: least loaded first). The API key,
when a server needs one, is read from the environment variable named by ``llm.api_key_env`` (never
written in a YAML file).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from governed_broker.llm.base import (
    LLMBackend,
    LLMError,
    LLMRequest,
    LLMResponse,
    LLMTransportError,
)
from governed_broker.llm.hosts import HostPool
from governed_broker.llm.reliability import (
    RetryPolicy,
    RetryReport,
    call_with_retries,
    chat_completion_response,
    openai_response_format,
    transport_error_class,
)

_RETRY_STATUS = (429, 500, 502, 503, 504)


def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise LLMError(
            "the openai backend needs the `httpx` package: run "
            "`pip install 'governed-broker[llm]'` (or `pip install httpx`)"
        ) from exc
    return httpx


def _headers(api_key_env: str | None) -> dict[str, str]:
    if not api_key_env:
        return {}
    key = os.environ.get(api_key_env)
    if not key:
        raise LLMError(
            f"llm.api_key_env names {api_key_env!r} but that environment variable is not set; "
            f"export {api_key_env}=<your key> or remove llm.api_key_env"
        )
    return {"Authorization": f"Bearer {key}"}


def check_servers(
    bases: Sequence[str], model: str, headers: dict[str, str], timeout_s: float = 10.0
) -> dict[str, list[str]]:
    """GET ``<base>/models`` on each server; return the model ids each one serves.

    Raises:
        LLMError: A server is unreachable or answers with an error, or it lists models and
            ``model`` is not among them.
    """
    httpx = _import_httpx()
    served: dict[str, list[str]] = {}
    for base in bases:
        try:
            reply = httpx.get(f"{base}/models", headers=headers, timeout=timeout_s)
        except httpx.HTTPError as exc:
            raise LLMError(
                f"cannot reach the OpenAI-compatible server at {base} "
                f"({exc.__class__.__name__}: {exc}); start it, or fix llm.hosts (base URLs "
                "ending in /v1)"
            ) from exc
        if reply.status_code != 200:
            raise LLMError(
                f"server {base} answered GET /models with HTTP {reply.status_code}: "
                f"{reply.text[:200]}; check llm.hosts and llm.api_key_env"
            )
        ids = [str(m.get("id")) for m in reply.json().get("data", []) if isinstance(m, dict)]
        if ids and model not in ids:
            raise LLMError(
                f"server {base} does not serve model {model!r} (it serves: {', '.join(ids)}); "
                "set llm.model to one of these"
            )
        served[base] = ids
    return served


class OpenAICompatibleBackend(LLMBackend):
    """Chat completions against OpenAI-compatible servers.

    Args:
        model: Model name the server expects (see its ``/v1/models``).
        base_urls: Base URLs ending in ``/v1``, e.g. ``http://gpu01:8080/v1``.
        concurrency: Requests in flight per server (llama.cpp ``--parallel``, vLLM batching).
        policy: Timeout and retry settings.
        api_key_env: Environment variable holding a bearer token, if the server needs one.
        health_check: Check servers and model now (fail fast).
    """

    kind = "openai"
    supports_schema = True

    def __init__(
        self,
        model: str,
        base_urls: Sequence[str],
        concurrency: int = 4,
        policy: RetryPolicy | None = None,
        api_key_env: str | None = None,
        health_check: bool = True,
    ) -> None:
        self._httpx = _import_httpx()
        if not base_urls:
            raise LLMError("the openai backend needs llm.hosts (base URLs ending in /v1)")
        self.model = model
        self.model_id = model
        self.policy = policy or RetryPolicy()
        self.headers = _headers(api_key_env)
        self.pool = HostPool(
            base_urls, concurrency,
            make_client=lambda _: self._httpx.AsyncClient(headers=self.headers,
                                                          timeout=self.policy.timeout_s),
            close_client=lambda c: c.aclose(),
        )
        self.bases = self.pool.hosts
        self.concurrency = concurrency
        self.max_concurrency = self.pool.max_concurrency
        self.served: dict[str, list[str]] = {}
        if health_check:
            self.served = check_servers(
                self.bases, model, self.headers, timeout_s=min(30.0, self.policy.timeout_s)
            )

    def _payload(self, request: LLMRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in request.messages],
            "temperature": request.temperature,
            "seed": request.seed % (2**31),
            "max_tokens": request.max_tokens,
            **request.sampling_options(),  # llama-server and vLLM accept top_k and min_p too
        }
        response_format = openai_response_format(request.json_schema)
        if response_format is not None:
            payload["response_format"] = response_format
        return payload

    async def _attempt(self, request: LLMRequest) -> tuple[str, dict]:
        async with self.pool.slot() as (base, client):
            try:
                reply = await client.post(f"{base}/chat/completions", json=self._payload(request))
            except Exception as exc:
                error_class = transport_error_class(exc)
                if error_class is not None:
                    raise error_class(f"{base}: {exc.__class__.__name__}: {exc}") from exc
                raise
        if reply.status_code in _RETRY_STATUS:
            raise LLMTransportError(f"{base}: HTTP {reply.status_code}: {reply.text[:200]}")
        if reply.status_code != 200:
            raise LLMError(
                f"{base} rejected the request with HTTP {reply.status_code}: {reply.text[:300]}"
            )
        return base, reply.json()

    async def achat(self, request: LLMRequest) -> LLMResponse:
        """The server's reply to ``request``."""
        start = time.perf_counter()
        report = RetryReport()
        base, data = await call_with_retries(
            lambda: self._attempt(request),
            self.policy,
            seed=request.seed,
            what=f"OpenAI-compatible server {','.join(self.bases)} model {self.model}",
            report=report,
        )
        latency = time.perf_counter() - start
        try:
            choice = data["choices"][0]
            text = choice["message"].get("content") or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"{base} returned a reply without choices: {str(data)[:300]}") from exc
        extra: dict[str, Any] = {"host": base, "finish_reason": choice.get("finish_reason"),
                                 **report.as_extra()}
        if "timings" in data:
            extra["timings"] = data["timings"]
        return chat_completion_response(data, text, request, latency_s=latency,
                                        backend=self.kind, model=self.model_id, extra=extra)

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.pool.aclose()

    def describe(self) -> dict[str, Any]:
        """The backend's identity and settings, for the manifest."""
        info = super().describe()
        info.update(hosts=list(self.bases), served=self.served)
        return info
