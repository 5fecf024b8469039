"""Vignettes are stated as the experiment's world states them.

And rendered by its own context builder: prices, damage, probability and memories follow the
experiment.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from governed_broker.broker.factory import build_context
from governed_broker.config.damage import load_damage_table
from governed_broker.contracts.effects import traits_of
from governed_broker.sim import finance, money
from governed_broker.sim.damage import damages_usd
from governed_broker.validity.battery import derive, load_battery
from governed_broker.validity.situations import SituationBuilder


def _base(experiment):
    config = experiment.config
    battery = load_battery(config.resolve_path(config.validity.battery_dir), experiment.domain)
    return battery.vignettes.base.model_copy(update={"flood_zone": "high"})


def _prompt(experiment, spec, order=None) -> str:
    situation = SituationBuilder(experiment, 1).build(spec, 7, order)
    return build_context(experiment).build(situation, chunks=[]).messages[1]["content"]


def test_prices_damage_and_probability_come_from_the_experiment(scripted_experiment) -> None:
    experiment = scripted_experiment("insurance.loading=2.0", "elevation.cost_usd=60000")
    config, base = experiment.config, _base(experiment)
    situation = SituationBuilder(experiment, 1).build(base, 7)
    premium = money.premium_usd(config.insurance, np.array([base.structure_value_usd]),
                                np.array([base.contents_value_usd]), np.array([True]))[0]
    assert situation.action_costs_usd["buy_insurance"] == pytest.approx(premium)
    assert situation.action_costs_usd["elevate_house"] == pytest.approx(30000.0)  # 50% subsidy
    table = load_damage_table(config.resolve_path(config.damage.table))
    d_s, d_c = damages_usd(table, np.array([0.6]), np.array([base.structure_value_usd]),
                           np.array([base.contents_value_usd]))
    assert situation.damage_usd == pytest.approx(float(d_s[0] + d_c[0]))
    assert situation.flood_probability == config.hazard.zones["high"].annual_probability
    # every action but the buyout, which needs a programme's offer
    assert situation.allowed_actions == _open_actions(experiment)


def test_price_factors_affordability_and_elevation(scripted_experiment) -> None:
    experiment = scripted_experiment()
    base = _base(experiment)
    builder = SituationBuilder(experiment, 1)
    plain = builder.build(base, 1)
    poor = {"cost_factor": {"insure": 3.0}, "savings_usd": 1000.0, "income_usd": 10000.0}
    dear = builder.build(derive(base, poor, None, None, Path("t"), "t"), 1)
    assert dear.action_costs_usd["buy_insurance"] == \
        pytest.approx(3 * plain.action_costs_usd["buy_insurance"])
    fin = experiment.config.finance  # what the world lets a household without loans spend
    room = finance.spending_room_usd(fin, np.array([1000.0]), np.array([10000.0]), np.zeros(1))
    assert dear.facts.spending_room_usd == pytest.approx(room[0])
    assert dear.action_costs_usd["buy_insurance"] > room[0]
    assert dear.affordable["buy_insurance"] is False
    assert plain.affordable["buy_insurance"] is True
    elevated = builder.build(derive(base, {"elevated": True}, None, None, Path("t"), "t"), 1)
    assert "elevate_house" not in elevated.allowed_actions  # the world's open_to
    assert elevated.damage_usd < plain.damage_usd  # 0.6 m under a 1.5 m elevation


def test_renters_get_their_actions_and_no_structure(scripted_experiment) -> None:
    experiment = scripted_experiment()
    renter = derive(_base(experiment), {"tenure": "renter", "structure_value_usd": 0}, None,
                    None, Path("t"), "t")
    situation = SituationBuilder(experiment, 1).build(renter, 1)
    assert "elevate_house" not in situation.allowed_actions
    assert situation.structure_value_usd == 0.0
    assert "You rent your home" in _prompt(experiment, renter)


def test_prompt_is_the_context_builders_and_follows_the_templates(scripted_experiment,
                                                                  tmp_path) -> None:
    experiment = scripted_experiment()
    base = _base(experiment)
    text = _prompt(experiment, base)
    assert "The water was 0.60 m deep" in text
    assert "What you remember:" in text  # memory engine on: the world's memories
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    source = experiment.config.resolve_path(experiment.config.governance.context.prompts_dir)
    household = (source / "household.yaml").read_text()
    (prompts / "household.yaml").write_text(
        household.replace("A flood reached your home.", "Water came into your home."))
    edited = scripted_experiment(f"governance.context.prompts_dir={prompts}")
    assert "Water came into your home." in _prompt(edited, base)


def test_reversed_order_changes_only_the_listing(scripted_experiment) -> None:
    experiment = scripted_experiment()
    base = _base(experiment)
    order = tuple(reversed(experiment.domain.actions))
    plain, reversed_ = _prompt(experiment, base), _prompt(experiment, base, order)
    assert plain != reversed_
    listed = _open_actions(experiment)
    assert sorted(plain.splitlines()) == sorted(
        line.replace(", ".join(reversed(listed)), ", ".join(listed))
        for line in reversed_.splitlines())


def _open_actions(experiment) -> tuple[str, ...]:
    """The domain's actions a vignette household may take (no buyout offer in a vignette)."""
    return tuple(a for a, spec in experiment.domain.actions.items()
                 if not traits_of(spec.effect).bought_out)


def test_memories_follow_the_history_and_the_engine(scripted_experiment) -> None:
    experiment = scripted_experiment()
    old_flood = derive(_base(experiment), {"flood_depth_m": 0.0,
                                          "earlier_floods": [{"years_ago": 2, "depth_m": 0.8}]},
                       None, None, Path("t"), "t")
    text = _prompt(experiment, old_flood)
    # earlier floods reach the prompt only as memories: the engine recalls the flood of year 4
    assert re.search(r"^- Year 4[^:]*: My home flooded (about )?0\.8 m deep", text, flags=re.M)
    without = _prompt(scripted_experiment("memory.engine=none"), old_flood)
    assert "You have no particular memories" in without
    assert "0.8 m" not in without and "Year 4" not in without  # no leak without memory


def test_situation_is_the_same_for_every_replicate_but_its_id(scripted_experiment) -> None:
    experiment = scripted_experiment()
    builder = SituationBuilder(experiment, 1)
    a, b = builder.build(_base(experiment), 1), builder.build(_base(experiment), 2)
    assert (a.agent_id, b.agent_id) == (1, 2)
    assert a.memories == b.memories and a.action_costs_usd == b.action_costs_usd


def test_unknown_zone_is_a_configuration_error(scripted_experiment) -> None:
    from governed_broker.config.base import ConfigError

    experiment = scripted_experiment()
    spec = derive(_base(experiment), {"flood_zone": "coastal"}, None, None, Path("t"), "t")
    with pytest.raises(ConfigError, match="flood_zone 'coastal' is not a zone"):
        SituationBuilder(experiment, 1).build(spec, 1)
