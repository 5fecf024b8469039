"""The world's acceptance figures (issue 18, "Done when") over replicate seeds of an experiment.

Usage:
    python benchmarks/world_acceptance.py [EXPERIMENT] [--seeds 1 2 3 4 5] [--set K=V ...]
    python benchmarks/world_acceptance.py --runs DIR [DIR ...]      # runs already made
    python benchmarks/world_acceptance.py EXPERIMENT --against OTHER.yaml --seeds 1 ... 20

Runs the experiment (default ``experiments/baseline.yaml``) once per seed in a temporary
directory (or loads the given run directories) and prints, with the mean and a 95 % Student-t
interval across the runs:

1. flood response: in zone-years with flooded and dry households that stayed, the mean change
   of insurance (insured_after - insured_before) of the flooded minus that of the dry
   households (``analysis.responses.insurance_response``; positive: flooded households
   insure more), and the share of such zone-years where it is positive; also the same
   comparison over all zones of a year (computable when a flood reaches every home of a zone);
2. debt: the share of households active at the end whose debt exceeds one year's income
   (``analysis.debt.debt_usd``);
3. insurance by zone at the end (insured share of the households active in the last year);
4. the MG-NMG adaptation gap (B6) split into its within-tenure and composition parts, and the
   gap within each tenure (``analysis.equity.adaptation_gap``; runs with an MG attribute);
5. the benchmark fit (``analysis.benchmarks.fit_replicates``): score per run, its mean and
   interval against the pass mark, and each target's mean and interval.

With ``--against OTHER.yaml`` the other experiment runs on the same seeds too (the same
population and floods per seed; ``--set`` overrides apply to both) and a sixth section gives
the seed-by-seed differences of the score and of every target, this experiment minus the other
(``analysis.benchmarks.paired_fit_difference``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd

from governed_broker.analysis import load_run
from governed_broker.analysis.benchmarks import (
    fit_replicates,
    mean_interval,
    paired_fit_difference,
)
from governed_broker.analysis.debt import debt_usd
from governed_broker.analysis.equity import adaptation_gap
from governed_broker.analysis.responses import insurance_response
from governed_broker.config import load_experiment
from governed_broker.runner import run_experiment

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_EXPERIMENT = ROOT / "experiments" / "baseline.yaml"


def _interval(values: list[float]) -> str:
    mean, low, high = mean_interval(values)
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def run_seeds(experiment: Path, seeds: list[int], overrides: list[str],
              work: Path) -> list[pd.DataFrame]:
    """Agent tables of one run per seed (written under ``work``)."""
    tables = []
    for seed in seeds:
        config = load_experiment(experiment, [*overrides, f"seed={seed}", "outputs.plots=false",
                                              "outputs.progress=false"])
        out = run_experiment(config, work / f"seed_{seed}", progress=False).out_dir
        tables.append(load_run(out).agents)
    return tables


def end_households(agents: pd.DataFrame) -> pd.DataFrame:
    """Rows of the last year of households that did not leave in it."""
    last = agents[agents["year"] == agents["year"].max()]
    return last[~last["relocated_after"].astype(bool)]


def report(tables: list[pd.DataFrame]) -> str:
    """The acceptance figures of replicate runs, as text."""
    lines = [f"runs: {len(tables)}", ""]
    responses = [insurance_response(a) for a in tables]
    diffs = [float(r["difference"].mean()) for r in responses]
    positive = [float((r["difference"] > 0).mean()) for r in responses]
    lines += ["1. flooded minus dry households' insurance change, same zone and year",
              f"   mean over zone-years:            {_interval(diffs)}",
              f"   share of zone-years positive:    {_interval(positive)}",
              f"   zone-years per run:              {[len(r) for r in responses]}"]
    anyzone = [float(insurance_response(a, same_zone=False)["difference"].mean())
               for a in tables]
    lines += [f"   (any zone, same year:            {_interval(anyzone)})", ""]
    shares = []
    for agents in tables:
        end = end_households(agents)
        shares.append(float((debt_usd(end) > end["income_usd"]).mean()))
    lines += ["2. share of end households with debt above one year's income",
              f"   {_interval(shares)}   per run: {[round(s, 3) for s in shares]}", ""]
    zones = sorted({z for a in tables for z in end_households(a)["flood_zone"].unique()})
    lines.append("3. insured share at the end, by zone")
    for zone in zones:
        values = []
        for agents in tables:
            end = end_households(agents)
            in_zone = end[end["flood_zone"] == zone]
            values.append(float(in_zone["insured_after"].mean()) if len(in_zone) else float("nan"))
        lines.append(f"   {zone:<10} {_interval(values)}   per run: "
                     f"{[round(v, 3) for v in values]}")
    gaps = [adaptation_gap(a).set_index("group")["gap"] for a in tables]
    gaps = [g for g in gaps if not g.empty]
    lines += ["", "4. MG-NMG adaptation gap (B6) and its parts (analysis.equity.adaptation_gap)"]
    for group in ("all", "within", "composition", "owner", "renter"):
        values = [float(g.get(group, float("nan"))) for g in gaps]
        lines.append(f"   {group:<12} {_interval(values)}")
    fit = fit_replicates(tables)
    low, high = fit.score_ci
    lines += ["", "5. benchmark fit (score = weighted share of computable, scored targets in "
                  "range)",
              f"   score per run: {[round(s, 3) for s in fit.scores]}",
              f"   mean {fit.score_mean:.3f} [{low:.3f}, {high:.3f}]  pass mark "
              f"{fit.pass_mark}: {'PASS' if fit.passed else 'FAIL'}"]
    table = fit.table[["id", "n", "mean", "ci_low", "ci_high", "low", "high", "share_in_range",
                       "status", "scored"]]
    lines += ["", table.to_string(index=False, float_format=lambda v: f"{v:.3f}")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", nargs="?", type=Path, default=DEFAULT_EXPERIMENT)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE")
    parser.add_argument("--runs", type=Path, nargs="+", help="analyse these run directories")
    parser.add_argument("--against", type=Path, metavar="OTHER.yaml", help=(
        "also run this experiment on the same seeds and print the paired differences"))
    args = parser.parse_args(argv)
    if args.runs and args.against:
        parser.error("--against runs both experiments on --seeds; it cannot pair --runs")
    if args.runs:
        tables = [load_run(path).agents for path in args.runs]
        print(report(tables))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        tables = run_seeds(args.experiment, args.seeds, args.overrides, Path(tmp) / "this")
        print(f"experiment: {args.experiment}  seeds: {args.seeds}  overrides: {args.overrides}")
        print(report(tables))
        if args.against:
            others = run_seeds(args.against, args.seeds, args.overrides, Path(tmp) / "other")
            print(f"\n6. {args.experiment.name} minus {args.against.name}, seed by seed "
                  "(mean and 95 % interval of the differences; pairs where it is higher/lower)")
            print(paired_fit_difference(tables, others).to_string(
                index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
