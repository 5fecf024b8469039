"""Call log: every call, cached or not, failed or not, with timing and tokens."""

from __future__ import annotations

import json
import sqlite3

import pytest

from governed_broker.llm import (
    CachedBackend,
    CallLog,
    LLMError,
    LLMRequest,
    LoggedBackend,
    ResponseCache,
    ScriptedBackend,
)


def test_every_call_is_logged_with_cache_flag_tokens_and_prompt(tmp_path):
    inner = ScriptedBackend([(r"^decide$", {"ok": True})], name="log-test")
    backend = LoggedBackend(
        CachedBackend(inner, ResponseCache(tmp_path / "cache.sqlite")),
        CallLog(tmp_path / "run" / "llm_calls.sqlite"),
    )
    request = LLMRequest.of([{"role": "user", "content": "decide"}], json_schema={},
                            seed=3, tag="decision")
    backend.chat(request)
    backend.chat(request)
    with pytest.raises(LLMError):
        backend.chat(LLMRequest.of([{"role": "user", "content": "fail"}], tag="reflection"))
    with sqlite3.connect(tmp_path / "run" / "llm_calls.sqlite") as conn:
        rows = conn.execute(
            "SELECT tag, backend, model, cached, ok, error, latency_s, prompt_tokens, "
            "completion_tokens, seed, messages_json, response_text, cache_key FROM calls "
            "ORDER BY id"
        ).fetchall()
    assert [r[:5] for r in rows] == [
        ("decision", "scripted", "scripted:log-test", 0, 1),
        ("decision", "scripted", "scripted:log-test", 1, 1),
        ("reflection", "scripted", "scripted:log-test", 0, 0),
    ]
    assert rows[2][5].startswith("LLMError: scripted backend")
    assert all(r[6] >= 0 for r in rows) and rows[0][7] > 0 and rows[0][8] > 0
    assert rows[0][9] == 3 and json.loads(rows[0][10]) == [{"role": "user", "content": "decide"}]
    assert rows[0][11] == '{"ok": true}' and rows[0][12] == rows[1][12] and len(rows[0][12]) == 64
    summary = backend.stats()["calls"]
    assert (summary["calls"], summary["cached"], summary["errors"]) == (3, 1, 1)
    assert summary["uncached_llm_seconds"] <= summary["llm_seconds"]
    assert backend.stats()["cache"]["hits"] == 1
