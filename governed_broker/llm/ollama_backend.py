"""The Ollama backend: the official ``ollama`` client against one or several servers.

Each request goes to the host with the fewest requests in flight (``concurrency`` slots per host;
the pool ``llm.hosts.HostPool`` is shared with the OpenAI-compatible backend), asks for structured
output with ``format=<json schema>`` and passes ``options={seed, temperature, num_ctx,
num_predict}`` and ``keep_alive``. At start a health check asks every host for ``/api/tags`` and
fails fast when a host is unreachable or the model is not pulled there; the model's digest from that
list becomes part of the model identity (and so of cache keys).
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
    parse_json_reply,
    transport_error_class,
)

DEFAULT_HOST = "http://127.0.0.1:11434"
_NS = 1e9


def _import_ollama() -> Any:
    try:
        import ollama
    except ImportError as exc:
        raise LLMError(
            "the ollama backend needs the `ollama` package: run "
            "`pip install 'governed-broker[llm]'` (or `pip install ollama`)"
        ) from exc
    return ollama


def default_hosts() -> tuple[str, ...]:
    """``$OLLAMA_HOST`` when set, else the local default ``http://127.0.0.1:11434``."""
    env = os.environ.get("OLLAMA_HOST")
    return (env,) if env else (DEFAULT_HOST,)


def _names_match(wanted: str, available: str) -> bool:
    # Ollama treats "gemma3" and "gemma3:latest" as the same model.
    def norm(name: str) -> str:
        return name if ":" in name else f"{name}:latest"

    return norm(wanted) == norm(available)


def check_hosts(hosts: Sequence[str], model: str, timeout_s: float = 10.0) -> dict[str, str]:
    """Ask each host for its model list; return ``{host: digest}`` of ``model``.

    Raises:
        LLMError: A host is unreachable or does not answer like Ollama, or ``model`` is not
            pulled there; the message names the host and the command that fixes it.
    """
    ollama = _import_ollama()
    digests: dict[str, str] = {}
    for host in hosts:
        client = ollama.Client(host=host, timeout=timeout_s)
        try:
            listing = client.list()
        except (ConnectionError, OSError) as exc:
            raise LLMError(
                f"cannot reach Ollama at {host} ({exc.__class__.__name__}): start it with "
                "`ollama serve` on that machine, or fix llm.hosts / OLLAMA_HOST"
            ) from exc
        except ollama.ResponseError as exc:
            raise LLMError(
                f"Ollama at {host} answered /api/tags with HTTP {exc.status_code}: {exc.error}"
            ) from exc
        except Exception as exc:  # httpx timeouts and protocol errors
            raise LLMError(
                f"Ollama at {host} did not answer /api/tags ({exc.__class__.__name__}: {exc}); "
                "check llm.hosts and that the server is an Ollama server"
            ) from exc
        found = [m for m in listing.models if _names_match(model, m.model or "")]
        if not found:
            have = ", ".join(sorted(m.model or "?" for m in listing.models)) or "none"
            raise LLMError(
                f"model {model!r} is not pulled on Ollama host {host} (it has: {have}); run "
                f"`ollama pull {model}` there, or fix llm.model"
            )
        digests[host] = found[0].digest or ""
    return digests


