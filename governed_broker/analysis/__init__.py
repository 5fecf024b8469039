"""Analysis of run and sweep outputs: loaders, measures, benchmarks, plots and HTML reports.

Every measure is defined once here, documented with units, unit-tested on hand-built tables,
and versioned by ``METRIC_VERSION`` (written into every report and summary). Definitions are
listed in docs/analysis.md.
"""

from governed_broker.analysis.behaviour import irrational_behaviour_rate
from governed_broker.analysis.benchmarks import (
    BenchmarkFit,
    BenchmarkSet,
    fit_to_benchmarks,
    load_benchmarks,
)
from governed_broker.analysis.diversity import decision_entropy, normalised_entropy
from governed_broker.analysis.equity import adaptation_gap
from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.governance import governance_workload, infeasible_proposal_rate
from governed_broker.analysis.loaders import (
    RunData,
    SweepData,
    load_groups,
    load_run,
    load_sweep,
)
from governed_broker.analysis.losses import losses_by_year
from governed_broker.analysis.replicates import (
    scalar_by_group,
    summarise_replicates,
    yearly_by_group,
)
from governed_broker.analysis.sensitivity import first_order_binned, run_outcomes, sobol_indices
from governed_broker.analysis.summary import RunSummary, summarise_run
from governed_broker.analysis.trajectories import adaptation_trajectories, household_states
from governed_broker.analysis.version import METRIC_VERSION

__all__ = [
    "METRIC_VERSION",
    "AnalysisInputError",
    "BenchmarkFit",
    "BenchmarkSet",
    "RunData",
    "RunSummary",
    "SweepData",
    "adaptation_gap",
    "adaptation_trajectories",
    "decision_entropy",
    "first_order_binned",
    "fit_to_benchmarks",
    "governance_workload",
    "household_states",
    "infeasible_proposal_rate",
    "irrational_behaviour_rate",
    "load_benchmarks",
    "load_groups",
    "load_run",
    "load_sweep",
    "losses_by_year",
    "normalised_entropy",
    "run_outcomes",
    "scalar_by_group",
    "sobol_indices",
    "summarise_replicates",
    "summarise_run",
    "yearly_by_group",
]
