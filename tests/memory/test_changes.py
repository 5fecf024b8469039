"""Incremental memory state.

``changes()`` replayed by ``apply_changes`` rebuilds a memory exactly, and what one year reports
does not grow with the years before it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from governed_broker.config.loader import load_agent_types
from governed_broker.config.memory import MemoryConfig, MemoryParams
from governed_broker.memory import (
    HumanCentricMemoryEngine,
    SemanticMemory,
    WindowMemoryEngine,
    fidelity_for_age,
)
from governed_broker.memory.item import ITEM_FIELDS, MemoryItem
from governed_broker.memory.semantic import DEFAULT_CONCEPTS
from governed_broker.memory.texts import MemoryTexts
from governed_broker.sim.household_memory import HouseholdMemory

REPO = Path(__file__).resolve().parents[2]
TEXTS = MemoryTexts.from_file(REPO / "configs" / "prompts" / "memory.yaml")
DOMAIN = load_agent_types(REPO / "agent_types.yaml")
EFFECTS = {a: spec.effect for a, spec in DOMAIN.actions.items()}
ACTIONS = list(EFFECTS)


@pytest.fixture(scope="module")
def graph() -> SemanticMemory:
    return SemanticMemory.from_yaml(DEFAULT_CONCEPTS)


def household(graph, engine: str = "humancentric") -> HouseholdMemory:
    return HouseholdMemory.from_config(11, DOMAIN.memory, MemoryConfig(engine=engine), 5,
                                       semantic=graph, action_effects=EFFECTS, texts=TEXTS)


def live_year(hm: HouseholdMemory, year: int, rng: np.random.Generator) -> None:
    """A varied year: floods, neighbours, decisions of every kind, reflections."""
    if rng.random() < 0.3:
        hm.record_flood(year, float(rng.uniform(0.1, 2)), float(rng.uniform(0, 50_000)),
                        float(rng.uniform(0, 20_000)), insured=bool(rng.random() < 0.5),
                        elevated=bool(rng.random() < 0.2))
    else:
        hm.record_no_flood(year, insured=hm.insured, elevated=hm.elevated)
    hm.record_neighbours(year, {"insured": float(rng.random()), "elevated": 0.1,
                                "relocated": 0.0})
    hm.retrieve(year)
    action = ACTIONS[int(rng.integers(len(ACTIONS)))]
    hm.record_decision(year, action, "approved", float(rng.uniform(0, 5000)),
                       executed=bool(rng.random() < 0.8))
    if rng.random() < 0.6:
        hm.add_insight(f"Lesson {year}: floods come back.", year)
    hm.end_year(year)


def _json(value):
    return json.loads(json.dumps(value))


@pytest.mark.parametrize("engine", ["humancentric", "window"])
def test_replayed_changes_rebuild_the_memory_year_by_year(graph, engine) -> None:
    original, replayed = household(graph, engine), household(graph, engine)
    rng = np.random.default_rng(3)
    for year in range(1, 31):
        live_year(original, year, rng)
        changes = original.changes()
        replayed.apply_changes(_json(changes))
        assert replayed.state() == original.state(), year
        assert original.changes() is None  # nothing happened since
    rng_a, rng_b = np.random.default_rng(8), np.random.default_rng(8)
    for year in range(31, 41):  # both go on identically (generators, fidelity, ids)
        live_year(original, year, rng_a)
        live_year(replayed, year, rng_b)
        assert replayed.state() == original.state(), year
        assert _json(replayed.changes()) == _json(original.changes()), year


def test_what_a_year_reports_does_not_grow_with_history(graph) -> None:
    hm, rng = household(graph), np.random.default_rng(4)
    sizes, whole = [], []
    for year in range(1, 81):
        live_year(hm, year, rng)
        sizes.append(len(json.dumps(hm.changes())))
        whole.append(len(json.dumps(hm.state())))
    assert whole[79] > 3 * whole[19]  # the memory itself grows ...
    # ... its yearly changes do not (decades after the first: a year's size varies with its
    # floods by a factor of 2, so 5-year windows were too noisy to compare)
    assert np.mean(sizes[70:80]) < 1.3 * np.mean(sizes[10:20])


def test_a_household_without_news_reports_nothing(graph) -> None:
    hm = household(graph)
    assert hm.changes() is not None  # its starting status, once
    assert hm.changes() is None
    hm.set_status(insured=True, elevated=False)
    assert hm.changes() == {"own": [True, False, False, None, None]}


def test_fidelity_refresh_visits_only_what_can_change_and_matches_the_rule() -> None:
    """Every long-term item's fidelity equals the rule's at its age, every year.

    Although a refresh skips items that are already gist.
    """
    e = HumanCentricMemoryEngine(
        MemoryParams(fidelity_detailed_years=1, fidelity_summary_years=3),
        rng=np.random.default_rng(0), agent_id=1)
    rng = np.random.default_rng(1)
    for year in range(1, 60):
        for _ in range(3):
            e.add("My home flooded" if rng.random() < 0.3 else "Sunny day.", year,
                  importance=float(rng.uniform(0.5, 1.0)))
        if rng.random() < 0.5:
            e.retrieve(year)
        e.end_year(year)
        for m in e.long_term():
            ref = m.year if m.last_access_year is None else max(m.year, m.last_access_year)
            assert m.fidelity == fidelity_for_age(year - ref, 1, 3)
    assert len(e._fresh) < len(e.long_term()) / 3  # most items are skipped


def test_a_refresh_after_a_restore_visits_everything() -> None:
    a = HumanCentricMemoryEngine(rng=np.random.default_rng(0), agent_id=1)
    for year in range(1, 8):
        a.add("My home flooded", year)
        a.end_year(year)
    b = HumanCentricMemoryEngine.from_state(_json(a.state()))
    for e in (a, b):
        e.retrieve(8)
        e.end_year(9)
    assert [m.to_dict() for m in a.items()] == [m.to_dict() for m in b.items()]


def test_item_rows_follow_the_declared_field_order() -> None:
    item = MemoryItem("m1", "3", 2.0, "text", "routine", "general", 0.5, metadata={"a": 1},
                      access_count=2, last_access_year=3.0, fidelity="summary", w_emotion=0.2)
    assert dict(zip(ITEM_FIELDS, item.to_row(), strict=True)) == item.to_dict()
    assert MemoryItem.from_row(_json(item.to_row())) == item


def test_engine_changes_carry_undrained_and_working_items() -> None:
    """Between consolidations an engine holds working items and items not yet drained to the store.

    Its changes carry them, sharing objects as the original does.
    """
    for klass in (HumanCentricMemoryEngine, WindowMemoryEngine):
        a = klass(MemoryParams(window_size=2), rng=np.random.default_rng(2), agent_id=4)
        b = klass(MemoryParams(window_size=2), rng=np.random.default_rng(99), agent_id=4)
        for text in ("My home flooded", "Sunny day.", "The neighbours left."):  # one evicted
            a.add(text, 1)
        a.add_insight("Floods happen.", 1)
        b.apply_changes(_json(a.changes()))
        assert b.state() == a.state()
        held = {m.id: m for m in b.items()}
        assert all(held.get(n.id, n) is n for n in b._new)
        assert len(held) < len(b._new)  # the evicted item lives on only as undrained
        for e in (a, b):
            e.end_year(1)
        assert b.state() == a.state()