class OllamaBackend(LLMBackend):
    """Chat with Ollama servers through ``ollama.AsyncClient``.

    Args:
        model: Model tag, e.g. ``"gemma3:4b"``.
        hosts: Server URLs.
        concurrency: Requests in flight per host (match the server's ``OLLAMA_NUM_PARALLEL``).
        policy: Timeout and retry settings.
        keep_alive: How long the server keeps the model loaded (e.g. ``"30m"``, ``-1``).
        health_check: Check hosts and model now (fail fast); records the model digest.
    """

    kind = "ollama"
    supports_schema = True

    def __init__(
        self,
        model: str,
        hosts: Sequence[str] = (),
        concurrency: int = 1,
        policy: RetryPolicy | None = None,
        keep_alive: str | int | None = "30m",
        health_check: bool = True,
    ) -> None:
        self._ollama = _import_ollama()
        self.model = model
        self.policy = policy or RetryPolicy()
        self.pool = HostPool(
            hosts or default_hosts(), concurrency,
            make_client=lambda h: self._ollama.AsyncClient(host=h, timeout=self.policy.timeout_s),
            close_client=lambda c: c.close(),
        )
        self.hosts = self.pool.hosts
        self.concurrency = concurrency
        self.max_concurrency = self.pool.max_concurrency
        self.keep_alive = keep_alive
        self.digests: dict[str, str] = {}
        if health_check:
            self.digests = check_hosts(
                self.hosts, model, timeout_s=min(30.0, self.policy.timeout_s)
            )
            if len(set(self.digests.values())) > 1:
                raise LLMError(
                    f"model {model!r} differs between hosts (digests {self.digests}); pull the "
                    "same version everywhere so that replies do not depend on the host"
                )
        digest = next(iter(self.digests.values()), "")
        self.model_id = f"{model}@{digest}" if digest else model

    async def _attempt(self, request: LLMRequest) -> tuple[str, Any, float]:
        async with self.pool.slot() as (host, client):
            start = time.perf_counter()
            result = await self._send(client, host, request)
            return host, result, time.perf_counter() - start

    async def _send(self, client: Any, host: str, request: LLMRequest) -> Any:
        options = {
            "seed": request.seed % (2**31),
            "temperature": request.temperature,
            "num_ctx": request.num_ctx,
            "num_predict": request.max_tokens,
            **request.sampling_options(),
        }
        try:
            return await client.chat(
                model=self.model,
                messages=[dict(m) for m in request.messages],
                format=dict(request.json_schema) if request.json_schema is not None else None,
                options=options,
                keep_alive=self.keep_alive,
                stream=False,
            )
        except self._ollama.ResponseError as exc:
            if exc.status_code in (429, 500, 502, 503, 504):
                raise LLMTransportError(
                    f"Ollama at {host}: HTTP {exc.status_code}: {exc.error}"
                ) from exc
            if exc.status_code == 404:
                raise LLMError(
                    f"Ollama at {host}: model {self.model!r} not found ({exc.error}); run "
                    f"`ollama pull {self.model}` on that host"
                ) from exc
            raise LLMError(f"Ollama at {host}: HTTP {exc.status_code}: {exc.error}") from exc
        except (ConnectionError, OSError) as exc:
            raise LLMTransportError(f"Ollama at {host}: cannot connect ({exc})") from exc
        except Exception as exc:
            error_class = transport_error_class(exc)
            if error_class is not None:
                raise error_class(f"Ollama at {host}: {exc.__class__.__name__}: {exc}") from exc
            raise

    async def achat(self, request: LLMRequest) -> LLMResponse:
        """The Ollama server's reply to ``request``."""
        start = time.perf_counter()
        report = RetryReport()
        host, result, _ = await call_with_retries(
            lambda: self._attempt(request),
            self.policy,
            seed=request.seed,
            what=f"Ollama {','.join(self.hosts)} model {self.model}",
            report=report,
        )
        latency = time.perf_counter() - start
        text = result.message.content or ""
        parsed, parse_error = (None, None)
        if request.json_schema is not None:
            parsed, parse_error = parse_json_reply(text)
        extra: dict[str, Any] = {
            "host": host,
            "done_reason": result.done_reason,
            "total_duration_s": (result.total_duration or 0) / _NS,
            "load_duration_s": (result.load_duration or 0) / _NS,
            "prompt_eval_duration_s": (result.prompt_eval_duration or 0) / _NS,
            "eval_duration_s": (result.eval_duration or 0) / _NS,
            **report.as_extra(),
        }
        if parse_error:
            extra["parse_error"] = parse_error
        return LLMResponse(
            text=text,
            parsed=parsed,
            prompt_tokens=int(result.prompt_eval_count or 0),
            completion_tokens=int(result.eval_count or 0),
            latency_s=latency,
            backend=self.kind,
            model=self.model_id,
            extra=extra,
        )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.pool.aclose()

    def describe(self) -> dict[str, Any]:
        """The backend's identity and settings, for the manifest."""
        info = super().describe()
        info.update(hosts=list(self.hosts), digests=self.digests, keep_alive=self.keep_alive)
        return info
