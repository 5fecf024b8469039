"""Risk-based premiums (``insurance.pricing: risk_based``).

By zone and first-floor height, checked against premiums computed by hand; legacy pricing is the
same everywhere.
"""

from __future__ import annotations

import numpy as np
import pytest

from governed_broker.config.damage import load_damage_table
from governed_broker.sim import money
from governed_broker.sim.effects import OptionBatch, price

# The baseline's policy: limits $250k / $100k, deductibles $1,000, loading 1.15, fee $100; the
# FEMA one-story table: fraction 0.054 at the floor, 0.288 at 0.6096 m (linear between).
# SFHA home, at grade, typical flood 0.3 m, chance 2 %: fraction 0.054 + 0.234 x 0.3 / 0.6096
# = 0.169157; damage $33,831.50 (structure $200k) + $8,457.87 (contents $50k); payout
# $32,831.50 + $7,457.87 = $40,289.37; premium 0.02 x 40,289.37 x 1.15 + 100 = $1,026.66.
SFHA_AT_GRADE = 1_026.66
# Outside: 0.2 m, 0.2 %: fraction 0.130772; payout $25,154.33 + $5,538.58 = $30,692.91;
# premium 0.002 x 30,692.91 x 1.15 + 100 = $170.59.
OUTSIDE_AT_GRADE = 170.59
# Elevated 1.524 m, typical flood 2.0 m: 0.476 m above the floor, fraction 0.236717; payout
# $46,343.31 + $10,835.83 = $57,179.13; premium 0.02 x 57,179.13 x 1.15 + 100 = $1,415.12.
ELEVATED_DEEP = 1_415.12
# Renter (contents $30k), SFHA: contents damage $5,074.72, payout $4,074.72; premium
# 0.02 x 4,074.72 x 1.15 + 100 = $193.72.
RENTER_SFHA = 193.72


@pytest.fixture
def batch(experiments):
    def make(pricing, owner, structure, contents, elevated, depth, probability):
        config = experiments.config([f"insurance.pricing={pricing}"])
        table = load_damage_table(config.resolve_path(config.damage.table))
        n = len(owner)
        return OptionBatch(config, table, np.asarray(owner), np.asarray(structure, float),
                           np.asarray(contents, float), np.asarray(elevated),
                           np.asarray(depth, float), np.asarray(probability, float),
                           np.zeros(n, dtype=bool))
    return make


def test_risk_based_premiums_by_zone_and_elevation_by_hand(batch) -> None:
    b = batch("risk_based", owner=[True, True, True, True, False],
              structure=[200e3, 200e3, 200e3, 200e3, 0.0],
              contents=[50e3, 50e3, 50e3, 50e3, 30e3],
              elevated=[False, False, True, True, False], depth=[0.3, 0.2, 0.3, 2.0, 0.3],
              probability=[0.02, 0.002, 0.02, 0.02, 0.02])
    np.testing.assert_allclose(
        b.premium_usd, [SFHA_AT_GRADE, OUTSIDE_AT_GRADE, 100.0, ELEVATED_DEEP, RENTER_SFHA],
        atol=0.01)  # an elevated home above the typical flood pays the fee only


def test_the_policy_bought_with_elevation_is_rated_on_the_elevated_home(batch) -> None:
    b = batch("risk_based", owner=[True], structure=[200e3], contents=[50e3],
              elevated=[False], depth=[0.3], probability=[0.02])
    assert price("insure", b).premium_usd[0] == pytest.approx(SFHA_AT_GRADE, abs=0.01)
    both = price("elevate+insure", b)
    assert both.premium_usd[0] == pytest.approx(100.0)
    assert both.cost_usd[0] == pytest.approx(40_000.0 + 100.0)  # $80k elevation, 50 % subsidy


def test_legacy_rates_every_home_alike(batch) -> None:
    b = batch("legacy", owner=[True] * 3, structure=[200e3] * 3, contents=[50e3] * 3,
              elevated=[False, False, True], depth=[0.3, 0.2, 0.3],
              probability=[0.02, 0.002, 0.02])
    np.testing.assert_allclose(b.premium_usd, (3.6 * 200 + 5.0 * 50) * 1.15 + 100)
    assert price("elevate+insure", b).premium_usd[0] == pytest.approx(b.premium_usd[0])


def test_risk_based_pricing_needs_the_expected_payout(experiments) -> None:
    ins = experiments.config(["insurance.pricing=risk_based"]).insurance
    with pytest.raises(ValueError, match="expected annual payout"):
        money.premium_usd(ins, np.array([1.0]), np.array([1.0]), np.array([True]))


def test_an_unknown_pricing_is_a_configuration_error(experiments) -> None:
    from governed_broker.config import ConfigError

    with pytest.raises(ConfigError, match="insurance.pricing"):
        experiments.config(["insurance.pricing=flat"])
