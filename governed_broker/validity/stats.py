"""The statistics of the battery, each a small function over plain numbers.

Point estimates:

- ``spearman``: Spearman's rho with a one-sided p-value against zero (scipy; ties get average
  ranks; used by the validity measures of a finished run);
- ``krippendorff_nominal``: Krippendorff's alpha for nominal data (Krippendorff 2004, ch. 11);
- ``total_variation``: the total variation distance between two samples' category shares;
- ``rwg`` and ``bennett_s``: within-vignette agreement of ordinal labels (James, Demaree &
  Wolf 1984) and of nominal choices (Bennett, Alpert & Goldstein 1954), each against replies
  drawn uniformly, so that neither depends on how much the vignettes differ.

Evidence against a threshold (``Evidence``: an estimate, its one-sided lower and upper bounds
and the p-values of the two one-sided tests), the form every test of the battery is judged in:

- ``correlation_evidence``: Spearman's rho with the Fisher-z interval of Bonett & Wright
  (2000), variance (1 + rho^2 / 2) / (n - 3);
- ``icc_evidence``: ICC(A,1) with McGraw & Wong's (1996, Tables 7-8) F test of ICC <= rho0
  and the bounds that invert it;
- ``tv_evidence``: total variation with bootstrap bounds (each arm resampled from its own
  replies; Efron & Tibshirani 1993): the percentile upper bound, the basic (bias-corrected)
  lower bound;
- ``alpha_evidence``: Krippendorff's alpha with bootstrap bounds over the units (vignettes);
- ``rate_evidence``: a share with Wilson (1927) score bounds and the score test;
- ``mean_evidence``: a mean with Student-t bounds (the agreement indices over vignettes).

``holm`` adjusts p-values for the primary tests (Holm 1979). Each function returns None (or a
``None`` estimate) where the statistic is undefined, e.g. when every value is the same.
A change here that moves any test's outcome bumps ``validity.CALIBRATION_VERSION`` (and the
shipped calibration is regenerated).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize as _scipy_optimize
from scipy import stats as _scipy


@dataclass(frozen=True)
class Evidence:
    """What the data say about a quantity relative to a threshold.

    Attributes:
        estimate: The point estimate (None: undefined).
        lower / upper: One-sided lower and upper confidence bounds, each at ``1 - alpha``
            (together a ``1 - 2 alpha`` interval).
        p_above: p-value of "the quantity is at most the threshold" (small: evidence that it
            is above).
        p_below: p-value of "the quantity is at least the threshold" (small: evidence that it
            is below).
    """

    estimate: float | None
    lower: float | None
    upper: float | None
    p_above: float
    p_below: float


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


#: rho is kept this far inside (-1, 1) so that its Fisher z stays finite.
_RHO_EDGE = 1e-9


def correlation_evidence(x: Sequence[float], y: Sequence[float], threshold: float,
                         alpha: float) -> Evidence | None:
    """Spearman's rho of ``x`` and ``y`` against ``threshold``.

    The interval is Fisher's z with Bonett & Wright's (2000) variance for Spearman's rho,
    (1 + rho^2 / 2) / (n - 3). Replies that all give the same value carry no rank association:
    rho is taken as 0 with the interval of that ``n`` (a constant answer is evidence of no
    response, not missing data). None when ``x`` is constant or ``n < 4``.
    """
    n = len(x)
    if n < 4 or len(set(x)) < 2:
        return None
    rho = 0.0
    if len(set(y)) > 1:
        rho = float(_scipy.spearmanr(x, y).statistic)
    r = min(max(rho, -1 + _RHO_EDGE), 1 - _RHO_EDGE)
    se = math.sqrt((1 + r * r / 2) / (n - 3))
    z = math.atanh(r)
    crit = _scipy.norm.ppf(1 - alpha)
    t = max(min(threshold, 1 - _RHO_EDGE), -1 + _RHO_EDGE)
    score = (z - math.atanh(t)) / se
    return Evidence(rho, math.tanh(z - crit * se), math.tanh(z + crit * se),
                    float(_scipy.norm.sf(score)), float(_scipy.norm.cdf(score)))


def _mean_squares(table: Sequence[Sequence[float]]
                  ) -> tuple[int, int, float, float, float] | None:
    y = np.asarray(table, dtype=float)
    if y.ndim != 2 or y.shape[0] < 2 or y.shape[1] < 2:
        return None
    n, k = y.shape
    grand = y.mean()
    ss_rows = k * ((y.mean(axis=1) - grand) ** 2).sum()
    ss_cols = n * ((y.mean(axis=0) - grand) ** 2).sum()
    ss_err = max(0.0, ((y - grand) ** 2).sum() - ss_rows - ss_cols)  # rounding: never < 0
    return n, k, ss_rows / (n - 1), ss_cols / (k - 1), ss_err / ((n - 1) * (k - 1))


#: Below this a mean square is 0 (rounding); rho0 is kept this far below 1 (a and b finite).
_TINY, _RHO_TOP = 1e-12, 1 - 1e-9


def icc_evidence(table: Sequence[Sequence[float]], threshold: float,
                 alpha: float) -> Evidence | None:
    """ICC(A,1) (= ICC(2,1)) of a targets x raters table against ``threshold``.

    McGraw & Wong (1996), Case 2A: the F test of ICC <= rho0 uses F = MSR / (a MSC + b MSE)
    with a = k rho0 / (n (1 - rho0)), b = 1 + k rho0 (n - 1) / (n (1 - rho0)) on (n - 1, v)
    degrees of freedom, v = (a MSC + b MSE)^2 / ((a MSC)^2 / (k - 1) + (b MSE)^2 / ((n - 1)
    (k - 1))). The bounds invert that same test (the rho0 at which its p-value is ``alpha``,
    and ``1 - alpha``), within [0, 1]: their published interval computes v at the estimate
    instead, and at the edge it could put the lower bound below a threshold the test passed.
    A table whose every cell is the same has no estimate and is evidence of nothing above the
    threshold. None when the table is not at least 2 x 2.
    """
    squares = _mean_squares(table)
    if squares is None:
        return None
    n, k, msr, msc, mse = squares
    if max(msr, msc, mse) <= _TINY:  # every cell the same: nothing to estimate
        return Evidence(None, None, None, 1.0, 0.0)
    icc = (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n)
    p_above = _icc_p_above(squares, min(max(threshold, 0.0), _RHO_TOP))
    if mse <= _TINY and msc <= _TINY:  # the replicates of every target agree exactly
        lower = upper = 1.0
    else:
        lower = _icc_bound(squares, alpha)
        upper = _icc_bound(squares, 1 - alpha)
    return Evidence(float(icc), lower, upper, p_above, 1.0 - p_above)


def _icc_p_above(squares: tuple[int, int, float, float, float], rho0: float) -> float:
    """McGraw & Wong's (1996) p-value of ICC(A,1) <= rho0 (0 <= rho0 < 1)."""
    n, k, msr, msc, mse = squares
    a = k * rho0 / (n * (1 - rho0))
    b = 1 + k * rho0 * (n - 1) / (n * (1 - rho0))
    denominator = a * msc + b * mse
    if denominator <= _TINY:
        return 0.0
    v = denominator ** 2 / ((a * msc) ** 2 / (k - 1) + (b * mse) ** 2 / ((n - 1) * (k - 1)))
    return float(_scipy.f.sf(msr / denominator, n - 1, v))


