"""What cohort mode costs in accuracy: a cohort run against a full per-household run.

``governed-broker cohort-check EXPERIMENT.yaml --households 500 --out DIR`` runs the experiment
twice on the same subsample of households, once household by household (``cohort.enabled:
false``) and once by cohort (``true``, with the experiment's ``cohort`` settings), and compares:

* action shares: the share of household-years that executed (and first proposed) each action,
  and their largest difference in percentage points;
* appraisal distributions: the shares of each threat and coping label, and their total
  variation distance (half the sum of absolute differences; 0 same, 1 disjoint);
* benchmark fit: each target of ``configs/benchmarks.yaml`` measured on both runs, and the
  fit scores;
* cost: LLM calls, CPU and wall seconds of each run.

The subsample: a generated population is generated with ``--households`` households (same
distributions and seed); a population file is sampled (``--households`` rows without
replacement, seeded by the experiment seed) into ``DIR/subsample_population.csv``. Both runs
use the same seed, so they see the same households and, until their decisions differ, the same
floods. The report goes to ``DIR/cohort_check.md`` and ``DIR/cohort_check.json``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from governed_broker.analysis.benchmarks import fit_to_benchmarks
from governed_broker.analysis.loaders import read_agents_table
from governed_broker.config.base import ConfigError
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.loader import load_experiment, read_population_csv
from governed_broker.run_dir import create_out_dir
from governed_broker.runner import run_experiment
from governed_broker.seeding import child_rng


@dataclass
class CohortCheck:
    """The comparison (see the module documentation); ``to_dict`` is the JSON report."""

    households: int
    years: int
    runs: dict[str, dict[str, Any]]
    actions: pd.DataFrame
    proposals: pd.DataFrame
    labels: dict[str, pd.DataFrame]
    benchmarks: pd.DataFrame
    scores: dict[str, float | None]

    @property
    def max_action_gap_pp(self) -> float:
        """Largest difference of an executed-action share, in percentage points."""
        return float(self.actions["gap_pp"].abs().max())

    def label_distance(self, which: str) -> float:
        """Total variation distance between the two runs' label shares (0..1)."""
        return float(self.labels[which]["gap_pp"].abs().sum() / 200)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-serialisable data."""
        return {
            "households": self.households, "years": self.years, "runs": self.runs,
            "actions": self.actions.reset_index().to_dict("records"),
            "proposals": self.proposals.reset_index().to_dict("records"),
            "labels": {k: v.reset_index().to_dict("records") for k, v in self.labels.items()},
            "benchmarks": self.benchmarks.to_dict("records"), "scores": self.scores,
            "max_action_gap_pp": self.max_action_gap_pp,
            "threat_label_distance": self.label_distance("threat_label"),
            "coping_label_distance": self.label_distance("coping_label"),
        }


def _shares(full: pd.Series, cohort: pd.Series) -> pd.DataFrame:
    table = pd.DataFrame({"full": full.value_counts(normalize=True, dropna=False),
                          "cohort": cohort.value_counts(normalize=True, dropna=False)}).fillna(0.0)
    table.index = table.index.map(lambda v: "none" if pd.isna(v) else str(v))
    table = table.sort_index()
    table.index.name = "value"
    table["gap_pp"] = 100 * (table["cohort"] - table["full"])
    return table


def _subsample(config: ExperimentConfig, path: Path, households: int, out: Path) -> list[str]:
    """``--set`` overrides that put the run on a subsample of ``households``."""
    if config.population.file is None:
        return [f"population.size={households}"]
    frame = read_population_csv(config.resolve_path(config.population.file))
    if households > len(frame):
        raise ConfigError(f"{path}: --households {households} is more than the "
                          f"{len(frame)} households of population.file")
    rng = child_rng(config.seed, "cohort-check", "subsample")
    rows = sorted(rng.choice(len(frame), size=households, replace=False).tolist())
    sample = out / "subsample_population.csv"
    frame.iloc[rows].to_csv(sample, index=False)
    return [f"population.file={sample.resolve()}"]


def _run(config: ExperimentConfig, out: Path, overwrite: bool) -> dict[str, Any]:
    c0, t0 = time.process_time(), time.perf_counter()
    run_experiment(config, out, progress=False, overwrite=overwrite)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    llm = manifest.get("llm") or {}
    calls = (llm.get("stats") or {}).get("calls", {}).get("calls")
    return {"dir": str(out), "cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
            "llm_calls": calls, "cohort": llm.get("cohort")}


def cohort_check(experiment: Path, out: Path, households: int = 500,
                 overrides: list[str] | None = None, overwrite: bool = False) -> CohortCheck:
    """Run the full and the cohort run into ``out/full`` and ``out/cohort`` and compare them.

    Raises:
        ConfigError: the experiment is not a governed LLM experiment, or ``households`` does
            not fit its population.
    """
    overrides = list(overrides or [])
    # read only for its population and seed (the runs below are checked against the limits)
    base = load_experiment(experiment, [*overrides, f"limits.max_llm_calls={2**62}",
                                        f"limits.max_household_years={2**62}"])
    if base.decision.maker != "llm":
        raise ConfigError(f"{experiment}: cohort-check compares LLM runs; decision.maker is "
                          f"{base.decision.maker!r}")
    if households < 1:
        raise ConfigError(f"--households must be at least 1, got {households}")
    create_out_dir(out)
    sample = _subsample(base, experiment, households, out)
    runs, agents = {}, {}
    for mode, enabled in (("full", "false"), ("cohort", "true")):
        config = load_experiment(experiment, [*overrides, *sample, f"cohort.enabled={enabled}"])
        runs[mode] = _run(config, out / mode, overwrite)
        agents[mode] = read_agents_table(out / mode / "agents_yearly.csv")
    full, cohort = agents["full"], agents["cohort"]
    fits = {mode: fit_to_benchmarks(agents[mode]) for mode in agents}
    bench = fits["full"].table[["id", "measure", "low", "high"]].copy()
    bench["full"] = fits["full"].table["value"]
    bench["cohort"] = fits["cohort"].table["value"]
    bench["gap"] = bench["cohort"] - bench["full"]
    return CohortCheck(
        households=households, years=base.years, runs=runs,
        actions=_shares(full["executed_action"], cohort["executed_action"]),
        proposals=_shares(full["proposed_action"], cohort["proposed_action"]),
        labels={k: _shares(full[k], cohort[k]) for k in ("threat_label", "coping_label")},
        benchmarks=bench, scores={m: fits[m].score for m in fits})


def _table(frame: pd.DataFrame, name: str, percent: bool = True) -> list[str]:
    lines = [f"| {name} | full | cohort | difference |", "|---|---:|---:|---:|"]
    for key, row in frame.iterrows():
        if percent:
            lines.append(f"| {key} | {100 * row['full']:.1f} % | {100 * row['cohort']:.1f} % | "
                         f"{row['gap_pp']:+.1f} pp |")
    return lines


def markdown(check: CohortCheck) -> str:
    """The comparison as a Markdown report."""
    full, cohort = check.runs["full"], check.runs["cohort"]
    stats = cohort.get("cohort") or {}
    lines = [
        f"# Cohort mode against a full run ({check.households} households x {check.years} "
        "years)", "",
        "| | full | cohort |", "|---|---:|---:|",
        f"| LLM calls | {full['llm_calls']} | {cohort['llm_calls']} |",
        f"| CPU seconds | {full['cpu_s']:.1f} | {cohort['cpu_s']:.1f} |",
        f"| wall seconds | {full['wall_s']:.1f} | {cohort['wall_s']:.1f} |",
        f"| benchmark fit score | {_score(check.scores['full'])} | "
        f"{_score(check.scores['cohort'])} |", "",
        f"Cohorts: {stats.get('cohort_years')} cohort-years, mean size "
        f"{stats.get('mean_size')}, largest {stats.get('largest')}, {stats.get('singletons')} "
        f"of one household, {stats.get('conversations')} conversations ({stats.get('samples')} "
        "samples per cohort at most).", "",
        f"Largest gap in executed-action shares: {check.max_action_gap_pp:.1f} percentage "
        f"points; total variation distance of threat labels "
        f"{check.label_distance('threat_label'):.3f}, of coping labels "
        f"{check.label_distance('coping_label'):.3f}.", "",
        "## Executed actions (share of household-years)", "",
        *_table(check.actions, "action"), "",
        "## First proposals", "", *_table(check.proposals, "proposal"), "",
        "## Threat appraisal", "", *_table(check.labels["threat_label"], "label"), "",
        "## Coping appraisal", "", *_table(check.labels["coping_label"], "label"), "",
        "## Benchmark targets", "",
        "| target | range | full | cohort | difference |", "|---|---|---:|---:|---:|",
    ]
    for _, row in check.benchmarks.iterrows():
        lines.append(f"| {row['id']} | {row['low']:g}-{row['high']:g} | {_num(row['full'])} | "
                     f"{_num(row['cohort'])} | {_num(row['gap'], sign=True)} |")
    return "\n".join(lines) + "\n"


def _score(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _num(value: float, sign: bool = False) -> str:
    if pd.isna(value):
        return "n/a"
    return f"{value:+.3f}" if sign else f"{value:.3f}"


def write_report(check: CohortCheck, out: Path) -> Path:
    """Write ``cohort_check.md`` and ``cohort_check.json`` into ``out``; returns the first."""
    (out / "cohort_check.json").write_text(json.dumps(check.to_dict(), indent=1,
                                                      default=float) + "\n", encoding="utf-8")
    path = out / "cohort_check.md"
    path.write_text(markdown(check), encoding="utf-8")
    return path
