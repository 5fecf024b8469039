"""The explorer's figures: every household drawn and clickable where its layout says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from governed_broker.explore.charts import (
    COLOUR_BY,
    MARGIN_PX,
    household_classes,
    money_option,
    neighbourhood_option,
    pixel_of,
    shares_option,
)
from governed_broker.explore.layout import household_layout, zone_layout
from governed_broker.explore.run_view import load_view

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("colour_by", COLOUR_BY)
def test_every_household_is_a_node_with_its_class(colour_by: str) -> None:
    view = load_view(FIXTURES / "baseline_run", live=False)
    layout = household_layout(view)
    classes = household_classes(view, 8, colour_by)
    option = neighbourhood_option(layout, classes, colour_by, selected=5)
    (series,) = option["series"]
    assert {n["agent_id"] for n in series["data"]} == set(view.household_ids())
    selected = next(n for n in series["data"] if n["agent_id"] == 5)
    assert selected["itemStyle"]["borderWidth"] == 3
    legend = option["legend"]["data"]
    assert all(0 <= n["category"] < len(legend) for n in series["data"])
    json.dumps(option)  # sent to the browser as JSON


def test_classes_follow_the_tables() -> None:
    view = load_view(FIXTURES / "baseline_run", live=False)
    status = household_classes(view, 3, "status")
    assert set(status.values()) <= {"baseline", "relocated"}
    flooded = household_classes(view, 3, "flooded")
    rows = view.agents[view.agents["year"] == 3]
    assert sum(v == "flooded" for v in flooded.values()) == int(rows["flooded"].sum())
    with pytest.raises(ValueError, match="colour_by"):
        household_classes(view, 3, "income")


def test_layouts_and_pixels() -> None:
    view = load_view(FIXTURES / "baseline_run", live=False)
    zones = zone_layout(view)
    assert set(zones.positions) == set(view.household_ids())
    assert all(0 <= x <= 1 and 0 <= y <= 1 for x, y in zones.positions.values())
    assert pixel_of((0, 1), 500, 400) == (MARGIN_PX, MARGIN_PX)
    assert pixel_of((1, 0), 500, 400) == (500 - MARGIN_PX, 400 - MARGIN_PX)


def test_series_mark_the_year_and_use_percent() -> None:
    view = load_view(FIXTURES / "baseline_run", live=False)
    shares = shares_option(view, 3)
    insured = shares["series"][0]
    assert insured["markLine"]["data"] == [{"xAxis": "3"}]
    assert insured["data"][0] == round(float(view.model["share_insured"].iloc[0]) * 100, 2)
    money = money_option(view, None)
    assert "markLine" not in money["series"][0]
    assert money["series"][0]["data"][0] == round(float(view.model["total_damage_usd"][0]), 2)
