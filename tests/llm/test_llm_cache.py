"""Response cache: keys, hits and misses, corruption, modes."""

from __future__ import annotations

import asyncio
import hashlib
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_broker.llm import (
    CachedBackend,
    LLMError,
    LLMRequest,
    ResponseCache,
    ScriptedBackend,
    cache_key,
)
from governed_broker.llm.cache import KEY_VERSION, canonical_json

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def base_request(**changes):
    fields = dict(
        messages=({"role": "system", "content": "sys"}, {"role": "user", "content": "hello"}),
        json_schema=SCHEMA, temperature=0.7, seed=42, max_tokens=64, num_ctx=2048,
    )
    fields.update(changes)
    return LLMRequest(**fields)


def counting_backend(name="m"):
    return ScriptedBackend([(r".", lambda req: {"a": req.seed})], name=name)


def test_identical_request_hits_and_returns_the_same_reply(tmp_path):
    inner = counting_backend()
    backend = CachedBackend(inner, ResponseCache(tmp_path / "c.sqlite"))
    first = backend.chat(base_request())
    second = backend.chat(base_request(tag="other label"))  # the tag is not part of the key
    assert len(inner.calls) == 1
    assert not first.cached and second.cached
    assert (second.text, second.parsed, second.model) == (first.text, first.parsed, first.model)
    assert backend.stats()["cache"] == {
        "mode": "readwrite", "path": str(tmp_path / "c.sqlite"),
        "hits": 1, "misses": 1, "corrupt": 0, "writes": 1,
    }


@pytest.mark.parametrize(
    "change",
    [
        {"seed": 43},
        {"json_schema": {**SCHEMA, "required": []}},
        {"json_schema": None},
        {"temperature": 0.2},
        {"top_p": 0.8},
        {"top_k": 20},
        {"min_p": 0.1},
        {"max_tokens": 65},
        {"num_ctx": 4096},
        {"messages": ({"role": "system", "content": "sys"}, {"role": "user", "content": "hi"})},
        {"messages": ({"role": "user", "content": "sys"}, {"role": "user", "content": "hello"})},
    ],
)
def test_any_change_of_request_misses(tmp_path, change):
    inner = counting_backend()
    backend = CachedBackend(inner, ResponseCache(tmp_path / "c.sqlite"))
    backend.chat(base_request())
    backend.chat(base_request(**change))
    assert len(inner.calls) == 2
    assert backend.cache.hits == 0 and backend.cache.misses == 2


def test_unset_sampling_options_leave_the_key_as_before_they_existed():
    # the key of KEY_VERSION 1 requests, written out as it was before top_p/top_k/min_p:
    # replies cached by earlier versions stay valid
    request = base_request()
    options = canonical_json({"temperature": 0.7, "seed": 42, "max_tokens": 64, "num_ctx": 2048})
    text = "".join(('{"backend":', canonical_json("embedded"), ',"messages":',
                    canonical_json([dict(m) for m in request.messages]), ',"model":',
                    canonical_json("m"), ',"options":', options, ',"schema":',
                    canonical_json(SCHEMA), ',"v":', canonical_json(KEY_VERSION), "}"))
    assert cache_key("embedded", "m", request) == hashlib.sha256(text.encode()).hexdigest()
    # and the key main computed for this request before the options existed (552e3f4)
    assert cache_key("embedded", "m", request) == (
        "fb939d3541614306a3fc4f5f75d2e2826ec8c1dd23c3ec83fb9fba9811dfef64")


def test_other_model_or_backend_kind_misses():
    request = base_request()
    assert cache_key("embedded", "m@sha256:aa", request) != cache_key(
        "embedded", "m@sha256:ab", request
    )
    assert cache_key("ollama", "m", request) != cache_key("openai", "m", request)


def test_model_change_misses_through_the_wrapper(tmp_path):
    path = tmp_path / "c.sqlite"
    one, two = counting_backend("one"), counting_backend("two")
    CachedBackend(one, ResponseCache(path)).chat(base_request())
    CachedBackend(two, ResponseCache(path)).chat(base_request())
    assert len(one.calls) == len(two.calls) == 1


