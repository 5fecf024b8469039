"""Embedded backend pieces that need no model: payload, reply mapping, load errors."""

from __future__ import annotations

import pytest
from llm_test_support import DECISION_SCHEMA

from governed_broker.llm import LLMError, LLMRequest
from governed_broker.llm.embedded import EmbeddedBackend, EmbeddedSettings


@pytest.fixture
def backend(tmp_path):
    path = tmp_path / "not-a-model.gguf"
    path.write_bytes(b"\x00" * 4096)
    return EmbeddedBackend(EmbeddedSettings(path, n_ctx=512), timeout_s=30)


def ask(seed=0):
    return LLMRequest.of([{"role": "user", "content": "x"}], json_schema=DECISION_SCHEMA,
                         seed=seed, max_tokens=20, temperature=0.1)


def test_payload_constrains_output_and_keeps_the_seed_deterministic(backend):
    payload = backend._payload(ask(seed=2**32 - 1))
    assert payload["response_format"]["json_schema"]["schema"] == DECISION_SCHEMA
    assert payload["seed"] == 0 and payload["cache_prompt"] is True  # never llama's "random"
    assert backend._payload(ask(seed=12345))["seed"] == 12345
    assert "response_format" not in backend._payload(LLMRequest.of([{"role": "user",
                                                                     "content": "x"}]))


def test_payload_sends_only_the_sampling_options_set(backend):
    assert not {"top_p", "top_k", "min_p"} & set(backend._payload(ask()))
    request = LLMRequest.of([{"role": "user", "content": "x"}], top_k=20, min_p=0.1)
    payload = backend._payload(request)
    assert (payload["top_k"], payload["min_p"]) == (20, 0.1) and "top_p" not in payload


def test_model_identity_is_the_file_sha256(backend):
    assert backend.model_id == (
        "not-a-model.gguf@sha256:ad7facb2586fc6e966c004d7d1d16b024f5805ff7cb47c7a85dabd8b48892ca7"
    )


def test_runtime_error_reply_is_an_llm_error(backend):
    with pytest.raises(LLMError, match="returned an error: .*grammar"):
        backend._response(ask(), {"error": {"message": "bad grammar"}}, 0.1)


def test_reply_mapping_and_parse_error(backend):
    result = {"choices": [{"message": {"content": '{"decision": "relocate"'},
                           "finish_reason": "length"}],
              "usage": {"prompt_tokens": 9, "completion_tokens": 20}, "timings": {}}
    reply = backend._response(ask(), result, 0.5)
    assert reply.parsed is None and "not valid JSON" in reply.extra["parse_error"]
    assert (reply.prompt_tokens, reply.completion_tokens, reply.backend) == (9, 20, "embedded")
    assert reply.extra["finish_reason"] == "length"


def test_a_file_that_is_not_gguf_fails_to_load_with_advice(backend):
    pytest.importorskip("xllamacpp", reason="embedded runtime: pip install -r requirements-llm.txt")
    with pytest.raises(LLMError, match="could not load GGUF model .*not-a-model.gguf"):
        backend.chat(ask())


def test_without_prompt_cache_every_prompt_is_evaluated_whole_and_cached_apart(tmp_path):
    from governed_broker.llm.cache import cache_key

    path = tmp_path / "not-a-model.gguf"
    path.write_bytes(b"\x00" * 4096)
    reuse = EmbeddedBackend(EmbeddedSettings(path, n_ctx=512), timeout_s=30)
    whole = EmbeddedBackend(EmbeddedSettings(path, n_ctx=512, prompt_cache=False), timeout_s=30)
    assert whole._payload(ask())["cache_prompt"] is False
    assert whole.model_id == reuse.model_id + "+whole-prompt"
    assert cache_key(whole.kind, whole.model_id, ask()) != cache_key(
        reuse.kind, reuse.model_id, ask())


def test_prompt_cache_off_is_for_the_embedded_backend_only():
    from governed_broker.config.llm import LLMConfig

    with pytest.raises(ValueError, match="prompt_cache: false applies only to backend"):
        LLMConfig(backend="ollama", model="gemma3:4b", prompt_cache=False)


