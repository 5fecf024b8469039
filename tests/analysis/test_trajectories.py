"""Adaptation trajectories on a hand-built 4-household, 3-year table."""

from __future__ import annotations

import pandas as pd
import pytest
from analysis_helpers import make_agents

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.trajectories import adaptation_trajectories, household_states


def _table():
    # Household 1: insures in year 1, lapses in year 2, insures again in year 3.
    # Household 2: elevates in year 1, also insures from year 2 (both).
    # Household 3: relocates in year 2 (no row in year 3).
    # Household 4 (renter): nothing.
    return make_agents(
        [
            {"year": 1, "agent_id": 1, "insured_after": True},
            {"year": 1, "agent_id": 2, "elevated_after": True},
            {"year": 1, "agent_id": 3},
            {"year": 1, "agent_id": 4, "tenure": "renter"},
            {"year": 2, "agent_id": 1},
            {"year": 2, "agent_id": 2, "elevated_after": True, "insured_after": True},
            {"year": 2, "agent_id": 3, "relocated_after": True},
            {"year": 2, "agent_id": 4, "tenure": "renter"},
            {"year": 3, "agent_id": 1, "insured_after": True},
            {"year": 3, "agent_id": 2, "elevated_after": True, "insured_after": True},
            {"year": 3, "agent_id": 4, "tenure": "renter"},
        ]
    )


def test_states_carry_relocation_forward():
    states = household_states(_table()).set_index(["agent_id", "year"])
    assert states.loc[(3, 3), "state"] == "relocated"
    assert states.loc[(1, 2), "state"] == "none"
    assert bool(states.loc[(1, 2), "ever_insured"]) is True
    assert states.loc[(2, 2), "state"] == "insured_and_elevated"


def test_shares_by_year_by_hand():
    traj = adaptation_trajectories(_table()).set_index("year")
    # Year 1: insured_only {1}, elevated_only {2}, none {3, 4} of 4 households.
    assert traj.loc[1, "share_insured_only"] == pytest.approx(0.25)
    assert traj.loc[1, "share_elevated_only"] == pytest.approx(0.25)
    assert traj.loc[1, "share_no_measure"] == pytest.approx(0.5)
    # Year 2: both {2}, relocated {3}, none {1, 4}.
    assert traj.loc[2, "share_insured_and_elevated"] == pytest.approx(0.25)
    assert traj.loc[2, "share_relocated"] == pytest.approx(0.25)
    assert traj.loc[2, "share_insured"] == pytest.approx(0.25)
    assert traj.loc[2, "share_elevated"] == pytest.approx(0.25)
    assert traj.loc[2, "share_ever_insured"] == pytest.approx(0.5)  # 1 (year 1) and 2
    # Year 3: insured {1, 2}, elevated {2}, relocated {3} (no row, carried), none {4}.
    assert traj.loc[3, "share_insured"] == pytest.approx(0.5)
    assert traj.loc[3, "share_relocated"] == pytest.approx(0.25)
    assert traj.loc[3, "share_no_measure"] == pytest.approx(0.25)
    assert traj.loc[3, "share_ever_adapted"] == pytest.approx(0.75)
    assert (traj["n_households"] == 4).all()
    five = ["share_relocated", "share_insured_and_elevated", "share_insured_only",
            "share_elevated_only", "share_no_measure"]
    assert traj[five].sum(axis=1).to_numpy() == pytest.approx([1, 1, 1])


def test_group_shares_use_group_population():
    traj = adaptation_trajectories(_table(), group_by="tenure").set_index(["year", "tenure"])
    assert traj.loc[(3, "owner"), "n_households"] == 3
    assert traj.loc[(3, "owner"), "share_insured"] == pytest.approx(2 / 3)
    assert traj.loc[(3, "renter"), "share_no_measure"] == pytest.approx(1.0)


def test_missing_household_without_relocation_is_an_error():
    table = _table()
    table = table[~((table["agent_id"] == 4) & (table["year"] == 2))]
    with pytest.raises(AnalysisInputError, match="household 4 has no row in year 2"):
        household_states(table)


def test_empty_table_is_an_error():
    with pytest.raises(AnalysisInputError, match="empty"):
        household_states(make_agents([]).iloc[0:0])


def test_returns_dataframe():
    assert isinstance(adaptation_trajectories(_table()), pd.DataFrame)
