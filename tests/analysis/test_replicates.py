"""Replicate summaries: t confidence intervals by hand."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from analysis_helpers import make_agents

from governed_broker.analysis.replicates import (
    scalar_by_group,
    summarise_replicates,
    yearly_by_group,
)


def test_t_interval_by_hand():
    long = pd.DataFrame(
        {"group": ["g"] * 3 + ["h"], "year": [1] * 4, "value": [0.1, 0.2, 0.3, 0.5]}
    )
    out = summarise_replicates(long).set_index("group")
    # mean 0.2, sd 0.1, n 3, t(0.975, 2) = 4.302653
    half = 4.302653 * 0.1 / math.sqrt(3)
    assert out.loc["g", "mean"] == pytest.approx(0.2)
    assert out.loc["g", "ci_low"] == pytest.approx(0.2 - half, rel=1e-5)
    assert out.loc["g", "ci_high"] == pytest.approx(0.2 + half, rel=1e-5)
    assert math.isnan(out.loc["h", "ci_low"])  # one replicate: no interval


def test_yearly_and_scalar_by_group():
    one = make_agents([{"year": 1, "agent_id": 1, "insured_after": True},
                       {"year": 1, "agent_id": 2}])
    two = make_agents([{"year": 1, "agent_id": 1}, {"year": 1, "agent_id": 2}])
    long = yearly_by_group({"a": [one, two]}, "share_insured")
    assert long["value"].tolist() == [0.5, 0.0]
    assert long["replicate"].tolist() == [0, 1]
    scalars = scalar_by_group({"a": [one, two]}, lambda t: len(t))
    assert scalars["value"].tolist() == [2.0, 2.0]