@given(
    seed=st.integers(0, 2**63 - 1),
    text=st.text(max_size=50),
    temperature=st.floats(0, 2, allow_nan=False),
)
def test_key_is_deterministic_and_seed_sensitive(seed, text, temperature):
    request = base_request(
        seed=seed, temperature=temperature, messages=({"role": "user", "content": text},)
    )
    again = LLMRequest.of([{"content": text, "role": "user"}], json_schema=dict(SCHEMA),
                          seed=seed, temperature=temperature, max_tokens=64, num_ctx=2048)
    assert cache_key("k", "m", request) == cache_key("k", "m", again)
    assert cache_key("k", "m", request) != cache_key("k", "m", base_request(
        seed=seed + 1, temperature=temperature, messages=request.messages))


@pytest.mark.parametrize(
    "tamper",
    [
        "UPDATE responses SET payload = replace(payload, '\"a\"', '\"b\"')",  # checksum fails
        "UPDATE responses SET payload = '{broken', checksum = 'x'",
        "UPDATE responses SET checksum = 'deadbeef'",
    ],
)
def test_corrupted_entry_is_detected_and_refetched(tmp_path, tamper):
    path = tmp_path / "c.sqlite"
    inner = counting_backend()
    CachedBackend(inner, ResponseCache(path)).chat(base_request())
    with sqlite3.connect(path) as conn:
        conn.execute(tamper)
    backend = CachedBackend(inner, ResponseCache(path))
    again = backend.chat(base_request())
    assert len(inner.calls) == 2 and not again.cached and again.parsed == {"a": 42}
    assert backend.cache.corrupt == 1 and backend.cache.writes == 1
    third = backend.chat(base_request())  # the refetched entry is good again
    assert third.cached and third.parsed == {"a": 42}


def test_corrupted_database_file_is_a_clear_error(tmp_path):
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(LLMError, match="not a usable SQLite database.*delete it"):
        ResponseCache(path)


def test_readonly_reuses_but_never_writes(tmp_path):
    path = tmp_path / "c.sqlite"
    inner = counting_backend()
    CachedBackend(inner, ResponseCache(path)).chat(base_request())
    readonly = CachedBackend(inner, ResponseCache(path, "readonly"))
    assert readonly.chat(base_request()).cached
    readonly.chat(base_request(seed=7))
    assert readonly.cache.writes == 0
    assert CachedBackend(inner, ResponseCache(path, "readonly")).cache.get(
        cache_key(inner.kind, inner.model_id, base_request(seed=7))) is None


def test_readonly_without_a_file_is_an_error(tmp_path):
    with pytest.raises(LLMError, match="does not exist but llm.cache.mode is readonly"):
        ResponseCache(tmp_path / "missing.sqlite", "readonly")


def test_off_mode_always_calls(tmp_path):
    inner = counting_backend()
    backend = CachedBackend(inner, ResponseCache(tmp_path / "c.sqlite", "off"))
    backend.chat(base_request())
    backend.chat(base_request())
    assert len(inner.calls) == 2 and not (tmp_path / "c.sqlite").exists()


def test_concurrent_identical_requests_are_all_answered(tmp_path):
    inner = counting_backend()
    backend = CachedBackend(inner, ResponseCache(tmp_path / "c.sqlite"))

    async def many():
        return await asyncio.gather(*(backend.achat(base_request(seed=s % 3)) for s in range(12)))

    replies = asyncio.run(many())
    assert [r.parsed["a"] for r in replies] == [s % 3 for s in range(12)]


def test_replies_are_stored_in_batches_and_answer_while_they_wait(tmp_path):
    path = tmp_path / "c.sqlite"
    inner = counting_backend()
    backend = CachedBackend(inner, ResponseCache(path))
    for seed in range(5):  # the first is written at once, the next wait (within a second)
        backend.chat(base_request(seed=seed))
    stored = sqlite3.connect(path).execute("SELECT count(*) FROM responses").fetchone()[0]
    assert 1 <= stored < 5
    assert backend.chat(base_request(seed=4)).cached  # a waiting reply answers
    backend.flush()
    assert sqlite3.connect(path).execute("SELECT count(*) FROM responses").fetchone()[0] == 5
    assert len(inner.calls) == 5
