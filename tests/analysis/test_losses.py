"""Damages, payouts, premiums and out-of-pocket losses by year and group, by hand."""

from __future__ import annotations

import math

import pytest
from analysis_helpers import make_agents

from governed_broker.analysis.losses import losses_by_year


def _table():
    return make_agents(
        [
            {"year": 1, "agent_id": 1, "flooded": True, "damage_usd": 10_000.0,
             "payout_usd": 8_000.0, "out_of_pocket_usd": 2_000.0, "premium_usd": 500.0},
            {"year": 1, "agent_id": 2, "flooded": True, "damage_usd": 30_000.0,
             "out_of_pocket_usd": 30_000.0, "tenure": "renter", "action_cost_usd": 1_000.0},
            {"year": 1, "agent_id": 3, "premium_usd": 700.0},
            {"year": 2, "agent_id": 1, "premium_usd": 500.0},
            {"year": 2, "agent_id": 2, "tenure": "renter"},
            {"year": 2, "agent_id": 3},
        ]
    )


def test_yearly_totals_by_hand():
    out = losses_by_year(_table()).set_index("year")
    assert out.loc[1, "n_household_years"] == 3
    assert out.loc[1, "n_flooded"] == 2
    assert out.loc[1, "damage_usd"] == pytest.approx(40_000)
    assert out.loc[1, "payout_usd"] == pytest.approx(8_000)
    assert out.loc[1, "premium_usd"] == pytest.approx(1_200)
    assert out.loc[1, "out_of_pocket_usd"] == pytest.approx(32_000)
    assert out.loc[1, "action_cost_usd"] == pytest.approx(1_000)
    assert out.loc[1, "mean_damage_per_flooded_usd"] == pytest.approx(20_000)
    assert out.loc[1, "payout_share_of_damage"] == pytest.approx(0.2)
    assert math.isnan(out.loc[2, "mean_damage_per_flooded_usd"])
    assert math.isnan(out.loc[2, "payout_share_of_damage"])
    assert out.loc[2, "premium_usd"] == pytest.approx(500)


def test_by_tenure():
    out = losses_by_year(_table(), group_by="tenure").set_index(["year", "tenure"])
    assert out.loc[(1, "owner"), "damage_usd"] == pytest.approx(10_000)
    assert out.loc[(1, "renter"), "out_of_pocket_usd"] == pytest.approx(30_000)
    assert out.loc[(1, "owner"), "n_household_years"] == 2
