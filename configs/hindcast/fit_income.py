"""Fit the Passaic income lognormal to the pooled ZIP-code income brackets.

Usage: python configs/hindcast/fit_income.py   (prints ln_mean and ln_sigma)

Method: maximum likelihood for interval-censored data: each household lies somewhere in its
bracket, so the log-likelihood is sum(count * log(F(upper) - F(lower))) with F the lognormal
CDF (the open top bracket has F(upper) = 1). Maximised with scipy.optimize.minimize.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize, stats

BRACKETS = Path(__file__).with_name("passaic_income_brackets.csv")


def fit(path: Path = BRACKETS) -> tuple[float, float]:
    """``(ln_mean, ln_sigma)`` of the lognormal that best explains the bracket counts."""
    table = pd.read_csv(path, comment="#", dtype={"zip": str})
    pooled = table.groupby(["lower_usd", "upper_usd"], dropna=False)["households"].sum()
    lower = np.array([lo for lo, _ in pooled.index], dtype=float)
    upper = np.array([np.inf if pd.isna(up) else up for _, up in pooled.index], dtype=float)
    counts = pooled.to_numpy(float)

    def loss(theta: np.ndarray) -> float:
        mu, log_sigma = theta
        dist = stats.lognorm(s=np.exp(log_sigma), scale=np.exp(mu))
        p = dist.cdf(upper) - dist.cdf(lower)
        return -float(np.sum(counts * np.log(np.maximum(p, 1e-300))))

    result = optimize.minimize(loss, x0=[11.3, np.log(0.8)], method="Nelder-Mead",
                               options={"xatol": 1e-8, "fatol": 1e-8, "maxiter": 10_000})
    return float(result.x[0]), float(np.exp(result.x[1]))


if __name__ == "__main__":
    ln_mean, ln_sigma = fit()
    sys.stdout.write(f"ln_mean {ln_mean:.3f}  ln_sigma {ln_sigma:.3f}  "
                     f"(median {np.exp(ln_mean):,.0f} USD)\n")
