"""The effect table: every effect priced once, executed from its traits, and a new effect is
one entry in ``contracts.effects.EFFECTS`` plus one in ``sim.effects.WORLD_EFFECTS``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from governed_broker.config.base import ConfigError
from governed_broker.contracts.effects import EFFECTS, EffectTraits
from governed_broker.runner import run_experiment
from governed_broker.sim.effects import WORLD_EFFECTS, WorldEffect, execute


def test_every_effect_has_its_world_behaviour() -> None:
    assert set(WORLD_EFFECTS) == set(EFFECTS)
    assert all(w.traits is EFFECTS[name] for name, w in WORLD_EFFECTS.items())


def test_execution_follows_the_traits() -> None:
    effects = ["none", "insure", "elevate", "relocate"]
    done = execute(effects, np.array([0, 1, 2, 3]), np.array([0.0, 500.0, 40_000.0, 5_000.0]))
    np.testing.assert_array_equal(done.premium_usd, [0, 500, 0, 0])
    np.testing.assert_array_equal(done.action_cost_usd, [0, 0, 40_000, 5_000])
    np.testing.assert_array_equal(done.insured, [False, True, False, False])
    np.testing.assert_array_equal(done.elevated, [False, False, True, False])
    np.testing.assert_array_equal(done.relocated, [False, False, False, True])


#: A toy measure: floodproofing, paid once, keeps a tenth of a typical flood's loss.
FLOODPROOF = WorldEffect(
    EffectTraits("floodproof", protective=True, one_off=True),
    cost_usd=lambda b: np.full(len(b.owner), 1_000.0),
    loss_if_flood_usd=lambda b: 0.1 * b.loss_usd(b.depth_here_m, insured=False))


@pytest.fixture
def floodproof(monkeypatch) -> None:
    monkeypatch.setitem(EFFECTS, "floodproof", FLOODPROOF.traits)
    monkeypatch.setitem(WORLD_EFFECTS, "floodproof", FLOODPROOF)


def _domain_with_floodproofing(repo_root, tmp_path):
    data = yaml.safe_load((repo_root / "agent_types.yaml").read_text())
    data["actions"]["floodproof_home"] = {
        "description": "Seal doors and vents against flood water.",
        "tenure": ["owner"], "duration": "once", "effect": "floodproof"}
    path = tmp_path / "agent_types_floodproof.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_new_effect_runs_an_experiment(experiments, tmp_path, repo_root, floodproof) -> None:
    data = experiments.data()
    data["agent_types"] = str(_domain_with_floodproofing(repo_root, tmp_path))
    data["memory"]["engine"] = "humancentric"  # memory words and judges it from its traits
    config = experiments.config(["years=6", "population.size=40",
                                 "hazard.zones.high.annual_probability=0.5"], data=data)
    out = run_experiment(config, tmp_path / "run", progress=False).out_dir
    agents = pd.read_csv(out / "agents_yearly.csv")
    taken = agents[agents["executed_action"] == "floodproof_home"]
    assert len(taken) > 0 and (taken["tenure"] == "owner").all()
    assert (taken["action_cost_usd"] == 1_000.0).all() and (taken["premium_usd"] == 0).all()
    assert taken["agent_id"].is_unique  # duration: once
    first = int(taken["agent_id"].iloc[0])
    memory = (out / "memories" / f"{first}.md").read_text()
    assert "I decided to floodproof home; it cost me $1,000." in memory


def test_an_unknown_effect_is_a_configuration_error(experiments, tmp_path, repo_root) -> None:
    data = experiments.data()
    data["agent_types"] = str(_domain_with_floodproofing(repo_root, tmp_path))
    with pytest.raises(ConfigError, match="unknown effect 'floodproof'; known: none, insure"):
        experiments.config(data=data)
