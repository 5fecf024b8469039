"""Decision diversity: normalised Shannon entropy of the actions taken each year.

For the action shares p_a of one year (over the household-years of that year),
``H = -sum_a p_a ln p_a / ln K`` where K is the number of actions in the action set (4 by
default: do_nothing, buy_insurance, elevate_house, relocate). H is 0 when every household does
the same thing and 1 when all K actions are equally common. Unitless, 0..1. The lineage called
this EHE_k4 (K = 4).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from governed_broker.analysis._grouping import as_columns
from governed_broker.analysis.schema import ACTIONS
from governed_broker.analysis.version import stamp


def normalised_entropy(counts: Sequence[float] | np.ndarray, n_actions: int) -> float:
    """Normalised Shannon entropy of a vector of action counts.

    Args:
        counts: Non-negative counts (zeros allowed; actions not taken may be omitted).
        n_actions: K, the size of the action set (>= 2).

    Returns:
        H in [0, 1], or NaN when the counts sum to zero.
    """
    if n_actions < 2:
        raise ValueError(f"n_actions must be >= 2, got {n_actions}")
    values = np.asarray(counts, dtype=float)
    if (values < 0).any():
        raise ValueError("counts must be non-negative")
    total = values.sum()
    if total == 0:
        return float("nan")
    p = values[values > 0] / total
    return float(-(p * np.log(p)).sum() / np.log(n_actions))


def decision_entropy(
    agents: pd.DataFrame,
    by: Sequence[str] | str | None = "year",
    column: str = "executed_action",
    actions: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Normalised entropy of actions per group (by default per year).

    Args:
        agents: Typed agent table.
        by: Grouping column(s); ``None`` pools all household-years.
        column: ``"executed_action"`` (default) or ``"proposed_action"``.
        actions: The action set; its length is K. Actions outside it raise ``ValueError``.
            None: the run's domain as ``load_run`` recorded it
            (``agents.attrs["action_effects"]``), else the default four actions.

    Returns:
        One row per group with ``n_decisions``, one ``n_<action>`` count per action and
        ``entropy`` (0..1).
    """
    actions = list(actions or agents.attrs.get("action_effects") or ACTIONS)
    values = agents[column].dropna()
    unknown = sorted(set(values) - set(actions))
    if unknown:
        raise ValueError(f"{column}: action {unknown[0]!r} is not in the action set {actions}")
    keys = as_columns(by)
    frame = agents.loc[values.index, keys].copy()
    for action in actions:
        frame[f"n_{action}"] = (values == action).astype(int)
    count_cols = [f"n_{a}" for a in actions]
    if keys:
        counts = frame.groupby(keys, observed=True)[count_cols].sum()
    else:
        counts = frame[count_cols].sum().to_frame().T
    counts.insert(0, "n_decisions", counts[count_cols].sum(axis=1))
    counts["entropy"] = [
        normalised_entropy(row, len(actions)) for row in counts[count_cols].to_numpy()
    ]
    return stamp(counts.reset_index(drop=not keys))
