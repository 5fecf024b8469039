"""EpisodicStore (seed 004): SQLite round trip, filters, hybrid search, forgetting, stats."""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pytest

from governed_broker.memory.embedding import TfidfEmbedder
from governed_broker.memory.episodic import EpisodicStore, combined_score

TEMPLATES = [
    "My home flooded {d} m deep and the damage cost ${c}.",
    "I bought flood insurance for ${c}.",
    "A quiet year with no water in the street.",
    "The neighbours raised their houses by {d} m.",
    "I decided to relocate away from the river.",
]


def corpus(n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        t = TEMPLATES[(i + i // 100) % len(TEMPLATES)]
        out.append(dict(
            content=t.format(d=round(float(rng.uniform(0.1, 2)), 1),
                             c=int(rng.integers(1, 90)) * 1000),
            user_id=i % 100, session_id=(i // 100) % 10 + 1, timestamp=float((i // 100) % 10 + 1),
            importance=round(float(rng.random()), 3),
            context={"flooded": i % 5 == 0, "zone": "high"},
            outcome={"success": bool(i % 3 == 0), "cost": float(i % 7)}, metadata={"n": i}))
    return out


@pytest.fixture(scope="module")
def tfidf():
    return TfidfEmbedder(t.format(d=1, c=1) for t in TEMPLATES)


def test_combined_score_formula():
    assert combined_score(0.9, 2.0, 0.5) == pytest.approx((0.8 * 0.9 + 0.2 / 3) * (0.8 + 0.2))
    assert combined_score(0.5, -1.0, 0.0) == pytest.approx((0.4 + 0.2) * 0.8)  # age clipped


def test_ten_thousand_round_trip_and_reopen(tmp_path, tfidf):
    path = tmp_path / "memory.sqlite"
    records = corpus(10_000)
    store = EpisodicStore(path, tfidf)
    eps = store.add_many(records)
    assert len(eps) == 10_000 and len({e.id for e in eps}) == 10_000
    st = store.stats()
    assert st["episodes"] == 10_000 and st["users"] == 100 and st["sessions"] == 10
    assert st["vectors"] == 10_000 and st["time_span"] == [1.0, 10.0]
    assert st["avg_importance"] == pytest.approx(np.mean([r["importance"] for r in records]))
    got = store.get(eps[1234].id)
    assert got == eps[1234] and got.metadata == {"n": 1234} and got.context["zone"] == "high"
    filters = {"user_id": 7, "year_min": 3, "year_max": 8, "min_importance": 0.2}
    hits = store.search("flood damage to my home", filters, top_k=5)
    assert 0 < len(hits) <= 5 and all(h.method == "vector" for h in hits)
    for h in hits:
        e = h.episode
        assert e.user_id == "7" and 3 <= e.timestamp <= 8 and e.importance >= 0.2
        assert h.score == pytest.approx(combined_score(h.similarity, 10 - e.timestamp,
                                                       e.importance), rel=1e-6)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # brute force over the same filter: the best hit is the true best combined score
    cand = [e for e in store.all_episodes(7) if 3 <= e.timestamp <= 8 and e.importance >= 0.2]
    qv = tfidf.embed(["flood damage to my home"])[0]
    sims = tfidf.embed([e.content for e in cand]) @ qv
    best = max(combined_score(min(1.0, s), 10 - e.timestamp, e.importance)
               for e, s in zip(cand, sims, strict=True) if s > 0)
    assert hits[0].score == pytest.approx(best, rel=1e-5)
    session = store.session_episodes(4, user_id=7)
    assert len(session) == 10  # i // 100 in 3, 13, ..., 93
    assert {(e.timestamp, e.session_id, e.user_id) for e in session} == {(4.0, "4", "7")}
    store.close()

    again = EpisodicStore(path, tfidf)
    assert again.stats() == st
    assert [(h.episode.id, h.score) for h in again.search("flood damage to my home", filters)] \
        == [(h.episode.id, h.score) for h in hits]
    again.close()
    again = EpisodicStore(path, tfidf)  # forgetting persists across reopening
    removed = again.forget("capacity", max_capacity=50, user_id=7)
    removed += again.forget("importance", threshold=0.05)
    removed += again.forget("time", max_age=8)  # drops year 1 (now = 10)
    after = again.stats()
    assert after["episodes"] == 10_000 - removed and after["vectors"] == after["episodes"]
    assert after["time_span"] == [2.0, 10.0] and len(again.all_episodes(7)) <= 50
    top = [(h.episode.id, h.score) for h in again.search("flood damage to my home", filters)]
    again.close()
    again = EpisodicStore(path, tfidf)
    assert again.stats() == after
    assert [(h.episode.id, h.score) for h in again.search("flood damage to my home", filters)] \
        == top
    again.close()
    keyword = EpisodicStore(path)  # no embedder: keyword fallback on the same file
    kh = keyword.search("relocate river", {"user_id": 4}, top_k=3)
    assert kh and all(h.method == "keyword" and "relocate" in h.episode.content for h in kh)
    assert all(h.similarity == 0.5 for h in kh)
    keyword.close()
    with pytest.raises(ValueError, match="embedded with"):
        EpisodicStore(path, TfidfEmbedder(["other words only"]))


def test_update_remove_clear_and_forget(tfidf):
    store = EpisodicStore(":memory:", tfidf)
    store.add_many(corpus(500))
    e = store.search("relocate river", {"user_id": 3})[0].episode
    store.update(e.id, content="My home flooded 3 m deep", importance=0.99, metadata={"x": 1})
    got = store.get(e.id)
    assert got.content == "My home flooded 3 m deep" and got.importance == 0.99
    assert store.search("home flooded deep", {"user_id": 3}, top_k=1)[0].episode.id == e.id
    assert store.remove(e.id) and not store.remove(e.id) and store.get(e.id) is None
    assert store.stats()["vectors"] == 499
    n_low = sum(1 for r in corpus(500) if r["importance"] < 0.3) - (e.importance < 0.3)
    assert store.forget("importance", threshold=0.3) == n_low
    assert all(x.importance >= 0.3 for x in store.all_episodes())
    before = store.stats()["episodes"]
    old = sum(1 for x in store.all_episodes() if x.timestamp < 6 - 2)
    assert old > 0
    assert store.forget("time", max_age=2, now=6) == old
    assert store.stats()["episodes"] == before - old
    uid = max(range(100), key=lambda u: len(store.all_episodes(u)))
    user = store.all_episodes(uid)
    assert len(user) >= 2
    removed = store.forget("capacity", max_capacity=1, user_id=uid)
    kept = store.all_episodes(uid)
    assert removed == len(user) - 1 and len(kept) == 1
    assert kept[0].importance == max(x.importance for x in user)
    assert store.clear(user_id=6) > 0 and store.all_episodes(6) == []
    store.clear()
    assert store.stats()["episodes"] == 0 and store.stats()["vectors"] == 0
    with pytest.raises(ValueError, match="strategy"):
        store.forget("random")
    with pytest.raises(ValueError, match="filters"):
        store.search("x", {"agent": 1})


def test_validation_and_no_pickle(tmp_path):
    store = EpisodicStore(tmp_path / "m.sqlite")
    with pytest.raises(ValueError, match="importance"):
        store.add("x", user_id=1, session_id=1, timestamp=1, importance=1.5)
    with pytest.raises(ValueError, match="JSON"):
        store.add("x", user_id=1, session_id=1, timestamp=1, metadata={"f": object()})
    store.add("x", user_id=1, session_id=1, timestamp=1, episode_id="dup")
    with pytest.raises(ValueError, match="duplicate"):
        store.add("y", user_id=1, session_id=1, timestamp=1, episode_id="dup")
    store.close()
    con = sqlite3.connect(tmp_path / "m.sqlite")
    row = con.execute("SELECT metadata, context, embedding FROM episodes").fetchone()
    assert row == ("{}", "{}", None)  # plain JSON text, no vectors without an embedder


def test_find_patterns():
    store = EpisodicStore()
    store.add_many(corpus(50))
    p = store.find_patterns(user_id=0)
    assert p["n_episodes"] == 1
    p = store.find_patterns()
    assert p["n_episodes"] == 50
    assert ("home", 10) in p["frequent_terms"]  # template 0 appears 10 times
    assert p["context_values"]["flooded"] == {"false": 40, "true": 10}
    assert p["outcomes"]["success_true"] == sum(1 for i in range(50) if i % 3 == 0)
    assert p["outcomes"]["cost_mean"] == pytest.approx(np.mean([i % 7 for i in range(50)]))


def test_semantic_search_with_minilm(minilm):
    store = EpisodicStore(":memory:", minilm)
    store.add_many([
        dict(content="Water poured into our living room and ruined the sofa.", user_id=1,
             session_id=2, timestamp=2, importance=0.9),
        dict(content="We bought a new car this year.", user_id=1, session_id=3, timestamp=3,
             importance=0.9),
    ])
    hits = store.search("my house was flooded", top_k=2)
    assert hits[0].episode.timestamp == 2 and hits[0].method == "vector"
    assert not math.isnan(hits[0].score)


def test_a_batch_writes_once_and_a_failed_batch_leaves_nothing(tmp_path) -> None:
    path = tmp_path / "m.sqlite"
    store = EpisodicStore(path)
    other = sqlite3.connect(path)
    with store.batch():
        store.add_many([{"content": "one", "user_id": 1, "session_id": 1, "timestamp": 1.0}])
        store.add_many([{"content": "two", "user_id": 2, "session_id": 1, "timestamp": 1.0}])
        assert other.execute("SELECT count(*) FROM episodes").fetchone()[0] == 0  # not yet
    assert other.execute("SELECT count(*) FROM episodes").fetchone()[0] == 2
    with pytest.raises(ValueError, match="duplicate id"), store.batch():
        store.add_many([{"content": "three", "user_id": 3, "session_id": 2, "timestamp": 2.0}])
        store.add_many([{"content": "dup", "user_id": 3, "session_id": 2, "timestamp": 2.0,
                         "episode_id": "ep00000001"}])
    assert [e.content for e in store.all_episodes()] == ["one", "two"]
    assert store.add("four", user_id=4, session_id=3, timestamp=3.0).id == "ep00000003"
