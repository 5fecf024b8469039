"""The episodic store (seed 004): SQLite is authoritative, FAISS indexes the embeddings.

One database file per run (``:memory:`` allowed); ``user_id`` is the agent id and
``session_id`` the year (or run id). Every column is plain SQL or JSON text and the embedding
is a float32 blob: no ``eval``, no pickle. Hybrid search = structured filter (SQL) -> vector
top-k among the filtered ids -> combined score

    score = (0.8 * sim + 0.2 * recency) * (0.8 + 0.4 * importance),  recency = 1 / (1 + age)

with ``age`` in years from ``now`` (default: the newest timestamp in the store) and ``sim``
the cosine similarity clipped to [0, 1]. Without an embedder (or when the query has no
embedding) a keyword match replaces the similarity with the base score 0.5; each hit says
which method produced it.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sqlite3
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from governed_broker.memory.embedding import Embedder, tokenize
from governed_broker.memory.vector_index import FaissFlatIndex

SIM_WEIGHT, RECENCY_WEIGHT = 0.8, 0.2
IMPORTANCE_BASE, IMPORTANCE_GAIN = 0.8, 0.4
KEYWORD_BASE_SCORE = 0.5
FILTER_KEYS = ("user_id", "session_id", "memory_type", "year_min", "year_max", "min_importance")
_STOPWORDS = frozenset(
    "a an and are as at be by for from had has have i in is it its me my of on or our so that "
    "the their this to was we were with you".split())

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (
    rid INTEGER PRIMARY KEY,
    id TEXT UNIQUE NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    memory_type TEXT NOT NULL,
    timestamp REAL NOT NULL,
    content TEXT NOT NULL,
    context TEXT NOT NULL,
    outcome TEXT,
    importance REAL NOT NULL,
    metadata TEXT NOT NULL,
    embedding BLOB
);
CREATE INDEX IF NOT EXISTS ep_user ON episodes(user_id, timestamp);
CREATE INDEX IF NOT EXISTS ep_session ON episodes(session_id);
CREATE INDEX IF NOT EXISTS ep_importance ON episodes(importance);
"""
_COLS = "rid, id, user_id, session_id, memory_type, timestamp, content, context, outcome, " \
        "importance, metadata"


@dataclass
class Episode:
    """One stored episode (seed 004).

    Attributes:
        id: Unique id (caller's, or ``ep00000001``...).
        user_id: Owner (agent id).
        session_id: Session (year or run id).
        timestamp: Time in simulation years.
        content: Text.
        importance: 0..1.
        memory_type: e.g. ``episodic``, ``insight``.
        context: Situation when it happened (JSON object).
        outcome: What it led to (JSON object or None).
        metadata: Extras (JSON object).
    """

    id: str
    user_id: str
    session_id: str
    timestamp: float
    content: str
    importance: float = 0.5
    memory_type: str = "episodic"
    context: dict[str, Any] = field(default_factory=dict)
    outcome: dict[str, Any] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SearchHit:
    """One search result: the episode, its combined score and the parts of it."""

    episode: Episode
    score: float
    similarity: float
    recency: float
    method: str  # "vector" or "keyword"


_ENCODER = json.JSONEncoder(sort_keys=True, allow_nan=False)


def _json(value: Any, what: str) -> str:
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"episode {what} must be JSON-serialisable: {exc}") from exc


def digest_episode_rows(conn: sqlite3.Connection, hasher: Any, *, after_rid: int = 0,
                        max_year: float | None = None) -> int:
    """Feed every episode row after ``after_rid`` (in ``rid`` order) into ``hasher``.

    Checkpoints use it to fingerprint a store's logical content (the file's bytes change freely
    under SQLite); with ``max_year``, rows of numeric sessions after it are left out (what an
    interrupted year added). Works on a read-only connection. Returns the last ``rid`` fed
    (``after_rid`` when none was).
    """
    sql = f"SELECT {_COLS}, embedding FROM episodes WHERE rid > ?"
    args: list[Any] = [int(after_rid)]
    if max_year is not None:
        sql += " AND NOT (session_id GLOB '[0-9]*' AND CAST(session_id AS REAL) > ?)"
        args.append(float(max_year))
    last = int(after_rid)
    for row in conn.execute(sql + " ORDER BY rid", args):
        *cols, blob = row
        hasher.update(json.dumps(cols, ensure_ascii=True).encode("ascii"))
        hasher.update(b"" if blob is None else bytes(blob))
        hasher.update(b"\n")
        last = int(row[0])
    return last


