"""The statistics of the battery, each a small function over plain numbers.

- ``spearman``: Spearman's rho with a one-sided p-value (scipy; ties get average ranks, the
  p-value uses the t approximation);
- ``icc_2_1``: ICC(2,1), two-way random effects, absolute agreement, single rater
  (Shrout & Fleiss 1979), for targets x raters with no missing cell;
- ``krippendorff_nominal``: Krippendorff's alpha for nominal data, any number of values per
  unit (units with fewer than two values are left out; Krippendorff 2004, ch. 11);
- ``total_variation`` and ``tv_permutation_p``: the total variation distance between two
  samples' category distributions and the share of label permutations giving at least as large
  a distance (seeded).

Each returns None (or NaN-free None pairs) where the statistic is undefined, e.g. when every
value is the same: a constant answer carries no information about the question.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np
from scipy import stats as _scipy


def spearman(x: Sequence[float], y: Sequence[float],
             alternative: str) -> tuple[float | None, float | None]:
    """Spearman's rho of ``x`` and ``y`` and its one-sided p-value.

    ``alternative``: ``greater`` or ``less``. ``(None, None)`` when either is constant or there are
    fewer than 3 pairs.
    """
    if len(x) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
        return None, None
    result = _scipy.spearmanr(x, y, alternative=alternative)
    rho, p = float(result.statistic), float(result.pvalue)
    if math.isnan(rho):
        return None, None
    return rho, p


def icc_2_1(table: Sequence[Sequence[float]]) -> float | None:
    """ICC(2,1) of an n targets x k raters table (k >= 2, n >= 2); None when undefined.

    ICC(2,1) = (MSR - MSE) / (MSR + (k - 1) MSE + k (MSC - MSE) / n), with MSR, MSC and MSE
    the mean squares of rows (targets), columns (raters) and the residual.
    """
    y = np.asarray(table, dtype=float)
    if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 2:
        return None
    n, k = y.shape
    grand = y.mean()
    ss_rows = k * ((y.mean(axis=1) - grand) ** 2).sum()
    ss_cols = n * ((y.mean(axis=0) - grand) ** 2).sum()
    ss_total = ((y - grand) ** 2).sum()
    ss_err = ss_total - ss_rows - ss_cols
    msr, msc = ss_rows / (n - 1), ss_cols / (k - 1)
    mse = ss_err / ((n - 1) * (k - 1))
    denominator = msr + (k - 1) * mse + k * (msc - mse) / n
    if denominator <= 1e-12:
        return None
    return float((msr - mse) / denominator)


def krippendorff_nominal(units: Sequence[Sequence[Hashable]]) -> float | None:
    """Krippendorff's alpha (nominal) of units, each a list of the values coders gave it.

    alpha = 1 - D_o / D_e from the coincidence matrix of pairable values; None when no unit has
    two values or every value is the same (D_e = 0).
    """
    coincidence: Counter = Counter()
    for values in units:
        m = len(values)
        if m < 2:
            continue
        for i, a in enumerate(values):
            for j, b in enumerate(values):
                if i != j:
                    coincidence[(a, b)] += 1.0 / (m - 1)
    total = sum(coincidence.values())
    if total == 0:
        return None
    margins: Counter = Counter()
    for (a, _), weight in coincidence.items():
        margins[a] += weight
    observed = sum(w for (a, b), w in coincidence.items() if a != b) / total
    expected = (total * total - sum(v * v for v in margins.values())) / (total * (total - 1))
    if expected <= 1e-12:
        return None
    return float(1.0 - observed / expected)


def total_variation(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Half the L1 distance between the category shares of two non-empty samples (0..1)."""
    ca, cb = Counter(a), Counter(b)
    return 0.5 * sum(abs(ca[c] / len(a) - cb[c] / len(b)) for c in set(ca) | set(cb))


def tv_permutation_p(a: Sequence[Hashable], b: Sequence[Hashable], permutations: int,
                     seed: int) -> float:
    """Share of random relabellings at least as far apart as the observed split.

    Of the pooled sample, by total variation; the observed split is counted, so never 0.
    """
    observed = total_variation(a, b)
    pooled = np.array(list(a) + list(b), dtype=object)
    rng = np.random.default_rng(seed)
    hits = 1
    for _ in range(permutations):
        shuffled = rng.permutation(pooled)
        if total_variation(list(shuffled[:len(a)]), list(shuffled[len(a):])) >= observed - 1e-12:
            hits += 1
    return hits / (permutations + 1)
