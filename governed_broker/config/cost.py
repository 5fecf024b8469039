"""What a run will cost before it starts, and the limits above which a user must confirm it.

A mistyped ``population.size: 10000000`` or ``years: 1000`` should not silently start a run
that would take weeks. ``estimate_run_cost`` counts household-years and LLM calls from the
configuration alone; ``check_run_limits`` refuses (exit code 2) a run above the experiment's
``limits:``, saying what it would cost and how to confirm. The estimate is an upper bound on
calls (households that relocate stop deciding) and a lower bound on re-asks (none counted).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from governed_broker.config.base import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from governed_broker.config.experiment import ExperimentConfig

#: Seconds per decision call and per reflection call of the embedded default model on 2 CPU
#: cores, measured (docs/llm_backends.md: ~8.5 s and ~3.5 s); other backends differ.
EMBEDDED_DECISION_S = 8.5
EMBEDDED_REFLECTION_S = 3.5


@dataclass(frozen=True)
class RunCost:
    """An estimate of a run's size.

    Attributes:
        households: Households at the start.
        years: Simulated years.
        household_years: households x years.
        decision_calls: LLM decision calls if every household decides every year once (0 for
            the baseline).
        reflection_calls: LLM reflection calls (0 when reflection is off).
        embedded_hours: Hours those calls would take with the embedded model on 2 cores.
    """

    households: int
    years: int
    household_years: int
    decision_calls: int
    reflection_calls: int
    embedded_hours: float

    @property
    def llm_calls(self) -> int:
        """Decision plus reflection calls."""
        return self.decision_calls + self.reflection_calls


def count_households(config: ExperimentConfig) -> int:
    """Households of the initial population (rows of the CSV, or ``population.size``)."""
    if config.population.file is None:
        return int(config.population.size or 0)
    path = Path(config.resolve_path(config.population.file))
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f if line.strip() and not line.startswith("#")]
    return max(0, len(lines) - 1)  # minus the header


def estimate_run_cost(config: ExperimentConfig, households: int | None = None) -> RunCost:
    """Count a run's household-years and LLM calls from its configuration.

    Args:
        config: The experiment.
        households: Households at the start (None: counted with ``count_households``).
    """
    n = count_households(config) if households is None else households
    hy = n * config.years
    llm = config.decision.maker == "llm"
    decisions = hy if llm else 0
    reflect = llm and config.reflection.enabled
    reflections = n * (config.years // config.reflection.interval_years) if reflect else 0
    hours = (decisions * EMBEDDED_DECISION_S + reflections * EMBEDDED_REFLECTION_S) / 3600
    return RunCost(n, config.years, hy, decisions, reflections, hours)


def format_run_cost(cost: RunCost) -> str:
    """One line for the console, e.g. before a run starts."""
    line = f"{cost.households:,} households x {cost.years} years = {cost.household_years:,} " \
           "household-years"
    if cost.llm_calls:
        line += (f"; about {cost.llm_calls:,} LLM calls ({cost.decision_calls:,} decisions, "
                 f"{cost.reflection_calls:,} reflections), about {cost.embedded_hours:,.1f} h "
                 "with the embedded model on 2 CPU cores")
    return line


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
        ("LLM calls", cost.llm_calls, limits.max_llm_calls, "max_llm_calls"),
    ):
        if value > limit:
            raise ConfigError(
                f"{source}: this run is large: {format_run_cost(cost)}. That is {value:,} "
                f"{what}, above limits.{key} = {limit:,}. If you mean it, confirm with "
                f"--set limits.{key}={value} (or set it in the experiment file)")
    return cost