def combined_score(similarity: float, age_years: float, importance: float) -> float:
    """``(0.8*sim + 0.2/(1+age)) * (0.8 + 0.4*importance)`` (seed 004)."""
    recency = 1.0 / (1.0 + max(0.0, age_years))
    return (SIM_WEIGHT * similarity + RECENCY_WEIGHT * recency) * (
        IMPORTANCE_BASE + IMPORTANCE_GAIN * importance)


class EpisodicStore:
    """SQLite-backed episodic memory with hybrid (filter + vector + score) search.

    Args:
        path: Database file (created if missing) or ``":memory:"``.
        embedder: Embedder for content and queries; None: keyword search only. A file that
            holds vectors of another embedder is refused (name and dimension are recorded).
    """

    def __init__(self, path: str | Path = ":memory:", embedder: Embedder | None = None) -> None:
        self.path = str(path)
        self.embedder = embedder
        self._conn = sqlite3.connect(self.path)
        self._conn.row_factory = None
        if self.path != ":memory:":
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)
        self._check_embedder()
        self._next = int(self._conn.execute("SELECT COALESCE(MAX(rid), 0) FROM episodes")
                         .fetchone()[0]) + 1
        self._index: FaissFlatIndex | None = None
        self._batching = False
        if embedder is not None:
            self._index = FaissFlatIndex(embedder.dim)
            self._load_vectors()

    # ----------------------------------------------------------------------------- set-up
    def _check_embedder(self) -> None:
        row = self._conn.execute("SELECT value FROM meta WHERE key='embedder'").fetchone()
        if self.embedder is None:
            return
        mine = {"name": self.embedder.name, "dim": int(self.embedder.dim)}
        if row is None:
            self._conn.execute("INSERT INTO meta VALUES ('embedder', ?)", (json.dumps(mine),))
            self._conn.commit()
        elif json.loads(row[0]) != mine:
            raise ValueError(
                f"{self.path}: episodes were embedded with {json.loads(row[0])}, not {mine}; "
                "open it with the same embedder, or with embedder=None for keyword search")

    def _load_vectors(self) -> None:
        assert self._index is not None
        rows = self._conn.execute(
            "SELECT rid, embedding FROM episodes WHERE embedding IS NOT NULL ORDER BY rid"
        ).fetchall()
        if rows:
            ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
            vecs = np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(
                len(rows), self._index.dim)
            self._index.add(ids, vecs)

    @contextlib.contextmanager
    def batch(self) -> Iterator[EpisodicStore]:
        """Make every ``add_many`` inside one transaction.

        Committed at the end (rolled back if the block fails): a year's consolidation of every
        household writes once.
        """
        if self._batching:
            yield self
            return
        self._batching = True
        try:
            with self._conn:
                yield self
        except BaseException:  # the rows of the block are gone: ids and vectors follow
            self._next = int(self._conn.execute(
                "SELECT COALESCE(MAX(rid), 0) FROM episodes").fetchone()[0]) + 1
            if self._index is not None:
                self._index = FaissFlatIndex(self._index.dim)
                self._load_vectors()
            raise
        finally:
            self._batching = False

    def close(self) -> None:
        """Commit and close the database."""
        self._conn.commit()
        self._conn.close()

    def abandon(self) -> None:
        """Close the database without committing what is pending.

        A failed run: resuming starts from its last checkpoint.
        """
        self._conn.rollback()
        self._conn.close()

    def __enter__(self) -> EpisodicStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------------------- writing
    def add(self, content: str, *, user_id: str | int, session_id: str | int,
            timestamp: float, importance: float = 0.5, memory_type: str = "episodic",
            context: Mapping[str, Any] | None = None, outcome: Mapping[str, Any] | None = None,
            metadata: Mapping[str, Any] | None = None, episode_id: str | None = None) -> Episode:
        """Store one episode (and its embedding) and return it."""
        return self.add_many([dict(
            content=content, user_id=user_id, session_id=session_id, timestamp=timestamp,
            importance=importance, memory_type=memory_type, context=context, outcome=outcome,
            metadata=metadata, episode_id=episode_id)])[0]

    def add_many(self, records: Iterable[Mapping[str, Any]]) -> list[Episode]:
        """Store many episodes in one transaction with one batched embedding call.

        Each record has the keyword arguments of ``add`` (``content``, ``user_id``,
        ``session_id``, ``timestamp`` required).
        """
        episodes = [self._episode(dict(r)) for r in records]
        if not episodes:
            return []
        rids = list(range(self._next, self._next + len(episodes)))
        vecs = self._embed([e.content for e in episodes])
        rows = []
        for i, (rid, ep) in enumerate(zip(rids, episodes, strict=True)):
            if not ep.id:
                ep.id = f"ep{rid:08d}"
            blob = None if vecs is None else vecs[i].tobytes()
            rows.append((rid, ep.id, ep.user_id, ep.session_id, ep.memory_type, ep.timestamp,
                         ep.content, _json(ep.context, "context"),
                         None if ep.outcome is None else _json(ep.outcome, "outcome"),
                         ep.importance, _json(ep.metadata, "metadata"), blob))
        try:
            if self._batching:  # committed by ``batch``
                self._conn.executemany("INSERT INTO episodes VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                                       rows)
            else:
                with self._conn:
                    self._conn.executemany(
                        "INSERT INTO episodes VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        except sqlite3.IntegrityError as exc:
            raise ValueError(f"cannot store episodes: {exc} (duplicate id?)") from exc
        self._next = rids[-1] + 1
        if vecs is not None and self._index is not None:
            self._index.add(np.asarray(rids, np.int64), vecs)
        return episodes

    @staticmethod
    def _episode(r: dict[str, Any]) -> Episode:
        missing = [k for k in ("content", "user_id", "session_id", "timestamp") if k not in r]
        if missing:
            raise ValueError(f"episode record lacks {missing}")
        unknown = set(r) - {"content", "user_id", "session_id", "timestamp", "importance",
                            "memory_type", "context", "outcome", "metadata", "episode_id"}
        if unknown:
            raise ValueError(f"unknown episode fields {sorted(unknown)}")
        imp = float(r.get("importance", 0.5))
        ts = float(r["timestamp"])
        if not (0.0 <= imp <= 1.0):
            raise ValueError(f"episode importance must be in [0, 1], got {imp}")
        if not math.isfinite(ts):
            raise ValueError(f"episode timestamp must be finite, got {ts}")
        if not isinstance(r["content"], str) or not r["content"].strip():
            raise ValueError("episode content must be a non-empty string")
        return Episode(
            id=str(r.get("episode_id") or ""), user_id=str(r["user_id"]),
            session_id=str(r["session_id"]), timestamp=ts, content=r["content"],
            importance=imp, memory_type=str(r.get("memory_type") or "episodic"),
            context=dict(r.get("context") or {}),
            outcome=None if r.get("outcome") is None else dict(r["outcome"]),
            metadata=dict(r.get("metadata") or {}))

    def _embed(self, texts: Sequence[str]) -> np.ndarray | None:
        if self.embedder is None:
            return None
        vecs = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if vecs.shape != (len(texts), self.embedder.dim):
            raise ValueError(
                f"embedder {self.embedder.name} returned shape {vecs.shape}, expected "
                f"({len(texts)}, {self.embedder.dim})")
        return vecs

    def update(self, episode_id: str, *, content: str | None = None,
               importance: float | None = None, metadata: Mapping[str, Any] | None = None,
               context: Mapping[str, Any] | None = None,
               outcome: Mapping[str, Any] | None = None) -> Episode:
        """Change fields of an episode (re-embedding changed content); return the new one."""
        rid, ep = self._get_row(episode_id)
        if content is not None:
            ep.content = content
        if importance is not None:
            ep.importance = float(importance)
        if metadata is not None:
            ep.metadata = dict(metadata)
        if context is not None:
            ep.context = dict(context)
        if outcome is not None:
            ep.outcome = dict(outcome)
        self._episode({"content": ep.content, "user_id": ep.user_id, "importance":
                       ep.importance, "session_id": ep.session_id, "timestamp": ep.timestamp})
        vecs = self._embed([ep.content]) if content is not None else None
        with self._conn:
            self._conn.execute(
                "UPDATE episodes SET content=?, importance=?, metadata=?, context=?, outcome=? "
                "WHERE rid=?",
                (ep.content, ep.importance, _json(ep.metadata, "metadata"),
                 _json(ep.context, "context"),
                 None if ep.outcome is None else _json(ep.outcome, "outcome"), rid))
            if vecs is not None:
                self._conn.execute("UPDATE episodes SET embedding=? WHERE rid=?",
                                   (vecs[0].tobytes(), rid))
        if vecs is not None and self._index is not None:
            self._index.remove(np.array([rid]))
            self._index.add(np.array([rid]), vecs)
        return ep

    def remove(self, episode_id: str) -> bool:
        """Delete one episode from SQLite and the index; False if it did not exist."""
        row = self._conn.execute("SELECT rid FROM episodes WHERE id=?", (episode_id,)).fetchone()
        if row is None:
            return False
        self._delete_rids([row[0]])
        return True

    def _delete_rids(self, rids: Sequence[int]) -> int:
        if not rids:
            return 0
        with self._conn:
            self._conn.executemany("DELETE FROM episodes WHERE rid=?", [(int(r),) for r in rids])
        if self._index is not None:
            self._index.remove(np.asarray(rids, np.int64))
        return len(rids)

    def clear(self, user_id: str | int | None = None) -> int:
        """Delete all episodes (of one user when given); return how many."""
        where, args = ("WHERE user_id=?", (str(user_id),)) if user_id is not None else ("", ())
        rids = [r[0] for r in self._conn.execute(f"SELECT rid FROM episodes {where}", args)]
        return self._delete_rids(rids)

    def remove_sessions_after(self, year: float) -> int:
        """Delete episodes whose (numeric) session is a year after ``year``; return how many.

        Used when a run resumes from the checkpoint of ``year``: what the interrupted run
        stored for later years is discarded and written again. Non-numeric sessions are kept.
        """
        rids = [r[0] for r in self._conn.execute(
            "SELECT rid FROM episodes WHERE session_id GLOB '[0-9]*' "
            "AND CAST(session_id AS REAL) > ?", (float(year),))]
        removed = self._delete_rids(rids)
        # ids continue after what remains, exactly as in a run that was never interrupted
        self._next = int(self._conn.execute("SELECT COALESCE(MAX(rid), 0) FROM episodes")
                         .fetchone()[0]) + 1
        return removed

    def digest_rows(self, hasher: Any, *, after_rid: int = 0,
                    max_year: float | None = None) -> int:
        """Feed stored rows into ``hasher`` (see ``digest_episode_rows``)."""
        return digest_episode_rows(self._conn, hasher, after_rid=after_rid, max_year=max_year)

    def forget(self, strategy: str = "importance", *, threshold: float | None = None,
               max_age: float | None = None, now: float | None = None,
               max_capacity: int | None = None, user_id: str | int | None = None) -> int:
        """Hard-delete episodes by policy (seed 004); return how many were removed.

        * ``importance``: importance below ``threshold``;
        * ``time``: older than ``max_age`` years at ``now`` (default: newest timestamp);
        * ``capacity``: beyond ``max_capacity`` episodes, keeping the most important (ties:
          newer first).

        ``user_id`` restricts the policy to one agent.
        """
        where, args = ("user_id=?", [str(user_id)]) if user_id is not None else ("1=1", [])
        if strategy == "importance":
            if threshold is None:
                raise ValueError("forget('importance') needs threshold=")
            sql = f"SELECT rid FROM episodes WHERE {where} AND importance < ?"
            rids = [r[0] for r in self._conn.execute(sql, [*args, float(threshold)])]
        elif strategy == "time":
            if max_age is None:
                raise ValueError("forget('time') needs max_age= (years)")
            now = self._now(now)
            sql = f"SELECT rid FROM episodes WHERE {where} AND timestamp < ?"
            rids = [r[0] for r in self._conn.execute(sql, [*args, now - float(max_age)])]
        elif strategy == "capacity":
            if max_capacity is None or int(max_capacity) < 0:
                raise ValueError("forget('capacity') needs max_capacity= >= 0")
            sql = (f"SELECT rid FROM episodes WHERE {where} "
                   "ORDER BY importance DESC, timestamp DESC, rid DESC LIMIT -1 OFFSET ?")
            rids = [r[0] for r in self._conn.execute(sql, [*args, int(max_capacity)])]
        else:
            raise ValueError(f"unknown forget strategy {strategy!r}; "
                             "allowed: importance, time, capacity")
        return self._delete_rids(rids)

    # ----------------------------------------------------------------------------- reading
    def _row_to_episode(self, row: Sequence[Any]) -> Episode:
        return Episode(id=row[1], user_id=row[2], session_id=row[3], memory_type=row[4],
                       timestamp=row[5], content=row[6], context=json.loads(row[7]),
                       outcome=None if row[8] is None else json.loads(row[8]),
                       importance=row[9], metadata=json.loads(row[10]))

    def _get_row(self, episode_id: str) -> tuple[int, Episode]:
        row = self._conn.execute(f"SELECT {_COLS} FROM episodes WHERE id=?",
                                 (episode_id,)).fetchone()
        if row is None:
            raise KeyError(f"no episode with id {episode_id!r}")
        return row[0], self._row_to_episode(row)

    def get(self, episode_id: str) -> Episode | None:
        """The episode with this id, or None."""
        try:
            return self._get_row(episode_id)[1]
        except KeyError:
            return None

    def session_episodes(self, session_id: str | int,
                         user_id: str | int | None = None) -> list[Episode]:
        """Episodes of one session (and user), oldest first."""
        sql = f"SELECT {_COLS} FROM episodes WHERE session_id=?"
        args: list[Any] = [str(session_id)]
        if user_id is not None:
            sql += " AND user_id=?"
            args.append(str(user_id))
        rows = self._conn.execute(sql + " ORDER BY timestamp, rid", args)
        return [self._row_to_episode(r) for r in rows]

    def all_episodes(self, user_id: str | int | None = None) -> list[Episode]:
        """Every episode (of one user), oldest first."""
        return self._filtered({"user_id": user_id} if user_id is not None else {})

    def _where(self, filters: Mapping[str, Any] | None) -> tuple[str, list[Any]]:
        filters = dict(filters or {})
        unknown = sorted(set(filters) - set(FILTER_KEYS))
        if unknown:
            raise ValueError(f"unknown search filters {unknown}; allowed: {FILTER_KEYS}")
        clauses, args = ["1=1"], []
        for key, col, op in (("user_id", "user_id", "="), ("session_id", "session_id", "="),
                             ("memory_type", "memory_type", "="),
                             ("year_min", "timestamp", ">="), ("year_max", "timestamp", "<="),
                             ("min_importance", "importance", ">=")):
            if filters.get(key) is not None:
                val = filters[key]
                clauses.append(f"{col} {op} ?")
                args.append(str(val) if op == "=" else float(val))
        return " AND ".join(clauses), args

    def _filtered(self, filters: Mapping[str, Any] | None) -> list[Episode]:
        where, args = self._where(filters)
        rows = self._conn.execute(
            f"SELECT {_COLS} FROM episodes WHERE {where} ORDER BY timestamp, rid", args)
        return [self._row_to_episode(r) for r in rows]

    def _now(self, now: float | None) -> float:
        if now is not None:
            return float(now)
        val = self._conn.execute("SELECT MAX(timestamp) FROM episodes").fetchone()[0]
        return 0.0 if val is None else float(val)

    def search(self, query: str, filters: Mapping[str, Any] | None = None, top_k: int = 5,
               now: float | None = None) -> list[SearchHit]:
        """Hybrid search: SQL filter -> vector top-k -> combined score (see module doc).

        Args:
            query: Free text.
            filters: Any of ``user_id, session_id, memory_type, year_min, year_max,
                min_importance``.
            top_k: Number of hits returned.
            now: Current time in years for recency (default: newest timestamp stored).
        """
        if top_k <= 0:
            return []
        where, args = self._where(filters)
        now = self._now(now)
        hits: list[SearchHit] = []
        qv = self._embed([query]) if self._index is not None else None
        if qv is not None and np.any(qv[0]) and self._index.ntotal > 0:
            allowed = None
            if where != "1=1":
                allowed = np.fromiter(
                    (r[0] for r in self._conn.execute(
                        f"SELECT rid FROM episodes WHERE {where}", args)), np.int64)
            pool = max(4 * top_k, 20)  # rerank pool for the combined score
            ids, sims = self._index.search(qv[0], pool, allowed)
            hits = self._score_vector_hits(ids, sims, now)
        if not hits:
            hits = self._keyword_hits(query, where, args, now)
        hits.sort(key=lambda h: (-h.score, -h.episode.timestamp, h.episode.id))
        return hits[:top_k]

    def _score_vector_hits(self, ids: np.ndarray, sims: np.ndarray, now: float) -> list[SearchHit]:
        if ids.size == 0:
            return []
        marks = ",".join("?" * ids.size)
        rows = {r[0]: r for r in self._conn.execute(
            f"SELECT {_COLS} FROM episodes WHERE rid IN ({marks})", [int(i) for i in ids])}
        hits = []
        for rid, sim in zip(ids.tolist(), sims.tolist(), strict=True):
            s = min(1.0, float(sim))
            if s <= 0.0:  # orthogonal or opposite: not a match
                continue
            ep = self._row_to_episode(rows[rid])
            age = now - ep.timestamp
            hits.append(SearchHit(ep, combined_score(s, age, ep.importance), s,
                                  1.0 / (1.0 + max(0.0, age)), "vector"))
        return hits

    def _keyword_hits(self, query: str, where: str, args: list[Any],
                      now: float) -> list[SearchHit]:
        words = [w for w in tokenize(query) if w not in _STOPWORDS] or tokenize(query)
        if not words:
            return []
        pattern = re.compile(r"(?<!\w)(?:" + "|".join(map(re.escape, words)) + r")(?!\w)",
                             re.IGNORECASE)
        # SQL LIKE (case-insensitive for ASCII) pre-selects, the regex checks word boundaries
        like = " OR ".join("content LIKE ?" for _ in words)
        sql = f"SELECT {_COLS} FROM episodes WHERE {where} AND ({like})"
        hits = []
        for row in self._conn.execute(sql, [*args, *(f"%{w}%" for w in words)]):
            if pattern.search(row[6]):
                ep = self._row_to_episode(row)
                age = now - ep.timestamp
                hits.append(SearchHit(ep, combined_score(KEYWORD_BASE_SCORE, age, ep.importance),
                                      KEYWORD_BASE_SCORE, 1.0 / (1.0 + max(0.0, age)), "keyword"))
        return hits

    # ----------------------------------------------------------------------------- summaries
    def find_patterns(self, user_id: str | int | None = None, min_support: int = 2,
                      top_n: int = 10) -> dict[str, Any]:
        """Simple behaviour statistics (seed 004): frequent words, context values, outcomes.

        Returns a dict with ``n_episodes``, ``frequent_terms`` (term, episodes containing it;
        at least ``min_support``), ``context_values`` (key -> value -> count, scalar values
        only) and ``outcomes`` (key -> count of true values / mean of numeric values).
        """
        eps = self.all_episodes(user_id)
        terms: Counter[str] = Counter()
        ctx: dict[str, Counter[str]] = {}
        out_true: Counter[str] = Counter()
        out_num: dict[str, list[float]] = {}
        for ep in eps:
            terms.update({w for w in tokenize(ep.content) if w not in _STOPWORDS and len(w) > 2})
            for k, v in ep.context.items():
                if isinstance(v, str | int | float | bool) or v is None:
                    ctx.setdefault(k, Counter())[json.dumps(v)] += 1
            for k, v in (ep.outcome or {}).items():
                if isinstance(v, bool):
                    out_true[k] += int(v)
                elif isinstance(v, int | float):
                    out_num.setdefault(k, []).append(float(v))
        return {
            "n_episodes": len(eps),
            "frequent_terms": [(t, c) for t, c in sorted(terms.items(), key=lambda x: (-x[1], x[0]))
                               if c >= min_support][:top_n],
            "context_values": {k: dict(sorted(c.items())) for k, c in sorted(ctx.items())},
            "outcomes": {**{f"{k}_true": v for k, v in sorted(out_true.items())},
                         **{f"{k}_mean": float(np.mean(v)) for k, v in sorted(out_num.items())}},
        }

    def stats(self) -> dict[str, Any]:
        """Counts, averages, time span and storage facts."""
        n, users, sessions, avg, t0, t1 = self._conn.execute(
            "SELECT COUNT(*), COUNT(DISTINCT user_id), COUNT(DISTINCT session_id), "
            "AVG(importance), MIN(timestamp), MAX(timestamp) FROM episodes").fetchone()
        by_type = dict(self._conn.execute(
            "SELECT memory_type, COUNT(*) FROM episodes GROUP BY memory_type ORDER BY 1"))
        return {
            "episodes": n, "users": users, "sessions": sessions,
            "avg_importance": None if avg is None else float(avg),
            "time_span": None if t0 is None else [float(t0), float(t1)],
            "by_type": by_type,
            "vectors": 0 if self._index is None else self._index.ntotal,
            "embedder": None if self.embedder is None else self.embedder.name,
            "path": self.path,
        }
