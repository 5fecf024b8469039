"""The SQLite response cache: never pay twice for the same call.

The key is the sha256 of a canonical JSON document of everything that determines a reply:
backend kind, model identity (file sha256 or server digest), messages, JSON schema and the
sampling options including the seed. The request ``tag`` is a label and not part of the key.
Each stored entry carries a sha256 of its payload; an entry whose checksum or JSON does not
check out is counted as corrupt, deleted and fetched again, never returned.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, Literal

from governed_broker.llm.base import LLMError, LLMRequest, LLMResponse
from governed_broker.llm.jsontext import ENCODERS, messages_json, schema_json

CacheMode = Literal["readwrite", "readonly", "off"]
KEY_VERSION = 1
#: Replies are written in batches: a reply is written at once unless the last write was less
#: than FLUSH_SECONDS ago; then it waits for the next write (at most FLUSH_ROWS wait) or
#: ``flush`` (the broker's end of a phase). A killed process loses at most the waiting ones.
FLUSH_ROWS, FLUSH_SECONDS = 512, 1.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    payload TEXT NOT NULL,
    checksum TEXT NOT NULL,
    created_at REAL NOT NULL
)
"""


def canonical_json(value: Any) -> str:
    """Deterministic JSON (sorted keys, no whitespace, UTF-8 kept) used for hashing."""
    return ENCODERS["canonical"].encode(value)


def cache_key(backend_kind: str, model_id: str, request: LLMRequest,
              settings: Mapping[str, Any] | None = None) -> str:
    """The cache key of a request sent to a backend/model (hex sha256).

    It is the sha256 of ``canonical_json`` of the document ``{"v": KEY_VERSION, "backend",
    "model", "messages", "schema", "options": {temperature, seed, max_tokens, num_ctx, and
    top_p, top_k, min_p where the request sets them}, "runtime": settings}``, written out piece
    by piece in sorted-key order so that the system message and the schema, the same in most
    calls, are encoded once (``llm.jsontext``). Unset sampling options are left out, so
    requests that set none keep the keys they had before those options existed; so is
    ``runtime`` when ``settings`` (the backend's ``reply_settings``: the embedded model's
    thread count) is empty.
    """
    options = canonical_json({"temperature": request.temperature, "seed": request.seed,
                              "max_tokens": request.max_tokens, "num_ctx": request.num_ctx,
                              **request.sampling_options()})
    runtime = f',"runtime":{canonical_json(dict(settings))}' if settings else ""
    text = "".join((
        '{"backend":', encode_basestring(backend_kind),
        ',"messages":', messages_json(request.messages, "canonical"),
        ',"model":', encode_basestring(model_id), ',"options":', options, runtime,
        ',"schema":', schema_json(request.json_schema, "canonical"),
        _KEY_END))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_KEY_END = f',"v":{canonical_json(KEY_VERSION)}}}'

#: ``extra`` keys that describe one call, not the reply (left out of cached payloads).
_PER_CALL = ("transport_retries", "transport_wait_s")


# ASCII escapes: a reply may hold lone surrogates, which SQLite's UTF-8 text cannot store;
# the escaped JSON keeps the reply exactly as the backend gave it.
_PAYLOAD = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _payload_of(response: LLMResponse) -> str:
    return _PAYLOAD.encode(
        {
            "text": response.text,
            "parsed": response.parsed,
            "prompt_tokens": response.prompt_tokens,
            "completion_tokens": response.completion_tokens,
            "latency_s": response.latency_s,
            "backend": response.backend,
            "model": response.model,
            # what this call's transport cost is not part of the reply a cache hit gives again
            "extra": {k: v for k, v in response.extra.items() if k not in _PER_CALL},
        })


