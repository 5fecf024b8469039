"""The mandatory purchase requirement.

Who is required, and that required households stay insured unless they cannot pay or their lender
does not enforce it.
"""

from __future__ import annotations

import numpy as np
import pytest

from governed_broker.config import ConfigError
from governed_broker.config.world import MandatoryPurchaseConfig
from governed_broker.sim import FloodModel
from governed_broker.sim.instruments.mandatory import draw_required, with_insurance
from tests.sim.test_model import POP_HEADER, Scripted, run

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
    (experiments.tmp_path / "pop.csv").write_text(
        "# synthetic test population\n" + POP_HEADER + "\n" + "\n".join(POP_ROWS) + "\n")

    def make(script: dict[tuple[int, int], str], mandatory: dict | None, years: int = 3):
        data = experiments.data()
        data["years"] = years
        data["memory"]["engine"] = "none"
        data["population"] = {"source": "test", "file": "pop.csv"}
        data["hazard"] = {"source": "test", "mode": "fixed", "events": [
            {"year": 2, "depth_m": {"high": 1.0}}],
            "zones": {"high": {"annual_probability": 0.02, "median_depth_m": 0.3},
                      "low": {"annual_probability": 0.002, "median_depth_m": 0.2}}}
        data["network"] = {"kind": "ring", "k": 2}
        data["insurance"]["mandatory_purchase"] = mandatory
        if mandatory is None:
            del data["insurance"]["mandatory_purchase"]
        maker = Scripted(script)
        return FloodModel(experiments.config(data=data), maker), maker

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
