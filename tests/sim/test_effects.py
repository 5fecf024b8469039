"""The effect table: every effect priced once, executed from its traits.

And a new effect is one entry in ``contracts.effects.EFFECTS`` plus one in
``sim.effects.WORLD_EFFECTS``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import yaml

from governed_broker.config.base import ConfigError
from governed_broker.config.damage import load_damage_table
from governed_broker.contracts.effects import EFFECTS, EffectTraits, traits_of
from governed_broker.runner import run_experiment
from governed_broker.sim.effects import WORLD_EFFECTS, OptionBatch, WorldEffect, execute, price


def test_every_effect_has_its_world_behaviour() -> None:
    assert set(WORLD_EFFECTS) == set(EFFECTS)
    assert all(w.traits is EFFECTS[name] for name, w in WORLD_EFFECTS.items())


def test_execution_follows_the_traits() -> None:
    effects = ["none", "insure", "elevate", "relocate", "elevate+insure"]
    done = execute(effects, np.array([0, 1, 2, 3, 4]),
                   np.array([0.0, 500.0, 40_000.0, 5_000.0, 40_500.0]),
                   np.array([0.0, 500.0, 0.0, 0.0, 500.0]))
    np.testing.assert_array_equal(done.premium_usd, [0, 500, 0, 0, 500])
    np.testing.assert_array_equal(done.action_cost_usd, [0, 0, 40_000, 5_000, 40_000])
    np.testing.assert_array_equal(done.insured, [False, True, False, False, True])
    np.testing.assert_array_equal(done.elevated, [False, False, True, False, True])
    np.testing.assert_array_equal(done.relocated, [False, False, False, True, False])


def _batch(experiments, elevated) -> OptionBatch:
    config = experiments.config()
    table = load_damage_table(config.resolve_path(config.damage.table))
    n = len(elevated)
    return OptionBatch(config, table, np.ones(n, bool), np.full(n, 250_000.0),
                       np.full(n, 100_000.0), np.asarray(elevated), np.full(n, 2.0),
                       np.full(n, 0.02))


def test_a_combination_sums_costs_and_judges_the_loss_with_every_part(experiments) -> None:
    batch = _batch(experiments, [False, True])
    insure, elevate = price("insure", batch), price("elevate", batch)
    both = price("elevate+insure", batch)
    np.testing.assert_allclose(both.cost_usd, insure.cost_usd + elevate.cost_usd)
    np.testing.assert_allclose(both.premium_usd, insure.premium_usd)
    assert elevate.premium_usd.tolist() == [0.0, 0.0]
    # the elevated, insured home loses less than with either measure alone
    assert both.loss_usd[0] <= insure.loss_usd[0] < elevate.loss_usd[0]
    assert both.open_to.tolist() == [True, False]  # an elevated home cannot be elevated again
    # insured after elevating: the policy pays for what the raised home still takes
    protected = batch.with_protection(traits_of("elevate+insure"))
    np.testing.assert_allclose(both.loss_usd, protected.loss_usd(protected.depth_here_m, True))


@pytest.mark.parametrize("effect, message", [
    ("elevate+tunnel", "unknown effect 'tunnel'"), ("insure+insure", "names a part twice"),
    ("none+insure", "'none' cannot be combined"), ("relocate+elevate", "'relocate' cannot be")])
def test_bad_combinations_are_refused(effect, message) -> None:
    with pytest.raises(ValueError, match=message):
        traits_of(effect)


#: A toy measure: floodproofing, paid once, keeps a tenth of a typical flood's loss.
FLOODPROOF = WorldEffect(
    EffectTraits("floodproof", protective=True, one_off=True),
    cost_usd=lambda b: np.full(len(b.owner), 1_000.0),
    loss_if_flood_usd=lambda b: 0.1 * b.loss_here_usd())


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
                                 "hazard.zones.high.annual_probability=0.5",
                                 "hazard.zones.high.flooded_share=1"], data=data)
    out = run_experiment(config, tmp_path / "run", progress=False).out_dir
    agents = pd.read_csv(out / "agents_yearly.csv")
    taken = agents[agents["executed_action"] == "floodproof_home"]
    assert len(taken) > 0 and (taken["tenure"] == "owner").all()
    assert (taken["action_cost_usd"] == 1_000.0).all()
    # a premium only where the mortgage lender renewed the policy (mandatory purchase)
    assert ((taken["premium_usd"] > 0) == taken["lender_placed"]).all()
    assert taken["agent_id"].is_unique  # duration: once
    first = int(taken.loc[~taken["lender_placed"], "agent_id"].iloc[0])
    memory = (out / "memories" / f"{first}.md").read_text()
    assert "I decided to floodproof home; it cost me $1,000." in memory


def test_an_unknown_effect_is_a_configuration_error(experiments, tmp_path, repo_root) -> None:
    data = experiments.data()
    data["agent_types"] = str(_domain_with_floodproofing(repo_root, tmp_path))
    with pytest.raises(ConfigError, match="unknown effect 'floodproof'; known: none, insure"):
        experiments.config(data=data)


def test_a_buyout_is_open_only_with_an_offer_and_costs_the_move_plus_value_not_paid(
        experiments) -> None:
    batch = dataclasses.replace(_batch(experiments, [False, False, False]),
                                buyout_offered=np.array([True, True, False]),
                                buyout_price_usd=np.array([200_000.0, 300_000.0, 0.0]))
    sold = price("buyout", batch)
    assert sold.open_to.tolist() == [True, True, False]
    # $250,000 home, $10,000 move (baseline.yaml): a $200,000 price leaves $60,000 to pay;
    # a $300,000 pre-flood price covers the home and the move
    np.testing.assert_allclose(sold.cost_usd[:2], [60_000.0, 0.0])
    np.testing.assert_allclose(sold.loss_usd, 0.0)
    assert sold.premium_usd.tolist() == [0.0, 0.0, 0.0]
