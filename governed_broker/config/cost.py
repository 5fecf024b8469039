"""What a run will cost before it starts, and the limits above which a user must confirm it.

A mistyped ``population.size: 10000000`` or ``years: 1000`` should not silently start a run
that would take weeks. ``estimate_run_cost`` counts household-years and the LLM calls of every
kind from the configuration alone: decisions, the re-asks they are expected to need,
retrieval query expansions, reflections and the institutions' decisions. ``check_run_limits``
refuses (exit code 2) a run above the experiment's ``limits:``, saying what it would cost and
how to confirm. Decisions and reflections are upper bounds (households that relocate stop
deciding; one that remembers nothing of a year does not reflect); re-asks are an expectation
(``REASKS_PER_DECISION``), which a run's progress line replaces with its own measurement after
its first decisions (``governed_broker.progress``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from governed_broker.config.base import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from governed_broker.config.experiment import ExperimentConfig

#: Seconds per LLM call of the embedded default model on 2 idle CPU cores with its default 2
#: threads, decisions and reflections alike: the demo cold on an idle 2-core machine (load
#: 0.6), 373 s for 55 calls (docs/changelog.md). A busy machine is slower (16-25 s per call
#: beside other work): the progress line measures the machine it runs on.
EMBEDDED_CALL_S = 6.8
#: Re-asks per household decision (unreadable replies and proposals a rule blocked) expected
#: before a run has measured its own: the embedded default model under the strict profile on
#: the demo, cold: 0.83 (44 decision calls for 24 decisions) before the demo was made smaller,
#: 0.56 after it (25 calls for 16 decisions; benchmarks/bench_demo.py, docs/changelog.md); the
#: larger sample is kept. Models and profiles differ; the progress line recalibrates after the
#: first decisions.
REASKS_PER_DECISION = 0.8


@dataclass(frozen=True)
class RunCost:
    """An estimate of a run's size.

    Attributes:
        households: Households at the start.
        years: Simulated years.
        household_years: households x years.
        decision_calls: LLM decision calls if every household decides every year once (0 for
            the baseline; conversations of the cohorts in cohort mode, at most this).
        reask_calls: Re-asks those decisions are expected to need (``REASKS_PER_DECISION``,
            within the governance budgets; 0 without an LLM).
        expansion_calls: Retrieval query expansions (MQE, HyDE): per decision when on.
        reflection_calls: LLM reflection calls (0 when reflection is off).
        institution_calls: The LLM institutions' yearly decisions, with their re-asks.
        embedded_hours: Hours those calls would take with the embedded model on 2 idle cores.
        backend: The LLM backend the calls go to (None: no LLM calls).
    """

    households: int
    years: int
    household_years: int
    decision_calls: int
    reflection_calls: int
    embedded_hours: float
    reask_calls: int = 0
    expansion_calls: int = 0
    institution_calls: int = 0
    backend: str | None = None

    @property
    def llm_calls(self) -> int:
        """Every call: decisions, re-asks, expansions, reflections and institutions."""
        return (self.decision_calls + self.reask_calls + self.expansion_calls
                + self.reflection_calls + self.institution_calls)

    @property
    def calls_per_decision(self) -> float:
        """Expected calls per household decision (the decision, its re-asks, expansions)."""
        if not self.decision_calls:
            return 0.0
        return (self.decision_calls + self.reask_calls + self.expansion_calls) \
            / self.decision_calls


def count_households(config: ExperimentConfig) -> int:
    """Households of the initial population (rows of the CSV, or ``population.size``)."""
    if config.population.file is None:
        return int(config.population.size or 0)
    path = Path(config.resolve_path(config.population.file))
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f if line.strip() and not line.startswith("#")]
    return max(0, len(lines) - 1)  # minus the header


def expected_reasks(config: ExperimentConfig) -> float:
    """Re-asks expected per household decision (``REASKS_PER_DECISION`` within the budgets)."""
    governance = config.governance
    return min(REASKS_PER_DECISION, governance.max_retries + governance.max_parse_retries)


def expansions_per_decision(config: ExperimentConfig) -> int:
    """Retrieval query-expansion calls per household decision (MQE, HyDE: one each when on)."""
    rag = config.rag
    return int(rag.enabled) * (int(rag.mqe) + int(rag.hyde))


def calls_per_decision(config: ExperimentConfig) -> float:
    """LLM calls expected per household decision: the decision, its re-asks, expansions."""
    return 1 + expected_reasks(config) + expansions_per_decision(config)


def estimate_run_cost(config: ExperimentConfig, households: int | None = None) -> RunCost:
    """Count a run's household-years and LLM calls of every kind from its configuration.

    Args:
        config: The experiment.
        households: Households at the start (None: counted with ``count_households``).
    """
    n = count_households(config) if households is None else households
    hy = n * config.years
    household_llm = config.decision.maker == "llm"
    decisions = hy if household_llm else 0
    reasks = expected_reasks(config)
    expansions = decisions * expansions_per_decision(config)
    reflect = household_llm and config.reflection.enabled
    reflections = n * (config.years // config.reflection.interval_years) if reflect else 0
    institutions = 0
    if config.institutions is not None and config.llm is not None:
        institutions = round(config.years * len(config.institutions.llm_makers)
                             * (1 + REASKS_PER_DECISION))
    cost = RunCost(n, config.years, hy, decisions, reflections, 0.0,
                   reask_calls=round(decisions * reasks), expansion_calls=expansions,
                   institution_calls=institutions)
    hours = cost.llm_calls * EMBEDDED_CALL_S / 3600
    return RunCost(n, config.years, hy, decisions, reflections, hours,
                   reask_calls=cost.reask_calls, expansion_calls=expansions,
                   institution_calls=institutions,
                   backend=config.llm.backend if config.llm and cost.llm_calls else None)


def format_run_cost(cost: RunCost) -> str:
    """One line for the console, e.g. before a run starts."""
    line = f"{cost.households:,} households x {cost.years} years = {cost.household_years:,} " \
           "household-years"
    if cost.llm_calls:
        kinds = [(cost.decision_calls, "decisions"), (cost.reask_calls, "re-asks expected"),
                 (cost.expansion_calls, "query expansions"),
                 (cost.reflection_calls, "reflections"),
                 (cost.institution_calls, "institution calls")]
        listed = ", ".join(f"{count:,} {what}" for count, what in kinds if count)
        line += f"; about {cost.llm_calls:,} LLM calls ({listed})"
        if cost.backend == "embedded":
            line += (f", about {_duration(cost.embedded_hours * 3600)} on 2 idle CPU cores "
                     "(a busy machine is slower: the progress line measures this one)")
    return line


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:,.1f} h"


def check_run_limits(config: ExperimentConfig, source: Path,
                     households: int | None = None) -> RunCost:
    """The run's cost, or a ``ConfigError`` when it exceeds ``config.limits``.

    Args:
        config: The experiment.
        source: Its file, for the message.
        households: Households at the start, when already known (None: counted).
    """
    cost = estimate_run_cost(config, households)
    limits = config.limits
    for what, value, limit, key in (
        ("household-years", cost.household_years, limits.max_household_years,
         "max_household_years"),
        ("decision and reflection calls", cost.decision_calls + cost.reflection_calls,
         limits.max_llm_calls, "max_llm_calls"),
    ):
        if value > limit:
            raise ConfigError(
                f"{source}: this run is large: {format_run_cost(cost)}. That is {value:,} "
                f"{what}, above limits.{key} = {limit:,}. If you mean it, confirm with "
                f"--set limits.{key}={value} (or set it in the experiment file)")
    return cost
