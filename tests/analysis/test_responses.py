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


def test_flooded_households_are_grouped_by_what_they_could_do_and_only_could_act_is_b5():
    from governed_broker.analysis.benchmarks import fit_to_benchmarks
    from governed_broker.analysis.responses import post_flood_inaction

    flooded = {"flooded": True, "could_protect": True, "executed_action": "do_nothing"}
    rows = make_agents([
        {"year": 1, "agent_id": 1, **flooded},                                # could act: idle
        {"year": 1, "agent_id": 2, **flooded, "executed_action": "buy_insurance"},
        {"year": 1, "agent_id": 3, **flooded, "elevated_before": True},       # elevated
        {"year": 1, "agent_id": 4, **flooded, "insurance_required": True,     # lender insures
         "lender_placed": True, "insured_after": True},
        {"year": 1, "agent_id": 5, **flooded, "could_protect": False},        # no means
        {"year": 1, "agent_id": 6, **flooded, "status": "rejected"},          # broker fallback
        {"year": 1, "agent_id": 7},                                           # dry: not counted
    ])
    table = post_flood_inaction(rows).set_index("group")
    assert list(table.index) == ["could_act", "elevated", "required", "no_means", "fallback"]
    assert table["n"].tolist() == [2, 1, 1, 1, 1]
    assert table.loc["could_act", "share_inaction"] == pytest.approx(0.5)
    assert table.loc["required", "n_inaction"] == 1
    b5 = fit_to_benchmarks(rows).table.set_index("id").loc["B5"]
    assert b5["value"] == pytest.approx(0.5) and b5["n"] == 2
