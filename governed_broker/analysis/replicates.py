"""Comparing groups of runs (e.g. ablation arms) across replicate seeds.

A *group* is a label (such as ``"baseline"`` or ``"governed"``) with one agent table per
replicate run. Yearly measures are computed per replicate and summarised per group and year by
the mean and a Student-t confidence interval across replicates::

    mean +/- t_{(1+c)/2, n-1} * sd / sqrt(n)

(sd with ddof=1; the interval is NaN for a single replicate, never a fake zero width).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from governed_broker.analysis.trajectories import adaptation_trajectories
from governed_broker.analysis.version import stamp


def yearly_by_group(
    groups: Mapping[str, Sequence[pd.DataFrame]],
    column: str = "share_insured",
    measure: Callable[[pd.DataFrame], pd.DataFrame] = adaptation_trajectories,
) -> pd.DataFrame:
    """Long table ``group, replicate, year, value`` of one yearly measure for every run.

    Args:
        groups: Group label -> agent tables of its replicate runs.
        column: Column of the measure's output to collect (e.g. ``share_insured``).
        measure: Function from an agent table to a table with ``year`` and ``column``
            (default: ``adaptation_trajectories``).
    """
    frames = []
    for label, tables in groups.items():
        for replicate, agents in enumerate(tables):
            yearly = measure(agents)
            frames.append(
                pd.DataFrame(
                    {
                        "group": label,
                        "replicate": replicate,
                        "year": yearly["year"].astype(int).to_numpy(),
                        "value": yearly[column].astype(float).to_numpy(),
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def summarise_replicates(
    long: pd.DataFrame, keys: Sequence[str] = ("group", "year"), confidence: float = 0.95
) -> pd.DataFrame:
    """Mean and t confidence interval of ``value`` across replicates for each key.

    Returns:
        ``keys..., n, mean, sd, ci_low, ci_high`` (sd and CI NaN when n == 1).
    """
    grouped = long.groupby(list(keys), observed=True)["value"]
    out = grouped.agg(n="count", mean="mean", sd="std").reset_index()
    t = stats.t.ppf((1 + confidence) / 2, np.maximum(out["n"] - 1, 1))
    half = np.where(out["n"] > 1, t * out["sd"] / np.sqrt(out["n"]), np.nan)
    out["ci_low"] = out["mean"] - half
    out["ci_high"] = out["mean"] + half
    return stamp(out)


def scalar_by_group(
    groups: Mapping[str, Sequence[pd.DataFrame]], metric: Callable[[pd.DataFrame], float]
) -> pd.DataFrame:
    """Long table ``group, replicate, value`` of a scalar metric for every run."""
    rows = [
        {"group": label, "replicate": i, "value": float(metric(agents))}
        for label, tables in groups.items()
        for i, agents in enumerate(tables)
    ]
    return pd.DataFrame(rows)
