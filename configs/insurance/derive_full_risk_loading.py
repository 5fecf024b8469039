"""The loading that puts a world's risk-based premiums at Risk Rating 2.0's full-risk level.

The world's ``risk_based`` premium is the expected payout of one typical flood of the zone at
its stated chance (``sim.effects.OptionBatch.expected_payout_usd``) times ``insurance.loading``
plus the fee: a stand-in for FEMA's rating, which integrates many flood frequencies and adds
its expense and catastrophe loads. Its level is anchored here to FEMA's published full-risk
premiums: for the single-family homes of New Jersey renewed under Risk Rating 2.0 by
30 September 2022 the average full-risk premium is 1.97 times the average current (legacy)
premium ($2,129 against $1,081; FEMA, "Risk Rating 2.0: cost of flood insurance for
single-family homes", state exhibit released 19 April 2023, as compiled by the Coalition for
Sustainable Flood Insurance, csfi.info, 2023; nationally $1,808 against $808).

For an experiment the script takes the households insured at the start of the run (the
required ones included), quotes each its legacy premium in year ``--year`` (with the year's
factor of ``insurance.premium_path``) and its risk-based premium at loading 1, and prints the
loading ``L`` at which their mean risk-based premium is ``--ratio`` times their mean legacy
premium: ``L = (ratio * mean legacy - fee) / (mean risk-based at 1 - fee)``.

Usage:
    python configs/insurance/derive_full_risk_loading.py EXPERIMENT.yaml [--year 11] \
        [--ratio 1.97] [--set population.size=20000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from governed_broker.config import load_experiment
from governed_broker.sim import FloodModel
from governed_broker.sim.quote import quote

#: FEMA's New Jersey single-family homes: average full-risk premium over the current one.
NJ_FULL_RISK_RATIO = round(2129 / 1081, 2)


class _NoDecisions:
    """Stands in for a decision maker: the script only quotes."""

    name = "none"

    def decide(self, situations):  # pragma: no cover - never called
        raise RuntimeError("the loading script does not simulate decisions")


def mean_premiums(experiment: Path, year: int, overrides: list[str]
                  ) -> tuple[float, float, float, int]:
    """Mean legacy premium, mean risk-based premium at loading 1, the fee, and the policies."""
    config = load_experiment(experiment, ["memory.engine=none", *overrides])
    model = FloodModel(config, _NoDecisions())
    insured = model.hh.insured.copy()
    model.year = year
    model.begin_year()
    model.config = config.with_settings({"insurance.pricing": "legacy"})
    legacy = quote(model, model.instruments).actions["buy_insurance"].premium_usd
    model.config = config.with_settings({"insurance.pricing": "risk_based",
                                         "insurance.loading": 1.0})
    risk = quote(model, model.instruments).actions["buy_insurance"].premium_usd
    held = insured[model.current.idx]
    return (float(np.mean(legacy[held])), float(np.mean(risk[held])),
            float(config.insurance.fee_usd), int(held.sum()))


def main(argv: list[str] | None = None) -> int:
    """Print the loading for the experiment named on the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", type=Path)
    parser.add_argument("--year", type=int, default=1, help="the year whose legacy premium "
                        "the full-risk premium replaces (1-based)")
    parser.add_argument("--ratio", type=float, default=NJ_FULL_RISK_RATIO)
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="e.g. population.size=20000 (more policies)")
    args = parser.parse_args(argv)
    legacy, risk, fee, n = mean_premiums(args.experiment, args.year, args.overrides)
    loading = (args.ratio * legacy - fee) / (risk - fee)
    print(f"{args.experiment}: {n} policies at the start; year {args.year}: mean legacy premium "
          f"${legacy:,.0f}, mean risk-based premium at loading 1 ${risk:,.0f} (fee ${fee:,.0f}); "
          f"ratio {args.ratio:g} -> loading {loading:.3f} (mean full-risk premium "
          f"${args.ratio * legacy:,.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