def _icc_bound(squares: tuple[int, int, float, float, float], level: float) -> float:
    """The rho0 in [0, 1] at which the test's p-value of ICC <= rho0 is ``level``.

    The p-value rises with rho0: 0 when it is at least ``level`` already at 0 (the bound is
    at or below 0, where ICC(A,1) as a share of variance cannot be), 1 when it stays below.
    """
    if _icc_p_above(squares, 0.0) >= level:
        return 0.0
    if _icc_p_above(squares, _RHO_TOP) < level:
        return 1.0
    return float(_scipy_optimize.brentq(lambda r: _icc_p_above(squares, r) - level, 0.0,
                                        _RHO_TOP, xtol=1e-10))


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
        counts = Counter(values)  # pairs of values within a unit, from its counts: O(values)
        for a, na in counts.items():
            for b, nb in counts.items():
                coincidence[(a, b)] += na * (nb - (a == b)) / (m - 1)
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


def alpha_evidence(units: Sequence[Sequence[Hashable]], threshold: float, alpha: float,
                   resamples: int, seed: int) -> Evidence | None:
    """Krippendorff's alpha (nominal) against ``threshold``, with percentile-bootstrap bounds.

    The units (vignettes) are drawn with replacement; resamples where alpha is undefined count
    as 0. Every value the same: no estimate, and evidence of nothing above 0 (p_above 1).
    """
    value = krippendorff_nominal(units)
    if value is None:
        return None if not any(len(u) > 1 for u in units) else Evidence(None, None, None, 1.0,
                                                                          0.0)
    rng = np.random.default_rng(seed)
    draws = np.array([krippendorff_nominal([units[i] for i in rng.integers(0, len(units),
                                                                            len(units))]) or 0.0
                      for _ in range(resamples)])
    return _bootstrap_evidence(value, draws, threshold, alpha)


