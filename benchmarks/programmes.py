"""How the world's policy programmes work against their real counterparts, over replicate seeds.

Usage:
    python benchmarks/programmes.py [--root CHECKOUT] [--replicates 5]

Runs three shipped policy sweeps of the default world (rule-based baseline households) with
``governed-broker sweep`` in a temporary directory and prints, with the mean and a 95 %
Student-t interval across the replicate seeds:

1. premiums (``experiments/risk_rating.yaml``): the mean premium per policy bought (the
   household's or its lender's, ``premium_usd`` of households insured for next year), per
   pricing arm, zone and year, the risk-based arm's change against legacy pricing over years
   11-20, seed by seed, and its rise from year 11 to year 13 (set against the NFIP's US mean
   premium per policy, 2022 -> 2024);
2. elevation grants (``experiments/subsidy_budget.yaml`` at ``SIZE`` households): per arm,
   the grants paid a year against the annual budget, how many households chose an elevating
   action, and how many of the applications (``subsidy_applied``) a grant funded, pooled;
3. buyouts (``experiments/policy_buyout.yaml`` at ``SIZE`` households, its ``buyout`` arm):
   households offered a
   buyout, offers accepted, acceptance (accepted / households offered), and the years between
   the home's last flood and the offer;
4. premiums in the Passaic hindcast (``experiments/passaic_hindcast_small.yaml``, one run per
   arm: as shipped, and with ``insurance.pricing`` legacy and risk_based through the whole run,
   without the shipped Risk Rating 2.0 change):
   the mean premium per policy bought by zone and calendar year.

``--root`` runs another checkout's package and experiments (``PYTHONPATH`` set to it), so that
the figures of two commits come from the same script.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from governed_broker.analysis.benchmarks import mean_interval

ROOT = Path(__file__).resolve().parent.parent
#: Households of the grant and buyout sweeps: the default world's 100 see a flood at a home
#: about once in 50 years, too few applications and offers to measure.
SIZE = 1000


def _interval(values: list[float], digits: int = 3) -> str:
    mean, low, high = mean_interval(values)
    return f"{mean:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def run_sweep(root: Path, experiment: str, out: Path, replicates: int,
              overrides: tuple[str, ...] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run ``experiment`` of ``root`` as a sweep; its agent table and its runs (case, seed)."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, "-m", "governed_broker.cli", "sweep", str(root / experiment),
           "--out", str(out), "--set", f"sweep.replicates={replicates}"]
    for item in overrides:
        cmd += ["--set", item]
    subprocess.run(cmd, check=True, cwd=root, env=env, stdout=subprocess.DEVNULL)
    runs = pd.read_csv(out / "sweep_runs.csv")
    agents = pd.read_parquet(out / "sweep_agents_yearly.parquet")
    return agents, runs


def per_seed(agents: pd.DataFrame, runs: pd.DataFrame, case: str,
             measure: Callable[[pd.DataFrame], float]) -> dict[int, float]:
    """``measure`` of each run of ``case``, by seed."""
    out = {}
    for run in runs[runs["param.case"] == case].itertuples():
        out[int(run.seed)] = measure(agents[agents["run_id"] == run.run_id])
    return out


def _mean_premium(a: pd.DataFrame) -> float:
    """Mean premium per policy bought (households insured for next year that paid one)."""
    held = a[a["insured_after"].astype(bool) & (a["premium_usd"] > 0)]
    return float(held["premium_usd"].mean()) if len(held) else float("nan")


def premiums(agents: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """Section 1: mean premium per policy bought, by arm, zone and year."""
    lines = ["1. mean premium per policy bought (USD; households insured for next year), "
             "risk_rating.yaml: by year, and the risk-based arm against legacy over years "
             "11-20"]
    years = [1, 10, 11, 12, 13, 20]
    for zone in sorted(agents["flood_zone"].unique()):
        in_zone = agents[agents["flood_zone"] == zone]
        for case in ("legacy", "risk_based"):
            cells = []
            for year in years:
                values = per_seed(in_zone[in_zone["year"] == year], runs, case, _mean_premium)
                cells.append(f"{year}: {np.nanmean(list(values.values())):.0f}")
            lines.append(f"   {zone:<10} {case:<10} " + "  ".join(cells))
        late = in_zone[in_zone["year"] >= 11]
        legacy = per_seed(late, runs, "legacy", _mean_premium)
        risk = per_seed(late, runs, "risk_based", _mean_premium)
        change = [risk[s] / legacy[s] - 1 for s in legacy if s in risk]
        lines.append(f"   {zone:<10} risk_based / legacy - 1, years 11-20: {_interval(change)}")
    rise = []
    for seed, value in per_seed(agents[agents["year"] == 13], runs, "risk_based",
                                _mean_premium).items():
        first = per_seed(agents[agents["year"] == 11], runs, "risk_based", _mean_premium)[seed]
        rise.append(value / first - 1)
    lines.append(f"   all zones, risk_based arm, year 11 -> 13: {_interval(rise)} (US mean "
                 "premium per policy 2022 -> 2024: +0.194)")
    return lines


def grants(agents: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """Section 2: grants paid a year against the budget, and the applications."""
    lines = [f"2. elevation grants a year (subsidy_budget.yaml at {SIZE} households; budget of "
             "the capped arms $80,000 = 2 grants)"]
    elevating = ["elevate_house", "elevate_and_insure"]
    for case in ("unlimited", "first_come", "by_need"):
        paid = per_seed(agents, runs, case,
                        lambda a: float(a.groupby("year")["subsidy_usd"].sum().mean()))
        chose = per_seed(agents, runs, case, lambda a: float(
            a["proposed_action"].isin(elevating).groupby(a["year"]).sum().mean()))
        # pooled over the seeds: a seed where nobody chose to elevate has no share to give
        arm = agents[agents["run_id"].isin(runs.loc[runs["param.case"] == case, "run_id"])]
        granted = int((arm["subsidy_usd"] > 0).sum())
        funded = (f"applications funded {granted} of "
                  f"{int(arm['subsidy_applied'].astype(bool).sum())}"
                  if "subsidy_applied" in arm else f"grants paid {granted} (no applications "
                  "recorded by this checkout)")
        lines.append(f"   {case:<10} paid/year {_interval(list(paid.values()), 0)}   "
                     f"households choosing to elevate/year "
                     f"{_interval(list(chose.values()), 2)}   {funded}")
    return lines


def buyouts(agents: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """Section 3: offers, acceptance and the delay from the last flood to the offer."""
    arm = runs[runs["param.case"] == "buyout"]
    offered, accepted, rate, delay = [], [], [], []
    for run in arm.itertuples():
        a = agents[agents["run_id"] == run.run_id]
        offers = a[a["buyout_offered"].astype(bool)]
        took = offers[offers["buyout_usd"] > 0]
        n_offered = offers["agent_id"].nunique()
        offered.append(float(n_offered))
        accepted.append(float(took["agent_id"].nunique()))
        rate.append(float(took["agent_id"].nunique() / n_offered) if n_offered else np.nan)
        delay.extend(offers["years_since_flood"].dropna().astype(float).tolist())
    households = int(agents[agents["run_id"].isin(arm["run_id"])]
                     .groupby("run_id")["agent_id"].nunique().sum())
    return [f"3. buyouts (policy_buyout.yaml at {SIZE} households, arm buyout; NJ Blue Acres "
            "acceptance 0.46-0.75 of offers)",
            f"   households in the arm's runs: {households}",
            f"   households offered per run {_interval(offered, 2)} "
            f"(total {int(sum(offered))})",
            f"   accepted per run {_interval(accepted, 2)} (total {int(sum(accepted))})",
            f"   acceptance (accepted / offered) {_interval(rate)}   pooled "
            f"{sum(accepted) / max(sum(offered), 1):.3f}",
            f"   years since the home's last flood at an offer: mean {_mean(delay):.2f}, "
            f"offers {len(delay)}, share in the flood's year "
            f"{_mean([float(d == 0) for d in delay]):.2f}"]


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else float("nan")


def hindcast_premiums(root: Path, work: Path) -> list[str]:
    """Section 4: mean premium per policy bought in the small Passaic hindcast, per arm."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    lines = ["4. mean premium per policy bought (USD), passaic_hindcast_small.yaml, by zone and "
             "calendar year"]
    # legacy and risk_based hold their pricing through the run (no Risk Rating 2.0 change)
    for arm, overrides in (("shipped", []),
                           ("legacy", ["insurance.pricing=legacy", "policy_change=null"]),
                           ("risk_based", ["insurance.pricing=risk_based", "policy_change=null"])):
        out = work / f"hindcast_{arm}"
        cmd = [sys.executable, str(root / "run.py"), str(root / "experiments" /
                                                        "passaic_hindcast_small.yaml"),
               "--out", str(out), "--no-progress", "--overwrite",
               "--set", "outputs.plots=false"]
        for item in overrides:
            cmd += ["--set", item]
        subprocess.run(cmd, check=True, cwd=root, env=env, stdout=subprocess.DEVNULL)
        a = pd.read_csv(out / "agents_yearly.csv")
        held = a[a["insured_after"].astype(bool) & (a["premium_usd"] > 0)]
        table = held.groupby(["flood_zone", "year"])["premium_usd"].mean().unstack("year")
        table.columns = [2010 + int(y) for y in table.columns]
        lines += [f"   {arm}:", table.round(0).to_string()]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout to run")
    parser.add_argument("--replicates", type=int, default=5)
    args = parser.parse_args(argv)
    root = args.root.resolve()
    print(f"checkout: {root}  replicates: {args.replicates}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        larger = (f"population.size={SIZE}",)
        sections = [("experiments/risk_rating.yaml", premiums, ()),
                    ("experiments/subsidy_budget.yaml", grants, larger),
                    ("experiments/policy_buyout.yaml", buyouts, larger)]
        for k, (experiment, section, overrides) in enumerate(sections):
            agents, runs = run_sweep(root, experiment, work / f"sweep{k}", args.replicates,
                                     overrides)
            print("\n".join(section(agents, runs)), "\n", sep="")
        print("\n".join(hindcast_premiums(root, work)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
