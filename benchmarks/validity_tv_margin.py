"""The invariance test's bootstrap bounds where it matters: at the tolerance and at no difference.

Usage: python benchmarks/validity_tv_margin.py [--sets 400]

For the replies per arm the shipped battery plans (the order and the synonym test), simulates
data sets whose two arms follow given choice shares and applies the test's own percentile
bootstrap (``stats.tv_evidence``'s, ``power.TV_RESAMPLES`` resamples) at the level each test is
judged at, and prints how often the upper bound fell below the tolerance (a pass) and the lower
bound above it (a fail), for the basic lower bound the test uses and, beside it, the percentile
lower bound it used before:

- both arms alike (the design shares 0.8 / 4 x 0.05, and uniform over the 5 options): the
  pass rate is the test's power;
- a true TV of exactly the tolerance (0.8 / 4 x 0.05 against 0.55, 0.3, 3 x 0.05): the pass
  rate is the false-pass rate, which the estimator's upward bias keeps below the level; the
  fail rate is the false-fail rate, which the same bias pushes above it (the basic bound takes
  the resamples' share of the bias off, the percentile bound keeps it);
- a true TV of 0.20, inside the tolerance (against 0.6, 0.25, 3 x 0.05): every fail is false.

docs/validity.md quotes these figures. Seeded: the same output every run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from governed_broker.config import load_agent_types
from governed_broker.validity.battery import InvarianceTest, load_battery
from governed_broker.validity.plan import plan_battery
from governed_broker.validity.power import TV_RESAMPLES
from governed_broker.validity.stats import tv_resamples

REPO = Path(__file__).resolve().parents[1]
DESIGN = (0.8, 0.05, 0.05, 0.05, 0.05)
CASES = {
    "alike, design shares": (DESIGN, DESIGN),
    "alike, uniform": ((0.2,) * 5, (0.2,) * 5),
    "TV = tolerance (0.25)": (DESIGN, (0.55, 0.3, 0.05, 0.05, 0.05)),
    "TV = 0.20": (DESIGN, (0.6, 0.25, 0.05, 0.05, 0.05)),
}


def rates(a: tuple[float, ...], b: tuple[float, ...], n: int, tolerance: float,
          pass_alpha: float, fail_alpha: float, sets: int,
          rng: np.random.Generator) -> tuple[float, float, float]:
    """The pass rate and the two fail rates of the bootstrap bounds over simulated data sets.

    A pass at the test's own level (Bonferroni's for a primary test), a fail at the battery's:
    by the basic lower bound 2 TV - q(1 - alpha) (``stats.tv_evidence``'s) and by the
    percentile lower bound q(alpha).
    """
    pa = rng.multinomial(n, a, size=sets) / n
    pb = rng.multinomial(n, b, size=sets) / n
    draws = tv_resamples(rng, np.repeat(pa[:, None, :], TV_RESAMPLES, axis=1),
                         np.repeat(pb[:, None, :], TV_RESAMPLES, axis=1), n, n, None)
    upper = np.quantile(draws, 1 - pass_alpha, axis=1)
    observed = 0.5 * np.abs(pa - pb).sum(axis=-1)
    basic = 2 * observed - np.quantile(draws, 1 - fail_alpha, axis=1)
    percentile = np.quantile(draws, fail_alpha, axis=1)
    return (float(np.mean(upper < tolerance)), float(np.mean(basic > tolerance)),
            float(np.mean(percentile > tolerance)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=400, help="simulated data sets per case")
    args = parser.parse_args()
    domain = load_agent_types(REPO / "agent_types.yaml")
    plan = plan_battery(load_battery(REPO / "configs" / "validity", domain), domain,
                        {"high": 0.02, "low": 0.002})
    rng = np.random.default_rng(20251125)
    print("| test | replies per arm | pass level | case | pass | fail | fail (percentile) |\n"
          "|---|---|---|---|---|---|---|")
    for test in plan.battery.tests.tests:
        if not isinstance(test, InvarianceTest):
            continue
        size = plan.sizes[test.name]
        for case, (a, b) in CASES.items():
            passed, failed, percentile = rates(a, b, size.per_vignette, test.tolerance, size.alpha,
                                   plan.battery.tests.alpha, args.sets, rng)
            print(f"| {test.name} | {size.per_vignette} | {size.alpha:.4f} | {case} | "
                  f"{passed:.3f} | {failed:.3f} | {percentile:.3f} |")


if __name__ == "__main__":
    main()
