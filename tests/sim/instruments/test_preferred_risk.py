"""Banded premiums outside the SFHA (``insurance.preferred_risk``).

Households of its zones are offered and charged the band's premium under legacy pricing, the others
the rated premium.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from governed_broker.config import ConfigError
from governed_broker.sim import FloodModel, money
from tests.sim.test_model import Scripted, run


def test_households_of_the_zones_pay_the_banded_premium(experiments) -> None:
    config = experiments.config()
    maker = Scripted({(1, a): "buy_insurance" for a in range(1, 21)})
    rows = run(FloodModel(config, maker), 1)[0]
    ins = config.insurance
    seen = {s.agent_id: s for s in maker.seen[0]}
    zones = {s.flood_zone for s in seen.values()}
    assert zones == {"high", "low"}
    for agent_id, s in seen.items():
        owner = np.array([s.tenure == "owner"])
        cov = money.coverage_usd(ins, np.array([s.structure_value_usd]),
                                 np.array([s.contents_value_usd]), owner)
        banded = money.preferred_premium_usd(ins.preferred_risk, *cov, owner)[0]
        rated = money.premium_usd(ins, np.array([s.structure_value_usd]),
                                  np.array([s.contents_value_usd]), owner)[0]
        expected = banded if s.flood_zone == "low" else rated
        assert s.action_costs_usd["buy_insurance"] == pytest.approx(expected)
        assert rows[agent_id]["premium_usd"] == pytest.approx(expected)
        if s.flood_zone == "low":
            assert banded < rated  # the flat rate overprices a policy outside the SFHA


def test_risk_based_pricing_does_not_use_the_bands(experiments) -> None:
    config = experiments.config(["insurance.pricing=risk_based"])
    maker = Scripted({})
    run(FloodModel(config, maker), 1)
    band_premiums = {b.premium_usd + config.insurance.preferred_risk.surcharge_usd
                     for b in [*config.insurance.preferred_risk.building_contents,
                               *config.insurance.preferred_risk.contents_only]}
    low = [s for s in maker.seen[0] if s.flood_zone == "low"]
    assert low and not any(s.action_costs_usd["buy_insurance"] in band_premiums for s in low)


def test_an_unknown_zone_is_a_configuration_error(experiments) -> None:
    with pytest.raises(ConfigError, match=r"insurance.preferred_risk.zones.*'x'"):
        experiments.config(["insurance.preferred_risk.zones=[x]"])


@pytest.mark.parametrize(("override", "named"), [
    ("insurance.limit_structure_usd=300000", "building_contents[-1].building_usd 250000 < "
                                              "limit_structure_usd 300000"),
    ("insurance.limit_contents_usd=150000", "contents_only[-1].contents_usd 100000 < "
                                             "limit_contents_usd 150000"),
])
def test_bands_short_of_the_limits_are_a_configuration_error(experiments, override,
                                                             named) -> None:
    """Payouts follow the limits.

    So a table that stops below them would pay cover nobody bought.
    """
    with pytest.raises(ConfigError, match=re.escape(named)):
        experiments.config([override])
    experiments.config([override, "insurance.preferred_risk=null"])  # no bands, no conflict


def _flooded_every_year(experiments, extra=()):
    """Zone low flooded at every home every year, every household buying insurance."""
    config = experiments.config([
        "hazard.zones.low.annual_probability=1.0", "hazard.zones.low.flooded_share=1.0",
        "hazard.zones.low.median_depth_m=1.0", *extra])
    maker = Scripted({(y, a): "buy_insurance" for y in range(1, 6) for a in range(1, 21)})
    rows = run(FloodModel(config, maker), 5)
    return config, maker, rows


def _offered_prices(config, situation):
    ins = config.insurance
    owner = np.array([situation.tenure == "owner"])
    values = np.array([situation.structure_value_usd]), np.array([situation.contents_value_usd])
    banded = money.preferred_premium_usd(ins.preferred_risk, *money.coverage_usd(
        ins, *values, owner), owner)[0]
    return banded, money.premium_usd(ins, *values, owner)[0]


def test_a_home_with_a_flood_loss_history_is_rated_instead_of_banded(experiments) -> None:
    config, maker, rows = _flooded_every_year(experiments)
    rule = config.insurance.preferred_risk.loss_history
    paid: dict[int, int] = {}
    large: dict[int, int] = {}
    outcomes = set()
    for year, (seen, year_rows) in enumerate(zip(maker.seen, rows, strict=True), start=1):
        for s in seen:
            if s.flood_zone != "low":
                continue
            # this year's payments come before this year's decision
            row = year_rows[s.agent_id]
            amounts = [row["payout_usd"], row["aid_usd"], row["loan_usd"]]
            paid[s.agent_id] = paid.get(s.agent_id, 0) + sum(a > 0 for a in amounts)
            large[s.agent_id] = large.get(s.agent_id, 0) + sum(
                a >= rule.large_payment_usd for a in amounts)
            ineligible = large[s.agent_id] >= rule.large_payments or (
                paid[s.agent_id] >= rule.any_payments)
            banded, rated = _offered_prices(config, s)
            expected = rated if ineligible else banded
            assert s.action_costs_usd["buy_insurance"] == pytest.approx(expected), (
                year, s.agent_id, paid[s.agent_id], large[s.agent_id])
            outcomes.add(ineligible)
    assert outcomes == {True, False}  # some homes lost the bands, some kept them a while


def test_without_the_rule_every_home_of_the_zones_keeps_the_bands(experiments) -> None:
    config, maker, _ = _flooded_every_year(
        experiments, ["insurance.preferred_risk.loss_history=null"])
    low = [s for seen in maker.seen for s in seen if s.flood_zone == "low"]
    assert low
    for s in low:
        assert s.action_costs_usd["buy_insurance"] == pytest.approx(
            _offered_prices(config, s)[0])


def test_flood_payments_count_each_kind_and_the_large_ones() -> None:
    paid, large = money.flood_payments(1000.0, np.array([0.0, 500.0, 2000.0]),
                                       np.array([0.0, 1000.0, 0.0]),
                                       np.array([0.0, 0.0, 30000.0]))
    assert paid.tolist() == [0, 2, 2]
    assert large.tolist() == [0, 1, 2]


def test_a_zero_is_no_payment_whatever_the_threshold() -> None:
    paid, large = money.flood_payments(0.0, np.array([0.0, 500.0]), np.array([0.0, 0.0]))
    assert paid.tolist() == [0, 1] and large.tolist() == [0, 1]
