"""Debt after the year: loan balance plus any overdraft."""

from __future__ import annotations

from analysis_helpers import make_agents

from governed_broker.analysis.debt import debt_usd


def test_debt_is_loans_plus_overdraft():
    agents = make_agents([
        {"year": 1, "agent_id": 1, "debt_after_usd": 20_000.0, "savings_after_usd": 5_000.0},
        {"year": 1, "agent_id": 2, "savings_after_usd": -3_000.0},
        {"year": 1, "agent_id": 3, "debt_after_usd": 1_000.0, "savings_after_usd": -500.0},
    ])
    assert debt_usd(agents).tolist() == [20_000.0, 3_000.0, 1_500.0]
