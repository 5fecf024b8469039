"""The household adapter over 10 simulated years, consolidation, export and the run writer."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from governed_broker.config.loader import load_agent_types
from governed_broker.config.memory import MemoryConfig
from governed_broker.memory import SemanticMemory, fidelity_for_age
from governed_broker.memory.semantic import DEFAULT_CONCEPTS
from governed_broker.memory.texts import MemoryTexts
from governed_broker.sim.household_memory import HouseholdMemory, RunMemoryWriter

REPO = Path(__file__).resolve().parents[2]
SEED = 20240601


@pytest.fixture(scope="module")
def params():
    return load_agent_types(REPO / "agent_types.yaml").memory


@pytest.fixture(scope="module")
def graph():
    return SemanticMemory.from_yaml(DEFAULT_CONCEPTS)


#: The shipped memory sentences (configs/prompts/memory.yaml).
TEXTS = MemoryTexts.from_file(REPO / "configs" / "prompts" / "memory.yaml")
#: Action id -> effect of the shipped domain.
EFFECTS = {a: spec.effect
           for a, spec in load_agent_types(REPO / "agent_types.yaml").actions.items()}


def household(params, graph, agent_id=17, engine="humancentric") -> HouseholdMemory:
    return HouseholdMemory.from_config(agent_id, params, MemoryConfig(engine=engine), SEED,
                                       semantic=graph, action_effects=EFFECTS, texts=TEXTS)


def live_ten_years(hm: HouseholdMemory, writer: RunMemoryWriter | None = None) -> list:
    """Year 2 floods (0.8 m, $42,000, uninsured); the household insures from then on."""
    if writer is not None:
        writer.attach(hm)
    retrieved = []
    for year in range(1, 11):
        if year == 2:
            hm.record_flood(year, 0.8, 42_000, 0, insured=False, elevated=False)
        else:  # the policy bought in year 2 is in force from year 3
            hm.record_no_flood(year, insured=year > 2, elevated=False)
        hm.record_neighbours(year, {"insured": 0.3, "elevated": 0.05, "relocated": 0.0})
        retrieved.append(hm.retrieve(year))
        action = "do_nothing" if year < 2 else "buy_insurance"
        hm.record_decision(year, action, "baseline", 0.0 if year < 2 else 900.0)
        if year == 2:
            hm.add_insight("I live where floods happen; protecting my home matters.", year)
        hm.end_year(year)
    return retrieved


def test_memory_texts_encode_as_intended(params, graph):
    hm = household(params, graph)
    flood = hm.record_flood(2, 0.8, 42_000, 0, insured=False, elevated=False)
    assert flood.content.startswith("My home flooded 0.8 m deep; the damage cost $42,000.")
    assert (flood.emotion, flood.source, flood.importance) == ("direct_impact", "personal", 1.0)
    quiet = hm.record_no_flood(3, insured=False, elevated=False)
    assert (quiet.emotion, quiet.importance) == ("routine", pytest.approx(0.1))
    buy = hm.record_decision(3, "buy_insurance", "approved", 900)
    assert (buy.emotion, buy.importance) == ("strategic", pytest.approx(0.8))
    neigh = hm.record_neighbours(3, {"insured": 0.25})
    assert neigh.content == "Among the neighbouring households, 25% were insured."
    assert neigh.importance == pytest.approx(0.1 * 0.8)
    hm.set_status(insured=True, elevated=False)
    renew = hm.record_decision(4, "buy_insurance", "approved", 900)
    assert renew.content.startswith("I renewed") and renew.importance == pytest.approx(0.1)
    refused = hm.record_decision(5, "elevate_house", "rejected", 0, executed=False)
    assert "not possible (rejected)" in refused.content and refused.emotion == "strategic"


def test_ten_year_household_remembers_the_flood(params, graph):
    hm = household(params, graph)
    retrieved = live_ten_years(hm)
    final = retrieved[-1]
    texts = [m.content for m in final]
    assert any(t.startswith("My home flooded 0.8 m deep") for t in texts)
    assert any(m.kind == "insight" for m in final)
    old_routine = [m for m in final if m.emotion == "routine" and m.year < 10]
    assert old_routine == []  # routine years are gone from recall
    assert all(m.year == 10 for m in final if m.emotion == "routine")
    flood = next(m for m in final if m.content.startswith("My home flooded"))
    assert flood.access_count == 9  # retrieved every year from year 2 on
    lt = hm.engine.long_term()
    assert sum(1 for m in lt if m.emotion == "routine") < 10  # most routine memories forgotten
    # metacognition: insurance bought 9 times, paid off never (no flood while insured)
    rec = hm.metacognition.get("buy_insurance")
    assert (rec.chosen, rec.executed, rec.spent_usd, rec.evaluated, rec.paid_off) == \
        (9, 9, 8100.0, 8, 0)
    dn = hm.metacognition.get("do_nothing")
    assert (dn.evaluated, dn.paid_off, dn.floods_while_used, dn.damage_usd) == (1, 0, 1, 42_000)
    facts = hm.semantic.learned_facts()
    assert facts == [{"source": "home", "relation": "experienced", "target": "flood",
                      "year": 2.0, "evidence": flood.id}]


def test_insight_outlives_everything_else(params, graph):
    hm = household(params, graph)
    live_ten_years(hm)
    late = hm.retrieve(80)
    assert [m.kind for m in late] == ["insight"]


def test_same_seed_same_memories_and_distinct_agents_differ(params, graph):
    runs = [live_ten_years(household(params, graph, agent_id=5)) for _ in range(2)]
    assert [[m.id for m in year] for year in runs[0]] == [[m.id for m in year] for year in runs[1]]
    kept = []
    for agent in range(30):
        hm = household(params, graph, agent_id=agent)
        live_ten_years(hm)
        kept.append(tuple(m.id for m in hm.engine.long_term()))
    assert len(set(kept)) > 1  # each agent has its own generator


def test_window_engine_and_none(params, graph):
    assert household(params, graph, engine="none") is None
    hm = household(params, graph, engine="window")
    final = live_ten_years(hm)[-1]
    assert all(m.year == 10 for m in final)


def test_state_round_trip_mid_run(params, graph):
    a = household(params, graph)
    for year in (1, 2):
        (a.record_flood(year, 1.0, 10_000, 0, False, False) if year == 2
         else a.record_no_flood(year, insured=False, elevated=False))
        a.record_decision(year, "buy_insurance", "approved", 900)
        a.end_year(year)
    b = HouseholdMemory.from_state(json.loads(json.dumps(a.state())), semantic=graph,
                                   texts=TEXTS)
    for hm in (a, b):
        hm.record_flood(3, 0.5, 5_000, 4_000, insured=True, elevated=False)
        hm.record_decision(3, "buy_insurance", "approved", 900)
        hm.end_year(3)
    assert a.state() == b.state()
    assert a.metacognition.get("buy_insurance").paid_off == 1


def test_procedural_heuristic_from_dry_years(params, graph):
    hm = household(params, graph)
    for year in range(1, 6):
        hm.record_no_flood(year, insured=False, elevated=False)
        hm.record_decision(year, "do_nothing", "baseline", 0)
        report = hm.end_year(year)
    (h,) = hm.procedural.heuristics()
    assert h.action == "do_nothing" and h.situation["flooded_this_year"] is False
    assert h.created_year == 4  # judged in years 2, 3, 4 -> third success in year 4
    assert report.heuristics_discovered == 0


def test_fidelity_ladder():
    assert [fidelity_for_age(a, 1, 3) for a in (0, 1, 1.5, 3, 3.1)] == \
        ["detailed", "detailed", "summary", "summary", "gist"]


def test_run_writer_sqlite_and_markdown(tmp_path, params, graph):
    writer = RunMemoryWriter(tmp_path)
    homes = [household(params, graph, agent_id=i) for i in (3, 4)]
    for hm in homes:
        live_ten_years(hm, writer)
    files = writer.write_markdown(homes, year=10)
    writer.close()
    n_items = sum(hm.engine._next_id for hm in homes)
    con = sqlite3.connect(tmp_path / "memory.sqlite")
    rows = con.execute("SELECT user_id, session_id, memory_type, context FROM episodes").fetchall()
    assert len(rows) == n_items  # every memory ever formed, kept or forgotten
    assert {r[0] for r in rows} == {"3", "4"} and {r[1] for r in rows} == {str(y) for y in
                                                                            range(1, 11)}
    assert {"event", "decision", "observation", "insight"} == {r[2] for r in rows}
    assert any(json.loads(r[3])["long_term"] is False for r in rows)
    text = files[0].read_text()
    assert files[0] == tmp_path / "memories" / "3.md"
    for heading in ("## Episodic memory (by year)", "## Insights", "## Semantic memory",
                    "## Procedural memory", "## Metacognitive record"):
        assert heading in text
    assert "My home flooded 0.8 m deep" in text and "| buy_insurance | 9 | 9 | 8,100 |" in text
    with pytest.raises(ValueError, match="file name"):
        RunMemoryWriter(tmp_path / "..").write_markdown([household(params, graph, "../x")])


def test_the_cover_in_force_is_the_worlds(params, graph):
    """The adapter keeps no insurance timing of its own.

    A household that chose nothing is insured the next year when the world says so (its lender
    renewed the policy, or an aid certificate covers it), and what it learns is judged in that
    situation.
    """
    hm = household(params, graph)
    hm.record_no_flood(1, insured=True, elevated=False)
    hm.record_decision(1, "do_nothing", "baseline", 0.0)
    hm.record_no_flood(2, insured=True, elevated=False)
    assert hm.insured
    hm.record_decision(2, "do_nothing", "baseline", 0.0)
    hm.record_no_flood(3, insured=False, elevated=True)
    assert (hm.insured, hm.elevated) == (False, True)
    (situation,) = {json.loads(json.loads(key)[0])["insured"]
                    for key in hm.procedural.state()["tally"]}
    assert situation is True  # both years' choices were made insured
