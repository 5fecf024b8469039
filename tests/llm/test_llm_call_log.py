"""Call log: every call, cached or not, failed or not, with timing and tokens."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime

import pytest

from governed_broker.llm import (
    CachedBackend,
    CallLog,
    LLMError,
    LLMRequest,
    LLMResponse,
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
    backend.flush()  # rows are written in batches (the broker flushes at each phase's end)
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


def test_sampling_options_are_logged_only_where_a_request_sets_them(tmp_path):
    backend = LoggedBackend(ScriptedBackend([(r".", {"ok": True})], name="sampling"),
                            CallLog(tmp_path / "llm_calls.sqlite"))
    plain = LLMRequest.of([{"role": "user", "content": "a"}], temperature=0.3)
    backend.chat(plain)
    backend.chat(LLMRequest.of([{"role": "user", "content": "b"}], temperature=0.3, top_k=20,
                               min_p=0.1))
    backend.flush()
    with sqlite3.connect(tmp_path / "llm_calls.sqlite") as conn:
        rows = conn.execute("SELECT temperature, extra_json FROM calls ORDER BY id").fetchall()
    assert [r[0] for r in rows] == [0.3, 0.3]
    assert "sampling" not in json.loads(rows[0][1])  # rows as before the options existed
    assert json.loads(rows[1][1])["sampling"] == {"top_k": 20, "min_p": 0.1}


def _response(extra: dict) -> LLMResponse:
    return LLMResponse(text="{}", parsed={}, prompt_tokens=1, completion_tokens=1,
                       latency_s=0.1, backend="ollama", model="m", extra=extra)


def test_transport_retries_and_wait_have_columns_and_manifest_totals(tmp_path):
    log = CallLog(tmp_path / "llm_calls.sqlite")
    request = LLMRequest.of([{"role": "user", "content": "decide"}], seed=1, tag="decision")
    now = datetime.now(UTC)
    log.record(request, now, 0.1, "ollama", "m",
               response=_response({"transport_retries": 4, "transport_wait_s": 61.25}))
    log.record(request, now, 0.1, "ollama", "m", response=_response({}))
    summary = log.summary()
    log.close()
    assert summary["transport_retries"] == 4 and summary["transport_wait_s"] == 61.25
    rows = sqlite3.connect(tmp_path / "llm_calls.sqlite").execute(
        "SELECT transport_retries, transport_wait_s FROM calls ORDER BY id").fetchall()
    assert rows == [(4, 61.25), (0, 0.0)]


def test_a_log_from_before_the_transport_columns_gains_them_on_open(tmp_path):
    path = tmp_path / "llm_calls.sqlite"
    old = sqlite3.connect(path)  # the table as an older version created it
    old.execute("CREATE TABLE calls (id INTEGER PRIMARY KEY, started_at TEXT NOT NULL, "
                "tag TEXT NOT NULL, backend TEXT NOT NULL, model TEXT NOT NULL, cache_key TEXT, "
                "cached INTEGER NOT NULL, ok INTEGER NOT NULL, error TEXT, "
                "latency_s REAL NOT NULL, prompt_tokens INTEGER NOT NULL, "
                "completion_tokens INTEGER NOT NULL, seed INTEGER NOT NULL, "
                "temperature REAL NOT NULL, max_tokens INTEGER NOT NULL, "
                "num_ctx INTEGER NOT NULL, messages_json TEXT NOT NULL, schema_json TEXT, "
                "response_text TEXT, extra_json TEXT)")
    old.commit()
    old.close()
    log = CallLog(path)
    request = LLMRequest.of([{"role": "user", "content": "decide"}], seed=1, tag="decision")
    log.record(request, datetime.now(UTC), 0.1, "ollama", "m",
               response=_response({"transport_retries": 2, "transport_wait_s": 3.5}))
    assert log.summary()["transport_retries"] == 2
    log.close()


def test_a_new_log_has_pages_a_prompt_fits_and_an_older_log_keeps_its_own(tmp_path):
    """A call's row (a 1-6 KB prompt) would spill onto overflow pages of SQLite's default 4 KiB.

    A new log is made with ``PAGE_SIZE`` pages, an existing one is left as it is.
    """
    from governed_broker.llm.call_log import PAGE_SIZE

    def page_size(path) -> int:
        conn = sqlite3.connect(path)
        try:
            return conn.execute("PRAGMA page_size").fetchone()[0]
        finally:
            conn.close()

    request = LLMRequest.of([{"role": "user", "content": "x" * 6000}], seed=1, tag="decision")
    CallLog(tmp_path / "new.sqlite").close()
    assert PAGE_SIZE >= 8192 and page_size(tmp_path / "new.sqlite") == PAGE_SIZE
    old = sqlite3.connect(tmp_path / "old.sqlite")
    old.execute("PRAGMA page_size=4096")
    old.execute("CREATE TABLE t (x)")
    old.commit()
    old.close()
    log = CallLog(tmp_path / "old.sqlite")
    log.record(request, datetime.now(UTC), 0.1, "ollama", "m", response=_response({}))
    log.close()
    assert page_size(tmp_path / "old.sqlite") == 4096
    conn = sqlite3.connect(tmp_path / "old.sqlite")
    rows = conn.execute("SELECT length(messages_json) FROM calls").fetchall()
    conn.close()
    assert rows == [(len(json.dumps([{"role": "user", "content": "x" * 6000}])),)]