# -- streaming: a stall times out, a long reply does not; a cancelled call stops ------------

class FakeServer:
    """Streams ``tokens`` chunks, ``gap_s`` apart, after ``first_s``; records when it stopped."""

    def __init__(self, tokens=10, gap_s=0.0, first_s=0.0):
        self.tokens, self.gap_s, self.first_s = tokens, gap_s, first_s
        self.sent = 0
        self.stopped_early = False

    def handle_chat_completions(self, payload, callback):
        import time

        assert payload["stream"] is True
        time.sleep(self.first_s)
        for i in range(self.tokens):
            chunk = {"choices": [{"index": 0, "delta": {"content": f"t{i} "},
                                  "finish_reason": None}]}
            self.sent += 1
            if callback(chunk):
                self.stopped_early = True
                return
            time.sleep(self.gap_s)
        callback({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        callback({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": self.tokens},
                  "timings": {"predicted_n": self.tokens}})


@pytest.fixture
def serving(backend, monkeypatch):
    def serve(server):
        monkeypatch.setattr("governed_broker.llm.embedded.load_server", lambda settings: server)
        return server
    return serve


def free_request():
    return LLMRequest.of([{"role": "user", "content": "x"}], seed=1, max_tokens=20)


def test_a_reply_still_producing_tokens_is_not_timed_out(backend, serving):
    serving(FakeServer(tokens=12, gap_s=0.1))  # 1.2 s in all, never 0.4 s without a token
    backend.timeout_s = 0.4
    reply = backend.chat(free_request())
    assert reply.text == "".join(f"t{i} " for i in range(12))
    assert (reply.prompt_tokens, reply.completion_tokens) == (5, 12)
    assert reply.extra["finish_reason"] == "stop"


def test_a_stall_times_out_and_the_generation_is_told_to_stop(backend, serving):
    from governed_broker.llm.base import LLMTimeoutError
    from governed_broker.llm.embedded import generations_running

    server = serving(FakeServer(tokens=3, first_s=1.5))  # reads its prompt for 1.5 s
    backend.timeout_s = 0.3
    with pytest.raises(LLMTimeoutError, match="no token for 0.3 s"):
        backend.chat(free_request())
    backend._executor.shutdown(wait=True)
    assert server.stopped_early and server.sent == 1 and generations_running() == 0


def test_a_cancelled_call_stops_its_generation_at_the_next_token(backend, serving):
    import asyncio
    import time

    server = serving(FakeServer(tokens=1000, gap_s=0.01))

    async def cancel_soon():
        task = asyncio.ensure_future(backend.achat(free_request()))
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    start = time.perf_counter()
    asyncio.run(cancel_soon())
    backend._executor.shutdown(wait=True)
    assert server.stopped_early and server.sent < 100
    assert time.perf_counter() - start < 2


def test_the_thread_count_is_in_the_cache_key_and_fixed_by_default(tmp_path):
    from governed_broker.llm.cache import ResponseCache
    from governed_broker.llm.embedded import DEFAULT_THREADS, default_threads, usable_cores
    from governed_broker.llm.wrappers import CachedBackend

    path = tmp_path / "not-a-model.gguf"
    path.write_bytes(b"\x00" * 4096)
    cache = ResponseCache(tmp_path / "c.sqlite")
    keys = {t: CachedBackend(EmbeddedBackend(EmbeddedSettings(path, threads=t), sha256="ab"),
                             cache).key_for(ask()) for t in (0, 1, 2, 3)}
    assert len({keys[1], keys[2], keys[3]}) == 3
    assert default_threads() == min(DEFAULT_THREADS, usable_cores())  # not the machine's load
    assert keys[0] == keys[default_threads()]
    cache.close()


@pytest.fixture
def bare_environment(monkeypatch):
    """No OpenMP wait variable in the environment; whatever a test sets is undone after it."""
    from governed_broker.llm.embedded import THREAD_WAIT_VARIABLES

    for name in THREAD_WAIT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_waiting_threads_sleep_unless_the_environment_says_how_they_wait(bare_environment):
    from governed_broker.llm import embedded

    bare_environment.setattr(embedded, "_libgomp_loaded", lambda: False)
    assert embedded._choose_thread_wait() == (
        "GOMP_SPINCOUNT=10000 (the backend's default)", {"GOMP_SPINCOUNT": "10000"})
    bare_environment.setenv("OMP_WAIT_POLICY", "ACTIVE")
    bare_environment.setenv("GOMP_SPINCOUNT", "300000")
    assert embedded._choose_thread_wait() == (
        "OMP_WAIT_POLICY=ACTIVE GOMP_SPINCOUNT=300000 (from the environment)", {})


def test_a_wait_policy_that_comes_too_late_is_said_not_assumed(bare_environment):
    from governed_broker.llm import embedded

    bare_environment.setattr(embedded, "_libgomp_loaded", lambda: True)
    wait, setting = embedded._choose_thread_wait()
    assert wait.startswith("libgomp's default (spinning)") and setting == {}


@pytest.fixture
def runtime_import(bare_environment):
    """Import a stand-in ``xllamacpp`` afresh; returns the GOMP_SPINCOUNT each load saw."""
    import importlib.abc
    import importlib.util
    import os
    import sys

    from governed_broker.llm import embedded

    seen = []

    class StandIn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            return importlib.util.spec_from_loader(name, self) if name == "xllamacpp" else None

        def create_module(self, spec):
            return None

        def exec_module(self, module):
            seen.append(os.environ.get("GOMP_SPINCOUNT"))

    bare_environment.setitem(sys.modules, "xllamacpp", None)  # restored (or removed) after
    bare_environment.delitem(sys.modules, "xllamacpp")
    bare_environment.setattr(sys, "meta_path", [StandIn(), *sys.meta_path])
    bare_environment.setattr(embedded, "_loaded_thread_wait", None)
    bare_environment.setattr(embedded, "_libgomp_loaded", lambda: False)
    return seen


def test_the_wait_policy_is_set_only_while_the_runtime_loads(runtime_import):
    import os

    from governed_broker.llm import embedded

    embedded._import_xllamacpp()
    embedded._import_xllamacpp()
    assert runtime_import == ["10000"]  # loaded once, with a short spin
    assert "GOMP_SPINCOUNT" not in os.environ  # the user's environment, and children's, as was
    assert embedded.thread_wait() == "GOMP_SPINCOUNT=10000 (the backend's default)"


def test_a_wait_policy_the_user_chose_is_kept(runtime_import, bare_environment):
    import os

    from governed_broker.llm import embedded

    bare_environment.setenv("GOMP_SPINCOUNT", "300000")
    embedded._import_xllamacpp()
    assert runtime_import == ["300000"] and os.environ["GOMP_SPINCOUNT"] == "300000"
    assert embedded.thread_wait() == "GOMP_SPINCOUNT=300000 (from the environment)"


def test_the_wait_policy_is_recorded_but_not_in_the_cache_key(backend, tmp_path, monkeypatch):
    from governed_broker.llm import embedded
    from governed_broker.llm.cache import ResponseCache
    from governed_broker.llm.wrappers import CachedBackend

    cache = ResponseCache(tmp_path / "c.sqlite")
    keys = set()
    for wait in ("GOMP_SPINCOUNT=10000 (the backend's default)", "OMP_WAIT_POLICY=PASSIVE"):
        monkeypatch.setattr(embedded, "_loaded_thread_wait", wait)
        assert backend.describe()["thread_wait"] == wait
        keys.add(CachedBackend(backend, cache).key_for(ask()))
    assert len(keys) == 1  # replies are the same either way (real-model test)
    monkeypatch.setattr(embedded, "_loaded_thread_wait", None)
    assert backend.describe()["thread_wait"] is None  # not loaded in this process
    cache.close()