def _bootstrap_evidence(value: float, draws: np.ndarray, threshold: float,
                        alpha: float) -> Evidence:
    b = len(draws)
    return Evidence(float(value), float(np.quantile(draws, alpha)),
                    float(np.quantile(draws, 1 - alpha)),
                    float((np.sum(draws <= threshold) + 1) / (b + 1)),
                    float((np.sum(draws >= threshold) + 1) / (b + 1)))


def total_variation(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Half the L1 distance between the category shares of two non-empty samples (0..1)."""
    ca, cb = Counter(a), Counter(b)
    return 0.5 * sum(abs(ca[c] / len(a) - cb[c] / len(b)) for c in set(ca) | set(cb))


def tv_evidence(a: Sequence[Hashable], b: Sequence[Hashable], tolerance: float, alpha: float,
                resamples: int, seed: int) -> Evidence:
    """Total variation between two non-empty samples against ``tolerance``.

    Each sample is resampled from its own replies (a multinomial draw from its shares),
    ``resamples`` times, seeded. The estimator is biased upwards (two samples of one
    distribution differ by chance) and a resample adds that bias again. The upper bound is the
    percentile bound, which keeps both biases: equivalence (upper bound below the tolerance) is
    claimed conservatively. The lower bound is the basic bootstrap's, 2 TV - q(1 - alpha) of
    the resamples (floored at 0), which takes the resamples' bias off once: at the battery's
    replies a true TV of exactly the tolerance was called larger in 23-27 % of data sets at
    alpha 0.05 with the percentile lower bound, in 12 % with the basic bound
    (benchmarks/validity_tv_margin.py). ``p_above`` is the p-value of the basic bound, so a
    fail (``p_above < alpha``) goes with a lower bound above the tolerance.
    """
    categories = sorted(set(a) | set(b), key=str)
    ca, cb = Counter(a), Counter(b)
    pa = np.array([ca[c] for c in categories], dtype=float) / len(a)
    pb = np.array([cb[c] for c in categories], dtype=float) / len(b)
    rng = np.random.default_rng(seed)
    draws = tv_resamples(rng, pa, pb, len(a), len(b), resamples)
    value = total_variation(a, b)
    percentile = _bootstrap_evidence(value, draws, tolerance, alpha)
    basic_lower = max(0.0, 2 * value - float(np.quantile(draws, 1 - alpha)))
    # The basic bound exceeds the tolerance at level p when fewer than p of the resamples
    # reach 2 TV - tolerance.
    p_above = float((np.sum(draws >= 2 * value - tolerance) + 1) / (len(draws) + 1))
    return replace(percentile, lower=basic_lower, p_above=p_above)


def tv_resamples(rng: np.random.Generator, pa: np.ndarray, pb: np.ndarray, na: int, nb: int,
                 resamples: int | None) -> np.ndarray:
    """Bootstrap total variations of two samples with shares ``pa``, ``pb``.

    ``resamples`` of them; None: one per row of share arrays of any leading shape.
    """
    ra = rng.multinomial(na, pa, size=resamples) / na
    rb = rng.multinomial(nb, pb, size=resamples) / nb
    return 0.5 * np.abs(ra - rb).sum(axis=-1)


def rate_evidence(hits: int, n: int, threshold: float, alpha: float) -> Evidence | None:
    """A share ``hits / n`` against ``threshold``.

    Wilson (1927) score bounds and the score test (None when ``n`` is 0).
    """
    if n <= 0:
        return None
    p = hits / n
    z = _scipy.norm.ppf(1 - alpha)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    t = min(max(threshold, 1e-9), 1 - 1e-9)
    score = (p - t) / math.sqrt(t * (1 - t) / n)
    return Evidence(p, float(max(0.0, centre - half)), float(min(1.0, centre + half)),
                    float(_scipy.norm.sf(score)), float(_scipy.norm.cdf(score)))


def mean_evidence(values: Sequence[float], threshold: float, alpha: float) -> Evidence | None:
    """A mean against ``threshold`` with Student-t bounds.

    None with fewer than 2 values. With no spread the bounds close on the mean, and a mean
    equal to ``threshold`` is evidence of neither side (both p-values 1).
    """
    n = len(values)
    if n < 2:
        return None
    mean = float(np.mean(values))
    se = float(np.std(values, ddof=1)) / math.sqrt(n)
    if se <= 1e-12:
        return Evidence(mean, mean, mean, 0.0 if mean > threshold else 1.0,
                        0.0 if mean < threshold else 1.0)
    t = (mean - threshold) / se
    crit = _scipy.t.ppf(1 - alpha, n - 1)
    return Evidence(mean, mean - crit * se, mean + crit * se, float(_scipy.t.sf(t, n - 1)),
                    float(_scipy.t.cdf(t, n - 1)))


def rwg(values: Sequence[float], categories: int) -> float:
    """Within-group agreement of ordinal ratings (James, Demaree & Wolf 1984).

    1 - s^2 / sigma_EU^2, sigma_EU^2 = (A^2 - 1) / 12 the variance of ratings drawn uniformly from A
    categories (1: all agree; about 0: as spread as uniform draws; below 0: more spread).
    """
    if len(values) < 2 or categories < 2:
        raise ValueError("rwg needs at least two ratings on a scale of two or more categories")
    return 1.0 - float(np.var(values, ddof=1)) / ((categories ** 2 - 1) / 12)


def bennett_s(values: Sequence[Hashable], options: int) -> float:
    """Agreement of nominal choices (Bennett, Alpert & Goldstein 1954).

    (P_o - 1/q) / (1 - 1/q), P_o the share of agreeing pairs of replies and q the number of options
    offered (1: all agree; 0: as uniform draws agree).
    """
    m = len(values)
    if m < 2 or options < 2:
        raise ValueError("Bennett's S needs two or more choices among two or more options")
    pairs = sum(c * (c - 1) for c in Counter(values).values()) / (m * (m - 1))
    return (pairs - 1 / options) / (1 - 1 / options)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's (1979) step-down adjusted p-values, in the order given.

    The i-th smallest of m is multiplied by m - i + 1, made non-decreasing and capped at 1.
    """
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted
