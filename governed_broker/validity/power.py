"""How many replies a test needs to pass a respondent that shows its declared effect.

Each sized test of ``tests.yaml`` declares its smallest effect of interest (the threshold its
confidence bound must clear) and a *design* effect: what a respondent that follows the varied
fact shows. The battery gives each test the replies it needs to pass such a respondent with the
battery's ``power`` (0.8) at its significance level (``alpha``, divided by the number of
primary tests for a primary test: Bonferroni's level, which Holm's procedure never asks less
than). The computations (docs/validity.md "Power"):

- **rank correlation** (directional and guard tests): Fisher's z with Bonett & Wright's (2000)
  variance, power = Phi((atanh rho1 - atanh rho0) sqrt(n - 3) / sqrt(1 + rho1^2 / 2) - z);
- **ICC** (retest): the F distribution of the one-way model (Donner & Eliasziw 1987; Walter,
  Eliasziw & Donner 1998), power = P(F(n - 1, n (k - 1)) > F_crit (1 + k rho0 / (1 - rho0)) /
  (1 + k rho1 / (1 - rho1))), an approximation of the two-way ICC(A,1) when raters (seeds)
  differ little;
- **total variation** (invariance): simulated, since the bootstrap bound has no closed form:
  both arms drawn from the declared shares, the test's own percentile-bootstrap bound computed
  for each of ``TV_SIMULATIONS`` data sets (seeded, so the plan is the same every time);
- **rates** (laundering, coherence): the score test's normal approximation.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import stats as _scipy

from governed_broker.validity.stats import tv_resamples

#: Simulated data sets and bootstrap resamples behind the power of an invariance test.
TV_SIMULATIONS, TV_RESAMPLES = 100, 500
#: The largest number of replies per arm searched for an invariance test.
TV_MAX_N = 400


def correlation_power(n: int, threshold: float, effect: float, alpha: float) -> float:
    """Power of "rho > threshold" at a true ``effect`` with ``n`` replies."""
    if n < 4:
        return 0.0
    gap = math.atanh(effect) - math.atanh(threshold)
    shift = gap * math.sqrt(n - 3) / math.sqrt(1 + effect * effect / 2)
    return float(_scipy.norm.cdf(shift - _scipy.norm.ppf(1 - alpha)))


def correlation_n(threshold: float, effect: float, alpha: float, power: float) -> int:
    """Replies for ``power`` at ``effect`` (which must exceed ``threshold``)."""
    if effect <= threshold:
        raise ValueError(f"the design effect {effect} must exceed the threshold {threshold}")
    z = _scipy.norm.ppf(1 - alpha) + _scipy.norm.ppf(power)
    gap = math.atanh(effect) - math.atanh(threshold)
    return math.ceil((z * math.sqrt(1 + effect * effect / 2) / gap) ** 2 + 3)


def icc_power(targets: int, k: int, threshold: float, effect: float, alpha: float) -> float:
    """Power of "ICC > threshold" at a true ``effect``, ``targets`` x ``k`` replies."""
    if targets < 2 or k < 2:
        return 0.0
    df1, df2 = targets - 1, targets * (k - 1)
    critical = _scipy.f.ppf(1 - alpha, df1, df2)
    ratio = (1 + k * threshold / (1 - threshold)) / (1 + k * effect / (1 - effect))
    return float(_scipy.f.sf(critical * ratio, df1, df2))


def icc_replicates(targets: int, threshold: float, effect: float, alpha: float, power: float,
                   max_k: int) -> int:
    """Replicates per target for ``power`` (at most ``max_k``)."""
    if effect <= threshold:
        raise ValueError(f"the design effect {effect} must exceed the threshold {threshold}")
    for k in range(2, max_k + 1):
        if icc_power(targets, k, threshold, effect, alpha) >= power:
            return k
    return max_k


def rate_power(n: int, threshold: float, effect: float, alpha: float) -> float:
    """Power of "rate < threshold" at a true rate ``effect`` with ``n`` cases."""
    if n < 1:
        return 0.0
    z = _scipy.norm.ppf(1 - alpha)
    shift = (threshold - effect) * math.sqrt(n) - z * math.sqrt(threshold * (1 - threshold))
    return float(_scipy.norm.cdf(shift / math.sqrt(effect * (1 - effect))))


def rate_n(threshold: float, effect: float, alpha: float, power: float) -> int:
    """Cases for ``power`` at a true rate ``effect`` below ``threshold``."""
    if not 0 < effect < threshold < 1:
        raise ValueError(f"the design rate {effect} must lie between 0 and the threshold "
                         f"{threshold}")
    za, zb = _scipy.norm.ppf(1 - alpha), _scipy.norm.ppf(power)
    root = za * math.sqrt(threshold * (1 - threshold)) + zb * math.sqrt(effect * (1 - effect))
    return math.ceil((root / (threshold - effect)) ** 2)


@lru_cache(maxsize=64)
def tv_power(n: int, shares: tuple[float, ...], tolerance: float, alpha: float) -> float:
    """Power of "TV < tolerance" when both arms' ``n`` replies follow ``shares``."""
    rng = np.random.default_rng(20251125 + n)
    p = np.asarray(shares, dtype=float) / sum(shares)
    a = rng.multinomial(n, p, size=TV_SIMULATIONS) / n
    b = rng.multinomial(n, p, size=TV_SIMULATIONS) / n
    boot_a = np.repeat(a[:, None, :], TV_RESAMPLES, axis=1)
    boot_b = np.repeat(b[:, None, :], TV_RESAMPLES, axis=1)
    draws = tv_resamples(rng, boot_a, boot_b, n, n, None)  # one resample per row
    upper = np.quantile(draws, 1 - alpha, axis=1)
    return float(np.mean(upper < tolerance))


@lru_cache(maxsize=64)
def tv_n(shares: tuple[float, ...], tolerance: float, alpha: float, power: float) -> int:
    """Replies per arm for ``power`` (a bisection on ``tv_power``; at most ``TV_MAX_N``)."""
    low, high = 4, TV_MAX_N
    if tv_power(high, shares, tolerance, alpha) < power:
        return high
    while high - low > 2:
        middle = (low + high) // 2
        if tv_power(middle, shares, tolerance, alpha) >= power:
            high = middle
        else:
            low = middle
    return high
