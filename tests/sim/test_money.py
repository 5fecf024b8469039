"""Premiums, payouts with limits and deductibles, costs and affordability."""

from __future__ import annotations

import numpy as np
import pytest

from governed_broker.config.world import ElevationConfig, InsuranceConfig, RelocationConfig
from governed_broker.sim import money

INS = InsuranceConfig(
    source="test", rate_structure_per_1000_usd=3.6, rate_contents_per_1000_usd=5.0,
    loading=1.15, fee_usd=100, limit_structure_usd=250_000, limit_contents_usd=100_000,
    deductible_structure_usd=1_000, deductible_contents_usd=1_000,
)
OWNER, RENTER = np.array([True]), np.array([False])


def test_premium_owner_and_renter() -> None:
    owner = money.premium_usd(INS, np.array([200e3]), np.array([50e3]), OWNER)[0]
    assert owner == pytest.approx((3.6 * 200 + 5.0 * 50) * 1.15 + 100)
    renter = money.premium_usd(INS, np.array([200e3]), np.array([50e3]), RENTER)[0]
    assert renter == pytest.approx(5.0 * 50 * 1.15 + 100)


def test_premium_capped_by_limits() -> None:
    got = money.premium_usd(INS, np.array([900e3]), np.array([400e3]), OWNER)[0]
    assert got == pytest.approx((3.6 * 250 + 5.0 * 100) * 1.15 + 100)


PRP = {"source": "test", "zones": ["low"], "surcharge_usd": 25,
       "building_contents": [{"building_usd": 50_000, "contents_usd": 20_000, "premium_usd": 233},
                             {"building_usd": 100_000, "contents_usd": 40_000, "premium_usd": 308},
                             {"building_usd": 250_000, "contents_usd": 100_000,
                              "premium_usd": 405}],
       "contents_only": [{"contents_usd": 20_000, "premium_usd": 136},
                         {"contents_usd": 100_000, "premium_usd": 266}]}


def test_preferred_risk_premiums_come_from_the_smallest_band_that_covers() -> None:
    ins = InsuranceConfig.model_validate({**INS.model_dump(), "preferred_risk": PRP})
    structure = np.array([40e3, 90e3, 90e3, 900e3, 0.0, 0.0, 0.0])
    contents = np.array([10e3, 30e3, 45e3, 400e3, 15e3, 60e3, 400e3])
    owner = np.array([True, True, True, True, False, False, False])
    got = money.premium_usd(ins, structure, contents, owner, preferred=True)
    # 90k/45k needs the 250k/100k band (contents); beyond the limits: the largest band
    assert got.tolist() == [258, 333, 430, 430, 161, 291, 291]
    rated = money.premium_usd(ins, structure, contents, owner)  # outside the zones
    assert rated.tolist() == pytest.approx(money.premium_usd(INS, structure, contents,
                                                             owner).tolist())
    mixed = money.premium_usd(ins, structure, contents, owner,
                              preferred=np.array([True, False, True, False, True, False, True]))
    assert mixed.tolist() == [got[i] if i % 2 == 0 else rated[i] for i in range(7)]
    risk_based = ins.model_copy(update={"pricing": "risk_based"})
    assert money.premium_usd(risk_based, structure, contents, owner, np.full(7, 100.0),
                             preferred=True).tolist() == pytest.approx([100 * 1.15 + 100] * 7)


def test_preferred_risk_bands_must_increase() -> None:
    bands = [{"building_usd": 100_000, "contents_usd": 40_000, "premium_usd": 308},
             {"building_usd": 50_000, "contents_usd": 20_000, "premium_usd": 233}]
    with pytest.raises(ValueError, match="bands must cover more and more"):
        InsuranceConfig.model_validate({**INS.model_dump(), "preferred_risk": {
            **PRP, "building_contents": bands}})


@pytest.mark.parametrize(
    ("d_s", "d_c", "expected"),
    [
        (0.0, 0.0, 0.0),
        (500.0, 500.0, 0.0),  # below the deductibles
        (11_000.0, 6_000.0, 10_000.0 + 5_000.0),
        (400_000.0, 150_000.0, 249_000.0 + 99_000.0),  # capped by the limits
    ],
)
def test_payout_limits_and_deductibles(d_s, d_c, expected) -> None:
    got = money.payout_usd(INS, np.array([d_s]), np.array([d_c]), OWNER, np.array([True]))[0]
    assert got == pytest.approx(expected)


def test_payout_zero_uninsured_and_no_structure_cover_for_renters() -> None:
    d = np.array([50_000.0])
    assert money.payout_usd(INS, d, d, OWNER, np.array([False]))[0] == 0.0
    assert money.payout_usd(INS, d, d, RENTER, np.array([True]))[0] == pytest.approx(49_000.0)


def test_payout_share() -> None:
    ins = INS.model_copy(update={"payout_share": 0.8})
    got = money.payout_usd(ins, np.array([11_000.0]), np.array([0.0]), OWNER, np.array([True]))
    assert got[0] == pytest.approx(8_000.0)


def test_costs() -> None:
    elev = ElevationConfig(source="t", height_m=1.5, cost_usd=80_000, subsidy_share=0.5)
    assert money.elevation_cost_usd(elev) == 40_000
    rel = RelocationConfig(source="t", moving_cost_usd={"owner": 10_000, "renter": 5_000},
                           buyout_share=0.75)
    cost = money.relocation_cost_usd(rel, np.array([200e3, 200e3]), np.array([True, False]))
    np.testing.assert_allclose(cost, [60_000, 5_000])


def test_payouts_split_structure_and_contents() -> None:
    pay_s, pay_c = money.payouts_usd(INS, np.array([10_000.0]), np.array([5_000.0]),
                                     np.array([True]), np.array([True]))
    assert (pay_s[0], pay_c[0]) == (9_000.0, 4_000.0)
