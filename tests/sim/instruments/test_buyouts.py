"""The buyout programme.

Offers to owners with repetitive or substantial losses, within an annual budget, open only with an
offer; accepting sells the home to the programme at the offered price and the household leaves.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_broker.config import ConfigError, load_experiment
from governed_broker.config.world import BuyoutConfig
from governed_broker.sim.instruments.buyouts import buyout_offers
from tests.sim.instruments.small_world import scripted, small_world
from tests.sim.test_model import run

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
    def make(script: dict[tuple[int, int], str], buyout: dict | None, years: int = 3,
             agent_types: str | None = None):
        data = small_world(experiments, POP_ROWS, years, {1: {"high": 1.0}, 2: {"high": 1.0}})
        data["finance"]["aid"]["probability"] = 0.0
        if buyout is not None:
            data["buyout"] = buyout
        if agent_types is not None:
            data["agent_types"] = agent_types
        return scripted(experiments, data, script)

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


def test_an_offer_follows_the_flood_and_stays_open_for_its_term(world) -> None:
    # the second flood (year 2) makes 1, 2 and 5 repetitive-loss owners; offers open 2 years
    model, maker = world({(3, 1): "accept_buyout"}, {**PROGRAMME, "offer_years": 2}, years=4)
    first, second, third, fourth = run(model, 4)
    assert _offered(second) == [1, 2, 5] and _offered(third) == [1, 2, 5]
    assert _offered(fourth) == []  # lapsed after its term; no flood in year 3 to renew it
    price = maker.seen[1][0].facts.buyout_offer_usd
    assert third[1]["buyout_usd"] == pytest.approx(price)  # accepted in the term's 2nd year
    assert third[1]["relocated_after"] and 1 not in fourth


def test_without_a_new_flood_no_new_offer(world) -> None:
    # repetitive-loss owners after year 2; year 3 has no flood, so no offer (offers lapse)
    _, second, third = run(world({}, PROGRAMME)[0], 3)
    assert _offered(second) == [1, 2, 5] and _offered(third) == []


def test_owners_apply_and_the_offer_follows_its_delay(world) -> None:
    # 1, 2 and 5 are eligible after the second flood (year 2); 1 and 5 apply, 2 does not
    script = {(2, 1): "accept_buyout", (2, 5): "accept_buyout", (4, 1): "accept_buyout"}
    model, maker = world(script, {**PROGRAMME, "offer_delay_years": 1, "offer_years": 2},
                         years=4)
    _, second, third, fourth = run(model, 4)
    assert _offered(second) == []  # an application, not an offer
    seen = {s.agent_id: s for s in maker.seen[1]}
    assert [a for a, s in seen.items() if "accept_buyout" in s.allowed_actions] == [1, 2, 5]
    told = {}
    for a in (1, 2, 5):
        assert seen[a].facts.buyout_offer_usd is None  # not an offer yet
        told[a] = seen[a].structure_value_usd + seen[a].unrepaired_damage_usd  # pre-flood
        assert told[a] > 0
    # applying: the owner stays, nothing is paid, the default action runs
    applied = second[1]
    assert (applied["proposed_action"], applied["executed_action"]) == (
        "accept_buyout", "do_nothing")
    assert applied["feasible"] and not applied["relocated_after"]
    assert applied["buyout_usd"] == 0.0 and applied["action_cost_usd"] == 0.0
    # the year after, the applicants (only they) are offered the price they were told
    assert _offered(third) == [1, 5]
    offered = {s.agent_id: s for s in maker.seen[2]}
    assert offered[1].facts.buyout_offer_usd == pytest.approx(told[1])  # the year-2 price
    assert "accept_buyout" not in offered[2].allowed_actions
    # 1 accepts in the offer's second year; 5 declined both years
    assert fourth[1]["buyout_usd"] == pytest.approx(told[1])
    assert fourth[1]["relocated_after"] and not fourth[5]["relocated_after"]
    assert _offered(fourth) == [1, 5]


def test_an_application_the_budget_does_not_reach_waits(world) -> None:
    # every owner applies in year 2; about $200,000 a home against a $250,000 budget a year
    script = {(2, a): "accept_buyout" for a in (1, 2, 5)}
    budget = {**PROGRAMME, "offer_delay_years": 1, "annual_budget_usd": 250_000,
              "allocation": "by_need"}
    _, second, third, fourth = run(world(script, budget, years=4)[0], 4)
    assert _offered(second) == []
    assert _offered(third) == [5] and _offered(fourth) == [2]  # neediest first, then the next



def test_applications_are_refused_for_llm_households(repo_root) -> None:
    """No household prompt says how to apply yet: a clear error at load, not a silent prompt."""
    experiment = repo_root / "experiments" / "policy_buyout.yaml"
    arm = load_experiment(experiment).sweep.cases["buyout"]["policy_change"]
    assert arm["settings"]["buyout"]["offer_delay_years"] == 1
    load_experiment(experiment, [f"policy_change={json.dumps(arm)}"])  # the baseline may
    with pytest.raises(ConfigError, match=r"policy_change\.settings\.buyout\.offer_delay_years "
                                          r"is 1: LLM households cannot apply"):
        load_experiment(experiment, ["decision.maker=llm", f"policy_change={json.dumps(arm)}"])
    programme = {**PROGRAMME, "offer_delay_years": 2}
    with pytest.raises(ConfigError, match=r"buyout\.offer_delay_years is 2"):
        load_experiment(experiment, ["decision.maker=llm",
                                     f"buyout={json.dumps(programme)}"])
