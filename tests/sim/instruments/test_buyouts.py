"""The buyout programme.

Offers to owners with repetitive or substantial losses, within an annual budget, open only with an
offer; accepting sells the home to the programme at the offered price and the household leaves.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_broker.config import ConfigError
from governed_broker.config.world import BuyoutConfig
from governed_broker.sim import FloodModel
from governed_broker.sim.instruments.buyouts import buyout_offers
from tests.sim.test_model import POP_HEADER, Scripted, run

POP_ROWS = [
    "owner,high,60000,100000,200000,100000,False,False,0.3,0.5",   # 1
    "owner,high,30000,100000,200000,100000,False,False,0.3,0.5",   # 2
    "renter,high,25000,20000,0,50000,False,False,0.3,0.5",         # 3: renter, never offered
    "owner,low,20000,100000,200000,100000,False,False,0.3,0.5",    # 4: never flooded
    "owner,high,20000,100000,200000,100000,True,False,0.3,0.5",    # 5: elevated, no damage
]
PROGRAMME = {"source": "test", "min_floods": 2, "substantial_damage_share": None,
             "price_share": 1.0}


@pytest.fixture
def world(experiments):
    (experiments.tmp_path / "pop.csv").write_text(
        "# synthetic test population\n" + POP_HEADER + "\n" + "\n".join(POP_ROWS) + "\n")

    def make(script: dict[tuple[int, int], str], buyout: dict | None, years: int = 3,
             agent_types: str | None = None):
        data = experiments.data()
        data["years"] = years
        data["memory"]["engine"] = "none"
        data["population"] = {"source": "test", "file": "pop.csv"}
        data["hazard"] = {"source": "test", "mode": "fixed", "events": [
            {"year": 1, "depth_m": {"high": 1.0}}, {"year": 2, "depth_m": {"high": 1.0}}],
            "zones": {"high": {"annual_probability": 0.02, "median_depth_m": 0.3},
                      "low": {"annual_probability": 0.002, "median_depth_m": 0.2}}}
        data["network"] = {"kind": "ring", "k": 2}
        data["insurance"].pop("mandatory_purchase", None)
        data["finance"]["aid"]["probability"] = 0.0
        if buyout is not None:
            data["buyout"] = buyout
        if agent_types is not None:
            data["agent_types"] = agent_types
        maker = Scripted(script)
        return FloodModel(experiments.config(data=data), maker), maker

    return make


def _offered(rows: dict) -> list[int]:
    return [a for a, r in rows.items() if r["buyout_offered"]]


def test_repetitively_flooded_owners_are_offered_and_only_they_may_accept(world) -> None:
    model, maker = world({}, PROGRAMME)
    first, second, _ = run(model, 3)
    assert _offered(first) == [] and _offered(second) == [1, 2, 5]
    seen = {s.agent_id: s for s in maker.seen[1]}
    assert [a for a, s in seen.items() if "accept_buyout" in s.allowed_actions] == [1, 2, 5]
    # the price is the pre-flood value: today's value plus the damage left unrepaired
    for a in (1, 2, 5):
        pre_flood = seen[a].structure_value_usd + seen[a].unrepaired_damage_usd
        assert seen[a].facts.buyout_offer_usd == pytest.approx(pre_flood)
    assert seen[3].facts.buyout_offer_usd is None and seen[4].facts.buyout_offer_usd is None


def test_accepting_sells_the_home_and_the_household_leaves(world) -> None:
    model, maker = world({(2, 2): "accept_buyout", (2, 4): "accept_buyout"}, PROGRAMME)
    _, second, third = run(model, 3)
    sold = second[2]
    assert sold["executed_action"] == "accept_buyout" and sold["relocated_after"]
    assert sold["buyout_usd"] == pytest.approx(
        maker.seen[1][1].facts.buyout_offer_usd) and sold["buyout_usd"] > 0
    # the pre-flood price covers the home and, with the unrepaired damage it makes good, the
    # $10,000 move: nothing out of pocket for a household with no room left to spend
    seen = maker.seen[1][1]
    assert seen.unrepaired_damage_usd > 10_000 and seen.facts.spending_room_usd < 10_000
    assert seen.action_costs_usd["accept_buyout"] == 0 and sold["action_cost_usd"] == 0
    assert 2 not in third
    # no offer, no buyout: the world refuses it and runs the default
    assert second[4]["executed_action"] == "do_nothing" and not second[4]["feasible"]
    assert model.last_model_row["total_buyout_usd"] == 0.0
    assert second[1]["buyout_usd"] == 0.0


def test_substantial_damage_alone_qualifies(world) -> None:
    model, _ = world({}, {**PROGRAMME, "min_floods": 5, "substantial_damage_share": 0.1}, 1)
    (first,) = run(model, 1)
    assert _offered(first) == [1, 2]  # flooded owners with damage; 5 is elevated above it


def test_a_budget_funds_the_neediest_first(world) -> None:
    # one home of about $200,000 fits a $250,000 budget
    model, _ = world({}, {**PROGRAMME, "annual_budget_usd": 250_000, "allocation": "by_need"})
    _, second, _ = run(model, 3)
    assert _offered(second) == [5]


def test_a_programme_no_household_can_accept_is_a_configuration_error(world, repo_root,
                                                                      tmp_path) -> None:
    types = yaml.safe_load((repo_root / "agent_types.yaml").read_text())
    del types["actions"]["accept_buyout"]
    for rule in types["governance"]["rules"]:
        rule["actions"] = [a for a in rule["actions"] if a != "accept_buyout"]
    path = tmp_path / "types.yaml"
    path.write_text(yaml.safe_dump(types))
    with pytest.raises(ConfigError, match="no action of .* has the effect 'buyout'"):
        world({}, PROGRAMME, agent_types=str(path))


@settings(max_examples=200, deadline=None)
@given(budget=st.one_of(st.none(), st.floats(0, 2e6)), prices=st.lists(
    st.floats(0, 5e5), min_size=1, max_size=40), bits=st.integers(0, 2**40),
    by_need=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_offers_never_exceed_the_budget(budget, prices, bits, by_need, seed) -> None:
    config = BuyoutConfig(source="t", price_share=1.0, annual_budget_usd=budget,
                          allocation="by_need" if by_need else "first_come")
    price = np.array(prices)
    eligible = np.array([(bits >> i) & 1 == 1 for i in range(len(price))])
    income = np.arange(len(price), dtype=float)[::-1]
    offered = buyout_offers(config, eligible, price, income, np.random.default_rng(seed))
    assert not offered[~eligible].any()
    if budget is None:
        assert np.array_equal(offered, eligible)
        return
    left = budget - price[offered].sum()
    assert left >= -1e-6
    # greedy: an eligible household left without an offer did not fit what was left
    assert (price[eligible & ~offered] > left).all()
