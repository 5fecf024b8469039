"""Deterministic CSV formatting."""

from __future__ import annotations

import numpy as np

from governed_broker.sim.csvout import format_row, format_rows


def test_formats_by_unit_nan_bool_and_negative_zero() -> None:
    text = format_rows(
        ["damage_usd", "depth_m", "threat_score", "years_since_flood", "flooded", "status"],
        {"damage_usd": np.array([1.004, -0.0001]), "depth_m": np.array([0.12346, np.nan]),
         "threat_score": np.array([np.nan, 0.5]), "years_since_flood": np.array([np.nan, 3.0]),
         "flooded": np.array([True, False]), "status": ["a,b", "ok"]},
    )
    assert text == '1.00,0.1235,,,True,"a,b"\n0.00,,0.500000,3,False,ok\n'


def test_single_row() -> None:
    assert format_row(["year", "flood_occurred", "share_insured"],
                      {"year": 3, "flood_occurred": True, "share_insured": 0.25}) == \
        "3,True,0.250000\n"
