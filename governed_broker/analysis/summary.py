"""One-call summaries of a run: every measure of the package with the metric version."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from governed_broker.analysis.behaviour import irrational_behaviour_rate
from governed_broker.analysis.benchmarks import BenchmarkFit, BenchmarkSet, fit_to_benchmarks
from governed_broker.analysis.diversity import decision_entropy
from governed_broker.analysis.equity import adaptation_gap
from governed_broker.analysis.governance import (
    governance_workload,
    infeasible_proposal_rate,
    label_changes_on_retry,
)
from governed_broker.analysis.loaders import RunData
from governed_broker.analysis.losses import losses_by_year
from governed_broker.analysis.responses import insurance_response, post_flood_inaction
from governed_broker.analysis.trajectories import adaptation_trajectories
from governed_broker.analysis.version import METRIC_VERSION


@dataclass
class RunSummary:
    """All measures of one run (tables as DataFrames; see each measure's docstring).

    Attributes:
        run_id: The run directory name.
        trajectories: ``adaptation_trajectories`` by year.
        trajectories_by_group: by year and ``tenure`` / ``flood_zone`` (dict keyed by column).
        losses / losses_by_group: ``losses_by_year`` overall and per group column.
        irrational_executed / irrational_proposed: rates by year.
        irrational_overall: one row per action kind (executed, proposed), all years pooled.
        infeasible: ``infeasible_proposal_rate`` result.
        workload: ``governance_workload`` by year; workload_overall: pooled.
        entropy: ``decision_entropy`` by year; entropy_overall: pooled (float).
        fit: ``fit_to_benchmarks``.
        flood_responses: ``insurance_response`` (flooded versus dry households, by zone-year).
        post_flood: ``post_flood_inaction`` by group (could act, elevated, without means,
            broker fallback).
        label_changes: ``label_changes_on_retry`` (None without a broker audit).
        adaptation_gap: ``adaptation_gap`` (MG-NMG gap, within tenure and composition; empty
            without an MG attribute).
        metric_version: ``METRIC_VERSION``.
    """

    run_id: str
    trajectories: pd.DataFrame
    trajectories_by_group: dict[str, pd.DataFrame]
    losses: pd.DataFrame
    losses_by_group: dict[str, pd.DataFrame]
    irrational_executed: pd.DataFrame
    irrational_proposed: pd.DataFrame
    irrational_overall: pd.DataFrame
    infeasible: dict[str, Any]
    workload: pd.DataFrame
    workload_overall: pd.DataFrame
    entropy: pd.DataFrame
    entropy_overall: float
    fit: BenchmarkFit
    flood_responses: pd.DataFrame
    post_flood: pd.DataFrame
    label_changes: dict[str, Any] | None
    adaptation_gap: pd.DataFrame
    metric_version: str = field(default=METRIC_VERSION)

    def headline(self) -> dict[str, Any]:
        """Key scalars of the run (for tables across runs)."""
        last = self.trajectories.iloc[-1]
        overall = self.irrational_overall.set_index("actions")["rate"]
        return {
            "run_id": self.run_id,
            "metric_version": self.metric_version,
            "final_share_insured": float(last["share_insured"]),
            "final_share_elevated": float(last["share_elevated"]),
            "final_share_relocated": float(last["share_relocated"]),
            "irrational_rate_executed": float(overall["executed"]),
            "irrational_rate_proposed": float(overall["proposed"]),
            "infeasible_proposal_rate": float(self.infeasible["rate"]),
            "retries_per_decision": float(self.workload_overall["retries_per_decision"].iloc[0]),
            "entropy": self.entropy_overall,
            "benchmark_score": self.fit.score,
            "flooded_minus_dry_insurance_change": float(self.flood_responses["difference"]
                                                        .mean()),
            "share_labels_changed_on_retry": (float("nan") if self.label_changes is None
                                              else self.label_changes["share_labels_changed"]),
        }


GROUP_COLUMNS = ("tenure", "flood_zone")


def summarise_run(run: RunData, bench: BenchmarkSet | None = None) -> RunSummary:
    """Compute every measure of the package on one loaded run."""
    agents = run.agents
    irrational = pd.concat(
        [
            irrational_behaviour_rate(agents, on, decisions=run.decisions)
            for on in ("executed", "proposed")
        ],
        ignore_index=True,
    )
    return RunSummary(
        run_id=run.run_id,
        trajectories=adaptation_trajectories(agents),
        trajectories_by_group={g: adaptation_trajectories(agents, g) for g in GROUP_COLUMNS},
        losses=losses_by_year(agents),
        losses_by_group={g: losses_by_year(agents, g) for g in GROUP_COLUMNS},
        irrational_executed=irrational_behaviour_rate(agents, "executed", by="year"),
        irrational_proposed=irrational_behaviour_rate(
            agents, "proposed", by="year", decisions=run.decisions
        ),
        irrational_overall=irrational,
        infeasible=infeasible_proposal_rate(agents, run.decisions),
        workload=governance_workload(agents, by="year"),
        workload_overall=governance_workload(agents),
        entropy=decision_entropy(agents, by="year", actions=list(run.actions)),
        entropy_overall=float(decision_entropy(agents, by=None, actions=list(run.actions))
                              ["entropy"].iloc[0]),
        fit=fit_to_benchmarks(agents, bench),
        flood_responses=insurance_response(agents),
        post_flood=post_flood_inaction(agents),
        label_changes=None if run.decisions is None else label_changes_on_retry(run.decisions),
        adaptation_gap=adaptation_gap(agents),
    )
