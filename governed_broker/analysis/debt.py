"""Household debt: what a household owes after the year.

``debt_usd``: what a household owes after the year's execution, in dollars: its disaster-loan
balance (``debt_after_usd``) plus any savings below zero (runs written before loans existed
kept debt as negative savings; the world no longer lets savings fall below zero).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def debt_usd(agents: pd.DataFrame) -> pd.Series:
    """Debt after the year of each row (dollars, >= 0)."""
    overdraft = np.maximum(0.0, -agents["savings_after_usd"].astype(float))
    loans = agents["debt_after_usd"].astype(float) if "debt_after_usd" in agents else 0.0
    return pd.Series(overdraft + loans, index=agents.index)
