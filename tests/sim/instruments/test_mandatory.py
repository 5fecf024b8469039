"""The mandatory purchase requirement.

Who is required, and that required households stay insured unless they cannot pay or their lender
does not enforce it.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_broker.config import ConfigError
from governed_broker.config.resolved import resolve_experiment
from governed_broker.config.world import MandatoryPurchaseConfig
from governed_broker.sim import BaselineDecisionMaker, FloodModel
from governed_broker.sim.instruments.mandatory import (
    draw_required,
    holders_by_score,
    with_insurance,
    zone_tenure_groups,
)
from tests.sim.instruments.small_world import scripted, small_world
from tests.sim.test_model import Scripted, run

POP_ROWS = [
    "owner,high,60000,100000,200000,100000,False,False,0.3,0.5",   # 1: required
    "renter,high,40000,20000,0,50000,False,False,0.3,0.5",         # 2: renter, never required
    "owner,high,10000,0,200000,100000,False,False,0.3,0.5",        # 3: required, cannot pay
    "owner,low,60000,100000,200000,100000,False,True,0.3,0.5",     # 4: outside the zones
    "owner,high,60000,100000,200000,100000,False,False,0.3,0.5",   # 5: required
]
#: (3.6 x 200 + 5.0 x 100) x 1.15 + 100: the baseline's legacy premium for these homes.
PREMIUM_USD = 1_503.0


def _config(**kw) -> dict:
    return {"source": "test", "zones": ["high"], "mortgage_share": 1.0,
            "compliance_share": 1.0, **kw}


@pytest.fixture
def world(experiments):
    def make(script: dict[tuple[int, int], str], mandatory: dict | None, years: int = 3):
        data = small_world(experiments, POP_ROWS, years, {2: {"high": 1.0}})
        if mandatory is not None:
            data["insurance"]["mandatory_purchase"] = mandatory
        return scripted(experiments, data, script)

    return make


def test_required_households_stay_insured_whatever_they_choose(world) -> None:
    model, maker = world({(1, 5): "buy_insurance", (2, 1): "elevate_house"}, _config())
    rows = run(model, 3)
    assert [a for a in (1, 2, 3, 4, 5) if rows[0][a]["insurance_required"]] == [1, 3, 5]
    for year in range(3):
        r = rows[year][1]
        assert r["insured_after"] and r["lender_placed"]
        assert r["premium_usd"] == pytest.approx(PREMIUM_USD)
    assert rows[1][1]["executed_action"] == "elevate_house" and rows[1][1]["elevated_after"]
    assert rows[1][1]["action_cost_usd"] == pytest.approx(40_000.0)  # premium apart
    assert rows[1][1]["payout_usd"] > 0  # the policy the lender renewed in year 1 paid
    # buying it oneself is not a lender placement
    assert rows[0][5]["insured_after"] and not rows[0][5]["lender_placed"]
    assert rows[1][5]["lender_placed"]
    # the renter and the owner outside the zones lapse as usual
    assert not rows[0][2]["insured_after"] and not rows[0][4]["insured_after"]


def test_a_required_household_that_cannot_pay_lapses(world) -> None:
    row = run(world({}, _config(), years=1)[0], 1)[0][3]  # room $1,000 < premium $1,503
    assert row["insurance_required"] and not row["insured_after"] and not row["lender_placed"]
    assert row["premium_usd"] == 0


def test_decision_makers_see_the_price_with_the_lenders_policy(world) -> None:
    model, maker = world({}, _config(), years=1)
    model.step()
    s = {x.agent_id: x for x in maker.seen[0]}
    assert s[1].facts.insurance_required and not s[2].facts.insurance_required
    assert s[1].action_costs_usd["do_nothing"] == pytest.approx(PREMIUM_USD)
    assert s[1].facts.premium_usd["do_nothing"] == pytest.approx(PREMIUM_USD)
    assert s[1].facts.loss_if_flood_usd["do_nothing"] == pytest.approx(
        s[1].facts.loss_if_flood_usd["buy_insurance"])
    assert s[1].action_costs_usd["elevate_house"] == pytest.approx(40_000.0 + PREMIUM_USD)
    # cannot pay the premium: the choice keeps its own price
    assert s[3].action_costs_usd["do_nothing"] == 0


def test_without_enforcement_the_policy_lapses(world) -> None:
    for mandatory in (None, _config(compliance_share=0.0), _config(mortgage_share=0.0)):
        rows = run(world({(1, 1): "buy_insurance"}, mandatory)[0], 2)
        assert not rows[0][1]["insurance_required"]
        assert rows[0][1]["insured_after"] and not rows[1][1]["insured_after"]
        assert not any(rows[y][a]["lender_placed"] for y in range(2) for a in rows[y])


@pytest.mark.parametrize(("mortgage", "compliance"), [(1.0, 0.3), (0.62, 0.71), (0.5, 1.0)])
def test_required_share_is_mortgage_times_compliance(mortgage, compliance) -> None:
    n = 20_000
    zone = np.array(["high", "low"] * (n // 2), dtype=object)
    owner = np.ones(n, dtype=bool)
    owner[::4] = False
    config = MandatoryPurchaseConfig(source="t", zones=["high"], mortgage_share=mortgage,
                                     compliance_share=compliance)
    required = draw_required(config, zone, owner, seed=7)
    assert not required[(zone == "low") | ~owner].any()
    eligible = (zone == "high") & owner
    p = mortgage * compliance
    assert required[eligible].mean() == pytest.approx(p, abs=4 * np.sqrt(p * (1 - p) / n * 2))
    assert np.array_equal(required, draw_required(config, zone, owner, seed=7))
    assert not np.array_equal(required, draw_required(config, zone, owner, seed=8))


def test_the_lender_adds_a_policy_to_the_effect() -> None:
    assert with_insurance("none") == "insure"
    assert with_insurance("elevate") == "elevate+insure"


def test_an_unknown_zone_is_a_configuration_error(experiments) -> None:
    data = experiments.data()
    data["insurance"]["mandatory_purchase"]["zones"] = ["sfha"]
    with pytest.raises(ConfigError, match="mandatory_purchase.zones.*sfha"):
        experiments.config(data=data)


def test_required_households_start_insured(world) -> None:
    rows = run(world({}, _config(), years=1)[0], 1)
    for agent in (1, 3, 5):  # required (the CSV says uninsured)
        assert rows[0][agent]["insured_before"]
    assert not rows[0][2]["insured_before"] and rows[0][4]["insured_before"]


def test_the_initial_insured_share_is_kept_with_the_required_inside_it(experiments) -> None:
    data = experiments.data()
    data["population"]["size"] = 2000
    data["population"]["generate"]["initial_insured"]["high"]["owner"] = 0.6
    model = FloodModel(experiments.config(data=data), Scripted({}))
    hh = model.hh
    owners_high = hh.is_owner & (np.asarray(model.zones)[hh.zone_index] == "high")
    required = model.instrument("mandatory_purchase").arrays["insurance_required"]
    assert required[owners_high].mean() == pytest.approx(0.62 * 0.71, abs=0.06)
    assert hh.insured[required].all()
    # the group's insured count is the population's draw, required households inside it
    from governed_broker.sim.population import load_population
    config = model.config
    drawn = load_population(config.population, config.seed, config.resolve_path).insured
    assert hh.insured[owners_high].sum() == drawn[owners_high].sum()
    assert np.array_equal(hh.insured[~owners_high], drawn[~owners_high])


def test_an_initial_share_below_the_required_one_is_a_configuration_error(experiments) -> None:
    data = experiments.data()
    data["population"]["generate"]["initial_insured"]["high"]["owner"] = 0.3
    with pytest.raises(ConfigError, match=r"initial_insured.high.owner \(0.3\).*0.44"):
        experiments.config(data=data)


def test_a_fading_compliance_releases_households_one_by_one() -> None:
    n = 5_000
    zone = np.array(["high"] * n, dtype=object)
    owner = np.ones(n, dtype=bool)
    config = MandatoryPurchaseConfig(source="t", zones=["high"], mortgage_share=0.6,
                                     compliance_share=0.8, compliance_change_per_year=-0.1)
    sets = [draw_required(config, zone, owner, seed=3, year=y) for y in range(1, 11)]
    for earlier, later in zip(sets, sets[1:], strict=False):
        assert not (later & ~earlier).any()  # nobody is taken back
    assert [round(s.mean(), 2) for s in sets[:3]] == pytest.approx([0.48, 0.42, 0.36], abs=0.02)
    assert not sets[-1].any()  # compliance 0 from year 9 on
    assert config.compliance_in(30) == 0.0
    rising = config.model_copy(update={"compliance_change_per_year": 0.5})
    assert rising.compliance_in(3) == 1.0


def test_a_released_household_keeps_its_policy_by_its_own_choice_only(world) -> None:
    # compliance 1 in year 1, 0 from year 2: agent 1 renews once, agent 5 never
    model, _ = world({(2, 1): "buy_insurance"},
                     _config(compliance_share=1.0, compliance_change_per_year=-1.0), years=3)
    rows = run(model, 3)
    assert rows[0][1]["insurance_required"] and rows[0][1]["lender_placed"]
    assert not rows[1][1]["insurance_required"] and not rows[1][5]["insurance_required"]
    assert rows[1][1]["insured_after"] and not rows[1][1]["lender_placed"]
    assert not rows[1][5]["insured_after"] and not rows[2][1]["insured_after"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.integers(0, 3),
                          st.floats(-5, 5, allow_nan=False)), min_size=1, max_size=60))
def test_holders_by_score_keep_each_groups_count_and_the_required(rows) -> None:
    insured, required, groups, scores = (np.array(c) for c in zip(*rows, strict=True))
    required &= insured  # at the start the required hold policies within the count
    out = holders_by_score(insured, required, groups, scores)
    assert out[required].all()
    for g in np.unique(groups):
        members = groups == g
        assert out[members].sum() == insured[members].sum()
        free = members & ~required
        if (out & free).any() and (~out & free).any():  # the most worried keep the policies
            assert scores[out & free].min() >= scores[~out & free].max()


def test_the_baseline_can_start_its_policies_with_the_most_worried(experiments) -> None:
    data = experiments.data()
    data["population"]["size"] = 600
    by_draw = FloodModel(experiments.config(data=data), _baseline(experiments, data))
    data["decision"]["baseline"]["initial_policies"] = "by_perception"
    maker = _baseline(experiments, data)
    model = FloodModel(experiments.config(data=data), maker)
    hh, d = model.hh, maker.disposition(range(1, model.n + 1))
    required = model.instrument("mandatory_purchase").arrays["insurance_required"]
    assert np.array_equal(required, by_draw.instrument("mandatory_purchase")
                          .arrays["insurance_required"]) and hh.insured[required].all()
    groups = zone_tenure_groups(hh)
    moved = 0
    for g in np.unique(groups):
        members = groups == g
        assert hh.insured[members].sum() == by_draw.hh.insured[members].sum()
        free = members & ~required
        if (hh.insured & free).any() and (~hh.insured & free).any():
            assert d[hh.insured & free].min() >= d[~hh.insured & free].max()
        moved += int((hh.insured[members] != by_draw.hh.insured[members]).sum())
    assert moved > 0  # the draw's holders were not already the most worried


def _baseline(experiments, data):
    config = experiments.config(data=data)
    return BaselineDecisionMaker(config.decision.baseline, resolve_experiment(config).domain,
                                 config.seed)
