"""Normalised Shannon entropy of yearly actions, by hand."""

from __future__ import annotations

import math

import pytest
from analysis_helpers import make_agents

from governed_broker.analysis.diversity import decision_entropy, normalised_entropy


def test_entropy_values_by_hand():
    assert normalised_entropy([5, 0, 0, 0], 4) == 0.0
    assert normalised_entropy([1, 1, 1, 1], 4) == pytest.approx(1.0)
    # two equally common actions out of four: ln 2 / ln 4 = 0.5
    assert normalised_entropy([3, 3], 4) == pytest.approx(0.5)
    # p = (0.5, 0.25, 0.25): H = (0.5 ln 2 + 0.5 ln 4) / ln 4 = 0.75
    assert normalised_entropy([2, 1, 1, 0], 4) == pytest.approx(0.75)
    assert math.isnan(normalised_entropy([0, 0], 4))
    with pytest.raises(ValueError):
        normalised_entropy([1, -1], 4)


def test_decision_entropy_per_year():
    table = make_agents(
        [
            {"year": 1, "agent_id": 1, "executed_action": "do_nothing"},
            {"year": 1, "agent_id": 2, "executed_action": "do_nothing"},
            {"year": 2, "agent_id": 1, "executed_action": "do_nothing"},
            {"year": 2, "agent_id": 2, "executed_action": "buy_insurance"},
        ]
    )
    out = decision_entropy(table).set_index("year")
    assert out.loc[1, "entropy"] == 0.0
    # five actions in the default domain: ln 2 / ln 5
    assert out.loc[2, "entropy"] == pytest.approx(math.log(2) / math.log(5))
    assert out.loc[2, "n_buy_insurance"] == 1
    pooled = decision_entropy(table, by=None).iloc[0]
    # pooled p = (0.75, 0.25): (0.75 ln(4/3) + 0.25 ln 4) / ln 5
    expected = (0.75 * math.log(4 / 3) + 0.25 * math.log(4)) / math.log(5)
    assert pooled["entropy"] == pytest.approx(expected)


def test_unknown_action_is_an_error():
    table = make_agents([{"year": 1, "agent_id": 1, "executed_action": "fly_away"}])
    with pytest.raises(ValueError, match="fly_away"):
        decision_entropy(table)
