"""MemoryParams: the `memory:` section of agent_types.yaml and experiment overrides."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from governed_broker.config.base import ConfigError
from governed_broker.config.memory import SCALAR_PARAMS, MemoryParams
from governed_broker.memory import HumanCentricMemoryEngine

REPO = Path(__file__).resolve().parents[2]


def shipped() -> dict:
    return yaml.safe_load((REPO / "agent_types.yaml").read_text())["memory"]


def test_shipped_section_matches_spec_defaults():
    p = MemoryParams.model_validate(shipped())
    assert (p.window_size, p.top_k_significant, p.top_k_insights, p.decay_rate,
            p.consolidation_threshold, p.consolidation_prob, p.min_score,
            p.insight_importance, p.importance_boost) == (5, 2, 3, 0.1, 0.6, 0.7, 0.1, 10.0, 0.9)
    assert p.emotion_categories["direct_impact"].weight == 1.0
    assert p.emotion_categories["strategic"].weight == 0.8
    assert p.emotion_categories["routine"].weight == 0.1
    assert p.source_categories["personal"].weight == 1.0
    assert p.source_categories["neighbour"].weight == 0.8
    assert all(c.source for c in [*p.emotion_categories.values(), *p.source_categories.values()])
    def strip(params: MemoryParams) -> dict:
        d = params.model_dump()
        for kind in ("emotion_categories", "source_categories"):
            for cat in d[kind].values():
                cat.pop("source")
        return d

    assert strip(p) == strip(MemoryParams())  # Python defaults mirror the shipped file


def test_engine_from_shipped_section_uses_its_keywords(tmp_path):
    e = HumanCentricMemoryEngine.from_config(shipped())
    assert e.classify("Water entered our kitchen") == ("direct_impact", "personal")
    from_file = HumanCentricMemoryEngine.from_config(REPO / "agent_types.yaml")
    assert from_file.memory_params == e.memory_params
    bad = tmp_path / "a.yaml"
    bad.write_text("memory: {decay_rate: -1}\n")
    with pytest.raises(ConfigError, match="decay_rate"):
        HumanCentricMemoryEngine.from_config(bad)


@pytest.mark.parametrize("patch, message", [
    ({"window_size": 0}, "window_size"),
    ({"consolidation_prob": 1.5}, "consolidation_prob"),
    ({"default_emotion": "joy"}, "default_emotion"),
    ({"fidelity_summary_years": 0.5}, "fidelity_summary_years"),
    ({"windowsize": 3}, "windowsize"),
    ({"emotion_categories": {"routine": {"weight": 2}}}, "weight"),
])
def test_invalid_sections_name_the_field(patch, message):
    with pytest.raises(ValidationError, match=message):
        MemoryParams.model_validate({**shipped(), **patch})


def test_overrides():
    p = MemoryParams().with_overrides({"decay_rate": 0.2, "window_size": 3})
    assert p.decay_rate == 0.2 and p.window_size == 3
    with pytest.raises(ValueError, match="unknown parameter"):
        MemoryParams().with_overrides({"emotion_categories": 1})
    assert "decay_rate" in SCALAR_PARAMS
