"""Paired differences between the arms of a policy experiment.

The arms of a policy sweep (its ``cases``) run the same replicate seeds, so replicate r of every
arm lives through the same population and floods; with a ``policy_change`` they also share every
year before the change (``config.policy``). An arm's effect is therefore estimated pair by pair:
for each seed, the arm's outcome minus the reference arm's, then the mean of those differences
with a percentile bootstrap interval over the pairs (resampling seeds with replacement;
``n_boot`` resamples from a generator seeded with ``seed``, so the interval is reproducible).
With fewer than 2 pairs the interval is NaN, never a fake zero width; with few pairs (5) a
percentile bootstrap is narrow, so read ``n_pairs`` beside it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.sensitivity import OUTCOMES
from governed_broker.analysis.version import stamp

#: The sweep parameter that names a run's arm.
ARM = "param.case"
#: The record ``governed-broker branch`` writes in its directory (``sweep.branch.BRANCH_FILE``):
#: the parent, the year of the change, the arms and the outcome of the history check.
BRANCH_FILE = "branch.json"


def branch_record(sweep_dir: Path | str) -> dict[str, Any] | None:
    """The branch record of a sweep directory written by ``governed-broker branch``.

    None for any other sweep.

    Raises:
        AnalysisInputError: the record is not readable JSON with the keys a branch writes.
    """
    path = Path(sweep_dir) / BRANCH_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise AnalysisInputError(f"{path}: not readable JSON ({exc})") from exc
    keys = {"parent", "from_year", "reference_arm", "arms", "verification"}
    if not isinstance(record, dict) or not keys <= set(record):
        raise AnalysisInputError(f"{path}: not a branch record (keys {sorted(keys)} expected)")
    return record


def paired_arm_differences(
    outcomes: pd.DataFrame, reference: str, *, outcome_columns: Sequence[str] = OUTCOMES,
    level: float = 0.95, n_boot: int = 10_000, seed: int = 0,
) -> pd.DataFrame:
    """Mean paired difference of each arm against ``reference``, per outcome.

    Args:
        outcomes: One row per run with ``param.case``, ``seed`` and the outcome columns
            (``analysis.sensitivity.run_outcomes``).
        reference: The arm the others are compared with.
        outcome_columns: Outcomes to compare.
        level: Coverage of the bootstrap interval.
        n_boot: Bootstrap resamples.
        seed: Seed of the bootstrap generator.

    Returns:
        One row per (arm, outcome): ``arm``, ``outcome``, ``n_pairs`` (seeds run by both arms
        with the outcome defined), ``mean_reference``, ``mean_arm``, ``mean_difference`` (arm
        minus reference), ``ci_low``, ``ci_high``.

    Raises:
        AnalysisInputError: no arm column, or no run of the reference arm.
    """
    if ARM not in outcomes.columns or "seed" not in outcomes.columns:
        raise AnalysisInputError(
            f"paired arm differences need the columns {ARM} and seed (a sweep with cases)")
    arms = list(dict.fromkeys(outcomes[ARM].astype(str)))
    if reference not in arms:
        raise AnalysisInputError(f"no run of the reference arm {reference!r}; arms: {arms}")
    by_arm = {a: outcomes[outcomes[ARM].astype(str) == a].set_index("seed") for a in arms}
    rng = np.random.default_rng(seed)
    rows = []
    for arm in arms:
        if arm == reference:
            continue
        pairs = by_arm[arm].merge(by_arm[reference], left_index=True, right_index=True,
                                  suffixes=("", "@ref"))
        for column in outcome_columns:
            both = pairs[[column, f"{column}@ref"]].astype(float).dropna()
            diff = (both[column] - both[f"{column}@ref"]).to_numpy()
            low, high = _bootstrap_interval(diff, level, n_boot, rng)
            rows.append({"arm": arm, "outcome": column, "n_pairs": len(diff),
                         "mean_reference": both[f"{column}@ref"].mean(),
                         "mean_arm": both[column].mean(),
                         "mean_difference": diff.mean() if len(diff) else np.nan,
                         "ci_low": low, "ci_high": high})
    return stamp(pd.DataFrame(rows))


def _bootstrap_interval(diff: np.ndarray, level: float, n_boot: int,
                        rng: np.random.Generator) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``diff`` (NaN for fewer than 2 values)."""
    if len(diff) < 2:
        return np.nan, np.nan
    means = diff[rng.integers(0, len(diff), size=(n_boot, len(diff)))].mean(axis=1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)
