"""Banded premiums outside the SFHA (``insurance.preferred_risk``): households of its zones are
offered and charged the band's premium under legacy pricing, the others the rated premium."""

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
    """Payouts follow the limits, so a table that stops below them would pay cover nobody
    bought."""
    with pytest.raises(ConfigError, match=re.escape(named)):
        experiments.config([override])
    experiments.config([override, "insurance.preferred_risk=null"])  # no bands, no conflict
