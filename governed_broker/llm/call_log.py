"""The call log: every LLM call of a run, cached or not, in a SQLite file.

Modelled on simonw/llm's logs database: one row per call with the prompt, the reply, token
counts and wall-clock timing, so a run can report LLM time against framework time and every
decision can be traced to the exact text the model produced. A run writes
``<run_dir>/llm_calls.sqlite``. Rows are written in batches (``FLUSH_ROWS``, ``FLUSH_SECONDS``,
and whenever the broker finishes a year's phase), so a killed process loses at most the calls
of its last second.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from governed_broker.llm.base import LLMRequest, LLMResponse
from governed_broker.llm.jsontext import messages_json, schema_json

_EXTRA = json.JSONEncoder(ensure_ascii=False, default=str)
#: A row is written at once unless the last write was less than FLUSH_SECONDS ago; then it
#: waits for the next write (at most FLUSH_ROWS wait) or ``flush``.
FLUSH_ROWS, FLUSH_SECONDS = 512, 1.0
#: Bytes per database page of a new log (see ``CallLog.__init__``).
PAGE_SIZE = 16384
_INSERT = (
    "INSERT INTO calls (started_at, tag, backend, model, cache_key, cached, ok, error, "
    "latency_s, prompt_tokens, completion_tokens, seed, temperature, max_tokens, num_ctx, "
    "messages_json, schema_json, response_text, extra_json, transport_retries, "
    "transport_wait_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY,
    started_at TEXT NOT NULL,
    tag TEXT NOT NULL,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    cache_key TEXT,
    cached INTEGER NOT NULL,
    ok INTEGER NOT NULL,
    error TEXT,
    latency_s REAL NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    temperature REAL NOT NULL,
    max_tokens INTEGER NOT NULL,
    num_ctx INTEGER NOT NULL,
    messages_json TEXT NOT NULL,
    schema_json TEXT,
    response_text TEXT,
    extra_json TEXT,
    transport_retries INTEGER NOT NULL DEFAULT 0,
    transport_wait_s REAL NOT NULL DEFAULT 0
)
"""

#: Columns added after the first release of the table: added to an older log on open, so a
#: run resumed with a newer version keeps one log (older rows read 0, which they recorded).
_ADDED_COLUMNS = {
    "transport_retries": "INTEGER NOT NULL DEFAULT 0",
    "transport_wait_s": "REAL NOT NULL DEFAULT 0",
}


class CallLog:
    """Append-only SQLite log of LLM calls.

    Args:
        path: SQLite file; created with its parent directory if needed.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        # A call's row (its prompt, 1-6 KB) fits one 16 KiB page instead of spilling onto
        # overflow pages of the default 4 KiB: writing the log costs about a quarter less CPU.
        # It applies when the file is created (a resumed run's log keeps its page size).
        self._conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
        # WAL + NORMAL: a commit per call without an fsync per call (which costs milliseconds).
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute(_SCHEMA)
        self._add_missing_columns()
        self._conn.commit()
        self._pending: list[tuple[Any, ...]] = []
        self._flushed = float("-inf")  # monotonic time of the last write

    def _add_missing_columns(self) -> None:
        present = {row[1] for row in self._conn.execute("PRAGMA table_info(calls)")}
        for name, declaration in _ADDED_COLUMNS.items():
            if name not in present:  # fixed names from _ADDED_COLUMNS, never config values
                self._conn.execute(f"ALTER TABLE calls ADD COLUMN {name} {declaration}")

    def record(
        self,
        request: LLMRequest,
        started_at: datetime,
        latency_s: float,
        backend: str,
        model: str,
        response: LLMResponse | None = None,
        error: BaseException | None = None,
        cache_key: str | None = None,
    ) -> None:
        """Append one call (successful when ``response`` is given, failed with ``error``)."""
        extra = dict(response.extra) if response is not None else {}
        if sampling := request.sampling_options():  # beyond the temperature column
            extra["sampling"] = sampling
        row = (
            started_at.astimezone(UTC).isoformat(timespec="milliseconds"),
            request.tag,
            response.backend if response is not None else backend,
            response.model if response is not None else model,
            cache_key,
            int(bool(response is not None and response.cached)),
            int(response is not None and error is None),
            None if error is None else f"{type(error).__name__}: {error}",
            latency_s,
            response.prompt_tokens if response is not None else 0,
            response.completion_tokens if response is not None else 0,
            request.seed,
            request.temperature,
            request.max_tokens,
            request.num_ctx,
            _storable(messages_json(request.messages, "utf8")),
            None if request.json_schema is None else schema_json(request.json_schema, "ascii"),
            None if response is None else _storable(response.text),
            _EXTRA.encode(extra),
            # the transport cost of this call (retries, wall-clock seconds waited for a server)
            int(extra.get("transport_retries", 0)),
            float(extra.get("transport_wait_s", 0.0)),
        )
        now = time.monotonic()
        with self._lock:
            self._pending.append(row)
            due = len(self._pending) >= FLUSH_ROWS or now - self._flushed >= FLUSH_SECONDS
        if due:
            self.flush()

    def flush(self) -> None:
        """Write the rows waiting (one transaction)."""
        with self._lock:
            if self._pending:
                self._conn.executemany(_INSERT, self._pending)
                self._conn.commit()
                self._pending.clear()
            self._flushed = time.monotonic()

    def summary(self) -> dict[str, Any]:
        """Totals for the manifest.

        Calls, cached, errors, seconds in LLM calls, tokens, and the transport retries and seconds
        spent waiting for an unreachable server.
        """
        self.flush()
        with self._lock:
            row = self._conn.execute(
                "SELECT count(*), coalesce(sum(cached), 0), coalesce(sum(1 - ok), 0), "
                "coalesce(sum(latency_s), 0), coalesce(sum(CASE WHEN cached = 0 THEN latency_s "
                "ELSE 0 END), 0), coalesce(sum(prompt_tokens), 0), "
                "coalesce(sum(completion_tokens), 0), coalesce(sum(transport_retries), 0), "
                "coalesce(sum(transport_wait_s), 0) FROM calls"
            ).fetchone()
        return {
            "calls": row[0],
            "cached": row[1],
            "errors": row[2],
            "llm_seconds": round(row[3], 6),
            "uncached_llm_seconds": round(row[4], 6),
            "prompt_tokens": row[5],
            "completion_tokens": row[6],
            "transport_retries": row[7],
            "transport_wait_s": round(row[8], 3),
        }

    def close(self) -> None:
        """Write the rows waiting and close the database connection."""
        self.flush()
        with self._lock:
            self._conn.close()


def _storable(text: str) -> str:
    """``text`` with lone surrogates as backslash escapes (SQLite stores only valid UTF-8)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
