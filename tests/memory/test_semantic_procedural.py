"""Semantic memory (knowledge graph) and procedural memory (heuristics), seed 000."""

from __future__ import annotations

import pytest

from governed_broker.config.base import ConfigError
from governed_broker.memory import ProceduralMemory, SemanticMemory
from governed_broker.memory.semantic import DEFAULT_CONCEPTS


@pytest.fixture(scope="module")
def graph() -> SemanticMemory:
    return SemanticMemory.from_yaml(DEFAULT_CONCEPTS)


def test_shipped_graph_loads_with_measures_hazards_institutions(graph):
    for name in ("flood_insurance", "house_elevation", "relocation", "river_flood", "nfip",
                 "fema", "local_government"):
        assert graph.concept(name) is not None
    assert graph.concept("Flood Insurance")["id"] == "flood_insurance"


def test_related_queries(graph):
    assert graph.related("flood_insurance", "pays_for") == ["flood_damage"]
    assert graph.related("house_elevation", "is_a", depth=2) == ["structural_measure",
                                                                  "protective_action"]
    assert "nfip" in graph.related("flood_insurance")
    assert graph.related("unknown thing") == []


def test_shortest_path_and_inheritance(graph):
    path = graph.shortest_path("heavy_rain", "flood_insurance")
    assert path[0] == "heavy_rain" and path[-1] == "flood_insurance" and len(path) == 5
    assert graph.shortest_path("flood", "nowhere") is None
    props = graph.infer_properties("house_elevation")
    assert props["permanent"] is True  # own
    assert props["reduces_physical_damage"] is True and props["chosen_by"] == "household"
    ins = graph.infer_properties("flood_insurance")
    assert ins["reduces_physical_damage"] is False  # from financial_measure, nearer than ...
    assert graph.ancestors("river_flood") == ["flood", "hazard"]


def test_learned_facts_are_private_per_copy(graph):
    mine = graph.copy()
    mine.add_fact("home", "experienced", "river_flood", year=3, evidence="m000004")
    mine.add_fact("flood_insurance", "pays_for", "flood_damage", year=4, evidence="m000009")
    learned = mine.learned_facts()
    assert [(f["source"], f["year"]) for f in learned] == [("home", 3), ("flood_insurance", 4)]
    assert graph.learned_facts() == []  # the shared base graph is untouched
    assert "home experienced river flood (learned in year 3)" in mine.facts("home")
    again = graph.copy()
    again.restore_learned(mine.learned_state())
    assert again.learned_facts() == learned


def test_bad_yaml_names_entry(tmp_path):
    p = tmp_path / "k.yaml"
    p.write_text("concepts: {a: {type: x}}\nrelations: [[a, eats, a]]\n")
    with pytest.raises(ConfigError, match=r"relations\[0\].*eats"):
        SemanticMemory.from_yaml(p)
    p.write_text("concepts: {a: {type: x}}\nrelations: [[a, is_a, b]]\n")
    with pytest.raises(ConfigError, match="unknown concept 'b'"):
        SemanticMemory.from_yaml(p)


def test_procedural_discovery_after_three_successes_and_ema():
    pm = ProceduralMemory()
    dry = {"flooded_this_year": False, "insured": False}
    pm.record(dry, "do_nothing", True)
    pm.record(dry, "do_nothing", False)
    pm.record(dry, "do_nothing", True)
    assert pm.discover(3) == []
    pm.record(dry, "do_nothing", True)
    (h,) = pm.discover(4)
    assert (h.action, h.situation, h.use_count) == ("do_nothing", dry, 4)
    assert h.success_rate == pytest.approx(3 / 4)
    pm.record(dry, "do_nothing", False)
    assert h.success_rate == pytest.approx(0.9 * 0.75)  # EMA alpha 0.1
    pm.record(dry, "do_nothing", True)
    assert h.success_rate == pytest.approx(0.9 * 0.9 * 0.75 + 0.1)
    assert pm.discover(5) == []  # no duplicate
    assert pm.match({**dry, "elevated": True}) == [h]
    assert pm.match({"flooded_this_year": True, "insured": False}) == []
    back = ProceduralMemory.from_state(pm.state())
    assert back.heuristics() == pm.heuristics() and back.tally(dry, "do_nothing") == (6, 4)


def test_copies_share_the_graph_until_one_learns() -> None:
    graph = SemanticMemory.from_yaml(DEFAULT_CONCEPTS)
    base_facts = graph.facts()
    a, b = graph.copy(), graph.copy()
    assert a.graph is b.graph is graph.graph  # nothing copied yet
    version = a.version
    a.add_fact("flood_insurance", "pays_for", "flood_damage", year=3, evidence="m1")
    a.add_fact("home", "experienced", "river_flood", year=3, evidence="m2")
    assert a.graph is not graph.graph and a.version > version
    assert b.graph is graph.graph and b.version == version
    assert graph.facts() == base_facts == b.facts()  # the others did not learn it
    assert [f["target"] for f in a.learned_facts()] == ["flood_damage", "river_flood"]
    graph.add_concept("levee", "measure")  # the original writes to its own graph too
    assert "levee" not in b.graph and "levee" in graph.graph


def test_a_concepts_file_is_parsed_once_per_version_and_each_load_is_independent(tmp_path):
    import os

    path = tmp_path / "concepts.yaml"
    path.write_text("concepts:\n  flood: {type: hazard}\n  home: {type: asset}\nrelations: []\n")
    first, second = SemanticMemory.from_yaml(path), SemanticMemory.from_yaml(path)
    first.add_relation("home", "experienced", "flood")
    assert first.related("home", "experienced") and not second.related("home", "experienced")
    assert not SemanticMemory.from_yaml(path).related("home", "experienced")
    # an edited file is read again
    path.write_text("concepts:\n  flood: {type: hazard}\n  levee: {type: measure}\n"
                    "relations: []\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    edited = SemanticMemory.from_yaml(path)
    assert "levee" in edited.graph and "home" not in edited.graph
    with pytest.raises(ConfigError):
        SemanticMemory.from_yaml(tmp_path / "missing.yaml")
