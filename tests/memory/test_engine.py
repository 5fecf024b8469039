"""HumanCentricMemoryEngine vs independent arithmetic (docs/memory.md) and its invariants."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_broker.config.memory import MemoryConfig, MemoryParams
from governed_broker.memory import HumanCentricMemoryEngine, WindowMemoryEngine, make_engine


def engine(seed: int = 0, **kw) -> HumanCentricMemoryEngine:
    return HumanCentricMemoryEngine(MemoryParams(**kw), rng=np.random.default_rng(seed),
                                    agent_id=7)


def test_importance_is_product_of_keyword_weights():
    e = engine()
    flood = e.add("My home flooded 0.8 m deep", 1)
    assert (flood.emotion, flood.source, flood.importance) == ("direct_impact", "personal", 1.0)
    neigh = e.add("The neighbours decided to relocate", 1)
    assert (neigh.emotion, neigh.source) == ("strategic", "neighbour")
    assert neigh.importance == pytest.approx(0.8 * 0.8)
    plain = e.add("Sunny weather all summer", 1)
    assert (plain.emotion, plain.source) == ("routine", "general")
    assert plain.importance == pytest.approx(0.1 * 0.5)


def test_explicit_categories_and_importance_override():
    e = engine()
    item = e.add("My home flooded", 1, emotion="routine", source="neighbour")
    assert item.importance == pytest.approx(0.1 * 0.8) and item.w_emotion == 0.1
    item = e.add("Sunny day.", 1, importance=0.37)
    assert item.importance == 0.37 and item.emotion == "routine"
    with pytest.raises(ValueError, match="unknown category"):
        e.add("x", 1, emotion="panic")
    with pytest.raises(ValueError, match="kind"):
        e.add("x", 1, kind="dream")


def test_score_matches_hand_computation():
    e = engine(decay_rate=0.2)
    item = e.add("My house was damaged", 3)  # W_emotion 1.0, importance 1.0
    # lambda' = 0.2 * (1 - 0.5 * 1.0) = 0.1; age 4 -> exp(-0.4)
    assert e.score(item, 7) == pytest.approx(1.0 * math.exp(-0.4), rel=1e-12)
    low = e.add("Sunny day.", 3, importance=0.1)  # routine W_emotion 0.1
    assert e.score(low, 7) == pytest.approx(0.1 * math.exp(-0.2 * 0.95 * 4), rel=1e-12)


def test_seed_003_worked_example():
    e = engine()
    flood = e.add("Flood destroyed the house. Trauma extremely high.", 2, importance=1.0)
    e.end_year(2)
    sunny = e.add("Sunny day.", 8, importance=0.1)
    e._working.drain()  # put the sunny memory into long-term memory directly
    e._long.append(sunny)
    e._arrays = None
    assert e.score(flood, 10) == pytest.approx(math.exp(-0.05 * 8))  # 0.670
    assert e.score(sunny, 10) == pytest.approx(0.1 * math.exp(-0.095 * 2))  # 0.083 < 0.1
    got = e.retrieve(10)
    assert flood in got and sunny not in got


def test_consolidation_uses_seeded_draws_exactly():
    seed = 123
    e = engine(seed)
    items = [e.add("Sunny day.", 1, importance=imp) for imp in (0.1, 0.3, 0.59, 0.6, 0.9)]
    kept = e.end_year(1)
    draws = np.random.default_rng(seed).random(3)  # one draw per item below the threshold
    expected = [it for it, u in zip(items[:3], draws, strict=True)
                if u < 0.7 * it.importance / 0.6] + items[3:]
    assert {m.id for m in kept} == {m.id for m in expected}
    assert e.working() == [] and {m.id for m in e.long_term()} == {m.id for m in expected}


def test_consolidation_probability_statistically():
    e = engine(5, window_size=1)
    kept = 0
    for year in range(4000):
        e.add("Sunny day.", year, importance=0.3)
        kept += len(e.end_year(year))
    # p = 0.7 * 0.3 / 0.6 = 0.35; 4000 draws -> sd 0.0075
    assert kept / 4000 == pytest.approx(0.35, abs=0.03)


def test_consolidation_requires_rng_only_when_drawing():
    e = HumanCentricMemoryEngine()
    e.add("My home flooded", 1)
    assert len(e.end_year(1)) == 1  # importance 1.0: no draw needed
    e.add("Sunny day.", 2)
    with pytest.raises(ValueError, match="child_rng"):
        e.end_year(2)


def test_working_memory_capacity_evicts_least_important_oldest():
    e = engine(window_size=2)
    a = e.add("Sunny day.", 1, importance=0.2)
    b = e.add("My home flooded", 1)
    c = e.add("Sunny day again.", 1, importance=0.2)
    assert e.working() == [b, c] and a not in e.items()


def test_retrieve_structure_and_access_counts():
    e = engine(top_k_significant=2, top_k_insights=1, window_size=5)
    for y in range(1, 6):
        e.add(f"My home flooded in year {y}", y)
        e.end_year(y)
    i1 = e.add_insight("I live in a flood zone.", 3)
    i2 = e.add_insight("Insurance helps me.", 5)
    w = e.add("Sunny day.", 6, importance=0.05)
    got = e.retrieve(6)
    assert got[0] is w
    assert [m.year for m in got[1:3]] == [5.0, 4.0]  # most recent floods score highest
    assert got[3] is i2 and i1 not in got  # one insight slot; newer insight scores higher
    assert all(m.access_count == 1 and m.last_access_year == 6 for m in got)
    assert i2 not in e.working()  # insights never take a working slot


def test_insight_outlives_everything():
    e = engine()
    e.add("My home flooded 2 m deep and was destroyed", 1)
    e.end_year(1)
    ins = e.add_insight("I live in a flood zone and must protect my home.", 1)
    assert ins.importance == 10.0 and ins.w_emotion == 0.9
    got = e.retrieve(60)
    assert got == [ins]  # the flood memory (1.0 * e^-2.95 = 0.05) is gone, the insight is not
    assert e.score(ins, 60) == pytest.approx(10 * math.exp(-0.1 * 0.55 * 59))


def test_vectorised_scores_equal_scalar_scores():
    e = engine(1)
    rng = np.random.default_rng(2)
    for y in range(200):
        e.add("My home flooded" if rng.random() < 0.3 else "Sunny day.", y,
              importance=float(rng.random()))
        e.end_year(y)
        e.retrieve(y)  # builds the cached arrays, which later years extend incrementally
        if y % 50 == 0:
            e.add_insight("An insight.", y)
    vec = e.long_term_scores(250)
    assert np.allclose(vec, [e.score(m, 250) for m in e.long_term()], rtol=1e-12)


def test_state_round_trip_is_json_and_continues_identically():
    a = engine(9)
    for y in range(1, 6):
        a.add("Sunny day.", y, importance=0.3)
        a.add("My home flooded", y) if y % 2 else None
        a.end_year(y)
    a.add_insight("Floods come back.", 5)
    a.add("Sunny day.", 6, importance=0.2)
    text = json.dumps(a.state())
    b = HumanCentricMemoryEngine.from_state(json.loads(text))
    assert [m.to_dict() for m in b.items()] == [m.to_dict() for m in a.items()]
    for e in (a, b):
        e.add("Sunny day.", 7, importance=0.4)
        e.end_year(7)
    assert [m.id for m in a.long_term()] == [m.id for m in b.long_term()]
    assert [m.id for m in a.retrieve(8)] == [m.id for m in b.retrieve(8)]


def test_window_engine_keeps_only_current_year():
    e = WindowMemoryEngine(rng=np.random.default_rng(0))
    e.add("My home flooded", 1)
    assert len(e.retrieve(1)) == 1
    assert e.end_year(1) == [] and e.long_term() == []
    ins = e.add_insight("Floods happen.", 2)
    assert e.retrieve(2) == [ins]
    e.end_year(2)
    assert e.retrieve(3) == []
    assert isinstance(HumanCentricMemoryEngine.from_state(e.state()), WindowMemoryEngine)


def test_from_config_and_make_engine():
    params = MemoryParams(window_size=3)
    e = HumanCentricMemoryEngine.from_config(params, overrides={"decay_rate": 0.3})
    assert e.window_size == 3 and e.decay_rate == 0.3
    rng = np.random.default_rng(0)
    assert make_engine(params, MemoryConfig(engine="none"), rng=rng, agent_id=1) is None
    w = make_engine(params, MemoryConfig(engine="window"), rng=rng, agent_id=1)
    assert isinstance(w, WindowMemoryEngine)
    with pytest.raises(ValueError, match="unknown parameter"):
        make_engine(params, MemoryConfig(overrides={"windw_size": 2}), rng=rng, agent_id=1)
    with pytest.raises(ValueError, match="window_size"):
        make_engine(params, MemoryConfig(overrides={"window_size": 0}), rng=rng, agent_id=1)


# ---------------------------------------------------------------------------- properties
ages = st.floats(0, 200, allow_nan=False)
weights = st.floats(0, 1, allow_nan=False)


@given(imp=st.floats(0.01, 10), w=weights, t1=ages, dt=st.floats(0.001, 50))
def test_scores_decrease_with_age(imp, w, t1, dt):
    e = engine()
    item = e.add("x happened", 0, importance=imp)
    item.w_emotion = w
    assert e.score(item, t1 + dt) < e.score(item, t1) or e.score(item, t1) == 0


@given(w1=weights, w2=weights, age=st.floats(0.01, 100))
def test_higher_emotion_decays_slower(w1, w2, age):
    e = engine()
    a, b = e.add("a", 0, importance=1.0), e.add("b", 0, importance=1.0)
    a.w_emotion, b.w_emotion = min(w1, w2), max(w1, w2)
    assert e.score(b, age) >= e.score(a, age)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32), window=st.integers(1, 6), k_sig=st.integers(0, 4),
       k_ins=st.integers(0, 4), n_years=st.integers(1, 12), per_year=st.integers(0, 8),
       n_ins=st.integers(0, 5))
def test_retrieval_never_exceeds_window_plus_topk(seed, window, k_sig, k_ins, n_years,
                                                  per_year, n_ins):
    e = engine(seed, window_size=window, top_k_significant=k_sig, top_k_insights=k_ins)
    rng = np.random.default_rng(seed)
    for y in range(n_years):
        for _ in range(per_year):
            e.add("My home flooded" if rng.random() < 0.5 else "Sunny day.", y)
        if y < n_ins:
            e.add_insight("Insight.", y)
        assert len(e.retrieve(y)) <= window + k_sig + k_ins
        e.end_year(y)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), imps=st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_same_seed_same_consolidation(seed, imps):
    runs = []
    for _ in range(2):
        e = engine(seed, window_size=len(imps))
        for imp in imps:
            e.add("Sunny day.", 1, importance=imp)
        runs.append([m.id for m in e.end_year(1)])
    assert runs[0] == runs[1]


def test_a_state_written_with_constructor_keywords_is_still_read():
    """A state written with the parameters as constructor keywords is still read.

    Engines used to record them so (weights and keywords apart); such a state rebuilds the same
    engine.
    """
    e = engine(window_size=3, decay_rate=0.2)
    e.add("My home flooded", 1)
    state = json.loads(json.dumps(e.state()))
    p = e.memory_params
    cats = {**p.emotion_categories, **p.source_categories}
    state["params"] = {
        **{k: v for k, v in state["params"].items()
           if k not in ("emotion_categories", "source_categories")},
        "emotion_weights": {k: c.weight for k, c in p.emotion_categories.items()},
        "source_weights": {k: c.weight for k, c in p.source_categories.items()},
        "keywords": {k: list(c.keywords) for k, c in cats.items()}, "agent_id": "7"}
    del state["agent_id"]
    back = HumanCentricMemoryEngine.from_state(state)
    assert back.memory_params == p and back.agent_id == "7"
    assert [m.content for m in back.items()] == [m.content for m in e.items()]
