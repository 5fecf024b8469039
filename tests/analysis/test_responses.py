"""Insurance response to floods: flooded versus dry households of the same zone and year."""

from __future__ import annotations

import pytest
from analysis_helpers import make_agents

from governed_broker.analysis.responses import insurance_response


def _rows():
    # year 1, zone high: households 1, 2 flooded (1 buys, 2 does not), 3 dry and lapses,
    # 4 dry and keeps its policy, 5 flooded but relocates (left out); zone low: 6 dry only.
    return make_agents([
        {"year": 1, "agent_id": 1, "flooded": True, "insured_after": True},
        {"year": 1, "agent_id": 2, "flooded": True},
        {"year": 1, "agent_id": 3, "insured_before": True},
        {"year": 1, "agent_id": 4, "insured_before": True, "insured_after": True},
        {"year": 1, "agent_id": 5, "flooded": True, "insured_before": True,
         "relocated_after": True},
        {"year": 1, "agent_id": 6, "flood_zone": "low", "insured_after": True},
    ])


def test_flooded_against_dry_of_the_same_zone_by_hand():
    table = insurance_response(_rows())
    assert list(table["flood_zone"]) == ["high"]  # zone low has no flooded household
    row = table.iloc[0]
    assert (row["n_flooded"], row["n_dry"]) == (2, 2)
    assert row["change_flooded"] == pytest.approx(0.5)  # +1 and 0
    assert row["change_dry"] == pytest.approx(-0.5)  # -1 and 0
    assert row["difference"] == pytest.approx(1.0)


def test_all_zones_of_a_year_when_asked():
    row = insurance_response(_rows(), same_zone=False).iloc[0]
    assert row["flood_zone"] == "all" and row["n_dry"] == 3
    assert row["change_dry"] == pytest.approx(0.0)  # -1, 0, +1


def test_no_flood_gives_an_empty_table():
    rows = make_agents([{"year": 1, "agent_id": 1}, {"year": 1, "agent_id": 2}])
    assert insurance_response(rows).empty
