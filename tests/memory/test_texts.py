"""Memory sentences come from memory.texts_file: the shipped wording, a rewording, bad files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from governed_broker.config.base import ConfigError
from governed_broker.config.loader import load_agent_types
from governed_broker.memory.texts import MemoryTexts
from governed_broker.sim.baseline import BaselineDecisionMaker
from governed_broker.sim.model import FloodModel

SHIPPED = Path(__file__).resolve().parents[2] / "configs" / "prompts" / "memory.yaml"


@pytest.fixture(scope="module")
def texts() -> MemoryTexts:
    return MemoryTexts.from_file(SHIPPED)


def test_flood_sentences_at_three_fidelities(texts) -> None:
    said = texts.flood(4, 0.84, 42_000.0, 30_500.0, insured=True, elevated=True)
    assert said.text == ("My home flooded 0.8 m deep; the damage cost $42,000. My insurance paid "
                         "$30,500. Elevating my house kept the water lower.")
    assert said.summary == ("My home flooded about 0.8 m deep in year 4 and insurance paid part "
                            "of the damage.")
    assert said.gist == "My home flooded in year 4."
    harmless = texts.flood(2, 0.3, 0.0, 0.0, insured=False, elevated=True)
    assert harmless.text == ("Flood water 0.3 m deep reached my street, but my elevated house was "
                             "not damaged.")


def test_neighbours_list_only_the_shares_given(texts) -> None:
    assert texts.neighbours({"insured": 0.304, "relocated": 0.0}) == (
        "Among the neighbouring households, 30% were insured, 0% had moved away.")
    assert texts.neighbours({}) is None


def test_decision_sentences_format_money_and_action_words(texts) -> None:
    assert texts.decision("decision_protective", "floodproof_basement", 8_250.4) == (
        "I decided to floodproof basement; it cost me $8,250.")
    assert texts.decision("decision_refused", "elevate_house", 0.0, "rejected") == (
        "I wanted to elevate house but it was not possible (rejected); I took no new protective "
        "action.")
    assert texts.decision_gist(3, "buy_insurance", executed=False) == (
        "Year 3: buy insurance (not possible).")


def _copy(tmp_path: Path, **changes: str) -> Path:
    data = yaml.safe_load(SHIPPED.read_text())
    data.update(changes)
    path = tmp_path / "memory.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(("changes", "needle"), [
    ({"quiet_year": "Year $yeer was quiet."}, "template 'quiet_year' uses unknown placeholder"),
    ({"flood_gist": "Costs $5"}, "template 'flood_gist' is malformed"),
    ({"surprise": "hello"}, "unknown key(s) ['surprise']"),
])
def test_a_broken_texts_file_is_a_configuration_error_at_load(experiments, tmp_path, changes,
                                                              needle) -> None:
    path = _copy(tmp_path, **changes)
    with pytest.raises(ConfigError) as info:
        experiments.config(["memory.engine=humancentric", f"memory.texts_file={path}"])
    assert needle in str(info.value) and "memory.texts_file" in str(info.value)


def test_a_reworded_file_is_what_households_remember(experiments, tmp_path) -> None:
    path = _copy(tmp_path, quiet_year="Nothing happened at my home in year $year.")
    config = experiments.config(["memory.engine=humancentric", f"memory.texts_file={path}",
                                 "years=2", "population.size=3",
                                 "hazard.zones.high.annual_probability=0.0",
                                 "hazard.zones.low.annual_probability=0.0"])
    model = FloodModel(config, BaselineDecisionMaker(config.decision.baseline,
                                                     load_agent_types(config.agent_types),
                                                     config.seed))
    model.step()
    item = model.world_memory.memory_of(1).record_no_flood(2, insured=False, elevated=False)
    assert item.content == "Nothing happened at my home in year 2."