def _checksum(payload: str) -> str:
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ResponseCache:
    """A SQLite file of replies keyed by :func:`cache_key`.

    Args:
        path: SQLite file (parent directories are created in ``readwrite`` mode).
        mode: ``readwrite``, ``readonly`` (the file must exist; nothing is written) or ``off``.

    Counters (``hits``, ``misses``, ``corrupt``, ``writes``) feed the run manifest. New replies
    are stored in batches (``FLUSH_ROWS``, ``FLUSH_SECONDS``; ``flush``, ``close``) and answer
    ``get`` while they wait.
    """

    def __init__(self, path: Path | str, mode: CacheMode = "readwrite") -> None:
        if mode not in ("readwrite", "readonly", "off"):
            raise LLMError(f"llm.cache.mode {mode!r}: use readwrite, readonly or off")
        self.path = Path(path)
        self.mode = mode
        self.hits = self.misses = self.corrupt = self.writes = 0
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pending: dict[str, tuple[str, str, float]] = {}  # key -> payload, checksum, time
        self._flushed = float("-inf")  # monotonic time of the last write
        if mode != "off":
            self._conn = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            if self.mode == "readonly":
                if not self.path.is_file():
                    raise LLMError(
                        f"response cache {self.path} does not exist but llm.cache.mode is "
                        "readonly; point llm.cache.path at an existing cache or use readwrite"
                    )
                conn = sqlite3.connect(
                    f"{self.path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False
                )
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
                conn.execute("PRAGMA journal_mode=WAL")
                # WAL + NORMAL: no fsync per commit (ms each); an OS crash can lose the last
                # replies, never corrupt the file, and a lost reply is simply fetched again.
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(_SCHEMA)
                conn.commit()
            conn.execute("SELECT count(*) FROM responses").fetchone()
        except sqlite3.DatabaseError as exc:
            raise LLMError(
                f"response cache {self.path} is not a usable SQLite database ({exc}); delete "
                "it (a fresh one is created) or set llm.cache.mode: off"
            ) from exc
        return conn

    def get(self, key: str) -> LLMResponse | None:
        """Return the cached reply for ``key`` (``cached=True``) or None on a miss."""
        if self._conn is None:
            return None
        start = time.perf_counter()
        with self._lock:
            row = self._pending.get(key) or self._conn.execute(
                "SELECT payload, checksum FROM responses WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            self.misses += 1
            return None
        response = self._decode(row[0], row[1])
        if response is None:
            self.corrupt += 1
            self.misses += 1
            self._delete(key)
            return None
        self.hits += 1
        extra = dict(response.get("extra", {}))
        extra["original_latency_s"] = response["latency_s"]
        return LLMResponse(
            text=response["text"],
            parsed=response["parsed"],
            prompt_tokens=response["prompt_tokens"],
            completion_tokens=response["completion_tokens"],
            latency_s=time.perf_counter() - start,
            backend=response["backend"],
            model=response["model"],
            cached=True,
            extra=extra,
        )

    @staticmethod
    def _decode(payload: Any, checksum: Any) -> dict[str, Any] | None:
        if not isinstance(payload, str) or checksum != _checksum(payload):
            return None
        try:
            data = json.loads(payload)
        except json.JSONDecodeError:
            return None
        needed = ("text", "parsed", "prompt_tokens", "completion_tokens", "latency_s",
                  "backend", "model")
        if not isinstance(data, dict) or any(k not in data for k in needed):
            return None
        return data

    def _delete(self, key: str) -> None:
        if self.mode != "readwrite" or self._conn is None:
            return
        with self._lock:
            self._conn.execute("DELETE FROM responses WHERE key = ?", (key,))
            self._conn.commit()

    def put(self, key: str, response: LLMResponse) -> None:
        """Store a reply (only in ``readwrite`` mode; cached replies are not re-stored)."""
        if self.mode != "readwrite" or self._conn is None or response.cached:
            return
        payload = _payload_of(response)
        now = time.monotonic()
        with self._lock:
            self._pending[key] = (payload, _checksum(payload), time.time())
            due = len(self._pending) >= FLUSH_ROWS or now - self._flushed >= FLUSH_SECONDS
        self.writes += 1
        if due:
            self.flush()

    def flush(self) -> None:
        """Write the replies waiting to be stored (one transaction)."""
        with self._lock:
            if not self._pending or self._conn is None:
                return
            self._conn.executemany(
                "INSERT OR REPLACE INTO responses (key, payload, checksum, created_at) "
                "VALUES (?, ?, ?, ?)",
                [(k, *v) for k, v in self._pending.items()],
            )
            self._conn.commit()
            self._pending.clear()
            self._flushed = time.monotonic()

    def stats(self) -> dict[str, Any]:
        """Counters and settings for the run manifest."""
        return {
            "mode": self.mode,
            "path": str(self.path) if self.mode != "off" else None,
            "hits": self.hits,
            "misses": self.misses,
            "corrupt": self.corrupt,
            "writes": self.writes,
        }

    def close(self) -> None:
        """Store the waiting replies and close the database connection."""
        self.flush()
        if self._conn is not None:
            with self._lock:
                self._conn.close()
            self._conn = None
