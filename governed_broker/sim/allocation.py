"""The order in which a programme with a budget serves eligible households (grants, buyouts).

``first_come``: applications arrive in a random order, drawn from the programme's stream for
the year; ``by_need``: lowest income first, ties in agent-id order.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Allocation = Literal["first_come", "by_need"]


def allocation_order(eligible: np.ndarray, income_usd: np.ndarray, allocation: Allocation,
                     rng: np.random.Generator) -> np.ndarray:
    """Indices of the eligible households in the order the programme serves them."""
    candidates = np.flatnonzero(np.asarray(eligible, dtype=bool))
    if allocation == "first_come":
        return rng.permutation(candidates)
    return candidates[np.argsort(np.asarray(income_usd)[candidates], kind="stable")]
