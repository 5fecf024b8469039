"""Household finance measures.

``debt_usd``: what a household owes after the year's execution, in dollars: savings below
zero (an overdraft the world let happen).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def debt_usd(agents: pd.DataFrame) -> pd.Series:
    """Debt after the year of each row (dollars, >= 0)."""
    return pd.Series(np.maximum(0.0, -agents["savings_after_usd"].astype(float)),
                     index=agents.index)
